//! The sender side of MB-ECN: a byte budget per time slot, paced.

use super::super::{
    Acked, Algorithm, Cause, CcContext, CongestionEvent, Controller, ControllerMetrics,
};
use super::{ECE_MAX, ECE_SHIFT};
use crate::rtt::RttEstimator;
use crate::Instant;
use std::time::Duration;

/// The sender forgets its ECE after more than 2^N packets sent without an
/// update, in case the "end of congestion" update was lost (seed 004 says
/// "exceeds N"; the prototype compares with `CA_WND` = 2^N).
const ECE_RESET_PACKETS: u64 = 1 << ECE_SHIFT;
/// W: the first slot is 2^W ns ≈ 16.8 ms (seed 004: W = 24; prototype
/// `CA_SLOT`).
const INITIAL_SLOT_SHIFT: u32 = 24;
/// Budget of the first slot, bytes: 64 KiB per 2^24 ns ≈ 3.9 MB/s (prototype
/// `CA_IWL`; seed 004 gives no figure).
const INITIAL_BUDGET: u64 = 1 << 16;
/// Additive increase, bytes per 2^24 ns slot, scaled with the slot width
/// (seed 004: "64KiB per 16.8ms"; prototype `CA_INC`).
const ADDITIVE_INCREASE: u64 = 1 << 16;
/// PKT_MIN: after a slot with fewer packets the next slot is wider (seed 004:
/// 8; prototype `CA_MINPS`).
const MIN_SLOT_PACKETS: u64 = 8;
/// PKT_MAX: after a slot with more packets the next slot is narrower (seed
/// 004: 64; prototype `CA_MAXPS`).
const MAX_SLOT_PACKETS: u64 = 64;
/// Decrease fractions are counted out of 2^(N+8), the prototype's shift
/// (`CA_SHFT + 8`): there, a slot cuts budget · ECE / 2^(N+8).
const DECREASE_SHIFT: u32 = ECE_SHIFT + 8;
/// G: braid cuts ECE · 2^G / 2^(N+8) per 2^24 ns instead (see the module
/// docs). With G = 7, 2^N packets all marked 1 (ECE 32, the queue just
/// over 16 packets) cut half per 2^24 ns, DCTCP's α/2 with α = ECE / 2^N
/// (RFC 8257 §3.3, which cuts α/2 per RTT).
const DECREASE_GAIN_SHIFT: u32 = 7;
/// No slot cuts more than half the budget (DCTCP's largest cut).
const MAX_DECREASE: u128 = 1 << (DECREASE_SHIFT - 1);
/// Loss fallback: a slot with a loss and no ECE cuts 1/8 below what it
/// delivered (braid's choice; see `on_congestion`).
const LOSS_DECREASE: u128 = 1 << (DECREASE_SHIFT - 3);
/// Narrowest slot, 2^20 ns ≈ 1 ms. braid's choice (the prototype sets no
/// bound): drivers wake about once a millisecond and the pacer allows 2 ms
/// bursts, so a narrower slot would count bursts, not rates. Faster senders
/// simply put more than 64 packets in a slot.
pub const MIN_SLOT_SHIFT: u32 = 20;
/// Widest slot, 2^30 ns ≈ 1.07 s. braid's choice: the prototype never waits
/// more than 1 s for a slot, so it does not throttle below about one packet
/// per second.
pub const MAX_SLOT_SHIFT: u32 = 30;
/// Smallest window, packets (braid's choice: MB-ECN has no window, so this
/// one must never be what limits the sender).
const MIN_WINDOW_PACKETS: u64 = 16;
/// Window = this gain × rate × RTT. In flight is about rate × RTT, and the
/// RTT already includes queueing, so twice that never binds.
const WINDOW_GAIN: f64 = 2.0;
/// Per slot, the delivered-rate filter forgets this share of its maximum.
const DELIVERED_DECAY: f64 = 1.0 / 8.0;
/// RTT assumed before the first sample (RFC 6298 §2.1: initial RTO 1 s).
const RTT_BEFORE_SAMPLE: Duration = Duration::from_secs(1);

