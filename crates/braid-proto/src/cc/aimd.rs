//! AIMD as in ndncatchunks (ndn-tools `PipelineInterestsAimd`), the baseline
//! of the catchunks hackathon (seed 001).
//!
//! - initial window 2 packets, slow start (+1 per ACK) below ssthresh;
//! - congestion avoidance: +1/cwnd per ACK;
//! - on loss, timeout or congestion mark: ssthresh = max(2, cwnd·0.5),
//!   cwnd = ssthresh, at most once per RTT ("conservative window
//!   adaptation": a signal about a packet sent before the last decrease is
//!   part of the same congestion event).

use super::segments::Segments;
use super::{Acked, Algorithm, CcContext, CongestionEvent, Controller, ControllerMetrics};
use crate::rtt::RttEstimator;
use crate::Instant;

/// catchunks `--init-cwnd` default, packets.
const INITIAL_WINDOW: f64 = 2.0;
/// catchunks `--md-coef` default.
const MD_COEF: f64 = 0.5;
/// catchunks `--ai-step` default, packets.
const AI_STEP: f64 = 1.0;
/// catchunks' `MIN_SSTHRESH`, packets.
const MIN_SSTHRESH: f64 = 2.0;

/// ndncatchunks' AIMD controller, window counted in packets.
#[derive(Debug, Clone)]
pub struct Aimd {
    cwnd: f64,
    ssthresh: f64,
    /// Packets sent before this instant belong to the last congestion event.
    recovery_start: Option<Instant>,
    segments: Segments,
}

impl Aimd {
    /// Starts in slow start at 2 packets, capped at the session's maximum window.
    pub fn new(ctx: CcContext) -> Self {
        Aimd {
            cwnd: INITIAL_WINDOW,
            ssthresh: f64::INFINITY,
            recovery_start: None,
            segments: Segments::new(ctx.segment_size, ctx.max_window_packets),
        }
    }

    #[cfg(test)]
    /// Window in packets.
    pub fn window_packets(&self) -> f64 {
        self.cwnd
    }
}

impl Controller for Aimd {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Aimd
    }

    fn on_ack(&mut self, _now: Instant, _acked: &Acked, _rtt: &RttEstimator) {
        let step = if self.cwnd < self.ssthresh {
            AI_STEP
        } else {
            AI_STEP / self.cwnd
        };
        // Growing past the session window would only inflate the number.
        self.cwnd = (self.cwnd + step).min(self.segments.max().max(INITIAL_WINDOW));
    }

    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool {
        if self
            .recovery_start
            .is_some_and(|start| event.sent_at <= start)
        {
            return false;
        }
        self.recovery_start = Some(now);
        self.ssthresh = (self.cwnd * MD_COEF).max(MIN_SSTHRESH);
        self.cwnd = self.ssthresh;
        true
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn set_initial_window(&mut self, bytes: u64) {
        self.cwnd = self.segments.window_of(bytes, 1.0);
    }

    fn window(&self) -> u64 {
        self.segments.bytes_of(self.cwnd)
    }

    fn metrics(&self) -> ControllerMetrics {
        self.segments.metrics(self.cwnd, self.ssthresh)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Cause;
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn ack() -> Acked {
        Acked {
            bytes: 1000,
            sent_at: Instant::ZERO,
            retransmission: false,
            peer_rx_us: None,
        }
    }

    #[test]
    fn slow_start_then_once_per_rtt_decrease() {
        let mut c = Aimd::new(CcContext {
            segment_size: 1000,
            session_window_packets: 1000,
            max_window_packets: 1000,
            paths: 1,
        });
        let rtt = RttEstimator::default();
        assert_eq!(c.window_packets(), 2.0);
        for _ in 0..14 {
            c.on_ack(at(0), &ack(), &rtt);
        }
        assert_eq!(c.window_packets(), 16.0, "slow start adds one per ACK");
        let loss = |sent| CongestionEvent {
            cause: Cause::Loss,
            sent_at: at(sent),
            packets: 1,
            repeated: false,
        };
        assert!(c.on_congestion(at(100), &loss(50)));
        assert_eq!(c.window_packets(), 8.0);
        assert!(
            !c.on_congestion(at(120), &loss(90)),
            "same RTT: one decrease"
        );
        assert!(!c.on_congestion(at(130), &loss(100)));
        assert_eq!(c.window_packets(), 8.0);
        c.on_ack(at(140), &ack(), &rtt);
        assert_eq!(
            c.window_packets(),
            8.125,
            "congestion avoidance adds 1/cwnd"
        );
        assert!(
            c.on_congestion(at(200), &loss(150)),
            "a packet sent after the decrease"
        );
        assert_eq!(c.window_packets(), 4.0625);
        let mark = CongestionEvent {
            cause: Cause::Ecn,
            sent_at: at(300),
            packets: 1,
            repeated: false,
        };
        assert!(c.on_congestion(at(350), &mark));
        for t in 0..10 {
            c.on_congestion(at(400 + 100 * t), &loss(390 + 100 * t));
        }
        assert_eq!(c.window_packets(), 2.0, "never below MIN_SSTHRESH");
    }
}
