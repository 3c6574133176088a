//! What the live view shows, kept apart from the terminal: one [`Reading`]
//! of the session per tick goes in, and out come per-connection series
//! (rate, window, sRTT, losses) aligned on the same ticks, each
//! connection's share and the session's totals. Pure: time is an input.

use crate::side::Side;
use braid_proto::{PathId, PathState, SessionStats};
use std::collections::VecDeque;
use std::time::Duration;

/// How often the session is read: fine enough to see a window halve on a
/// 20 ms path, coarse enough that a column of the chart is a quarter second.
pub const TICK: Duration = Duration::from_millis(250);

/// Ticks kept per connection: 60 s, more than a 200-column terminal shows.
pub const HISTORY: usize = 240;

/// The session's rate and the loss rate are averaged over this long, so
/// the figures do not flicker with each tick's handful of packets.
const RECENT: Duration = Duration::from_secs(1);

/// One reading of the session.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Since the view started.
    pub at: Duration,
    /// Content bytes acknowledged (sender) or received (receiver) so far.
    pub content: u64,
    /// All stream bytes acknowledged or received, the header included:
    /// the receiver splits this among connections by the stream bytes
    /// that arrived on each (copies included, so only their proportion).
    pub stream: u64,
    pub paths: Vec<PathReading>,
}

/// One connection in a [`Reading`].
#[derive(Debug, Clone, Default)]
pub struct PathReading {
    pub id: PathId,
    pub label: String,
    pub state: PathState,
    /// What counts toward its share: stream bytes acknowledged on it
    /// (sender) or that arrived on it (receiver), as in the summary.
    pub carried: u64,
    /// Congestion window, bytes.
    pub window: u64,
    pub srtt: Duration,
    /// Packets declared lost so far.
    pub lost: u64,
}

impl Reading {
    /// Reads `stats` as `side` sees them; `label` names each connection.
    pub fn of(
        side: Side,
        at: Duration,
        content: u64,
        stats: &SessionStats,
        label: impl Fn(PathId) -> String,
    ) -> Reading {
        let stream = match side {
            Side::Send => stats.bytes_acked,
            Side::Recv => stats.bytes_received,
        };
        let paths = stats
            .paths
            .iter()
            .map(|&(id, p)| PathReading {
                id,
                label: label(id),
                state: p.state,
                carried: match side {
                    Side::Send => p.stream_bytes_acked,
                    Side::Recv => p.stream_bytes_received,
                },
                window: p.window,
                srtt: p.srtt,
                lost: p.lost_packets,
            })
            .collect();
        Reading {
            at,
            content,
            stream,
            paths,
        }
    }
}

/// One tick of one connection's chart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    /// Bytes it carried in the tick, ×8 per second.
    pub rate_bps: f64,
    pub window: u64,
    pub srtt: Duration,
    /// Packets declared lost in the tick, per second.
    pub lost_per_s: f64,
}

/// One connection's history.
#[derive(Debug, Clone)]
pub struct Series {
    pub id: PathId,
    pub label: String,
    pub state: PathState,
    /// One per tick, the newest last; `None` before the connection existed.
    pub points: VecDeque<Option<Point>>,
    /// Its counter toward the share (see [`PathReading::carried`]).
    pub carried: u64,
    /// Packets declared lost so far.
    pub lost: u64,
}

impl Series {
    /// The newest point.
    pub fn now(&self) -> Option<Point> {
        self.points.back().copied().flatten()
    }

    /// Its mean rate over the last second, bit/s: a tick holds only a few
    /// dozen packets of a slow path.
    pub fn recent_rate_bps(&self) -> f64 {
        mean_recent(&self.points, |p| p.rate_bps)
    }

    /// Packets lost per second over the last second.
    pub fn recent_loss_per_s(&self) -> f64 {
        mean_recent(&self.points, |p| p.lost_per_s)
    }
}