/// Sender side of MB-ECN: a byte budget per time slot of 2^k ns.
///
/// `window()` is max(2 × min(rate, delivered rate) × minimum RTT, 16
/// packets), using a 1 s RTT before the first sample. It only bounds what is in flight and is
/// never meant to limit the rate, which the pacer enforces.
#[derive(Debug, Clone)]
pub struct MbEcn {
    segment_size: u64,
    /// The receiver's last ECE, 0 when not congested.
    ece: u16,
    /// Packets sent since the last ECE update.
    packets_since_ece: u64,
    /// Until the first ECE update.
    slow_start: bool,
    /// The slot is 2^slot_shift ns wide.
    slot_shift: u32,
    /// Start of the current slot; `None` before the first event.
    slot_start: Option<Instant>,
    slot_packets: u64,
    slot_bytes: u64,
    /// Bytes acknowledged during the slot.
    slot_acked: u64,
    /// Packets of the slot sent while the ECE was 0.
    slot_clear: u64,
    /// A loss was declared during the slot.
    slot_lost: bool,
    /// ACKs were already arriving when the slot began, so `slot_acked`
    /// measures a whole slot of delivery.
    slot_measured: bool,
    /// An ACK has arrived.
    acking: bool,
    /// Bytes per second the path delivered: the best slot, decaying by 1/8
    /// per slot; 0 before the first acknowledged slot.
    delivered_rate: f64,
    /// Sum over the slot's packets of the ECE when each was sent.
    slot_ece_sum: u64,
    /// Bytes allowed per slot.
    budget: u64,
    /// The minimum RTT, once there is a sample: the window is twice the
    /// budget's bandwidth-delay product without queueing, so it bounds the
    /// standing queue the feedback loop's lag would otherwise build.
    rtt: Option<Duration>,
}

impl MbEcn {
    /// Starts in slow start with the initial budget and slot width.
    pub fn new(ctx: CcContext) -> Self {
        MbEcn {
            segment_size: ctx.segment_size.max(1),
            ece: 0,
            packets_since_ece: 0,
            slow_start: true,
            slot_shift: INITIAL_SLOT_SHIFT,
            slot_start: None,
            slot_packets: 0,
            slot_bytes: 0,
            slot_ece_sum: 0,
            slot_acked: 0,
            slot_clear: 0,
            slot_lost: false,
            slot_measured: false,
            acking: false,
            delivered_rate: 0.0,
            budget: INITIAL_BUDGET,
            rtt: None,
        }
    }

    /// Sets the budget to `rate` bytes/s and ends slow start: another
    /// controller measured the path (see `super::mbecn_fallback`).
    pub fn set_rate(&mut self, rate: f64) {
        if rate > 0.0 && rate.is_finite() {
            let per_slot = rate * (1u64 << self.slot_shift) as f64 / 1e9;
            self.budget = (per_slot as u64).max(self.segment_size);
            self.slow_start = false;
        }
    }

    #[cfg(test)]
    /// Bytes allowed per slot.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    #[cfg(test)]
    /// Width of a slot.
    pub fn slot_width(&self) -> Duration {
        Duration::from_nanos(1 << self.slot_shift)
    }

    #[cfg(test)]
    /// The congestion level the sender acts on.
    pub fn ece(&self) -> u16 {
        self.ece
    }

    /// Budget / slot width, bytes per second.
    fn rate(&self) -> f64 {
        self.budget as f64 * 1e9 / (1u64 << self.slot_shift) as f64
    }

    /// 64 KiB per 2^24 ns slot, scaled with the square of the slot width:
    /// the rate then grows by the same 3.9 MB/s per 2^24 ns whatever the slot
    /// (see the module docs).
    fn additive_increase(&self) -> u64 {
        if self.slot_shift >= INITIAL_SLOT_SHIFT {
            ADDITIVE_INCREASE << (2 * (self.slot_shift - INITIAL_SLOT_SHIFT))
        } else {
            ADDITIVE_INCREASE >> (2 * (INITIAL_SLOT_SHIFT - self.slot_shift))
        }
    }

    /// The share of the budget to cut for a slot whose mean ECE was `ece`,
    /// out of 2^(N+8): ECE · 2^G per 2^24 ns, in proportion to the slot
    /// width, at most one half.
    fn decrease_fraction(&self, ece: u64) -> u128 {
        let shift = DECREASE_GAIN_SHIFT + self.slot_shift;
        let e = u128::from(ece);
        let e = if shift >= INITIAL_SLOT_SHIFT {
            e << (shift - INITIAL_SLOT_SHIFT)
        } else {
            e >> (INITIAL_SLOT_SHIFT - shift)
        };
        e.min(MAX_DECREASE)
    }

