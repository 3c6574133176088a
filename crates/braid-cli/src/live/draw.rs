//! Draws a [`Model`] into a ratatui buffer of any size: a header with the
//! session's totals, then one box per connection with a strip chart per
//! figure (newest on the right, one column per tick, one scale per figure
//! shared by all connections so that their heights compare), and a footer
//! with the charts' span and tops. Too many connections for boxes: the
//! same without borders, then one line each.

use super::model::{Model, Point, Series, TICK};
use crate::side::Side;
use braid::text;
use braid_proto::PathState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, LineGauge, Paragraph, Sparkline, Widget};

/// One charted figure.
struct Metric {
    name: &'static str,
    color: Color,
    value: fn(&Point) -> f64,
    /// The figure now, for the column right of the chart.
    now: fn(&Series) -> String,
    /// The chart's top, for the footer.
    top: fn(f64) -> String,
}

const RATE: Metric = Metric {
    name: "rate",
    color: Color::Green,
    value: |p| p.rate_bps,
    now: |s| text::rate(s.recent_rate_bps()),
    top: text::rate,
};

const SEND_METRICS: [Metric; 4] = [
    RATE,
    Metric {
        name: "window",
        color: Color::Cyan,
        value: |p| p.window as f64,
        now: |s| s.now().map_or_else(String::new, |p| text::size(p.window)),
        top: |v| text::size(v as u64),
    },
    Metric {
        name: "sRTT",
        color: Color::Yellow,
        value: |p| p.srtt.as_secs_f64(),
        now: |s| {
            s.now()
                .map_or_else(String::new, |p| format!("{} ms", text::ms(p.srtt)))
        },
        top: |v| format!("{} ms", text::sig3(v * 1e3)),
    },
    Metric {
        name: "lost",
        color: Color::Red,
        value: |p| p.lost_per_s,
        now: |s| format!("{} ({}/s)", s.lost, per_s(s.recent_loss_per_s())),
        top: |v| format!("{}/s", per_s(v)),
    },
];

/// The receiver counts no windows, RTTs or losses: the sender does.
const RECV_METRICS: [Metric; 1] = [RATE];

/// Losses a second: "0", "0.5", "12".
fn per_s(x: f64) -> String {
    if x == 0.0 || x >= 9.95 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn metrics(side: Side) -> &'static [Metric] {
    match side {
        Side::Send => &SEND_METRICS,
        Side::Recv => &RECV_METRICS,
    }
}

/// Columns left of a chart (the figure's name) and right of it (its value).
const NAME_W: u16 = 7;
const VALUE_W: u16 = 13;

/// Rows a figure's chart may take on a tall terminal.
const MAX_CHART_ROWS: u16 = 4;

/// Draws `m` into `area` of `buf`.
pub fn draw(m: &Model, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let mut rows = area;
    header(m, &mut rows, buf);
    if rows.height == 0 {
        return;
    }
    // The footer takes the last row.
    let foot = Rect {
        y: rows.bottom() - 1,
        height: 1,
        ..rows
    };
    rows.height -= 1;
    let metrics = metrics(m.side);
    let n = m.paths.len() as u16;
    if n == 0 {
        text(
            Line::from("waiting for the session's first figures…"),
            rows,
            buf,
        );
        return;
    }
    let per_path = rows.height / n;
    let k = metrics.len() as u16;
    // Boxes if they fit, else the same without borders, else one line each.
    let boxed = per_path >= 2 + k;
    let columns = if boxed || per_path > k {
        let frame = if boxed { 2 } else { 1 };
        let chart_rows = ((per_path - frame) / k).min(MAX_CHART_ROWS);
        // Rows left over go to the rate, the figure people look at first.
        let spare = (per_path - frame - chart_rows * k).min(MAX_CHART_ROWS);
        let mut heights = vec![chart_rows; metrics.len()];
        heights[0] += spare;
        let h = frame + chart_rows * k + spare;
        let shares = m.shares();
        let mut y = rows.y;
        for (s, share) in m.paths.iter().zip(shares) {
            let r = Rect {
                y,
                height: h,
                ..rows
            };
            path_box(m, s, share, metrics, &heights, boxed, r, buf);
            y += h;
        }
        chart_width(if boxed {
            rows.width.saturating_sub(2)
        } else {
            rows.width
        })
    } else {
        path_lines(m, rows, buf)
    };
    footer(m, metrics, columns, foot, buf);
}

