//! `mbecn` on paths that do not mark: BBR until the path marks.
//!
//! MB-ECN reacts to its receiver's queue reports (ECE). Where no forwarder
//! writes the field, its only signal is loss, and its additive increase,
//! fixed per time slot whatever the RTT, outruns loss feedback that arrives
//! an RTT later: on long paths it retransmitted a large share of what it
//! sent, and behind a shallow queue it fell well below the link (issue 13).
//! The seed (004) leaves paths without MB-ECN forwarders open.
//!
//! So `mbecn` runs both: [`MbEcn`] decides while the path has marked or
//! nothing says it does not, and a [`Bbr`] fed the same events takes over
//! once a loss comes before any ECE above 0. Its model is warm by then
//! (min RTT, the delivery rates of MB-ECN's own packets), and it starts
//! in DRAIN: the loss says MB-ECN's slow start has filled the pipe. An ECE above 0
//! later hands control back, with MB-ECN's budget set to BBR's bandwidth
//! estimate. On a marking path MB-ECN's first ECE comes with a queue of 16
//! packets, before a drop-tail queue of that size or more can drop, so
//! marking paths never see the fallback.

use super::bbr::Bbr;
use super::mbecn::MbEcn;
use super::{
    Acked, Algorithm, Cause, CcContext, CongestionEvent, Controller, ControllerMetrics, RateSample,
};
use crate::rtt::RttEstimator;
use crate::Instant;

/// Which controller decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// MB-ECN; the path has marked, or has not lost yet.
    MbEcn,
    /// BBR: a loss came before any mark.
    LossOnly,
}

/// The `mbecn` controller: [`MbEcn`], but [`Bbr`] decides from a loss that
/// comes before any mark until the path's first mark.
#[derive(Debug, Clone)]
pub struct MbEcnWithFallback {
    mbecn: MbEcn,
    bbr: Bbr,
    mode: Mode,
    /// An ECE above 0 has arrived: some forwarder on the path marks.
    marked: bool,
}

impl MbEcnWithFallback {
    /// Starts with MB-ECN deciding.
    pub fn new(ctx: CcContext) -> Self {
        MbEcnWithFallback {
            mbecn: MbEcn::new(ctx),
            bbr: Bbr::new(ctx),
            mode: Mode::MbEcn,
            marked: false,
        }
    }

    /// Whether BBR decides (a loss came before any mark).
    pub fn is_loss_only(&self) -> bool {
        self.mode == Mode::LossOnly
    }

    fn decider(&self) -> &dyn Controller {
        match self.mode {
            Mode::MbEcn => &self.mbecn,
            Mode::LossOnly => &self.bbr,
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
        if event.cause == Cause::Loss && !self.marked && self.mode == Mode::MbEcn {
            self.mode = Mode::LossOnly;
            // MB-ECN's slow start doubles per slot, not per round trip: by
            // the first loss it has overrun the queue, and BBR's own STARTUP
            // (fed by that flood) must not keep going.
            self.bbr.end_startup();
        }
        let mbecn = self.mbecn.on_congestion(now, event);
        let bbr = self.bbr.on_congestion(now, event);
        match self.mode {
            Mode::MbEcn => mbecn,
            Mode::LossOnly => bbr,
        }
    }

    fn on_rate_sample(&mut self, now: Instant, sample: &RateSample) {
        self.mbecn.on_rate_sample(now, sample);
        self.bbr.on_rate_sample(now, sample);
    }

    fn on_ece(&mut self, now: Instant, ece: u16) {
        if ece > 0 {
            self.marked = true;
            if self.mode == Mode::LossOnly {
                self.mode = Mode::MbEcn;
                self.mbecn.set_rate(self.bbr.btl_bw());
            }
        }
        self.mbecn.on_ece(now, ece);
    }

    fn on_spurious_loss(&mut self, now: Instant) {
        self.mbecn.on_spurious_loss(now);
        self.bbr.on_spurious_loss(now);
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.decider().pacing_rate()
    }

    fn in_slow_start(&self) -> bool {
        self.decider().in_slow_start()
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
    use std::time::Duration;

    const MTU: u64 = 1200;

    fn controller() -> MbEcnWithFallback {
        MbEcnWithFallback::new(CcContext {
            mtu: MTU,
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
        }
    }

    #[test]
    fn a_loss_before_any_mark_hands_over_to_bbr() {
        let mut c = controller();
        assert!(!c.is_loss_only());
        let t = Instant::from_nanos(50_000_000);
        c.on_sent(Instant::ZERO, MTU);
        c.on_congestion(t, &loss(Instant::ZERO));
        assert!(c.is_loss_only());
        assert_eq!(c.pacing_rate(), c.bbr.pacing_rate());
        assert_eq!(c.window(), c.bbr.window());
    }

    #[test]
    fn a_mark_hands_back_at_bbrs_rate_and_later_losses_stay_with_mbecn() {
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
        assert!(c.is_loss_only());
        now += Duration::from_millis(1);
        c.on_ece(now, 3);
        assert!(!c.is_loss_only());
        let rate = c.pacing_rate().expect("MB-ECN paces");
        assert!((rate - 1e6).abs() < 0.01 * 1e6, "{rate}");
        now += Duration::from_millis(1);
        c.on_congestion(now, &loss(now));
        assert!(!c.is_loss_only(), "the path marks: loss is MB-ECN's");
    }

    #[test]
    fn an_ece_of_zero_is_not_a_mark() {
        let mut c = controller();
        c.on_ece(Instant::ZERO, 0);
        c.on_congestion(Instant::ZERO, &loss(Instant::ZERO));
        assert!(c.is_loss_only());
    }
}