    /// Cuts the budget to `fraction` / 2^(N+8) below what the slot delivered
    /// (the budget if nothing was acknowledged), never raising it.
    fn decrease(&mut self, fraction: u128) {
        let base = if self.slot_measured && self.slot_acked > 0 {
            self.slot_acked
        } else {
            self.budget
        };
        let cut = (u128::from(base) * fraction) >> DECREASE_SHIFT;
        self.budget = self.budget.min(base - cut as u64);
    }

    /// Ends the current slot if `now` is past it.
    fn roll(&mut self, now: Instant) {
        let now = now.as_nanos();
        let width = 1u64 << self.slot_shift;
        let Some(start) = self.slot_start else {
            self.slot_start = Some(Instant::from_nanos(now & !(width - 1)));
            return;
        };
        let elapsed = now.saturating_sub(start.as_nanos());
        if elapsed < width {
            return;
        }
        // Slots in which nothing happened are skipped, as in the prototype. The
        // new slot starts where the old width's grid reaches `now`.
        let next = start.as_nanos() + elapsed / width * width;
        self.end_slot();
        self.slot_start = Some(Instant::from_nanos(next));
        self.slot_packets = 0;
        self.slot_bytes = 0;
        self.slot_ece_sum = 0;
        self.slot_acked = 0;
        self.slot_clear = 0;
        self.slot_lost = false;
        self.slot_measured = self.acking;
    }

    /// The once-per-slot budget update, then the slot resize.
    fn end_slot(&mut self) {
        if self.slot_packets == 0 {
            // Idle: no evidence about the rate or the slot width.
            return;
        }
        let width = (1u64 << self.slot_shift) as f64 / 1e9;
        if self.slot_measured {
            self.delivered_rate =
                (self.delivered_rate * (1.0 - DELIVERED_DECAY)).max(self.slot_acked as f64 / width);
        }
        // A paced sender that the budget limited lands within a packet of it.
        let used = self.slot_bytes + self.segment_size >= self.budget;
        // The level over the whole slot, not the last report: a snapshot at
        // the slot's end is noise that differs between flows.
        let ece = self.slot_ece_sum.div_ceil(self.slot_packets);
        if self.slow_start {
            if used {
                self.budget = self.budget.saturating_mul(2);
            }
        } else {
            if ece > 0 {
                self.decrease(self.decrease_fraction(ece));
            } else if self.slot_lost {
                self.decrease(LOSS_DECREASE);
            }
            if used {
                // In proportion to the packets sent while the ECE was 0.
                let inc = u128::from(self.additive_increase()) * u128::from(self.slot_clear)
                    / u128::from(self.slot_packets);
                self.budget = self.budget.saturating_add(inc as u64);
            }
        }
        // A slot always lets one packet through: a blocking send waits only
        // after the budget has been passed.
        self.budget = self.budget.max(self.segment_size);

        // Resize by powers of two until the last slot's count would fall in
        // [PKT_MIN, PKT_MAX]. The budget scales too, so the rate is unchanged.
        let packets = self.slot_packets;
        if packets < MIN_SLOT_PACKETS {
            let wanted = (MIN_SLOT_PACKETS.div_ceil(packets)).next_power_of_two();
            let f = wanted
                .trailing_zeros()
                .min(MAX_SLOT_SHIFT - self.slot_shift);
            self.slot_shift += f;
            self.budget = self.budget.saturating_mul(1 << f);
        } else if packets > MAX_SLOT_PACKETS {
            let mut f = 0;
            while packets >> f > MAX_SLOT_PACKETS {
                f += 1;
            }
            let f = f.min(self.slot_shift.saturating_sub(MIN_SLOT_SHIFT));
            self.slot_shift -= f;
            self.budget = (self.budget >> f).max(self.segment_size);
        }
    }

    fn halve(&mut self) {
        self.slow_start = false;
        self.budget = (self.budget / 2).max(self.segment_size);
    }
}

impl Controller for MbEcn {
    fn algorithm(&self) -> Algorithm {
        Algorithm::MbEcn
    }

    fn rate_slot(&self) -> Option<(u64, Duration)> {
        Some((self.budget, Duration::from_nanos(1 << self.slot_shift)))
    }

    fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.roll(now);
        self.slot_packets += 1;
        self.slot_bytes = self.slot_bytes.saturating_add(bytes);
        self.packets_since_ece += 1;
        if self.packets_since_ece > ECE_RESET_PACKETS {
            self.ece = 0;
        }
        self.slot_ece_sum += u64::from(self.ece);
        if self.ece == 0 {
            self.slot_clear += 1;
        }
    }

    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &RttEstimator) {
        self.roll(now);
        self.slot_acked += acked.bytes;
        self.acking = true;
        if rtt.has_sample() {
            self.rtt = Some(rtt.min());
        }
    }

    fn on_ece(&mut self, now: Instant, ece: u16) {
        // A slot that is already over is settled with the level it had.
        self.roll(now);
        self.ece = ece.min(ECE_MAX);
        self.packets_since_ece = 0;
        self.slow_start = false;
    }

    /// MB-ECN proper reacts to queue marks only. braid adds:
    /// - Timeout or send failure: nothing is getting through, or the local
    ///   interface refuses, so the budget is too high. It is halved and slow
    ///   start ends. This stands in for the liveness check that the seed says
    ///   MB-ECN lacks.
    /// - Loss during slow start: the doubling overshot a path that is not
    ///   marking. The budget is halved and slow start ends.
    /// - Loss afterwards: a fallback for paths that do not mark. A slot with
    ///   a loss and no ECE ends with the budget at most 7/8 of what the slot
    ///   delivered. Anchoring the cut on the delivered bytes keeps a sender
    ///   on an overflowing drop-tail queue near the path's rate instead of
    ///   flooding it, while random loss (≤ one cut per slot, undone by the
    ///   additive increase in a few slots) does not collapse the rate. While
    ///   the ECE reports congestion the ECE rules and the loss adds nothing.
    /// - Classic CE marks (`Cause::Ecn`) are ignored: on an MB-ECN path the
    ///   ECE reports the same queues.
    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool {
        match event.cause {
            Cause::Timeout | Cause::SendFailure => {
                self.halve();
                true
            }
            Cause::Loss if self.slow_start => {
                self.halve();
                true
            }
            Cause::Loss => {
                self.roll(now);
                let first = !self.slot_lost;
                self.slot_lost = true;
                first
            }
            Cause::Ecn => false,
        }
    }

    fn pacing_rate(&self) -> Option<f64> {
        Some(self.rate())
    }

    fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn window(&self) -> u64 {
        let rtt = self.rtt.unwrap_or(RTT_BEFORE_SAMPLE).as_secs_f64();
        let mut rate = self.rate();
        if self.delivered_rate > 0.0 {
            rate = rate.min(self.delivered_rate);
        }
        let bytes = (WINDOW_GAIN * rate * rtt) as u64;
        bytes.max(MIN_WINDOW_PACKETS * self.segment_size)
    }

    fn metrics(&self) -> ControllerMetrics {
        // No slow-start threshold: slow start ends at the first ECE update.
        ControllerMetrics {
            window: self.window(),
            ssthresh: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGMENT_SIZE: u64 = 2000;
    /// The initial slot width, ns.
    const W: u64 = 1 << 24;

    fn ns(t: u64) -> Instant {
        Instant::from_nanos(t)
    }

    fn sender() -> MbEcn {
        MbEcn::new(CcContext {
            segment_size: SEGMENT_SIZE,
            session_window_packets: 1000,
            max_window_packets: 1000,
            paths: 1,
        })
    }

    fn send(c: &mut MbEcn, t: u64, packets: u64, bytes: u64) {
        for _ in 0..packets {
            c.on_sent(ns(t), bytes);
        }
    }

    /// Lets time pass without sending: an ACK arrives at `t`.
    fn tick(c: &mut MbEcn, t: u64, rtt: &RttEstimator) {
        let acked = Acked {
            bytes: SEGMENT_SIZE,
            sent_at: ns(0),
            retransmission: false,
            peer_rx_us: None,
        };
        c.on_ack(ns(t), &acked, rtt);
    }

    fn event(cause: Cause) -> CongestionEvent {
        CongestionEvent {
            cause,
            sent_at: ns(0),
            packets: 1,
            repeated: false,
        }
    }

    #[test]
    fn slow_start_doubles_a_used_budget_per_slot() {
        let mut c = sender();
        assert!(c.in_slow_start());
        assert_eq!(c.pacing_rate(), Some(3_906_250.0), "64 KiB per 2^24 ns");
        send(&mut c, 0, 33, SEGMENT_SIZE); // 66 000 bytes: the budget was used
        send(&mut c, W, 10, SEGMENT_SIZE);
        assert_eq!(c.budget(), 2 * INITIAL_BUDGET);
        assert_eq!(c.slot_width(), Duration::from_nanos(W));
        send(&mut c, 2 * W, 10, SEGMENT_SIZE);
        assert_eq!(c.budget(), 2 * INITIAL_BUDGET, "an unused budget stays");
    }

    #[test]
    fn additive_increase_is_64_kib_per_2_24_ns_with_the_slot_squared() {
        let mut c = sender();
        c.on_ece(ns(0), 0);
        assert!(!c.in_slow_start(), "the first update ends slow start");
        send(&mut c, 0, 33, SEGMENT_SIZE);
        // 66 packets in the next slot: used, and too many for one slot.
        send(&mut c, W, 66, SEGMENT_SIZE);
        assert_eq!(c.budget(), INITIAL_BUDGET + ADDITIVE_INCREASE);
        send(&mut c, 2 * W, 50, SEGMENT_SIZE);
        // (128 KiB + 64 KiB) / 2 for a slot half as wide.
        assert_eq!(c.slot_width(), Duration::from_nanos(W / 2));
        assert_eq!(c.budget(), 98_304);
        send(&mut c, 2 * W + W / 2, 10, SEGMENT_SIZE);
        // A quarter of the step per half slot: the rate still grows by
        // 64 KiB per 2^24 ns every 2^24 ns.
        assert_eq!(c.budget(), 98_304 + 16_384);
    }

    #[test]
    fn decrease_is_ece_times_2_to_the_g_per_2_24_ns_at_most_half() {
        let mut c = sender();
        assert_eq!(c.decrease_fraction(32), 4096, "32 level-1 marks: half");
        assert_eq!(c.decrease_fraction(8), 1024, "an eighth");
        assert_eq!(c.decrease_fraction(ECE_MAX.into()), MAX_DECREASE);
        c.slot_shift = 22;
        assert_eq!(c.decrease_fraction(32), 1024, "a quarter slot, a quarter");
        c.slot_shift = MIN_SLOT_SHIFT;
        assert_eq!(c.decrease_fraction(1), 8);
    }

    #[test]
    fn multiplicative_decrease_by_the_slots_mean_ece() {
        let rtt = RttEstimator::default();
        let mut c = sender();
        c.on_ece(ns(0), 32);
        send(&mut c, 0, 10, SEGMENT_SIZE);
        send(&mut c, W, 5, SEGMENT_SIZE);
        assert_eq!(c.budget(), 32_768, "ECE 32 halves");
        c.on_ece(ns(W), 0);
        send(&mut c, W, 5, SEGMENT_SIZE);
        // Half the slot's packets were sent at ECE 32: the mean, 16, cuts a
        // quarter (and the slot did not use its budget: no step).
        send(&mut c, 2 * W, 10, SEGMENT_SIZE);
        assert_eq!(c.budget(), 32_768 - 8_192);
        for slot in 3..20 {
            c.on_ece(ns(slot * W), u16::MAX);
            send(&mut c, slot * W, 10, SEGMENT_SIZE);
        }
        assert_eq!(c.ece(), ECE_MAX, "clamped");
        assert_eq!(c.budget(), SEGMENT_SIZE, "never below one packet per slot");

        // Once ACKs arrive through a whole slot, the cut starts from what
        // the slot delivered, and never raises the budget.
        let mut c = sender();
        c.on_ece(ns(0), 8);
        tick(&mut c, 0, &rtt);
        send(&mut c, 0, 10, SEGMENT_SIZE);
        send(&mut c, W, 10, SEGMENT_SIZE);
        assert_eq!(c.budget(), 65_536 - 8_192, "slot 0 began before the ACK");
        for _ in 0..5 {
            tick(&mut c, W, &rtt);
        }
        send(&mut c, 2 * W, 10, SEGMENT_SIZE);
        assert_eq!(c.budget(), 10_000 - 1_250, "7/8 of 10 000 delivered");
        for _ in 0..20 {
            tick(&mut c, 2 * W, &rtt);
        }
        send(&mut c, 3 * W, 1, SEGMENT_SIZE);
        assert_eq!(c.budget(), 8_750, "7/8 of 40 000 is more: kept");
    }

    #[test]
    fn slot_doubles_below_8_packets_and_halves_above_64_at_the_same_rate() {
        let rtt = RttEstimator::default();
        let mut c = sender();
        c.on_ece(ns(0), 0);
        let rate = c.pacing_rate();
        send(&mut c, 0, 3, 100);
        tick(&mut c, W, &rtt);
        // 3 packets: 4× wider reaches 8.
        assert_eq!(c.slot_width(), Duration::from_nanos(4 * W));
        assert_eq!(c.budget(), 4 * INITIAL_BUDGET);
        assert_eq!(c.pacing_rate(), rate);
        // The wide slot starts at W; 100 packets in it are too many.
        send(&mut c, W + 1, 100, 100);
        tick(&mut c, 5 * W - 1, &rtt);
        assert_eq!(c.slot_width(), Duration::from_nanos(4 * W), "not over yet");
        tick(&mut c, 5 * W, &rtt);
        assert_eq!(c.slot_width(), Duration::from_nanos(2 * W));
        assert_eq!(c.budget(), 2 * INITIAL_BUDGET);
        assert_eq!(c.pacing_rate(), rate);
    }

    #[test]
    fn idle_slots_change_nothing() {
        let rtt = RttEstimator::default();
        let mut c = sender();
        tick(&mut c, 0, &rtt);
        tick(&mut c, 10 * W, &rtt);
        tick(&mut c, 20 * W, &rtt);
        assert_eq!(c.budget(), INITIAL_BUDGET);
        assert_eq!(c.slot_width(), Duration::from_nanos(W));
    }

    #[test]
    fn sender_forgets_ece_after_32_packets_without_an_update() {
        let mut c = sender();
        c.on_ece(ns(0), 100);
        send(&mut c, 0, 32, SEGMENT_SIZE);
        assert_eq!(c.ece(), 100);
        send(&mut c, 0, 1, SEGMENT_SIZE);
        assert_eq!(
            c.ece(),
            0,
            "the end-of-congestion update may have been lost"
        );
        send(&mut c, W, 33, SEGMENT_SIZE);
        // Halved for the slot's marked packets; 1 of 33 earns the step.
        assert_eq!(c.budget(), 32_768 + 65_536 / 33);
        send(&mut c, 2 * W, 1, SEGMENT_SIZE);
        assert_eq!(c.budget(), 34_753 + ADDITIVE_INCREASE, "increase only");
    }

    #[test]
    fn loss_halves_in_slow_start_then_cuts_an_eighth_per_slot_without_ece() {
        let mut c = sender();
        assert!(c.on_congestion(ns(0), &event(Cause::Loss)));
        assert!(!c.in_slow_start());
        assert_eq!(c.budget(), INITIAL_BUDGET / 2);
        assert!(c.on_congestion(ns(0), &event(Cause::Loss)), "fallback");
        assert!(
            !c.on_congestion(ns(0), &event(Cause::Loss)),
            "once per slot"
        );
        assert!(!c.on_congestion(ns(0), &event(Cause::Ecn)));
        send(&mut c, 0, 10, SEGMENT_SIZE);
        tick(&mut c, W, &RttEstimator::default());
        assert_eq!(c.budget(), 32_768 - 4_096);
        // A loss while the ECE reports congestion adds nothing.
        c.on_ece(ns(W), 8);
        c.on_congestion(ns(W), &event(Cause::Loss));
        send(&mut c, W, 10, SEGMENT_SIZE);
        send(&mut c, 2 * W, 1, SEGMENT_SIZE);
        assert_eq!(c.budget(), 28_672 - 3_584);
        assert!(c.on_congestion(ns(0), &event(Cause::Timeout)));
        assert!(c.on_congestion(ns(0), &event(Cause::SendFailure)));
        assert_eq!(c.budget(), 25_088 / 4);
    }

    #[test]
    fn window_is_twice_rate_times_rtt_with_a_floor() {
        let mut c = sender();
        // 3 906 250 B/s, 1 s before any sample.
        assert_eq!(c.window(), 7_812_500);
        let mut rtt = RttEstimator::default();
        rtt.update(Duration::from_millis(100), Duration::ZERO);
        tick(&mut c, 0, &rtt);
        assert!(c.window().abs_diff(781_250) <= 1, "{}", c.window());
        let mut fast = RttEstimator::default();
        fast.update(Duration::from_millis(1), Duration::ZERO);
        tick(&mut c, 0, &fast);
        assert_eq!(c.window(), MIN_WINDOW_PACKETS * SEGMENT_SIZE);
        assert_eq!(c.metrics().ssthresh, None);
    }
}
