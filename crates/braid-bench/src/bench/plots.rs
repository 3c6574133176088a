//! The bench's plots, each as SVG and PNG: window per connection and
//! throughput per flow over time, goodput against a row parameter beside
//! TCP's figures, and a Pantheon-style throughput vs 95th-percentile
//! one-way delay scatter. Drawn by `braid_plot`, as every plot of braid.

use super::published::Row;
use super::report::Figure;
use super::stats::{aggregate, mean, run_owd_p95};
use super::Bench;
use braid_plot::draw::{self, nth_color, Chart, Mark, Series, PALETTE};
use braid_plot::{flow_throughput_chart, window_chart, Trace};
use braid_proto::cc::Algorithm;
use braid_sim::RunResult;
use plotters::style::RGBColor;
use std::path::Path;

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

/// Draws `c` to DIR/NAME.svg (and NAME.png); returns the figure.
fn save(c: &Chart, dir: &Path, name: &str, png: bool, suite: &str) -> anyhow::Result<Figure> {
    let files = draw::save(c, dir, name, png)?;
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
        svg: rel(&files[0]),
        png: files.get(1).map(|p| rel(p)),
    })
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
                        let c = window_chart(title, &Trace::from_run(r));
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
                        let c = flow_throughput_chart(title, &Trace::from_run(r));
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
    let (modal, rows) = swept_rows(suite, x_of)?;
    let mut series = controller_series(bench, si, &rows);
    series.extend(published_series(&rows));
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

/// A row on a swept chart: its index in the suite, the row, its x.
type SweptRow<'a> = (usize, &'a Row, f64);

/// The suite's rows at its most common rate, so the curve varies one
/// thing, each with its index and its x; the rate too. None for fewer
/// than two.
fn swept_rows(suite: &super::Suite, x_of: Param) -> Option<(String, Vec<SweptRow<'_>>)> {
    let rates: Vec<String> = suite.rows.iter().map(Row::rate_text).collect();
    let modal = rates
        .iter()
        .max_by_key(|r| rates.iter().filter(|x| x == r).count())?
        .clone();
    let rows: Vec<SweptRow<'_>> = suite
        .rows
        .iter()
        .enumerate()
        .filter(|(i, _)| rates[*i] == modal)
        .filter_map(|(i, r)| Some((i, r, x_of(r)?)))
        .collect();
    if rows.len() < 2 {
        return None;
    }
    Some((modal, rows))
}

/// One line per controller: its mean goodput over seeds in each row.
fn controller_series(bench: &Bench, si: usize, rows: &[SweptRow<'_>]) -> Vec<Series> {
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
    series
}

/// The published figures beside braid's: the seed's TCP and Linux's.
fn published_series(rows: &[SweptRow<'_>]) -> Vec<Series> {
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
    let mut series = Vec::new();
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
    series
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
