//! Plots of one run, whoever ran it: the simulator (`braid sim --plot`),
//! a real transfer (`braid send`/`recv --plot`) or a file read back
//! (`braid plot`). Each source becomes a [`Trace`], per-connection time
//! series, and every trace is drawn by the same charts (`charts`) through
//! the same drawing code (`draw`, which the bench's figures use too).

pub mod charts;
pub mod draw;
pub mod series_read;

pub use charts::{flow_throughput_chart, window_chart};

use braid_sim::report::SeriesPoint;
use braid_sim::RunResult;
use std::path::Path;

/// The units of `window` and `in_flight` a trace can have: the
/// simulator's samples count packets of the session's segment size; a
/// transfer's (`--plot`) and a qlog count bytes, drawn in kB.
pub const WINDOW_UNITS: [&str; 2] = ["packets", "kB"];

/// One sample of a connection; NaN where the source did not say.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// Seconds since the run began.
    pub t: f64,
    /// Congestion window, in the trace's `window_unit`.
    pub window: f64,
    /// Smoothed RTT, milliseconds; 0 before the first measurement.
    pub srtt_ms: f64,
    /// Bytes in flight, in the trace's `window_unit`.
    pub in_flight: f64,
    /// Stream bytes acknowledged (received, on the receiving side) over
    /// the sample's interval, Mbit/s.
    pub throughput_mbps: f64,
}

/// One connection's series, in time order.
#[derive(Debug, Clone)]
pub struct Conn {
    pub flow: usize,
    pub path: u64,
    pub points: Vec<Point>,
}

/// What the per-run plots are drawn from.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Opens every chart's title: a scenario's name, a session's side and id.
    pub title: String,
    /// The unit of `window` and `in_flight` on the axis: "packets" or "kB".
    pub window_unit: &'static str,
    /// Whether the trace is of the side that sent the data: only its
    /// windows, bytes in flight and RTTs describe the transfer (a
    /// receiver's are those of its ACKs, flat lines, and it takes no
    /// round trip), so only its are drawn.
    pub sender: bool,
    /// Sorted by flow, then path.
    pub conns: Vec<Conn>,
    /// Names for connections by path id, as a transfer's summary gives
    /// them (their peer address); "path N" where there is none.
    pub names: std::collections::BTreeMap<u64, String>,
}

impl From<braid_qlog::read::Sample> for Point {
    fn from(s: braid_qlog::read::Sample) -> Point {
        Point {
            t: s.t,
            window: s.window,
            srtt_ms: s.srtt_ms,
            in_flight: s.in_flight,
            throughput_mbps: s.throughput_mbps,
        }
    }
}

impl Conn {
    /// Whether it carried any of the run: some throughput in a sample.
    pub fn carried(&self) -> bool {
        self.points.iter().any(|p| p.throughput_mbps > 0.0)
    }
}

impl Trace {
    /// From each flow's series as the simulator writes them (samples of
    /// every connection interleaved, in time order).
    pub fn from_series<'a>(
        title: String,
        window_unit: &'static str,
        flows: impl IntoIterator<Item = (usize, &'a [SeriesPoint])>,
    ) -> Trace {
        let mut conns = Vec::new();
        for (flow, series) in flows {
            let mut paths: Vec<u8> = series.iter().map(|p| p.path).collect();
            paths.sort_unstable();
            paths.dedup();
            for path in paths {
                let points = series
                    .iter()
                    .filter(|s| s.path == path)
                    .map(|s| Point {
                        t: s.t,
                        window: s.window,
                        srtt_ms: s.srtt_ms,
                        in_flight: s.in_flight,
                        throughput_mbps: s.throughput_mbps,
                    })
                    .collect();
                conns.push(Conn {
                    flow,
                    path: u64::from(path),
                    points,
                });
            }
        }
        Trace {
            title,
            window_unit,
            sender: true,
            conns,
            names: Default::default(),
        }
    }

    /// A qlog's series (windows in kB, as it counts bytes); `fallback`
    /// titles it if the qlog has no title.
    pub fn from_qlog(bytes: &[u8], fallback: &str) -> anyhow::Result<Trace> {
        let q = braid_qlog::read::read(bytes, fallback)?;
        let conns = q
            .paths
            .into_iter()
            .map(|p| Conn {
                flow: 0,
                path: p.path,
                points: p.points.into_iter().map(Point::from).collect(),
            })
            .collect();
        Ok(Trace {
            title: q.title,
            window_unit: "kB",
            sender: q.sender,
            conns,
            names: Default::default(),
        })
    }

    /// A simulated run's client series (windows in packets).
    pub fn from_run(r: &RunResult) -> Trace {
        let flows = r.flows.iter().map(|f| (f.flow, f.series.as_slice()));
        Trace::from_series(r.scenario.clone(), "packets", flows)
    }

    /// The flows present, in order.
    fn flows(&self) -> Vec<usize> {
        let mut f: Vec<usize> = self.conns.iter().map(|c| c.flow).collect();
        f.dedup();
        f
    }

    /// A connection's name in legends: its flow too when there are several.
    fn label(&self, c: &Conn) -> String {
        if let Some(name) = self.names.get(&c.path) {
            return name.clone();
        }
        if self.flows().len() > 1 {
            format!("flow {} path {}", c.flow, c.path)
        } else {
            format!("path {}", c.path)
        }
    }
}

/// `braid sim --plot DIR`: the per-run plots of a simulated run.
pub fn write_run(r: &RunResult, dir: &Path, who: &str) -> anyhow::Result<()> {
    let stem = r.scenario.replace(['/', ' '], "-");
    charts::write(&Trace::from_run(r), dir, &stem, true, who)
}
