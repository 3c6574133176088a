//! Plots, each as SVG and PNG (plotters; text in the bundled DejaVu Sans,
//! so no system font is needed): window per connection and throughput per
//! flow over time, goodput against a row parameter beside TCP's figures,
//! and a Pantheon-style throughput vs 95th-percentile one-way delay scatter.

use super::published::Row;
use super::report::Figure;
use super::stats::{aggregate, mean, run_owd_p95};
use super::Bench;
use anyhow::Context as _;
use braid_proto::cc::Algorithm;
use braid_sim::RunResult;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (800, 480);
/// Most points one series keeps (longer series are thinned or averaged).
const MAX_POINTS: usize = 800;

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is part of the binary: failing to parse it is a build defect.
        if plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            panic!("the bundled DejaVu Sans does not parse");
        }
    });
}

#[derive(Clone, Copy, PartialEq)]
enum Mark {
    Line,
    Points,
    LinePoints,
}

struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    mark: Mark,
    color: RGBColor,
}

struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    series: Vec<Series>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// A controller's colour, the same in every plot.
fn cc_color(cc: Algorithm) -> RGBColor {
    match cc {
        Algorithm::Aimd => PALETTE[0],
        Algorithm::Cubic => PALETTE[1],
        Algorithm::Bbr => PALETTE[2],
        Algorithm::MbEcn => PALETTE[3],
        Algorithm::Ncp => PALETTE[4],
    }
}

fn nth_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Legend geometry: the sample line, the gap before the label, the space
/// between entries and around the box.
const LEGEND_SAMPLE: i32 = 18;
const LEGEND_GAP: i32 = 6;
const LEGEND_ROW: i32 = 20;
const LEGEND_PAD: i32 = 8;
const LEGEND_FONT: u32 = 13;

/// The width of the legend column to the right of the plot: the longest
/// label in the bundled font (measured; 8 px a character if it cannot be),
/// the sample line and the padding.
fn legend_width(c: &Chart) -> u32 {
    if c.series.is_empty() {
        return 0;
    }
    register_font();
    let style: TextStyle<'_> = (FAMILY, LEGEND_FONT).into();
    let label = c
        .series
        .iter()
        .map(|s| {
            style
                .font
                .box_size(&s.name)
                .map_or(8 * s.name.chars().count() as u32, |(w, _)| w)
        })
        .max()
        .unwrap_or(0);
    // A tenth more: an SVG viewer may set the text in a wider font.
    label * 11 / 10 + (LEGEND_SAMPLE + LEGEND_GAP + 3 * LEGEND_PAD) as u32
}

/// The canvas: the plot keeps SIZE, the legend column is added to its right.
fn canvas(c: &Chart) -> (u32, u32) {
    (SIZE.0 + legend_width(c), SIZE.1)
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &Chart) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("plotting failed: {e:?}");
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(&c.title, (FAMILY, 18)).map_err(err)?;
    // The legend lives in its own column right of the plot, so it never
    // covers a curve.
    let (w, _) = root.dim_in_pixel();
    let (plot, legend) = root.split_horizontally(w.saturating_sub(legend_width(c)));
    let all = c.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let pad = (x1 - x0) * 0.03;
    let (x0, x1) = (
        if x0 >= 0.0 {
            (x0 - pad).max(0.0)
        } else {
            x0 - pad
        },
        x1 + pad,
    );
    let y1 = if y1 > 0.0 { y1 * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(err)?;
    let fmt = |span: f64| {
        move |v: &f64| {
            if span >= 20.0 {
                format!("{v:.0}")
            } else if span >= 2.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.2}")
            }
        }
    };
    let (fx, fy) = (fmt(x1 - x0), fmt(y1));
    chart
        .configure_mesh()
        .light_line_style(RGBColor(236, 236, 236))
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(err)?;
    for s in &c.series {
        let color = s.color;
        let style = color.stroke_width(2);
        if matches!(s.mark, Mark::Line | Mark::LinePoints) {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), style))
                .map_err(err)?;
        }
        if matches!(s.mark, Mark::Points | Mark::LinePoints) {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
    }
    draw_legend(&legend, c).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The series' names, each beside a sample of its line or mark, boxed, at
