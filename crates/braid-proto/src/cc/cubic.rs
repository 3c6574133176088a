//! CUBIC, RFC 9438 (<https://www.rfc-editor.org/rfc/rfc9438>).
//!
//! Windows are kept in segments of the session segment size, as in the RFC. Slow start
//! uses HyStart++ (RFC 9406). Reaction to loss and ECN is once per RTT: a
//! signal about a packet sent before the last reduction belongs to the same
//! congestion event. ECN marks reduce the window DCTCP-style (RFC 8257), by
//! the marked fraction rather than by β.

use super::dctcp::Dctcp;
use super::hystart::{HyStart, Phase, CSS_GROWTH_DIVISOR};
use super::segments::Segments;
use super::{Acked, Algorithm, Cause, CcContext, CongestionEvent, Controller, ControllerMetrics};
use crate::rtt::RttEstimator;
use crate::Instant;
use std::time::Duration;

/// Scaling constant C (RFC 9438 §4.2, §5).
const C: f64 = 0.4;
/// Multiplicative decrease factor β_cubic (RFC 9438 §4.6).
const BETA: f64 = 0.7;
/// α_cubic = 3(1 − β)/(1 + β), the Reno-friendly additive increase (§4.3).
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);
/// Initial window, segments (RFC 9002 §7.2 uses 10).
const INITIAL_WINDOW: f64 = 10.0;
/// Smallest window after a reduction, segments (RFC 9002 §7.2: 2).
const MIN_WINDOW: f64 = 2.0;
/// Window after an RTO, segments (RFC 5681 §3.1: the loss window, 1).
const LOSS_WINDOW: f64 = 1.0;

/// What a reduction changes and an undo restores (§4.9): a copy of it is
/// saved at each reduction so that a spurious one can be undone.
#[derive(Debug, Clone, Copy)]
struct State {
    cwnd: f64,
    ssthresh: f64,
    /// W_max: window before the last reduction.
    w_max: f64,
    /// For fast convergence (§4.7).
    w_last_max: f64,
    /// W_est: the Reno-friendly estimate (§4.3).
    w_est: f64,
    /// K: time for the cubic function to reach W_max, seconds.
    k: f64,
    epoch_start: Option<Instant>,
    recovery_start: Option<Instant>,
    /// Only the initial slow start uses HyStart++ (RFC 9406 §4.3).
    hystart: Option<HyStart>,
}

/// CUBIC controller (RFC 9438) with HyStart++ and DCTCP-style ECN response.
#[derive(Debug, Clone)]
pub struct Cubic {
    state: State,
    /// The state before the last reduction, until it is undone or proven.
    saved: Option<State>,
    /// Losses of the current congestion event not yet proven spurious; the
    /// reduction is undone only when this reaches zero.
    unproven_losses: u64,
    dctcp: Dctcp,
    segments: Segments,
}

impl Cubic {
    /// Starts in slow start at 10 segments, capped at the session's maximum window.
    pub fn new(ctx: CcContext) -> Self {
        Cubic {
            state: State {
                cwnd: INITIAL_WINDOW,
                ssthresh: f64::INFINITY,
                w_max: 0.0,
                w_last_max: 0.0,
                w_est: 0.0,
                k: 0.0,
                epoch_start: None,
                recovery_start: None,
                hystart: Some(HyStart::default()),
            },
            saved: None,
            unproven_losses: 0,
            dctcp: Dctcp::default(),
            segments: Segments::new(ctx.segment_size, ctx.max_window_packets),
        }
    }

    #[cfg(test)]
    /// Window in segments.
    pub fn window_segments(&self) -> f64 {
        self.state.cwnd
    }

