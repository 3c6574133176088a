//! What a session reports: a snapshot of its counters and the
//! per-connection time series.

use super::Session;
use crate::stats::{PathSample, SessionStats};
use crate::{Instant, PathId};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Most time-series points kept before the oldest are dropped.
const MAX_SAMPLES: usize = 1 << 16;

/// The per-connection time series: when the next points are due, the
/// points not yet drained (at most [`MAX_SAMPLES`], the oldest dropped),
/// and each connection's delivered bytes at its previous point.
#[derive(Debug)]
pub(super) struct Sampler {
    next: Option<Instant>,
    last: Instant,
    samples: VecDeque<PathSample>,
    delivered: BTreeMap<PathId, u64>,
}

impl Sampler {
    /// A series from `now`, a point every `interval` (`None`: none).
    pub fn new(now: Instant, interval: Option<Duration>) -> Self {
        Sampler {
            next: interval.map(|i| now + i),
            last: now,
            samples: VecDeque::new(),
            delivered: BTreeMap::new(),
        }
    }

    /// When the next points are due.
    pub fn deadline(&self) -> Option<Instant> {
        self.next
    }

    /// Points are taken at `now`: the time since the last ones.
    pub fn start(&mut self, now: Instant) -> Duration {
        let interval = now - self.last;
        self.last = now;
        interval
    }

    /// Connection `path` has delivered `delivered` stream bytes so far:
    /// how many since its previous point.
    pub fn delivered_since(&mut self, path: PathId, delivered: u64) -> u64 {
        let before = self.delivered.insert(path, delivered).unwrap_or(0);
        delivered - before
    }

    /// Records a point, the oldest dropped beyond `MAX_SAMPLES`.
    pub fn push(&mut self, sample: PathSample) {
        if self.samples.len() >= MAX_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// The points due at `due` were taken at `now`: the next are due an
    /// `interval` later, or an interval from now if that has passed.
    pub fn schedule(&mut self, due: Instant, now: Instant, interval: Duration) {
        let mut next = due + interval;
        if next <= now {
            next = now + interval;
        }
        self.next = Some(next);
    }

    /// The points recorded since the last call.
    pub fn drain(&mut self) -> impl Iterator<Item = PathSample> + '_ {
        self.samples.drain(..)
    }
}

impl Session {
    /// A snapshot of all statistics.
    pub fn stats(&self) -> SessionStats {
        let mut s = SessionStats {
            paths: self
                .paths
                .iter()
                .map(|(&id, p)| {
                    let mut snapshot = p.snapshot(&self.cfg.rto);
                    snapshot.stream_bytes_acked = self.streams.send.delivered_on(id);
                    (id, snapshot)
                })
                .collect(),
            recv_window: self.streams.recv.window(),
            send_buffer: self.streams.send.buffer_limit(),
            bytes_written: self.streams.send.written(),
            bytes_acked: self.streams.send.acked_bytes,
            bytes_received: self.streams.recv.cumulative(),
            segments_sent: self.counters.segments_sent,
            retransmitted: self.counters.retransmitted,
            malformed_dropped: self.counters.malformed,
            unexpected_dropped: self.counters.unexpected,
            duplicate_packets: self.counters.duplicate_packets,
            forged_dropped: self.counters.forged,
            duplicate_bytes: self.streams.recv.duplicate_bytes,
            key_updates: self.packets.keys().map_or(0, |k| k.updates()),
            recv_buffered: self.streams.recv.buffered(),
            ..SessionStats::default()
        };
        for (_, p) in &s.paths {
            s.spurious_retransmits += p.spurious_losses;
            s.timeouts += p.timeouts;
            s.window_decreases += p.timeout_decreases + p.loss_decreases + p.ecn_decreases;
            s.ecn_marks += p.ecn_marks;
        }
        s
    }

    /// Takes the per-connection time series recorded since the last call.
    pub fn drain_samples(&mut self) -> impl Iterator<Item = PathSample> + '_ {
        self.sampler.drain()
    }

    /// Records one sample of each usable connection, the oldest dropped
    /// beyond `MAX_SAMPLES`.
    pub(super) fn take_samples(&mut self, now: Instant) {
        let interval = self.sampler.start(now);
        for p in self.paths.values().filter(|p| p.is_usable()) {
            let delivered = self.streams.send.delivered_on(p.id());
            let acked = self.sampler.delivered_since(p.id(), delivered);
            self.sampler
                .push(p.sample(now, interval, &self.cfg.rto, acked));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PathId;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn point(at: Instant) -> PathSample {
        PathSample {
            at_s: at.as_secs_f64(),
            path: PathId(0),
            window: 0,
            srtt: Duration::ZERO,
            rto: Duration::ZERO,
            in_flight: 0,
            throughput_bps: 0.0,
        }
    }

    #[test]
    fn points_keep_their_interval_and_catch_up_after_a_late_call() {
        let i = Duration::from_millis(100);
        let mut s = Sampler::new(t(0), Some(i));
        assert_eq!(s.deadline(), Some(t(100)));
        assert_eq!(s.start(t(100)), i);
        s.schedule(t(100), t(100), i);
        assert_eq!(s.deadline(), Some(t(200)));
        // Called late: the next point is an interval from now.
        assert_eq!(s.start(t(450)), Duration::from_millis(350));
        s.schedule(t(200), t(450), i);
        assert_eq!(s.deadline(), Some(t(550)));
        assert_eq!(Sampler::new(t(0), None).deadline(), None);
    }

    #[test]
    fn the_oldest_points_go_beyond_the_limit() {
        let mut s = Sampler::new(t(0), None);
        for ms in 0..MAX_SAMPLES as u64 + 2 {
            s.push(point(t(ms)));
        }
        let points: Vec<_> = s.drain().collect();
        assert_eq!(points.len(), MAX_SAMPLES);
        assert_eq!(points[0].at_s, t(2).as_secs_f64());
        assert_eq!(s.drain().count(), 0);
    }
}
