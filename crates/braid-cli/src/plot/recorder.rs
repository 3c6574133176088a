//! `send`/`recv --plot DIR`: keeps a session's samples (one per connection
//! every `sample_interval`) while the transfer runs, then writes them as a
//! series JSON (the shape of `braid sim --json --series`, so `braid plot`
//! reads it back) and draws them, whether the transfer succeeded or not.

use super::{charts, Trace};
use crate::side::Side;
use braid::{Monitor, Session};
use braid_proto::{PathId, PathSample, SessionStats};
use braid_sim::report::SeriesPoint;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tokio::sync::{broadcast, oneshot};

/// Most points kept, about 1 MB: 13 minutes of two connections at full
/// rate. Past it, every other sampling time is dropped, and from then on
/// only every other one is kept (then every fourth, ...), so a transfer of
/// any length fits.
const MAX_POINTS: usize = 1 << 14;

/// Collects one session's samples until [`Recorder::write`].
pub struct Recorder {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Kept>,
    dir: PathBuf,
    side: Side,
    session_id: u64,
    cc: &'static str,
}

impl Recorder {
    /// Starts keeping `session`'s samples from now on, if there is a `dir`
    /// to plot them into.
    pub fn start(dir: Option<&Path>, session: &Session, side: Side) -> Option<Recorder> {
        let dir = dir?.to_owned();
        let monitor = session.monitor();
        // Subscribed before anything is awaited: no sample is missed.
        let samples = monitor.samples();
        let config = session.config();
        let interval_s = config.sample_interval.map_or(0.1, |d| d.as_secs_f64());
        let kept = Kept {
            points: Vec::new(),
            stride: 1,
            batch: 0,
            last_at: None,
            t0: None,
            interval_s,
            received: (side == Side::Recv).then(|| Received::new(&monitor.stats())),
        };
        let (stop, stopped) = oneshot::channel();
        Some(Recorder {
            stop,
            task: tokio::spawn(collect(samples, monitor, stopped, kept)),
            dir,
            side,
            session_id: session.id(),
            cc: config.cc.name(),
        })
    }

    /// Stops keeping samples, writes DIR/SIDE-ID-series.json and the plots
    /// beside it, and names them on stderr. A failure to write is said
    /// there too: it does not change how the transfer ended. Titles say
    /// what `report` sent or received, legends name connections as its
    /// summary does.
    pub async fn write(self, report: &crate::summary::Report) {
        let _ = self.stop.send(());
        let Ok(kept) = self.task.await else { return };
        let side = match self.side {
            Side::Send => "send",
            Side::Recv => "recv",
        };
        let who = format!("braid {side}");
        let stem = format!("{side}-{:016x}", self.session_id);
        let title = match &report.file {
            Some(f) => format!("braid {side} {}", braid::text::escape(f)),
            None => format!("braid {side}"),
        };
        let connections: Vec<_> = report
            .connections
            .iter()
            .map(
                |c| serde_json::json!({"path": c.id.0, "name": c.label_among(&report.connections)}),
            )
            .collect();
        let doc = serde_json::json!({
            "title": title,
            "connections": connections,
            "source": who,
            "session_id": format!("{:016x}", self.session_id),
            "side": side,
            "window_unit": "bytes",
            "sample_interval_s": kept.interval_s,
            "every_nth_sample": kept.stride,
            "flows": [{
                "flow": 0,
                "cc": self.cc,
                "series": kept.points.iter().map(|(_, p)| p).collect::<Vec<_>>(),
            }],
        });
        let dir = self.dir;
        // Drawing takes a while: off the runtime, which may be receiving
        // other transfers (`recv --keep`).
        let drawn = tokio::task::spawn_blocking(move || save(&doc, &dir, &stem, &who)).await;
        match drawn {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("braid: cannot write the plots: {e:#}"),
            Err(e) => eprintln!("braid: cannot write the plots: {e}"),
        }
    }
}

