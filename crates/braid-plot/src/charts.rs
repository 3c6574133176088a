//! The per-run charts of a [`Trace`]: window, bytes in flight, throughput
//! and smoothed RTT per connection over time.

use super::draw::{self, average, nth_color, thin, Chart, Mark, Series};
use super::{Conn, Point, Trace};
use plotters::style::RGBColor;
use std::path::Path;

/// The session's total among its connections' lines.
const TOTAL_COLOR: RGBColor = RGBColor(0, 0, 0);

fn over_time(title: String, y_label: String, series: Vec<Series>) -> Chart {
    Chart {
        title,
        x_label: "time (s)".into(),
        y_label,
        series,
    }
}

/// The connections drawn, with their colour's index: those that carried
/// some of the run (all of them if none did), each in the colour it has
/// among all.
fn drawn(t: &Trace) -> Vec<(usize, &Conn)> {
    let any = t.conns.iter().any(Conn::carried);
    t.conns
        .iter()
        .enumerate()
        .filter(|(_, c)| !any || c.carried())
        .collect()
}

/// One line per connection of `value`, where it is a number (and, with
/// `positive`, above 0: an RTT of 0 means none was measured yet).
fn per_conn(t: &Trace, value: fn(&Point) -> f64, positive: bool) -> Vec<Series> {
    drawn(t)
        .into_iter()
        .map(|(i, c)| Series {
            name: t.label(c),
            points: thin(
                c.points
                    .iter()
                    .map(|p| (p.t, value(p)))
                    .filter(|&(_, v)| v.is_finite() && (!positive || v > 0.0))
                    .collect(),
            ),
            mark: Mark::Line,
            color: nth_color(i),
        })
        .collect()
}

/// Connection windows over time, one series per flow and connection.
pub fn window_chart(title: String, t: &Trace) -> Chart {
    let y = format!("window ({})", t.window_unit);
    over_time(title, y, per_conn(t, |p| p.window, false))
}

/// Bytes in flight per connection, beside its window.
fn in_flight_chart(title: String, t: &Trace) -> Chart {
    let y = format!("in flight ({})", t.window_unit);
    over_time(title, y, per_conn(t, |p| p.in_flight, false))
}

/// Smoothed RTT per connection, from its first measurement.
fn rtt_chart(title: String, t: &Trace) -> Chart {
    let series = per_conn(t, |p| p.srtt_ms, true);
    over_time(title, "smoothed RTT (ms)".into(), series)
}

/// The sum of `conns`' throughputs at each sampling time.
fn total(conns: &[&Conn]) -> Vec<(f64, f64)> {
    let mut all: Vec<(f64, f64)> = conns
        .iter()
        .flat_map(|c| c.points.iter().map(|p| (p.t, p.throughput_mbps)))
        .filter(|p| p.1.is_finite())
        .collect();
    // Stable: at one time, the connections stay in path order.
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut by_t: Vec<(f64, f64)> = Vec::new();
    for (t, v) in all {
        match by_t.last_mut() {
            Some(last) if (last.0 - t).abs() < 1e-9 => last.1 += v,
            _ => by_t.push((t, v)),
        }
    }
    by_t
}

/// Each flow's throughput over time: the sum of its connections' samples.
pub fn flow_throughput_chart(title: String, t: &Trace) -> Chart {
    let series = t
        .flows()
        .into_iter()
        .map(|flow| {
            let conns: Vec<&Conn> = t.conns.iter().filter(|c| c.flow == flow).collect();
            Series {
                name: format!("flow {flow}"),
                points: average(&total(&conns)),
                mark: Mark::Line,
                color: nth_color(flow),
            }
        })
        .collect();
    over_time(title, "throughput (Mbit/s)".into(), series)
}

/// One session: each connection's throughput and their sum.
fn conn_throughput_chart(title: String, t: &Trace) -> Chart {
    let conns = drawn(t);
    let mut series: Vec<Series> = conns
        .iter()
        .map(|&(i, c)| Series {
            name: t.label(c),
            points: average(
                &c.points
                    .iter()
                    .map(|p| (p.t, p.throughput_mbps))
                    .filter(|p| p.1.is_finite())
                    .collect::<Vec<_>>(),
            ),
            mark: Mark::Line,
            color: nth_color(i),
        })
        .collect();
    // With one connection the sum is the same line.
    if conns.len() > 1 {
        let all: Vec<&Conn> = conns.iter().map(|&(_, c)| c).collect();
        series.push(Series {
            name: "session".into(),
            points: average(&total(&all)),
            mark: Mark::Line,
            color: TOTAL_COLOR,
        });
    }
    over_time(title, "throughput (Mbit/s)".into(), series)
}