/// the top of `area` (level with the plot's top).
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if c.series.is_empty() {
        return Ok(());
    }
    let (w, _) = area.dim_in_pixel();
    let top = 12;
    let (left, right) = (LEGEND_PAD, w as i32 - LEGEND_PAD);
    let bottom = top + LEGEND_PAD * 2 + LEGEND_ROW * c.series.len() as i32 - LEGEND_ROW / 2;
    area.draw(&Rectangle::new(
        [(left, top), (right, bottom)],
        BLACK.stroke_width(1),
    ))?;
    let font = TextStyle::from((FAMILY, LEGEND_FONT))
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in c.series.iter().enumerate() {
        let y = top + LEGEND_PAD + LEGEND_ROW / 4 + LEGEND_ROW * i as i32;
        let x = left + LEGEND_PAD;
        if s.mark != Mark::Points {
            area.draw(&PathElement::new(
                vec![(x, y), (x + LEGEND_SAMPLE, y)],
                s.color.stroke_width(3),
            ))?;
        }
        if s.mark != Mark::Line {
            area.draw(&Circle::new(
                (x + LEGEND_SAMPLE / 2, y),
                3,
                s.color.filled(),
            ))?;
        }
        area.draw(&Text::new(
            s.name.clone(),
            (x + LEGEND_SAMPLE + LEGEND_GAP, y),
            font.clone(),
        ))?;
    }
    Ok(())
}

/// Draws `c` to DIR/NAME.svg (and NAME.png); returns the figure.
fn save(c: &Chart, dir: &Path, name: &str, png: bool, suite: &str) -> anyhow::Result<Figure> {
    register_font();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let svg = dir.join(format!("{name}.svg"));
    let size = canvas(c);
    draw(SVGBackend::new(&svg, size).into_drawing_area(), c)?;
    let png_path = dir.join(format!("{name}.png"));
    if png {
        draw(BitMapBackend::new(&png_path, size).into_drawing_area(), c)?;
    }
    let rel = |p: &Path| {
        let d = dir
            .file_name()
            .map_or_else(String::new, |d| d.to_string_lossy().into_owned());
        format!(
            "{d}/{}",
            p.file_name().unwrap_or_default().to_string_lossy()
        )
    };
    Ok(Figure {
        suite: suite.to_owned(),
        title: c.title.clone(),
        svg: rel(&svg),
        png: png.then(|| rel(&png_path)),
    })
}

/// Every `len / MAX_POINTS`-th point.
fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    points.into_iter().step_by(step).collect()
}

/// Means of consecutive groups of points, at most MAX_POINTS of them.
fn average(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    points
        .chunks(step)
        .map(|c| (mean(c.iter().map(|p| p.0)), mean(c.iter().map(|p| p.1))))
        .collect()
}

/// Connection windows over time, one series per flow and connection.
fn window_chart(title: String, r: &RunResult) -> Chart {
    let mut series = Vec::new();
    for f in &r.flows {
        let mut paths: Vec<u8> = f.series.iter().map(|p| p.path).collect();
        paths.sort_unstable();
        paths.dedup();
        for p in paths {
            let pts = f
                .series
                .iter()
                .filter(|s| s.path == p)
                .map(|s| (s.t, s.window))
                .collect();
            let name = if r.flows.len() > 1 {
                format!("flow {} path {p}", f.flow)
            } else {
                format!("path {p}")
            };
            series.push(Series {
                name,
                points: thin(pts),
                mark: Mark::Line,
                color: nth_color(series.len()),
            });
        }
    }
    Chart {
        title,
        x_label: "time (s)".into(),
        y_label: "window (packets)".into(),
        series,
    }
}

/// Each flow's throughput over time: the sum of its connections' samples.
fn throughput_chart(title: String, r: &RunResult) -> Chart {
    let series = r
        .flows
        .iter()
        .map(|f| {
            let mut by_t: Vec<(f64, f64)> = Vec::new();
            for s in &f.series {
                match by_t.last_mut() {
                    Some(last) if (last.0 - s.t).abs() < 1e-9 => last.1 += s.throughput_mbps,
                    _ => by_t.push((s.t, s.throughput_mbps)),
                }
            }
            Series {
                name: format!("flow {}", f.flow),
                points: average(&by_t),
                mark: Mark::Line,
                color: nth_color(f.flow),
            }
        })
        .collect();
    Chart {
        title,
        x_label: "time (s)".into(),
        y_label: "throughput (Mbit/s)".into(),
        series,
    }
}

