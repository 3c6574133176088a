//! What a session reports: a snapshot of its counters and the
//! per-connection time series.

use super::{Session, MAX_SAMPLES};
use crate::stats::{PathSample, SessionStats};
use crate::Instant;

impl Session {
    /// A snapshot of all statistics.
    pub fn stats(&self) -> SessionStats {
        let mut s = SessionStats {
            paths: self
                .paths
                .iter()
                .map(|(&id, p)| {
                    let mut snapshot = p.snapshot(&self.cfg.rto);
                    snapshot.stream_bytes_acked = self.send.delivered_on(id);
                    (id, snapshot)
                })
                .collect(),
            recv_window: self.recv.window(),
            send_buffer: self.send.buffer_limit(),
            bytes_written: self.send.written(),
            bytes_acked: self.send.acked_bytes,
            bytes_received: self.recv.cumulative(),
            segments_sent: self.counters.segments_sent,
            retransmitted: self.counters.retransmitted,
            malformed_dropped: self.counters.malformed,
            unexpected_dropped: self.counters.unexpected,
            duplicate_packets: self.counters.duplicate_packets,
            forged_dropped: self.counters.forged,
            duplicate_bytes: self.recv.duplicate_bytes,
            key_updates: self.keys.as_ref().map_or(0, |k| k.updates()),
            recv_buffered: self.recv.buffered(),
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
        self.samples.drain(..)
    }

    /// Records one sample of each usable connection, the oldest dropped
    /// beyond `MAX_SAMPLES`.
    pub(super) fn take_samples(&mut self, now: Instant) {
        let interval = now - self.last_sample;
        self.last_sample = now;
        for p in self.paths.values_mut().filter(|p| p.is_usable()) {
            if self.samples.len() >= MAX_SAMPLES {
                self.samples.pop_front();
            }
            self.samples.push_back(p.sample(
                now,
                interval,
                &self.cfg.rto,
                self.send.delivered_on(p.id()),
            ));
        }
    }
}