fn mean_recent(points: &VecDeque<Option<Point>>, f: impl Fn(&Point) -> f64) -> f64 {
    let n = (RECENT.as_nanos() / TICK.as_nanos()).max(1) as usize;
    let recent: Vec<f64> = points.iter().rev().take(n).flatten().map(f).collect();
    if recent.is_empty() {
        0.0
    } else {
        recent.iter().sum::<f64>() / recent.len() as f64
    }
}

/// Everything the view draws.
#[derive(Debug, Clone)]
pub struct Model {
    pub side: Side,
    /// "braid send data.bin", shown first in the header.
    pub title: String,
    /// Content bytes announced, once known.
    pub total: Option<u64>,
    /// Content bytes so far.
    pub content: u64,
    pub elapsed: Duration,
    /// Connections in the order they appeared.
    pub paths: Vec<Series>,
    /// Recent (time, content) pairs for the session's rate.
    recent: VecDeque<(Duration, u64)>,
    /// Ticks recorded, capped at [`HISTORY`].
    ticks: usize,
    last: Option<Reading>,
}

impl Model {
    pub fn new(side: Side, title: impl Into<String>, total: Option<u64>) -> Model {
        Model {
            side,
            title: title.into(),
            total,
            content: 0,
            elapsed: Duration::ZERO,
            paths: Vec::new(),
            recent: VecDeque::new(),
            ticks: 0,
            last: None,
        }
    }

    /// Ticks of history held (each series holds as many points).
    pub fn ticks(&self) -> usize {
        self.ticks
    }