/// `braid sim FILE --plot DIR`: the per-run plots of one run.
pub fn plot_run(r: &RunResult, dir: &Path) -> anyhow::Result<Vec<String>> {
    let stem = r.scenario.replace(['/', ' '], "-");
    let a = save(
        &window_chart(format!("{}: window per connection", r.scenario), r),
        dir,
        &format!("{stem}-window"),
        true,
        "",
    )?;
    let b = save(
        &throughput_chart(format!("{}: throughput per flow", r.scenario), r),
        dir,
        &format!("{stem}-throughput"),
        true,
        "",
    )?;
    Ok(vec![a.svg, b.svg])
}

/// The first seed's result of a row with a controller, if it ran.
fn first_run(bench: &Bench, si: usize, ri: usize, cc: Algorithm) -> Option<&RunResult> {
    bench
        .runs_of(si, ri, cc)
        .into_iter()
        .find_map(|(_, o)| o.as_ref().ok())
}

/// A row's value of the parameter its suite varies.
type Param = fn(&Row) -> Option<f64>;

/// The row parameter a suite varies (axis label, value), by the suite's name.
fn swept(suite: &str) -> Option<(&'static str, Param)> {
    if suite.contains("longrtt") || suite.ends_with("-delay") {
        Some(("RTT (ms)", |r| Some(r.rtt_s() * 1e3)))
    } else if suite.ends_with("-loss") {
        Some(("loss (%)", |r| Some(r.loss() * 100.0)))
    } else if suite.ends_with("-queue") {
        Some(("queue (packets)", Row::queue_packets))
    } else {
        None
    }
}

/// Every plot of the bench, into `dir`.
pub fn suite_plots(bench: &Bench, dir: &Path, png: bool) -> anyhow::Result<Vec<Figure>> {
    let mut out = Vec::new();
    for (si, suite) in bench.suites.iter().enumerate() {
        let slug = |row: &Row| format!("{}--{}", suite.name, row.name);
        for (ri, row) in suite.rows.iter().enumerate() {
            let ccs = bench.ccs_of(row);
            if row.published.target_converge_within_s.is_some() {
                for &cc in &ccs {
                    if let Some(r) = first_run(bench, si, ri, cc) {
                        let title =
                            format!("{}/{} {cc}: window per connection", suite.name, row.name);
                        let c = window_chart(title, r);
                        out.push(save(
                            &c,
                            dir,
                            &format!("{}--{cc}-window", slug(row)),
                            png,
                            &suite.name,
                        )?);
                    }
                }
            }
            if row.multi_flow {
                for &cc in &ccs {
                    if let Some(r) = first_run(bench, si, ri, cc) {
                        let title =
                            format!("{}/{} {cc}: throughput per flow", suite.name, row.name);
                        let c = throughput_chart(title, r);
                        out.push(save(
                            &c,
                            dir,
                            &format!("{}--{cc}-throughput", slug(row)),
                            png,
                            &suite.name,
                        )?);
                    }
                }
            }
        }
        if let Some(c) = goodput_vs(bench, si) {
            out.push(save(
                &c,
                dir,
                &format!("{}--goodput", suite.name),
                png,
                &suite.name,
            )?);
        }
        if let Some(c) = delay_scatter(bench, si) {
            out.push(save(
                &c,
                dir,
                &format!("{}--throughput-delay", suite.name),
                png,
                &suite.name,
            )?);
        }
    }
    Ok(out)
}