/// Columns of a chart in a box of this inner width.
fn chart_width(inner: u16) -> u16 {
    inner.saturating_sub(NAME_W + VALUE_W)
}

/// The totals line, and a gauge when the size is known; shrinks `rows`.
fn header(m: &Model, rows: &mut Rect, buf: &mut Buffer) {
    let mut spans = vec![
        Span::styled(m.title.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::raw("  "),
    ];
    let amount = match m.total {
        Some(t) => format!("{} of {}", text::size(m.content), text::size(t)),
        None => text::size(m.content),
    };
    spans.push(Span::raw(amount));
    spans.push(Span::raw(format!(
        "  {}  elapsed {}",
        text::rate(m.rate_bps()),
        text::duration(m.elapsed)
    )));
    if m.total.is_some() {
        let eta = m.eta().map_or_else(|| "–".into(), text::duration);
        spans.push(Span::raw(format!("  ETA {eta}")));
    }
    take_line(Line::from(spans), rows, buf);
    if let Some(total) = m.total.filter(|&t| t > 0) {
        if rows.height > 0 {
            let ratio = (m.content as f64 / total as f64).clamp(0.0, 1.0);
            let r = Rect { height: 1, ..*rows };
            LineGauge::default()
                .ratio(ratio)
                .label(format!("{:>3.0} %", ratio * 100.0))
                .filled_style(Style::new().fg(Color::Green))
                .render(r, buf);
            rows.y += 1;
            rows.height -= 1;
        }
    }
}

/// "path 0 · 40mbit 20ms RTT (probing)".
fn title(s: &Series) -> String {
    let state = match s.state {
        PathState::Active => "",
        PathState::Probing => " (probing)",
        PathState::Closed => " (closed)",
    };
    format!("{}{state}", s.label)
}

fn share_text(side: Side, share: f64) -> String {
    let of = match side {
        Side::Send => "bytes",
        Side::Recv => "bytes received",
    };
    format!("{:.0} % of {of}", share * 100.0)
}

/// One connection's box (or, unboxed, a title line): `heights[i]` rows
/// of chart for figure `i`.
#[allow(clippy::too_many_arguments)]
fn path_box(
    m: &Model,
    s: &Series,
    share: f64,
    metrics: &[Metric],
    heights: &[u16],
    boxed: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let name = Line::from(format!(" {} ", title(s))).bold();
    let share = Line::from(format!(" {} ", share_text(m.side, share))).right_aligned();
    let inner = if boxed {
        let block = Block::bordered()
            .border_style(Style::new().fg(Color::DarkGray))
            .title_top(name)
            .title_top(share);
        let inner = block.inner(area);
        block.render(area, buf);
        inner
    } else {
        let top = Rect { height: 1, ..area };
        Paragraph::new(share).render(top, buf);
        // The name last: on a narrow terminal it wins over the share.
        buf.set_line(top.x, top.y, &name, top.width);
        Rect {
            y: area.y + 1,
            height: area.height - 1,
            ..area
        }
    };
    let width = chart_width(inner.width);
    let mut y = inner.y;
    for (metric, &height) in metrics.iter().zip(heights) {
        let r = Rect { y, height, ..inner };
        y += height;
        let base = r.bottom() - 1;
        buf.set_stringn(
            r.x,
            base,
            metric.name,
            NAME_W as usize,
            Style::new().fg(metric.color),
        );
        let chart = Rect {
            x: r.x + NAME_W,
            width,
            ..r
        };
        let top = m.top(width as usize, metric.value);
        spark(s, metric, top, chart, buf);
        let value = Line::from((metric.now)(s)).right_aligned();
        let v = Rect {
            x: chart.right(),
            y: base,
            width: r.right().saturating_sub(chart.right()),
            height: 1,
        };
        value.render(v, buf);
    }
}

/// The last `area.width` ticks of one figure, scaled to `top`, newest on
/// the right edge.
fn spark(s: &Series, metric: &Metric, top: f64, area: Rect, buf: &mut Buffer) {
    // Eight levels a row; a finer integer scale keeps small values visible.
    const FULL: u64 = 1000;
    let w = area.width as usize;
    let scaled = |p: &Point| {
        let v = (metric.value)(p);
        if top > 0.0 && v > 0.0 {
            ((v / top * FULL as f64).round() as u64).clamp(1, FULL)
        } else {
            0
        }
    };
    let shown: Vec<Option<u64>> = s
        .points
        .iter()
        .rev()
        .take(w)
        .rev()
        .map(|p| p.as_ref().map(scaled))
        .collect();
    let pad = w.saturating_sub(shown.len());
    let data = std::iter::repeat_n(None, pad).chain(shown);
    Sparkline::default()
        .data(data)
        .max(FULL)
        .absent_value_symbol(" ")
        .style(Style::new().fg(metric.color))
        .render(area, buf);
}

/// One line per connection, for a terminal too short for boxes; returns
/// the width of the rate charts.
fn path_lines(m: &Model, area: Rect, buf: &mut Buffer) -> u16 {
    let label_w = m
        .paths
        .iter()
        .map(|s| title(s).chars().count())
        .max()
        .unwrap_or(0)
        .min(24) as u16;
    // Label, share, then the figures: rate, and the sender's window,
    // sRTT and losses.
    let figures_w = match m.side {
        Side::Send => 12 + 9 + 10 + 10,
        Side::Recv => 12,
    };
    let chart_w = area.width.saturating_sub(label_w + 6 + figures_w);
    let shares = m.shares();
    let fits = area.height as usize;
    let shown = if m.paths.len() > fits {
        fits.saturating_sub(1)
    } else {
        fits
    };
    let more = m.paths.len().saturating_sub(shown);
    for (i, (s, share)) in m.paths.iter().zip(shares).take(shown).enumerate() {
        let y = area.y + i as u16;
        let mut x = area.x;
        buf.set_stringn(x, y, title(s), label_w as usize, Style::new().bold());
        x += label_w;
        buf.set_string(x, y, format!(" {:>3.0}% ", share * 100.0), Style::new());
        x += 6;
        let top = m.top(chart_w as usize, RATE.value);
        spark(s, &RATE, top, Rect::new(x, y, chart_w, 1), buf);
        x += chart_w;
        let mut figures = format!("{:>12}", (RATE.now)(s));
        if m.side == Side::Send {
            let p = s.now().unwrap_or_default();
            figures += &format!(
                "{:>9}{:>10}{:>10}",
                text::size(p.window),
                format!("{} ms", text::ms(p.srtt)),
                format!("{} lost", s.lost)
            );
        }
        buf.set_stringn(x, y, figures, figures_w as usize, Style::new());
    }
    if more > 0 && fits > 0 {
        let y = area.y + shown as u16;
        buf.set_string(
            area.x,
            y,
            format!("… and {more} more connections (a taller terminal shows them)"),
            Style::new().fg(Color::DarkGray),
        );
    }
    chart_w
}

/// The charts' span and each figure's top.
fn footer(m: &Model, metrics: &[Metric], columns: u16, area: Rect, buf: &mut Buffer) {
    let shown = (columns as usize).min(m.ticks());
    let span = TICK * shown as u32;
    let tops: Vec<String> = metrics
        .iter()
        .map(|metric| (metric.top)(m.top(columns as usize, metric.value)))
        .collect();
    let mut line = format!(
        "charts: last {} · tops: {}",
        text::duration(span),
        tops.join(", ")
    );
    if m.side == Side::Recv {
        line += " · windows, RTT, losses: on the sender";
    }
    text(Line::from(line).fg(Color::DarkGray), area, buf);
}

fn text(line: Line<'_>, area: Rect, buf: &mut Buffer) {
    Paragraph::new(line).render(area, buf);
}

/// Writes `line` on the first row of `rows` and removes that row.
fn take_line(line: Line<'_>, rows: &mut Rect, buf: &mut Buffer) {
    if rows.height == 0 {
        return;
    }
    text(line, Rect { height: 1, ..*rows }, buf);
    rows.y += 1;
    rows.height -= 1;
}

#[cfg(test)]
#[path = "draw_tests.rs"]
mod tests;
