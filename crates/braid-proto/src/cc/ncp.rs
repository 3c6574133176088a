//! NCP's window control, NKP-0024 ("Dynamically adjust send window size based
//! on connection throughput in NCP") as implemented in nknorg/ncp-go.
//!
//! - initial window = `sendWindowPacketCount / n`, where
//!   `sendWindowPacketCount = sendWindowSize / sendMtu`;
//! - +1 packet for each ACKed packet that was never retransmitted;
//! - halved for each packet that times out and on a failed send; braid's
//!   threshold loss detection only finds earlier the losses NCP's per-packet
//!   timer would find, so a detected loss halves too;
//! - minimum 1 packet; no maximum beyond the session window;
//! - after each ACK and each timeout the session rescales all windows so
//!   they sum to `sendWindowPacketCount` (see `Session::normalize_windows`).
//!
//! Deviation: once every connection has a measured delivery rate, braid
//! shares `sendWindowPacketCount` in proportion to those rates at each
//! rescale instead of rescaling the per-ACK-grown windows. NKP-0024's
//! windows tend to the same shares, but with a time constant of the
//! session window over the ACK rate (seconds; the seed reports ~10 s to
//! converge); braid's take a round trip or two (seeds/000 NKP-0024, window convergence experiments).
//!
//! ECN marks are not part of NKP-0024 and are ignored.

use super::segments::Segments;
use super::{Acked, Algorithm, CcContext, CongestionEvent, Controller};
use crate::rtt::RttEstimator;
use crate::Instant;

/// NKP-0024's minimum window, packets.
const MIN_WINDOW_PACKETS: f64 = 1.0;

/// NCP's per-connection window (NKP-0024), counted in packets.
#[derive(Debug, Clone)]
pub struct Ncp {
    /// Window in packets; fractional after normalisation.
    window: f64,
    segments: Segments,
}

impl Ncp {
    /// Starts at an equal share of the session window among the connections.
    pub fn new(ctx: CcContext) -> Self {
        let total = ctx.session_window_packets.max(1) as f64;
        Ncp {
            window: (total / ctx.paths.max(1) as f64).max(MIN_WINDOW_PACKETS),
            segments: Segments::new(ctx.segment_size, ctx.session_window_packets),
        }
    }

    #[cfg(test)]
    /// Window in packets.
    pub fn window_packets(&self) -> f64 {
        self.window
    }
}

impl Controller for Ncp {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Ncp
    }

    fn on_ack(&mut self, _now: Instant, acked: &Acked, _rtt: &RttEstimator) {
        if !acked.retransmission {
            self.window = (self.window + 1.0).min(self.segments.max());
        }
    }

    fn on_congestion(&mut self, _now: Instant, event: &CongestionEvent) -> bool {
        use super::Cause::*;
        let halvings = match event.cause {
            Loss | Timeout => event.packets.min(64) as i32,
            SendFailure => 1,
            Ecn => 0,
        };
        let before = self.window;
        self.window = (self.window / 2f64.powi(halvings)).max(MIN_WINDOW_PACKETS);
        self.window < before
    }

    fn window(&self) -> u64 {
        self.segments.bytes_of(self.window)
    }

    fn is_normalized(&self) -> bool {
        true
    }

    fn set_window(&mut self, bytes: u64) {
        self.window = self.segments.window_of(bytes, MIN_WINDOW_PACKETS);
    }

    fn set_initial_window(&mut self, bytes: u64) {
        self.set_window(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Cause;
    use super::*;

    fn ctx(paths: usize) -> CcContext {
        CcContext {
            segment_size: 1024,
            session_window_packets: 4096,
            max_window_packets: 4096,
            paths,
        }
    }

    fn ack(retransmission: bool) -> Acked {
        Acked {
            bytes: 1024,
            sent_at: Instant::ZERO,
            retransmission,
            peer_rx_us: None,
        }
    }

    #[test]
    fn follows_nkp0024() {
        let mut c = Ncp::new(ctx(4));
        assert_eq!(c.window_packets(), 1024.0, "4096 / 4");
        let rtt = RttEstimator::default();
        c.on_ack(Instant::ZERO, &ack(false), &rtt);
        c.on_ack(Instant::ZERO, &ack(true), &rtt);
        assert_eq!(
            c.window_packets(),
            1025.0,
            "+1 only for never-retransmitted packets"
        );
        // NKP-0024's example: two timed-out packets halve twice.
        let ev = CongestionEvent {
            cause: Cause::Timeout,
            sent_at: Instant::ZERO,
            packets: 2,
            repeated: false,
        };
        assert!(c.on_congestion(Instant::ZERO, &ev));
        assert_eq!(c.window_packets(), 1025.0 / 4.0);
        let fail = CongestionEvent {
            cause: Cause::SendFailure,
            sent_at: Instant::ZERO,
            packets: 1,
            repeated: false,
        };
        for _ in 0..20 {
            c.on_congestion(Instant::ZERO, &fail);
        }
        assert_eq!(c.window_packets(), 1.0, "never below one packet");
        for _ in 0..10_000 {
            c.on_ack(Instant::ZERO, &ack(false), &rtt);
        }
        assert_eq!(c.window_packets(), 4096.0, "no cap but the session window");
    }
}