/// Goodput against the suite's swept parameter: braid per controller (mean
/// over seeds) beside the `[published]` TCP figures.
fn goodput_vs(bench: &Bench, si: usize) -> Option<Chart> {
    let suite = &bench.suites[si];
    let (x_label, x_of) = swept(&suite.name)?;
    // Rows at the suite's most common rate, so the curve varies one thing.
    let rates: Vec<String> = suite.rows.iter().map(Row::rate_text).collect();
    let modal = rates
        .iter()
        .max_by_key(|r| rates.iter().filter(|x| x == r).count())?
        .clone();
    let rows: Vec<(usize, &Row, f64)> = suite
        .rows
        .iter()
        .enumerate()
        .filter(|(i, _)| rates[*i] == modal)
        .filter_map(|(i, r)| Some((i, r, x_of(r)?)))
        .collect();
    if rows.len() < 2 {
        return None;
    }
    let mut series = Vec::new();
    for &cc in &bench.ccs {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|&(ri, row, x)| {
                let g = bench
                    .runs_of(si, ri, cc)
                    .into_iter()
                    .filter_map(|(_, o)| o.as_ref().ok())
                    .map(|r| aggregate(row, r));
                let m = mean(g);
                (!m.is_nan()).then_some((x, m))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !pts.is_empty() {
            series.push(Series {
                name: format!("braid {cc}"),
                points: pts,
                mark: Mark::LinePoints,
                color: cc_color(cc),
            });
        }
    }
    // The seed's TCP figure says which TCP it was.
    let seed_tcp = match &rows[0].1.published.seed_tcp_name {
        Some(n) => format!("seed TCP ({n})"),
        None => "seed TCP".to_owned(),
    };
    type Reference = fn(&Row) -> Option<f64>;
    let refs: [(Reference, String, RGBColor); 3] = [
        (Row::seed_tcp_mbps, seed_tcp, RGBColor(0, 0, 0)),
        (
            |r| r.published.linux_cubic,
            "Linux cubic".into(),
            RGBColor(110, 110, 110),
        ),
        (
            |r| r.published.linux_bbr,
            "Linux bbr".into(),
            RGBColor(170, 170, 170),
        ),
    ];
    for (figure, name, color) in refs {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|&(_, row, x)| Some((x, figure(row)?)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !pts.is_empty() {
            series.push(Series {
                name,
                points: pts,
                mark: Mark::LinePoints,
                color,
            });
        }
    }
    Some(Chart {
        title: format!(
            "{}: goodput vs {}, {modal}",
            suite.name,
            x_label.split(' ').next().unwrap_or("")
        ),
        x_label: x_label.into(),
        y_label: "goodput (Mbit/s)".into(),
        series,
    })
}

/// Pantheon-style: each run's goodput against its 95th-percentile one-way
/// delay, one colour per controller.
fn delay_scatter(bench: &Bench, si: usize) -> Option<Chart> {
    let suite = &bench.suites[si];
    let mut ccs: Vec<Algorithm> = Vec::new();
    for row in &suite.rows {
        for cc in bench.ccs_of(row) {
            if !ccs.contains(&cc) {
                ccs.push(cc);
            }
        }
    }
    let series: Vec<Series> = ccs
        .into_iter()
        .filter_map(|cc| {
            let pts: Vec<(f64, f64)> = suite
                .rows
                .iter()
                .enumerate()
                .flat_map(|(ri, row)| {
                    bench
                        .runs_of(si, ri, cc)
                        .into_iter()
                        .filter_map(|(_, o)| o.as_ref().ok())
                        .filter_map(move |r| Some((run_owd_p95(r)?, aggregate(row, r))))
                })
                .filter(|p| p.1.is_finite())
                .collect();
            (!pts.is_empty()).then(|| Series {
                name: format!("braid {cc}"),
                points: pts,
                mark: Mark::Points,
                color: cc_color(cc),
            })
        })
        .collect();
    (!series.is_empty()).then(|| Chart {
        title: format!(
            "{}: throughput vs 95th-percentile one-way delay (every run)",
            suite.name
        ),
        x_label: "95th-percentile one-way delay (ms)".into(),
        y_label: "goodput (Mbit/s)".into(),
        series,
    })
}

/// One point series per kind over numbered rows (`braid bench real`).
pub fn rows_chart(
    title: &str,
    y_label: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
    dir: &Path,
    name: &str,
    png: bool,
) -> anyhow::Result<Figure> {
    let chart = Chart {
        title: title.to_owned(),
        x_label: "row (numbered as in the table)".to_owned(),
        y_label: y_label.to_owned(),
        series: series
            .into_iter()
            .enumerate()
            .map(|(i, (name, points))| Series {
                name,
                points,
                mark: Mark::LinePoints,
                color: nth_color(i),
            })
            .collect(),
    };
    save(&chart, dir, name, png, "real")
}