    /// W_cubic(t) = C·(t − K)³ + W_max (§4.2, eq. 1).
    fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.state.k).powi(3) + self.state.w_max
    }

    /// A congestion event: the window falls to `beta` of itself.
    fn reduce(&mut self, now: Instant, beta: f64) {
        self.unproven_losses = 0;
        self.saved = Some(self.state);
        // Only the first slow start uses HyStart++, unless this is undone.
        self.state.hystart = None;
        // Fast convergence (§4.7): release bandwidth sooner when W_max shrinks.
        if self.state.cwnd < self.state.w_last_max {
            self.state.w_last_max = self.state.cwnd;
            self.state.w_max = self.state.cwnd * (1.0 + BETA) / 2.0;
        } else {
            self.state.w_last_max = self.state.cwnd;
            self.state.w_max = self.state.cwnd;
        }
        self.state.ssthresh = (self.state.cwnd * beta).max(MIN_WINDOW);
        self.state.cwnd = self.state.ssthresh;
        // K = ∛(W_max·(1 − β)/C) (§4.2, eq. 2), measured from the reduced window.
        self.state.k = ((self.state.w_max - self.state.cwnd).max(0.0) / C).cbrt();
        self.state.w_est = self.state.cwnd;
        self.state.epoch_start = Some(now);
        self.state.recovery_start = Some(now);
    }

    /// The last reduction was spurious: back to the state before it
    /// (§4.9), and later losses are a congestion event of their own.
    fn undo(&mut self) {
        self.unproven_losses = 0;
        if let Some(saved) = self.saved.take() {
            // The window keeps whatever it regrew meanwhile.
            let cwnd = self.state.cwnd.max(saved.cwnd);
            self.state = saved;
            self.state.cwnd = cwnd;
        }
    }
}