fn save(doc: &serde_json::Value, dir: &Path, stem: &str, who: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json: PathBuf = dir.join(format!("{stem}-series.json"));
    std::fs::write(&json, serde_json::to_string(doc)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    eprintln!("{who}: series {}", json.display());
    // Read back as `braid plot` reads it, so both draw the same.
    let trace: Trace = super::series_read::read(doc, stem)?;
    charts::write(&trace, dir, stem, true, who)
}

/// Keeps samples until told to stop, then takes what is still queued.
async fn collect(
    mut samples: broadcast::Receiver<PathSample>,
    monitor: Monitor,
    mut stop: oneshot::Receiver<()>,
    mut kept: Kept,
) -> Kept {
    use broadcast::error::{RecvError, TryRecvError};
    loop {
        tokio::select! {
            s = samples.recv() => match s {
                Ok(s) => kept.push(s, || monitor.stats()),
                // Fell behind: the oldest were overwritten; keep going.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return kept,
            },
            _ = &mut stop => loop {
                match samples.try_recv() {
                    Ok(s) => kept.push(s, || monitor.stats()),
                    Err(TryRecvError::Lagged(_)) => {}
                    Err(_) => return kept,
                }
            },
        }
    }
}

/// The points kept so far.
struct Kept {
    /// Each with the index of its sampling time (a batch: one sample per
    /// connection, all at the same instant).
    points: Vec<(u64, SeriesPoint)>,
    /// Only batches whose index is a multiple of this are kept.
    stride: u64,
    batch: u64,
    /// The current batch's time, seconds of the runtime's clock.
    last_at: Option<f64>,
    /// The runtime's clock when the session began: t = 0 in the series.
    t0: Option<f64>,
    interval_s: f64,
    /// On the receiving side, what it received (see [`Received`]).
    received: Option<Received>,
}

impl Kept {
    /// Keeps `s` if its sampling time is kept; `stats` are the session's
    /// counters now, read once per sampling time on the receiving side.
    fn push(&mut self, s: PathSample, stats: impl FnOnce() -> SessionStats) {
        if self.last_at.is_none_or(|at| (at - s.at_s).abs() > 1e-9) {
            let interval = self.last_at.map_or(self.interval_s, |at| s.at_s - at);
            if self.last_at.is_some() {
                self.batch += 1;
            }
            self.last_at = Some(s.at_s);
            if let Some(r) = &mut self.received {
                r.update(&stats(), interval);
            }
        }
        if !self.batch.is_multiple_of(self.stride) {
            return;
        }
        // The first samples come an interval after the session began.
        let t0 = *self.t0.get_or_insert(s.at_s - self.interval_s);
        let throughput_bps = match &self.received {
            Some(r) => r.rate_bps(s.path),
            None => s.throughput_bps,
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let point = SeriesPoint {
            t: s.at_s - t0,
            path: s.path.0,
            window: s.window as f64,
            srtt_ms: ms(s.srtt),
            rto_ms: ms(s.rto),
            in_flight: s.in_flight as f64,
            throughput_mbps: throughput_bps / 1e6,
        };
        self.points.push((self.batch, point));
        if self.points.len() >= MAX_POINTS {
            self.stride *= 2;
            let stride = self.stride;
            self.points.retain(|(b, _)| b.is_multiple_of(stride));
        }
    }
}

/// A receiver's samples carry the throughput of what it sent (its verdict:
/// nearly nothing), so its throughput is what it received instead: the
/// stream bytes that arrived on each connection over the interval
/// (copies of bytes it already had included).
struct Received {
    bytes: BTreeMap<PathId, u64>,
    /// The last interval's rate per connection, bit/s.
    rates: BTreeMap<PathId, f64>,
}

impl Received {
    fn new(stats: &SessionStats) -> Received {
        Received {
            bytes: arrived(stats),
            rates: BTreeMap::new(),
        }
    }

    /// The counters now, `interval_s` seconds after the last update.
    fn update(&mut self, stats: &SessionStats, interval_s: f64) {
        let now = arrived(stats);
        self.rates = now
            .iter()
            .map(|(&id, &n)| {
                let bytes = n.saturating_sub(*self.bytes.get(&id).unwrap_or(&0));
                (id, bytes as f64 * 8.0 / interval_s.max(1e-3))
            })
            .collect();
        self.bytes = now;
    }

    fn rate_bps(&self, path: PathId) -> f64 {
        self.rates.get(&path).copied().unwrap_or(0.0)
    }
}

fn arrived(stats: &SessionStats) -> BTreeMap<PathId, u64> {
    stats
        .paths
        .iter()
        .map(|(id, p)| (*id, p.stream_bytes_received))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(at_s: f64, path: u8) -> PathSample {
        PathSample {
            at_s,
            path: PathId(path),
            window: 12_000,
            srtt: Duration::from_millis(20),
            rto: Duration::from_millis(200),
            in_flight: 6_000,
            throughput_bps: 8e6,
        }
    }

    fn kept() -> Kept {
        Kept {
            points: Vec::new(),
            stride: 1,
            batch: 0,
            last_at: None,
            t0: None,
            interval_s: 0.1,
            received: None,
        }
    }

    /// A long transfer keeps at most MAX_POINTS, spread over all of it,
    /// and both connections of each sampling time kept.
    #[test]
    fn the_buffer_is_bounded_and_spans_the_whole_transfer() {
        let mut k = kept();
        let batches = 5 * MAX_POINTS as u64;
        for b in 0..batches {
            let at = 7.0 + (b + 1) as f64 * 0.1;
            k.push(sample(at, 0), SessionStats::default);
            k.push(sample(at, 1), SessionStats::default);
        }
        assert!(k.points.len() < MAX_POINTS, "{}", k.points.len());
        assert!(k.points.len() > MAX_POINTS / 4);
        let first = k.points.first().unwrap().1;
        let last = k.points.last().unwrap().1;
        assert!((first.t - 0.1).abs() < 1e-6, "{}", first.t);
        assert!(last.t > batches as f64 * 0.1 * 0.99, "{}", last.t);
        assert_eq!((first.window, first.in_flight), (12_000.0, 6_000.0));
        for pair in k.points.chunks(2) {
            assert_eq!((pair[0].1.path, pair[1].1.path), (0, 1));
            assert_eq!(pair[0].0, pair[1].0);
        }
    }

    #[test]
    fn a_receiver_counts_the_bytes_each_connection_brought() {
        let mut stats = SessionStats::default();
        let mut r = Received::new(&stats);
        let mut a = braid_proto::PathStats::default();
        a.stream_bytes_received = 750_000;
        let mut b = a;
        b.stream_bytes_received = 250_000;
        stats.paths = vec![(PathId(0), a), (PathId(1), b)];
        r.update(&stats, 0.1);
        assert!((r.rate_bps(PathId(0)) - 60e6).abs() < 1.0);
        assert!((r.rate_bps(PathId(1)) - 20e6).abs() < 1.0);
        assert_eq!(r.rate_bps(PathId(2)), 0.0);
        // The next interval counts only what came since.
        stats.paths[1].1.stream_bytes_received += 125_000;
        r.update(&stats, 0.1);
        assert_eq!(r.rate_bps(PathId(0)), 0.0);
        assert!((r.rate_bps(PathId(1)) - 10e6).abs() < 1.0);
    }
}
