//! Drawing one chart as SVG and PNG (plotters; text in the bundled DejaVu
//! Sans, so no system font is needed): the one drawing path of the
//! simulator's, the bench's, `send`/`recv --plot`'s and `braid plot`'s
//! figures.

use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
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
pub enum Mark {
    Line,
    Points,
    LinePoints,
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    pub color: RGBColor,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

impl Chart {
    /// Whether no series has a point to draw.
    pub fn is_empty(&self) -> bool {
        self.series.iter().all(|s| s.points.is_empty())
    }
}

pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

pub fn nth_color(i: usize) -> RGBColor {
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

/// Draws `c` to DIR/NAME.svg (and NAME.png); returns the files written.
pub fn save(c: &Chart, dir: &Path, name: &str, png: bool) -> anyhow::Result<Vec<PathBuf>> {
    register_font();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let svg = dir.join(format!("{name}.svg"));
    let size = canvas(c);
    draw(SVGBackend::new(&svg, size).into_drawing_area(), c)?;
    let mut written = vec![svg];
    if png {
        let png_path = dir.join(format!("{name}.png"));
        draw(BitMapBackend::new(&png_path, size).into_drawing_area(), c)?;
        written.push(png_path);
    }
    Ok(written)
}

/// Every `len / MAX_POINTS`-th point.
pub fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    points.into_iter().step_by(step).collect()
}

/// Means of consecutive groups of points, at most MAX_POINTS of them.
pub fn average(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    points
        .chunks(step)
        .map(|c| (mean(c.iter().map(|p| p.0)), mean(c.iter().map(|p| p.1))))
        .collect()
}

/// The mean of the values that are numbers (NaN if none is).
fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs
        .filter(|x| !x.is_nan())
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}