impl Controller for Cubic {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Cubic
    }

    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &RttEstimator) {
        let segments = acked.bytes as f64 / self.segments.size() as f64;
        self.dctcp.on_ack(now, acked.sent_at, acked.bytes);
        if self.state.cwnd < self.state.ssthresh {
            let phase = match &mut self.state.hystart {
                Some(h) => h.on_ack(now, acked.sent_at, now - acked.sent_at),
                None => Phase::SlowStart,
            };
            match phase {
                Phase::SlowStart => self.state.cwnd += segments,
                Phase::Conservative => self.state.cwnd += segments / CSS_GROWTH_DIVISOR,
                // RFC 9406 §4.2: ssthresh = cwnd, continue in avoidance.
                Phase::Exit => self.state.ssthresh = self.state.cwnd,
            }
            self.state.cwnd = self.state.cwnd.min(self.segments.max());
            return;
        }
        let epoch = *self.state.epoch_start.get_or_insert_with(|| {
            // Congestion avoidance without a prior reduction: start the curve here.
            self.state.w_max = self.state.cwnd;
            self.state.k = 0.0;
            self.state.w_est = self.state.cwnd;
            now
        });
        let t = (now - epoch).as_secs_f64();
        let rtt = rtt.srtt_or(Duration::from_millis(100)).as_secs_f64();
        // Target one RTT ahead, kept within [cwnd, 1.5·cwnd] (§4.2).
        let target = self
            .w_cubic(t + rtt)
            .clamp(self.state.cwnd, 1.5 * self.state.cwnd);
        // Reno-friendly estimate (§4.3).
        self.state.w_est += ALPHA * segments / self.state.cwnd;
        if self.w_cubic(t) < self.state.w_est {
            self.state.cwnd = self.state.w_est;
        } else {
            self.state.cwnd += (target - self.state.cwnd) / self.state.cwnd * segments;
        }
        self.state.cwnd = self.state.cwnd.min(self.segments.max());
    }

    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool {
        if event.cause == Cause::Ecn {
            self.dctcp
                .on_marked(event.packets.saturating_mul(self.segments.size()));
        }
        if event.cause == Cause::Timeout {
            // RFC 9438 §4.8 with RFC 5681 §3.1: after an RTO, restart from
            // the loss window. An RTO backing off while nothing is
            // acknowledged (an outage) holds ssthresh (§3.1): cutting it
            // again from the loss window would leave slow start at the
            // floor once the path comes back.
            let repeated = event.repeated;
            if repeated {
                self.unproven_losses += event.packets;
            } else {
                self.reduce(now, BETA);
                self.unproven_losses = event.packets;
            }
            let cut = self.state.cwnd > LOSS_WINDOW;
            self.state.cwnd = LOSS_WINDOW;
            return cut || !repeated;
        }
        if self
            .state
            .recovery_start
            .is_some_and(|start| event.sent_at <= start)
        {
            self.unproven_losses += event.packets;
            return false;
        }
        let beta = match event.cause {
            Cause::Ecn => self.dctcp.decrease_factor().max(BETA),
            _ => BETA,
        };
        self.reduce(now, beta);
        self.unproven_losses = event.packets;
        true
    }

    fn on_spurious_loss(&mut self, _now: Instant) {
        // §4.9: a reduction is undone once every loss of its congestion
        // event proved spurious; one real loss among them keeps it.
        self.unproven_losses = self.unproven_losses.saturating_sub(1);
        if self.unproven_losses == 0 {
            self.undo();
        }
    }

    fn on_spurious_timeout(&mut self, _now: Instant) {
        self.undo();
    }

    fn in_slow_start(&self) -> bool {
        self.state.cwnd < self.state.ssthresh
    }

    fn set_initial_window(&mut self, bytes: u64) {
        self.state.cwnd = self.segments.window_of(bytes, MIN_WINDOW);
    }

    fn window(&self) -> u64 {
        self.segments.bytes_of(self.state.cwnd)
    }

    fn metrics(&self) -> ControllerMetrics {
        self.segments.metrics(self.state.cwnd, self.state.ssthresh)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Cause;
    use super::*;

    const SEGMENT_SIZE: u64 = 1000;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn ack(c: &mut Cubic, now: Instant, rtt: &RttEstimator) {
        let a = Acked {
            bytes: SEGMENT_SIZE,
            sent_at: now,
            retransmission: false,
            peer_rx_us: None,
        };
        c.on_ack(now, &a, rtt);
    }

    fn signal(cause: Cause, sent_ms: u64, packets: u64) -> CongestionEvent {
        CongestionEvent {
            cause,
            sent_at: at(sent_ms),
            packets,
            repeated: false,
        }
    }

    /// A timeout firing again with nothing acknowledged since the last.
    fn repeated_timeout(sent_ms: u64, packets: u64) -> CongestionEvent {
        CongestionEvent {
            repeated: true,
            ..signal(Cause::Timeout, sent_ms, packets)
        }
    }

    fn cubic() -> Cubic {
        Cubic::new(CcContext {
            segment_size: SEGMENT_SIZE,
            session_window_packets: 100_000,
            max_window_packets: 100_000,
            paths: 1,
        })
    }

    #[test]
    fn reduces_by_beta_and_regrows_along_the_cubic_curve() {
        let mut c = cubic();
        let mut rtt = RttEstimator::default();
        rtt.update(Duration::from_millis(100), Duration::ZERO);
        for _ in 0..90 {
            ack(&mut c, at(0), &rtt);
        }
        assert_eq!(
            c.window_segments(),
            100.0,
            "slow start: +1 per ACKed segment"
        );
        assert!(c.on_congestion(at(100), &signal(Cause::Loss, 10, 1)));
        assert!((c.window_segments() - 70.0).abs() < 1e-9, "β = 0.7");
        // K = ∛(100·0.3/0.4) ≈ 4.22 s: the window returns near W_max around then.
        let expected_k = (100.0f64 * 0.3 / 0.4).cbrt();
        assert!((c.state.k - expected_k).abs() < 1e-9);
        assert!(
            !c.on_congestion(at(150), &signal(Cause::Loss, 90, 1)),
            "same RTT"
        );
        let mut t = 100;
        while t < 100 + (expected_k * 1000.0) as u64 {
            t += 1;
            ack(&mut c, at(t), &rtt);
        }
        let w = c.window_segments();
        assert!((95.0..=106.0).contains(&w), "near W_max after K: {w}");
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = cubic();
        c.state.cwnd = 100.0;
        c.state.ssthresh = 50.0;
        c.on_congestion(at(0), &signal(Cause::Loss, 0, 1));
        assert_eq!(c.state.w_max, 100.0);
        c.on_congestion(at(200), &signal(Cause::Ecn, 150, 1));
        assert!(
            (c.state.w_max - 70.0 * 1.7 / 2.0).abs() < 1e-9,
            "W_max = cwnd·(1+β)/2"
        );
    }

    #[test]
    fn spurious_reduction_is_undone_and_timeout_restarts_at_one_segment() {
        let mut c = cubic();
        c.state.cwnd = 80.0;
        c.on_congestion(at(0), &signal(Cause::Loss, 0, 1));
        assert!((c.window_segments() - 56.0).abs() < 1e-9);
        c.on_spurious_loss(at(10));
        assert_eq!(c.window_segments(), 80.0);
        c.on_congestion(at(20), &signal(Cause::Timeout, 15, 5));
        assert_eq!(c.window_segments(), 1.0);
        assert!((c.state.ssthresh - 56.0).abs() < 1e-9);
    }

    /// RFC 5681 §3.1: ssthresh is held when the retransmission timer
    /// expires again for data it already retransmitted. Cut per expiry,
    /// a one-second outage (200, 400 ms backoffs) left ssthresh at the
    /// floor and the window growing linearly from 2 segments after it.
    #[test]
    fn a_timeout_backing_off_in_an_outage_holds_ssthresh() {
        let mut c = cubic();
        c.state.cwnd = 80.0;
        c.state.ssthresh = 100.0;
        c.on_congestion(at(0), &signal(Cause::Timeout, 0, 80));
        assert!((c.state.ssthresh - 56.0).abs() < 1e-9);
        for t in [200, 600, 1400] {
            assert!(!c.on_congestion(at(t), &repeated_timeout(t - 1, 1)));
            assert!((c.state.ssthresh - 56.0).abs() < 1e-9, "at {t} ms");
            assert_eq!(c.window_segments(), 1.0);
        }
        // Something got through: the path reports the next timeout as a
        // new congestion event.
        ack(&mut c, at(1500), &RttEstimator::default());
        c.on_congestion(at(2000), &signal(Cause::Timeout, 1900, 2));
        assert!(
            (c.state.ssthresh - MIN_WINDOW).abs() < 1e-9,
            "{}",
            c.state.ssthresh
        );
    }

    /// A timeout proved spurious (and the expiries backing off after it)
    /// is undone whole (§4.9): window, threshold and curve, and a later
    /// loss is a congestion event of its own.
    #[test]
    fn a_spurious_timeout_restores_the_state_before_it() {
        let mut c = cubic();
        c.state.cwnd = 80.0;
        c.state.ssthresh = 100.0;
        c.on_congestion(at(0), &signal(Cause::Loss, 0, 1));
        let (cwnd, ssthresh, w_max, k) = (c.state.cwnd, c.state.ssthresh, c.state.w_max, c.state.k);
        c.on_congestion(at(500), &signal(Cause::Timeout, 400, 56));
        c.on_congestion(at(1000), &repeated_timeout(999, 1));
        assert_eq!(c.window_segments(), 1.0);
        c.on_spurious_timeout(at(1200));
        assert_eq!(
            (c.state.cwnd, c.state.ssthresh, c.state.w_max, c.state.k),
            (cwnd, ssthresh, w_max, k)
        );
        assert!(c.on_congestion(at(1300), &signal(Cause::Loss, 300, 1)));
        assert!((c.window_segments() - 0.7 * cwnd).abs() < 1e-9);
    }

    /// A timeout in the first slow start that proves spurious returns to
    /// it with HyStart++ as it was: slow start ends when the RTT rises,
    /// not when the queue overflows.
    #[test]
    fn a_spurious_timeout_in_the_first_slow_start_keeps_hystart() {
        let mut c = cubic();
        let rtt = RttEstimator::default();
        for _ in 0..20 {
            ack(&mut c, at(0), &rtt);
        }
        assert!(c.state.hystart.is_some() && c.state.ssthresh.is_infinite());
        c.on_congestion(at(500), &signal(Cause::Timeout, 400, 30));
        assert!(c.state.hystart.is_none());
        c.on_spurious_timeout(at(900));
        assert!(c.state.hystart.is_some() && c.state.ssthresh.is_infinite());
        assert_eq!(c.window_segments(), 30.0);
    }
}
