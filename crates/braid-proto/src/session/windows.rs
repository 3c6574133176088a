//! The session's windows: the send buffer grown to what the connections'
//! windows can carry, the pace of receive-window growth, and NKP-0024's
//! normalisation of windows to the session window.

use super::Session;
use crate::path::Path;
use crate::trace::EventKind;
use std::time::Duration;

impl Session {
    /// Send-buffer autotuning: the buffer (and the segments it may keep in
    /// flight) stays at least twice the sum of the connections' windows, so
    /// it never limits a long fat path; it only grows, up to `max_window`.
    pub(super) fn autotune_send_buffer(&mut self) {
        let windows: u64 = self
            .paths
            .values()
            .filter(|p| p.is_usable())
            .map(|p| p.cc().window())
            .sum();
        let target = (2 * windows).min(self.cfg.max_window);
        if target > self.streams.send.buffer_limit() {
            let segment_size = u64::from(self.cfg.segment_size);
            let packets = (target / segment_size).max(self.streams.send.window_packets);
            self.streams
                .send
                .set_limits(u32::from(self.cfg.segment_size), target, packets);
        }
    }

    /// How often the receive window may grow: once per round trip, the
    /// least any usable connection has shown (a receiver may have no
    /// smoothed RTT of its own, and no sender's feedback is faster), or the
    /// initial RTO before any is known.
    pub(super) fn recv_growth_interval(&self) -> Duration {
        self.paths
            .values()
            .filter(|p| p.is_usable())
            .filter_map(|p| p.least_rtt())
            .min()
            .unwrap_or(self.cfg.rto.initial_rto)
    }

    /// NKP-0024: after each ACK and timeout, rescale the windows of
    /// normalised controllers so they sum to the session window.
    ///
    /// Deviation from NKP-0024 (seed 000): once every such connection has a
    /// measured delivery rate, the session window is shared in proportion
    /// to those rates instead of rescaling what per-ACK growth produced.
    /// NKP-0024's windows converge to the same shares (each grows by its ACK
    /// rate), but only with a time constant of the session window over the
    /// total ACK rate (4096 / 1152 packets/s ≈ 3.5 s, ~10 s to the band in
    /// the seed's experiments); the rates are known after a round trip or
    /// two. Losses still halve a window until the next ACK; the delivery
    /// rate already counts only what arrived.
    pub(super) fn normalize_windows(&mut self) {
        let target = (self.cfg.send_window_packets() * u64::from(self.cfg.segment_size)) as f64;
        let live = || {
            self.paths
                .values()
                .filter(|p| p.is_usable() && p.cc().is_normalized())
        };
        let by_rate = live().count() > 1 && live().all(|p| p.delivery_rate() > 0.0);
        let weight = |p: &Path| {
            if by_rate {
                p.delivery_rate()
            } else {
                p.cc().window() as f64
            }
        };
        let sum: f64 = live().map(weight).sum();
        if sum <= 0.0 {
            return;
        }
        let scale = target / sum;
        let now = self.liveness.latest();
        for p in self
            .paths
            .values_mut()
            .filter(|p| p.is_usable() && p.cc().is_normalized())
        {
            let w = (weight(p) * scale) as u64;
            let old = p.cc().window();
            p.cc_mut().set_window(w);
            let new = p.cc().window();
            if new != old {
                let path = p.id();
                (p.trace.tracer).record(now, EventKind::WindowNormalised { path, old, new });
            }
        }
    }
}

impl Session {
    /// A listener's session: its receive window, once the client has
    /// confirmed, and its growth are drawn from `memory`.
    pub(crate) fn use_memory(&mut self, memory: crate::endpoint::Reservation) {
        self.streams.recv.use_memory(memory);
    }

    /// The client confirmed: data may come now, so the window must be
    /// held. A listener whose budget has no room says so and closes.
    pub(super) fn hold_receive_window(&mut self) {
        if !self.streams.recv.hold_window() {
            let busy = crate::CloseCode::Busy.value();
            self.abort(busy, "busy: the listener's memory is taken");
        }
    }
}
