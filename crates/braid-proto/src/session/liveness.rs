//! When the session last heard from the peer, last sent, and last made
//! progress: what the idle timeout, keep-alives, the persist probe and the
//! give-up rules measure from.

use crate::{Instant, PathId};
use std::time::Duration;

/// See the module documentation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Liveness {
    /// When anything authentic last arrived from the peer, and where.
    last_recv: Instant,
    last_recv_path: PathId,
    /// When we last sent a datagram.
    last_send: Instant,
    /// When new stream data was last acknowledged, or data became
    /// outstanding (each connection counts its timeouts since).
    progress_at: Instant,
}

impl Liveness {
    /// A session created at `now`.
    pub fn new(now: Instant) -> Self {
        Liveness {
            last_recv: now,
            last_recv_path: PathId(0),
            last_send: now,
            progress_at: now,
        }
    }

    /// Something authentic arrived on `path` at `now`.
    pub fn on_heard(&mut self, now: Instant, path: PathId) {
        self.last_recv = now;
        self.last_recv_path = path;
    }

    /// A datagram went out at `now`.
    pub fn on_sent(&mut self, now: Instant) {
        self.last_send = now;
    }

    /// The transfer made progress at `now`.
    pub fn on_progress(&mut self, now: Instant) {
        self.progress_at = now;
    }

    /// The latest time the session knows of: its last send or arrival
    /// (for dating what happens between calls that bring the time).
    pub fn latest(&self) -> Instant {
        self.last_send.max(self.last_recv)
    }

    /// The connection the peer was last heard on.
    pub fn last_recv_path(&self) -> PathId {
        self.last_recv_path
    }

    /// How long the peer has been silent at `now`.
    pub fn silence(&self, now: Instant) -> Duration {
        now - self.last_recv
    }

    /// How long the transfer has gone without progress at `now`.
    pub fn without_progress(&self, now: Instant) -> Duration {
        now - self.progress_at
    }

    /// When the session is idle for `timeout`.
    pub fn idle_deadline(&self, timeout: Duration) -> Instant {
        self.last_recv + timeout
    }

    /// When a keep-alive with `interval` is due: that long after the last
    /// datagram either way.
    pub fn keep_alive_deadline(&self, interval: Duration) -> Instant {
        self.last_send.max(self.last_recv) + interval
    }

    /// `wait` after we last sent.
    pub fn after_last_send(&self, wait: Duration) -> Instant {
        self.last_send + wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn deadlines_run_from_the_last_datagram() {
        let mut l = Liveness::new(t(0));
        assert_eq!(l.idle_deadline(30 * S), t(30_000));
        l.on_sent(t(500));
        assert_eq!(l.keep_alive_deadline(S), t(1_500), "sent last");
        assert_eq!(l.after_last_send(S), t(1_500));
        l.on_heard(t(800), PathId(2));
        assert_eq!(l.keep_alive_deadline(S), t(1_800), "heard last");
        assert_eq!(l.idle_deadline(30 * S), t(30_800));
        assert_eq!(l.last_recv_path(), PathId(2));
        assert_eq!(l.silence(t(2_800)), 2 * S);
    }

    #[test]
    fn progress_is_its_own_clock() {
        let mut l = Liveness::new(t(0));
        l.on_heard(t(5_000), PathId(0));
        assert_eq!(l.without_progress(t(6_000)), 6 * S);
        l.on_progress(t(6_000));
        assert_eq!(l.without_progress(t(6_000)), Duration::ZERO);
    }
}
