//! `mbecn` on paths that do not mark: BBR until the path marks.
//!
//! MB-ECN reacts to its receiver's queue reports (ECE). Where no forwarder
//! writes the field, its only signal is loss, and its additive increase,
//! fixed per time slot whatever the RTT, outruns loss feedback that arrives
//! an RTT later: on long paths it retransmitted a large share of what it
//! sent, and behind a shallow queue it fell well below the link (measured through real links with `braid link`).
//! Its slow start doubles per 2^24 ns slot, not per round trip, so by the
//! first loss of a long path it has overrun any queue. The seed (004)
//! leaves paths without MB-ECN forwarders open.
//!
//! So `mbecn` runs both, fed the same events: a [`Bbr`] decides until the
//! path shows it marks (an ECE above 0), and [`MbEcn`] from then on, its
//! budget set to BBR's bandwidth estimate. A marking forwarder reports a
//! queue of 16 packets, so on a marking path the hand-over comes within
//! BBR's first round trips with a queue, before a drop-tail queue of that
//! size or more can drop; where nothing marks, `mbecn` is `bbr`.

use super::bbr::Bbr;
use super::mbecn::MbEcn;
use super::{
    Acked, Algorithm, CcContext, CongestionEvent, Controller, ControllerMetrics, RateSample,
};
use crate::rtt::RttEstimator;
use crate::Instant;

/// Which controller decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// BBR: the path has not marked yet.
    Bbr,
    /// MB-ECN: an ECE above 0 has arrived.
    MbEcn,
}

/// The `mbecn` controller: [`Bbr`] until the path's first MB-ECN mark,
/// [`MbEcn`] from then on.
#[derive(Debug, Clone)]
pub struct MbEcnWithFallback {
    mbecn: MbEcn,
    bbr: Bbr,
    mode: Mode,
}

impl MbEcnWithFallback {
    /// Starts with BBR deciding.
    pub fn new(ctx: CcContext) -> Self {
        MbEcnWithFallback {
            mbecn: MbEcn::new(ctx),
            bbr: Bbr::new(ctx),
            mode: Mode::Bbr,
        }
    }

    #[cfg(test)]
    /// Whether the path has marked, so MB-ECN decides.
    pub fn has_marked(&self) -> bool {
        self.mode == Mode::MbEcn
    }

    fn decider(&self) -> &dyn Controller {
        match self.mode {
            Mode::Bbr => &self.bbr,
            Mode::MbEcn => &self.mbecn,
        }
    }
}

impl Controller for MbEcnWithFallback {
    fn algorithm(&self) -> Algorithm {
        Algorithm::MbEcn
    }

    fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.mbecn.on_sent(now, bytes);
        self.bbr.on_sent(now, bytes);
    }

    fn on_ack_frame(&mut self, now: Instant, peer_rx_us: Option<u64>) {
        self.mbecn.on_ack_frame(now, peer_rx_us);
        self.bbr.on_ack_frame(now, peer_rx_us);
    }

    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &RttEstimator) {
        self.mbecn.on_ack(now, acked, rtt);
        self.bbr.on_ack(now, acked, rtt);
    }

    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool {
        let mbecn = self.mbecn.on_congestion(now, event);
        let bbr = self.bbr.on_congestion(now, event);
        match self.mode {
            Mode::Bbr => bbr,
            Mode::MbEcn => mbecn,
        }
    }

    fn on_rate_sample(&mut self, now: Instant, sample: &RateSample) {
        self.mbecn.on_rate_sample(now, sample);
        self.bbr.on_rate_sample(now, sample);
    }

    fn on_ece(&mut self, now: Instant, ece: u16) {
        if ece > 0 && self.mode == Mode::Bbr {
            self.mode = Mode::MbEcn;
            self.mbecn.set_rate(self.bbr.btl_bw());
        }
        self.mbecn.on_ece(now, ece);
    }

    fn on_spurious_loss(&mut self, now: Instant) {
        self.mbecn.on_spurious_loss(now);
        self.bbr.on_spurious_loss(now);
    }

    fn on_spurious_timeout(&mut self, now: Instant) {
        self.mbecn.on_spurious_timeout(now);
        self.bbr.on_spurious_timeout(now);
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.decider().pacing_rate()
    }

    fn in_slow_start(&self) -> bool {
        self.decider().in_slow_start()
    }

    fn state_name(&self) -> &'static str {
        self.decider().state_name()
    }

    fn rate_slot(&self) -> Option<(u64, std::time::Duration)> {
        self.decider().rate_slot()
    }

    fn window(&self) -> u64 {
        self.decider().window()
    }

    fn is_normalized(&self) -> bool {
        self.decider().is_normalized()
    }

    fn set_window(&mut self, bytes: u64) {
        self.mbecn.set_window(bytes);
        self.bbr.set_window(bytes);
    }

    fn set_initial_window(&mut self, bytes: u64) {
        self.mbecn.set_initial_window(bytes);
        self.bbr.set_initial_window(bytes);
    }

    fn metrics(&self) -> ControllerMetrics {
        self.decider().metrics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::Cause;
    use std::time::Duration;

    const SEGMENT_SIZE: u64 = 1200;

    fn controller() -> MbEcnWithFallback {
        MbEcnWithFallback::new(CcContext {
            segment_size: SEGMENT_SIZE,
            session_window_packets: 10_000,
            max_window_packets: 10_000,
            paths: 1,
        })
    }

    fn loss(at: Instant) -> CongestionEvent {
        CongestionEvent {
            cause: Cause::Loss,
            sent_at: at,
            packets: 1,
            repeated: false,
        }
    }

    #[test]
    fn bbr_decides_until_the_path_marks_loss_or_not() {
        let mut c = controller();
        assert!(!c.has_marked());
        let t = Instant::from_nanos(50_000_000);
        c.on_sent(Instant::ZERO, SEGMENT_SIZE);
        c.on_congestion(t, &loss(Instant::ZERO));
        assert!(!c.has_marked());
        assert_eq!(c.pacing_rate(), c.bbr.pacing_rate());
        assert_eq!(c.window(), c.bbr.window());
    }

    #[test]
    fn a_mark_hands_over_at_bbrs_rate_and_later_losses_stay_with_mbecn() {
        let mut c = controller();
        let mut now = Instant::ZERO;
        // Feed BBR a bandwidth sample of 1 MB/s.
        c.on_rate_sample(
            now,
            &RateSample {
                delivery_rate: 1e6,
                interval: Duration::from_millis(10),
                delivered: 10_000,
                total_delivered: 10_000,
                rtt: Duration::from_millis(10),
                newly_acked: 10_000,
                ..RateSample::default()
            },
        );
        c.on_congestion(now, &loss(now));
        assert!(!c.has_marked());
        now += Duration::from_millis(1);
        c.on_ece(now, 3);
        assert!(c.has_marked());
        let rate = c.pacing_rate().expect("MB-ECN paces");
        assert!((rate - 1e6).abs() < 0.01 * 1e6, "{rate}");
        now += Duration::from_millis(1);
        c.on_congestion(now, &loss(now));
        assert!(c.has_marked(), "the path marks: loss is MB-ECN's");
    }

    #[test]
    fn an_ece_of_zero_is_not_a_mark() {
        let mut c = controller();
        c.on_ece(Instant::ZERO, 0);
        assert!(!c.has_marked());
    }
}