    /// Takes one reading: a point for every connection, `None` for one
    /// missing from it, so that all series stay aligned on the same ticks.
    pub fn record(&mut self, r: Reading) {
        let dt = self
            .last
            .as_ref()
            .map_or(Duration::ZERO, |l| r.at.saturating_sub(l.at));
        let per_s = |n: f64| {
            if dt.is_zero() {
                0.0
            } else {
                n / dt.as_secs_f64()
            }
        };
        // A receiver's connections count copies of bytes it already had:
        // its in-order stream bytes are split in proportion to each one's.
        let stream_delta = self
            .last
            .as_ref()
            .map_or(r.stream, |l| r.stream.saturating_sub(l.stream));
        let carried_delta: u64 = r
            .paths
            .iter()
            .map(|p| p.carried.saturating_sub(self.previous(p.id).0))
            .sum();
        let ticks = self.ticks;
        let mut seen = vec![false; self.paths.len()];
        for p in &r.paths {
            let (carried_before, lost_before) = self.previous(p.id);
            let carried = p.carried.saturating_sub(carried_before);
            let bytes = match self.side {
                Side::Send => carried as f64,
                Side::Recv if carried_delta > 0 => {
                    stream_delta as f64 * carried as f64 / carried_delta as f64
                }
                Side::Recv => 0.0,
            };
            let point = Point {
                rate_bps: per_s(bytes * 8.0),
                window: p.window,
                srtt: p.srtt,
                lost_per_s: per_s(p.lost.saturating_sub(lost_before) as f64),
            };
            let i = self.series_of(p, ticks);
            seen.resize(self.paths.len(), false);
            let s = &mut self.paths[i];
            s.label.clone_from(&p.label);
            s.state = p.state;
            s.carried = p.carried;
            s.lost = p.lost;
            s.points.push_back(Some(point));
            seen[i] = true;
        }
        for (s, seen) in self.paths.iter_mut().zip(seen) {
            if !seen {
                s.points.push_back(None);
            }
            while s.points.len() > HISTORY {
                s.points.pop_front();
            }
        }
        self.ticks = (ticks + 1).min(HISTORY);
        self.content = r.content;
        self.elapsed = r.at;
        self.recent.push_back((r.at, r.content));
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| r.at.saturating_sub(t) > RECENT)
        {
            self.recent.pop_front();
        }
        self.last = Some(r);
    }

    /// The index of `p`'s series, a new one (blank for the `ticks` so far)
    /// if it was not seen before.
    fn series_of(&mut self, p: &PathReading, ticks: usize) -> usize {
        if let Some(i) = self.paths.iter().position(|s| s.id == p.id) {
            return i;
        }
        self.paths.push(Series {
            id: p.id,
            label: String::new(),
            state: p.state,
            points: std::iter::repeat_n(None, ticks).collect(),
            carried: 0,
            lost: 0,
        });
        self.paths.len() - 1
    }

    /// The previous reading's counters of connection `id` (zero if new).
    fn previous(&self, id: PathId) -> (u64, u64) {
        self.last
            .as_ref()
            .and_then(|l| l.paths.iter().find(|p| p.id == id))
            .map_or((0, 0), |p| (p.carried, p.lost))
    }

    /// The session's content rate over the last second, bit/s.
    pub fn rate_bps(&self) -> f64 {
        match (self.recent.front(), self.recent.back()) {
            (Some(&(t0, b0)), Some(&(t1, b1))) if t1 > t0 => {
                b1.saturating_sub(b0) as f64 * 8.0 / (t1 - t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// Time left at the recent rate, if the size is known and bytes move.
    pub fn eta(&self) -> Option<Duration> {
        let left = self.total?.saturating_sub(self.content);
        let rate = self.rate_bps() / 8.0;
        (rate > 0.0).then(|| Duration::from_secs_f64(left as f64 / rate))
    }

    /// Each connection's share of the session so far, in `paths` order
    /// (of bytes acknowledged for the sender, arrived for the receiver).
    pub fn shares(&self) -> Vec<f64> {
        let total: u64 = self.paths.iter().map(|s| s.carried).sum();
        self.paths
            .iter()
            .map(|s| {
                if total > 0 {
                    s.carried as f64 / total as f64
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The largest value of `f` over the last `columns` ticks of every
    /// connection: one scale for all, so that their charts compare.
    pub fn top(&self, columns: usize, f: impl Fn(&Point) -> f64) -> f64 {
        self.paths
            .iter()
            .flat_map(|s| s.points.iter().rev().take(columns).flatten())
            .map(f)
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(id: u8, carried: u64, lost: u64) -> PathReading {
        PathReading {
            id: PathId(id),
            label: format!("path {id}"),
            carried,
            window: 10_000 * (u64::from(id) + 1),
            srtt: Duration::from_millis(20),
            lost,
            ..PathReading::default()
        }
    }

    fn at(ms: u64, content: u64, paths: Vec<PathReading>) -> Reading {
        let stream = paths.iter().map(|p| p.carried).sum();
        Reading {
            at: Duration::from_millis(ms),
            content,
            stream,
            paths,
        }
    }

    #[test]
    fn rates_and_losses_come_from_the_tick_s_deltas() {
        let mut m = Model::new(Side::Send, "t", Some(10_000_000));
        m.record(at(0, 0, vec![path(0, 0, 0), path(1, 0, 0)]));
        m.record(at(
            250,
            1_500_000,
            vec![path(0, 1_000_000, 2), path(1, 500_000, 0)],
        ));
        let p0 = m.paths[0].now().unwrap();
        assert!((p0.rate_bps - 32e6).abs() < 1.0, "{p0:?}");
        assert!((p0.lost_per_s - 8.0).abs() < 1e-9);
        assert_eq!(p0.window, 10_000);
        assert!((m.paths[1].now().unwrap().rate_bps - 16e6).abs() < 1.0);
        assert_eq!(m.paths[0].lost, 2);
        // 1.5 MB in 250 ms; 8.5 MB left at that rate.
        assert!((m.rate_bps() - 48e6).abs() < 1.0);
        let eta = m.eta().unwrap().as_secs_f64();
        assert!((eta - 8.5 / 6.0).abs() < 1e-6, "{eta}");
        let shares = m.shares();
        assert!((shares[0] - 2.0 / 3.0).abs() < 1e-9 && (shares[1] - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn the_receiver_splits_its_bytes_by_those_each_connection_brought() {
        let mut m = Model::new(Side::Recv, "t", None);
        m.record(Reading {
            at: Duration::ZERO,
            ..Reading::default()
        });
        m.record(Reading {
            at: Duration::from_millis(500),
            content: 800_000,
            stream: 1_000_000,
            paths: vec![path(0, 300, 0), path(1, 100, 0)],
        });
        let r0 = m.paths[0].now().unwrap().rate_bps;
        let r1 = m.paths[1].now().unwrap().rate_bps;
        assert!(
            (r0 - 12e6).abs() < 1.0 && (r1 - 4e6).abs() < 1.0,
            "{r0} {r1}"
        );
        assert_eq!(m.eta(), None, "no size, no ETA");
        assert_eq!(m.shares(), vec![0.75, 0.25]);
    }

    #[test]
    fn series_stay_aligned_and_bounded() {
        let mut m = Model::new(Side::Send, "t", None);
        for i in 0..3 {
            m.record(at(i * 250, 0, vec![path(0, i * 1000, 0)]));
        }
        // A connection found later (a punched direct path) starts blank.
        m.record(at(750, 0, vec![path(0, 3000, 0), path(1, 0, 0)]));
        assert_eq!(m.paths[1].points.len(), 4);
        assert_eq!(m.paths[1].points.iter().flatten().count(), 1);
        // One gone from the readings keeps its place with gaps.
        m.record(at(1000, 0, vec![path(1, 100, 0)]));
        assert_eq!(m.paths[0].points.back(), Some(&None));
        for i in 5..(HISTORY as u64 + 50) {
            m.record(at(i * 250, 0, vec![path(0, i * 1000, 0), path(1, 0, 0)]));
        }
        assert_eq!(m.ticks(), HISTORY);
        assert!(m.paths.iter().all(|s| s.points.len() == HISTORY));
    }

    #[test]
    fn the_top_is_shared_and_recent() {
        let mut m = Model::new(Side::Send, "t", None);
        m.record(at(0, 0, vec![path(0, 0, 0), path(1, 0, 0)]));
        m.record(at(250, 0, vec![path(0, 1_000_000, 0), path(1, 0, 0)]));
        m.record(at(500, 0, vec![path(0, 1_000_000, 0), path(1, 250_000, 0)]));
        assert!((m.top(10, |p| p.rate_bps) - 32e6).abs() < 1.0);
        // The last column alone: path 1's 8 Mbit/s.
        assert!((m.top(1, |p| p.rate_bps) - 8e6).abs() < 1.0);
        assert_eq!(m.top(10, |p| p.window as f64), 20_000.0);
        // Over the last second, path 0 averaged 0, 32 and 0 Mbit/s.
        assert!((m.paths[0].recent_rate_bps() - 32e6 / 3.0).abs() < 1.0);
    }

    #[test]
    fn a_reading_takes_the_side_s_counters() {
        let mut stats = SessionStats::default();
        let mut p = braid_proto::PathStats::default();
        p.stream_bytes_acked = 5000;
        p.packets_received = 7;
        p.stream_bytes_received = 7_000;
        p.lost_packets = 3;
        stats.paths = vec![(PathId(2), p)];
        stats.bytes_acked = 5100;
        stats.bytes_received = 900;
        let label = |id: PathId| format!("c{id}");
        let s = Reading::of(Side::Send, Duration::ZERO, 5000, &stats, label);
        assert_eq!(
            (s.stream, s.paths[0].carried, s.paths[0].lost),
            (5100, 5000, 3)
        );
        assert_eq!(s.paths[0].label, "c2");
        let r = Reading::of(Side::Recv, Duration::ZERO, 800, &stats, label);
        assert_eq!((r.stream, r.paths[0].carried), (900, 7_000));
    }
}