/// The charts of a trace, each with its file name's suffix and what it
/// lacks when it has no point: all of them for the side that sent the
/// data, the throughput only for the side that received it.
fn charts(t: &Trace) -> Vec<(&'static str, Chart, &'static str)> {
    let title = |what: &str| format!("{}: {what}", t.title);
    let throughput = if t.flows().len() > 1 {
        flow_throughput_chart(title("throughput per flow"), t)
    } else {
        conn_throughput_chart(title("throughput per connection and for the session"), t)
    };
    let none = "no connection was sampled";
    if !t.sender {
        return vec![("throughput", throughput, none)];
    }
    vec![
        (
            "window",
            window_chart(title("window per connection"), t),
            none,
        ),
        (
            "inflight",
            in_flight_chart(title("in flight per connection"), t),
            none,
        ),
        ("throughput", throughput, none),
        (
            "rtt",
            rtt_chart(title("smoothed RTT per connection"), t),
            "no round trip was measured",
        ),
    ]
}

/// Draws every chart of `t` with data into DIR/STEM-KIND.svg (and .png),
/// and says on stderr, after `who`, which files it wrote and which charts
/// had nothing to draw.
pub fn write(t: &Trace, dir: &Path, stem: &str, png: bool, who: &str) -> anyhow::Result<()> {
    if !t.sender {
        eprintln!(
            "{who}: no window, in-flight or RTT plot: this side received the data, and its \
             windows are those of its ACKs (the sender's plots have the transfer's)"
        );
    }
    if t.conns.iter().any(Conn::carried) {
        for c in t.conns.iter().filter(|c| !c.carried()) {
            eprintln!("{who}: {} carried nothing: not drawn", t.label(c));
        }
    }
    for (kind, chart, none) in charts(t) {
        if chart.is_empty() {
            eprintln!("{who}: no {kind} plot: {none}");
            continue;
        }
        for file in draw::save(&chart, dir, &format!("{stem}-{kind}"), png)? {
            if file.extension().is_some_and(|e| e == "svg") {
                eprintln!("{who}: plot {}", file.display());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: f64, thr: f64) -> Point {
        Point {
            t,
            window: 10.0,
            srtt_ms: 0.0,
            in_flight: 1.0,
            throughput_mbps: thr,
        }
    }

    fn conn(path: u64, pts: &[(f64, f64)]) -> Conn {
        Conn {
            flow: 0,
            path,
            points: pts.iter().map(|&(t, v)| point(t, v)).collect(),
        }
    }

    #[test]
    fn the_session_line_sums_its_connections_at_each_time() {
        let a = conn(0, &[(0.1, 1.0), (0.2, 2.0)]);
        let b = conn(1, &[(0.2, 5.0), (0.3, 4.0)]);
        assert_eq!(total(&[&a, &b]), [(0.1, 1.0), (0.2, 7.0), (0.3, 4.0)]);
    }

    #[test]
    fn an_rtt_of_zero_is_not_drawn() {
        let t = Trace {
            title: "x".into(),
            window_unit: "packets",
            sender: true,
            conns: vec![conn(0, &[(0.1, 1.0)])],
            names: Default::default(),
        };
        let c = rtt_chart("x".into(), &t);
        assert!(c.is_empty());
        assert!(!window_chart("x".into(), &t).is_empty());
    }

    /// A connection that carried nothing is not drawn; the others keep
    /// the colours they have among all.
    #[test]
    fn a_connection_that_carried_nothing_is_not_drawn() {
        let mut t = Trace {
            title: "x".into(),
            window_unit: "kB",
            sender: true,
            conns: vec![
                conn(0, &[(0.1, 0.0), (0.2, 0.0)]),
                conn(1, &[(0.1, 3.0), (0.2, 4.0)]),
            ],
            names: Default::default(),
        };
        let w = window_chart("x".into(), &t);
        assert_eq!(w.series.len(), 1);
        assert_eq!(w.series[0].name, "path 1");
        assert_eq!(w.series[0].color, nth_color(1));
        // Alone, the live one is the session: no sum line.
        assert_eq!(conn_throughput_chart("x".into(), &t).series.len(), 1);
        // Nothing carried anything (a failed run): all are drawn.
        t.conns[1] = conn(1, &[(0.1, 0.0)]);
        assert_eq!(window_chart("x".into(), &t).series.len(), 2);
    }

    /// The receiver's trace: its throughput only.
    #[test]
    fn a_receiver_gets_no_sender_charts() {
        let t = Trace {
            title: "x".into(),
            window_unit: "kB",
            sender: false,
            conns: vec![conn(0, &[(0.1, 3.0)])],
            names: Default::default(),
        };
        let kinds: Vec<&str> = charts(&t).iter().map(|c| c.0).collect();
        assert_eq!(kinds, ["throughput"]);
    }
}
