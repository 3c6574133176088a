//! BBR v1: draft-cardwell-iccrg-bbr-congestion-control-00
//! (<https://datatracker.ietf.org/doc/html/draft-cardwell-iccrg-bbr-congestion-control-00>)
//! and Linux `net/ipv4/tcp_bbr.c` before BBRv2.
//!
//! The model (BtlBw: max delivery rate over 10 rounds; RTprop: min RTT over
//! 10 s) is fed once per ACK frame by [`Controller::on_rate_sample`]; the
//! state machine is STARTUP → DRAIN → PROBE_BW, with PROBE_RTT when RTprop
//! goes 10 s without a new minimum. Deviations from v1:
//!
//! - cwnd gain 2 in STARTUP and DRAIN, as BBRv2 (v1: 2.89).
//! - Loss, ECN and send failures change nothing: no packet conservation and
//!   no `cwnd − losses` in recovery, so random loss costs no throughput.
//! - STARTUP jumps after the first flight (braid's, after RAPID and packet-
//!   train dispersion; see [`ack_train`]): the IW10 burst's ACK spacing
//!   gives the bottleneck rate, and STARTUP paces the next round at it with
//!   cwnd at its BDP instead of doubling from IW10 (~log2(BDP/IW) rounds,
//!   seconds on a long path). The estimate also counts as the first
//!   round of the plateau, so after the jump STARTUP needs rate samples 25 %
//!   above it to go on, and ends one round sooner than v1 when they stay
//!   flat (less overshoot into a shallow queue). An untrusted estimate
//!   (jitter on the sender's clock, a timeout, a paced train) leaves v1's
//!   startup unchanged; uneven receive times give half the estimate.
//!   A first flight received within 30 µs grants no more than its
//!   delivery rate on our clock, as a lower bound: a
//!   flight the path held and released in one burst has receive times
//!   microseconds apart, which read the same as a multi-Gbit/s link
//!   ([`ack_train`]).
//! - A round that overflowed the queue lowers BtlBw to the most it
//!   delivered (BBRv3's `bw_lo`, draft-ietf-ccwg-bbr; [`congested_round`]):
//!   after a capacity drop v1 keeps the old rate, and twice its BDP in
//!   flight, for ten rounds that the growing queue makes longer.
//! - PROBE_BW paces at gain × BtlBw / (1 − p), p the loss share of cruise
//!   rounds with no queue ([`random_loss`], at most 25 %). Loss
//!   before the bottleneck (radio, netem ahead of a rate limiter) otherwise
//!   leaves it idle a share p of the time; cwnd (2 × BDP) still bounds the
//!   queue if p is too high, and rounds with a queue pull p back to 0.
//! - A probe that lost more than its cruise did (by 2 % beyond chance) caps
//!   later probes' in-flight data, as BBRv2's `inflight_hi` does
//!   ([`probe_ceiling`]): behind a queue shallower than a quarter of
//!   the BDP, v1's probe overflows it every cycle. The cap bounds the
//!   probe's whole window, aggregation allowance included, as in BBRv3.
//! - An RTO saves cwnd and drops it to the 4-packet floor (Linux sets 1 and
//!   floors it to 4 on the next ACK). The saved cwnd comes back with the first
//!   ACK of a packet sent after the RTO, or a spurious-loss report (Linux: when
//!   recovery ends).
//! - The PROBE_BW start phase is a hash of the delivered count, not a random
//!   draw (the core has no RNG); like Linux it is never the 0.75 phase.
//! - cwnd adds the ACK aggregation estimate as Linux does since 2019
//!   (`extra_acked`; [`ack_aggregation`]), up to 500 ms at BtlBw where
//!   Linux stops at 100 ms: cellular uplinks stall for seconds.
//! - Omitted: long-term bandwidth sampling (`lt_bw` policer detection),
//!   idle-restart handling, the 1 % pacing margin, TSO rounding of cwnd.
//! - PROBE_RTT holds cwnd at half the estimated BDP, not at 4 packets
//!   (BBRv2: draft-cardwell-iccrg-bbr-congestion-control-02 §2.14.2,
//!   BBRProbeRTTCwndGain = 0.5; Linux `tcp_bbr2.c` `bbr_probe_rtt_cwnd_gain`),
//!   which still drains a queue up to half the BDP. v1's 4 packets stop the
//!   sender for a round trip and starve the pipe for another, twice what
//!   half the BDP costs. The interval stays v1's 10 s (v2 probes every 5 s).
//! - When RTprop expires, PROBE_RTT's cwnd is still half the BDP of the
//!   expired RTprop, and RTprop becomes the least RTT PROBE_RTT measured
//!   when it ends (BBRv3, draft-ietf-ccwg-bbr "ProbeRTT": PROBE_RTT starts
//!   when the 5 s `probe_rtt_min_delay` filter expires, while the 10 s
//!   `min_rtt` that sizes its cwnd is still valid). v1 takes the sample that
//!   expired it, which a standing queue inflates; its PROBE_RTT cwnd of 4
//!   packets drains anyway, but half a BDP computed from that sample does
//!   not: on the Verizon LTE trace RTprop went from 41 to 370 ms, cwnd
//!   from 70 to 300 packets while the cell slowed to 0.8 Mbit/s, and RTT to
//!   2.3 s.
//! - PROBE_RTT ends as soon as a sample comes within 12.5 % of RTprop (the
//!   tolerance below), instead of holding 200 ms and a round: that sample
//!   has measured RTprop again, and each further millisecond at half the
//!   BDP idles half the link: on the Verizon trace (simulator, 20 MB) the
//!   hold cost 1.1 % of the goodput. RTprop then only falls, so the
//!   tolerance cannot raise it step by step.
//! - PROBE_RTT marks later samples app-limited here, as Linux's rate sampler
//!   does through `tp->app_limited`.
//! - RTprop takes only a strictly smaller sample before it expires (Linux
//!   since 2020; draft-00 uses ≤), but a sample within 12.5 % of it keeps
//!   it current (quiche's BBR7 option, there only after an app-limited
//!   round): PROBE_RTT runs after 10 s without one. On a flat path v1
//!   drains every 10 s for nothing, at ~1 % of the rate on a 100 ms path
//!   (half the BDP for 200 ms and a round). A propagation delay that grows
//!   by less than 12.5 % goes unseen; cwnd's gain of 2 covers that.
//! - cwnd adds BtlBw × the ACK path's queueing delay ([`RateSample::ack_queue_delay`],
//!   from the ACK frames' receive timestamps) to gain × BDP. In full duplex
//!   each direction's ACKs wait behind the other's data: with v1's cwnd the
//!   RTT grows past 2 × RTprop, the sender becomes cwnd-limited, its rate
//!   samples fall and BtlBw with them, to a fraction of the link.
//! - PROBE_BW paces no slower than the peer's receive rate in the latest
//!   sample ([`RateSample::receive_rate`]: on the receiver's clock, over at
//!   least the minimum RTT), up to twice STARTUP's gain × BtlBw, in the
//!   current round and not in the 0.75 phase. BtlBw only learns a rate the
//!   sender has sent at, so after a link speeds up (a cell's capacity
//!   surging after a slow spell) v1 grows 1.25× per probe cycle while the
//!   queue it built drains at the new rate. The floor is not a bandwidth
//!   sample, and the cap bounds what a peer misreporting its receive times
//!   can ask for. A cap of the cwnd gain (2×) took 3-4 rounds to follow the
//!   Verizon trace's jump from ~1 to ~10 Mbit/s, and on the AT&T trace
//!   behind 200 packets cost 4 % of the goodput (simulator).
//! - STARTUP's loss exit and the random-loss estimate judge "a queue" on
//!   the RTT less the ACK path's queueing: in full duplex the other
//!   direction's data delays our ACKs, and with random loss that ended
//!   STARTUP at a fraction of the rate (the train estimate itself uses the
//!   receiver's receive times, see [`ack_train`]).
//! - Before the first bandwidth sample `pacing_rate` is `None`: the
//!   connection paces at its own gain over cwnd / sRTT, and not at all
//!   before its first RTT sample, so IW10 leaves as one burst (the train).
//!   A first flight of a few packets (a request, a file's manifest sent
//!   before the receiver answers) is not a train: the next flight is,
//!   and leaves unpaced too, within the window.
//! - The first RTT sample usually comes from the handshake's confirming
//!   PING (no payload), a packet's serialisation time below what data can
//!   reach. It understates the BDP by that time only, and where a data
//!   packet's serialisation adds more than 12.5 % to the RTT, PROBE_RTT
//!   runs every 10 s as in v1.

mod ack_aggregation;
mod ack_train;
mod congested_round;
mod max_filter;
mod probe_ceiling;
mod random_loss;

use self::ack_aggregation::AckAggregation;
use self::ack_train::{AckTrain, Estimate};
use self::congested_round::CongestedRound;
use self::max_filter::MaxFilter;
use self::probe_ceiling::ProbeCeiling;
use self::random_loss::RandomLoss;
use super::{
    Acked, Algorithm, Cause, CcContext, CongestionEvent, Controller, ControllerMetrics, RateSample,
};
use crate::rtt::RttEstimator;
use crate::Instant;
use std::time::Duration;

/// Loss rate of a STARTUP round that ends STARTUP (BBRv2 `BBRLossThresh`, 2 %).
const STARTUP_LOSS_THRESH: f64 = 0.02;
/// RTT over the minimum that shows a queue behind that loss (braid's choice).
const STARTUP_QUEUE_RTT_RATIO: f64 = 1.25;
/// 2/ln 2, the smallest gain that doubles the delivery rate each round
/// (draft-00 "Startup", BBRHighGain; Linux `bbr_high_gain`): STARTUP's
/// pacing gain. v1 uses it for cwnd in STARTUP and DRAIN too.
const HIGH_GAIN: f64 = 2.0 / std::f64::consts::LN_2;
/// cwnd gain in STARTUP and DRAIN (BBRv2: draft-cardwell-iccrg-bbr-
/// congestion-control-02 §2.6 BBRStartupCwndGain = 2; v1 uses HIGH_GAIN).
/// Two BDPs still let the delivery rate double each round and fit a path
/// with one BDP of queue, which a round at 2.89 BDPs overflows.
const STARTUP_CWND_GAIN: f64 = 2.0;
/// Inverse of the STARTUP gain: drains its queue in one round (draft-00
/// "Drain"; Linux `bbr_drain_gain`).
const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// Most PROBE_BW paces over BtlBw to keep up with the peer's receive rate
/// (braid's choice; see the module docs): twice STARTUP's gain. The rate
/// is measured, not extrapolated, and cwnd still bounds what is in flight.
const RECEIVE_RATE_MAX_GAIN: f64 = 2.0 * HIGH_GAIN;
/// cwnd gain in PROBE_BW, tolerating delayed and stretched ACKs (draft-00
/// "ProbeBW"; Linux `bbr_cwnd_gain`).
const CWND_GAIN: f64 = 2.0;
/// PROBE_BW pacing gains, one phase per RTprop (draft-00 BBRGainCycle;
/// Linux `bbr_pacing_gain`).
const GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The phase at whose start a probe's losses are judged: the probe's
/// packets were acknowledged or declared lost in the two phases after it.
const PROBE_JUDGED_PHASE: usize = 3;
/// The start phase is drawn among this many (Linux `bbr_cycle_rand`): all but
/// the 0.75 phase.
const CYCLE_RAND: u64 = 7;
/// RTprop min-filter window (draft-00 RTpropFilterLen; Linux `bbr_min_rtt_win_sec`).
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// RTprop stays current while RTT samples come within this factor of it
/// (quiche's BBR `kSimilarMinRttThreshold`, 1.125, of its BBR7 option).
const SIMILAR_RTT: f64 = 1.125;
/// Least time at the minimum cwnd in PROBE_RTT (draft-00 ProbeRTTDuration;
/// Linux `bbr_probe_rtt_mode_ms`).
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// Growth that still counts as growth in STARTUP (draft-00 "Estimating When
/// Startup has Filled the Pipe"; Linux `bbr_full_bw_thresh`).
const FULL_BW_THRESH: f64 = 1.25;
/// Rounds without that growth that end STARTUP (Linux `bbr_full_bw_cnt`).
const FULL_BW_ROUNDS: u32 = 3;
/// cwnd floor, packets (draft-00 BBRMinPipeCwnd; Linux `bbr_cwnd_min_target`).
const MIN_CWND: u64 = 4;
/// cwnd in PROBE_RTT as a fraction of the estimated BDP (BBRv2:
/// draft-cardwell-iccrg-bbr-congestion-control-02 §2.14.2 BBRProbeRTTCwndGain;
/// v1 uses [`MIN_CWND`]).
const PROBE_RTT_CWND_GAIN: f64 = 0.5;
/// Initial cwnd, packets (draft-00 InitialCwnd; RFC 6928).
const INITIAL_CWND: u64 = 10;
/// Packets allowed above gain × BDP for send quanta and ACK jitter (draft-00
/// BBRInflight: 3 × send_quantum; braid's quantum is one packet).
const QUANTA: u64 = 3;
/// Pacing gain over the first flight's ACK-train estimate for the round
/// after it (braid's choice): the estimate is the bottleneck's capacity, so
/// one round at it fills the pipe without a queue.
const JUMP_PACING_GAIN: f64 = 1.0;
/// cwnd for that round as a multiple of estimate × RTT (braid's choice).
const JUMP_CWND_GAIN: f64 = 1.0;
/// How far the samples of the round paced at a jump may fall short of its
/// estimate before it is dropped (braid's; a real path's samples come
/// within a few percent, see `startup_jumps_to_the_ack_train_estimate`).
const JUMP_CHECK_SHORTFALL: f64 = 2.0;

/// BBR's state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BbrMode {
    /// Paces at 2/ln 2 × the bandwidth estimate, doubling the rate each
    /// round, until the pipe is full.
    Startup,
    /// Paces below the estimate until in-flight data is down to one BDP.
    Drain,
    /// Cruises at the bottleneck rate, one phase above and one below it per
    /// gain cycle.
    ProbeBw,
    /// Holds in-flight data at half the BDP to measure the propagation RTT
    /// afresh: until a sample comes near RTprop, or for 200 ms and a round.
    ProbeRtt,
}

/// BBR v1 controller with the deviations listed in the module docs.
#[derive(Debug, Clone)]
pub struct Bbr {
    mode: BbrMode,
    cwnd: u64,
    /// cwnd saved on entering PROBE_RTT or at an RTO.
    prior_cwnd: u64,
    pacing_rate: Option<f64>,
    btl_bw: MaxFilter,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    /// Bytes lost and delivered in the current round, for the startup exit.
    round_lost: u64,
    round_delivered: u64,
    full_bw: f64,
    full_bw_count: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// Least RTT sampled since PROBE_RTT began: RTprop when it ends.
    probe_rtt_min: Option<Duration>,
    /// Packets sent before `delivered` reaches this were sent in PROBE_RTT:
    /// their samples underestimate the path.
    app_limited_until: u64,
    /// Set by an RTO until ACK progress restores `prior_cwnd`.
    timeout_at: Option<Instant>,
    /// inflight(1.0) when STARTUP ended, as Linux reports it.
    ssthresh: Option<u64>,
    /// The first flight's ACK dispersion, for the jump out of IW10.
    train: AckTrain,
    /// The rate STARTUP jumped to, bytes/s; 0 without a jump.
    jump_bw: f64,
    /// The round of the jump, until the rounds after it have checked it.
    jump_round: Option<u64>,
    /// Loss without a queue, which PROBE_BW's pacing makes up for.
    random_loss: RandomLoss,
    /// Bound on PROBE_BW's in-flight data after a probe that lost.
    ceiling: ProbeCeiling,
    ack_aggregation: AckAggregation,
    /// Rounds whose loss shows our queue overflowing.
    congested_round: CongestedRound,
    /// The peer's receive rate in the latest sample that measured one
    /// ([`RateSample::receive_rate`]), and the round it came in.
    receive_rate: (f64, u64),
    segment_size: u64,
    max_cwnd: u64,
}

impl Bbr {
    /// Starts in STARTUP with a 10-packet window and no pacing rate.
    pub fn new(ctx: CcContext) -> Self {
        let segment_size = ctx.segment_size.max(1);
        Bbr {
            mode: BbrMode::Startup,
            cwnd: INITIAL_CWND * segment_size,
            prior_cwnd: 0,
            pacing_rate: None,
            btl_bw: MaxFilter::new(),
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            round_lost: 0,
            round_delivered: 0,
            full_bw: 0.0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: Instant::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            probe_rtt_min: None,
            app_limited_until: 0,
            timeout_at: None,
            ssthresh: None,
            train: AckTrain::new(),
            jump_bw: 0.0,
            jump_round: None,
            receive_rate: (0.0, 0),
            ack_aggregation: AckAggregation::new(),
            congested_round: CongestedRound::default(),
            random_loss: RandomLoss::default(),
            ceiling: ProbeCeiling::default(),
            segment_size,
            // Growing past the session window would only inflate the number.
            max_cwnd: ctx.max_window_packets.max(INITIAL_CWND) * segment_size,
        }
    }

    #[cfg(test)]
    /// The current state.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }

    /// Bottleneck bandwidth estimate, bytes/s; 0 before the first sample.
    pub fn btl_bw(&self) -> f64 {
        self.btl_bw.get()
    }

    /// Round-trip propagation time estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// This state's pacing gain over the bottleneck bandwidth estimate.
    pub fn pacing_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup => HIGH_GAIN,
            BbrMode::Drain => DRAIN_GAIN,
            BbrMode::ProbeBw => GAIN_CYCLE[self.cycle_idx],
            BbrMode::ProbeRtt => 1.0,
        }
    }

    fn cwnd_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup | BbrMode::Drain => STARTUP_CWND_GAIN,
            BbrMode::ProbeBw => CWND_GAIN,
            BbrMode::ProbeRtt => 1.0,
        }
    }

    #[cfg(test)]
    /// The rate STARTUP jumped to after the first flight, bytes/s; 0 if none.
    pub fn jump_bw(&self) -> f64 {
        self.jump_bw
    }

    /// Deviation: STARTUP starts from the first flight's ACK-train estimate
    /// instead of doubling from IW10. One round paced at the estimate with
    /// cwnd at its BDP; the rate samples of that round then take over, and
    /// an estimate they fall far short of is dropped ([`Self::check_jump`]). A
    /// lower bound is grown from at STARTUP's gains at once, as a rate
    /// sample would be: held at it for a round, the next round's samples
    /// could only repeat it.
    fn jump(&mut self, est: Estimate, rtt: Duration) {
        if self.mode != BbrMode::Startup || self.full_bw_reached {
            return;
        }
        let (pacing_gain, cwnd_gain) = if est.lower_bound {
            (HIGH_GAIN, STARTUP_CWND_GAIN)
        } else {
            (JUMP_PACING_GAIN, JUMP_CWND_GAIN)
        };
        let bw = est.bw;
        self.jump_bw = bw;
        self.jump_round = Some(self.round_count);
        // The estimate counts as the plateau's first round: STARTUP goes on
        // only while the rate samples beat it by FULL_BW_THRESH.
        if bw > self.full_bw {
            self.full_bw = bw;
            self.full_bw_count = 0;
        }
        let rate = pacing_gain * bw;
        if self.pacing_rate.is_none_or(|r| rate > r) {
            self.pacing_rate = Some(rate);
        }
        let rtt = self.min_rtt.unwrap_or(rtt).as_secs_f64();
        let cwnd = ((cwnd_gain * bw * rtt) as u64).saturating_add(QUANTA * self.segment_size);
        self.cwnd = self.cwnd.max(cwnd.min(self.max_cwnd));
    }

    /// The estimate rests on the peer's receive times. Once the round
    /// paced at it has been measured on our side, an estimate that the
    /// samples fall far short of (a peer stamping its packets close
    /// together, or a burst the link will not repeat) stops holding the
    /// pacing rate and the window up: STARTUP goes on from the samples, as
    /// if it had not jumped.
    fn check_jump(&mut self) {
        let Some(round) = self.jump_round else {
            return;
        };
        if !self.round_start || self.round_count < round + 2 {
            return;
        }
        self.jump_round = None;
        let bw = self.btl_bw.get();
        if self.full_bw_reached || bw <= 0.0 {
            return;
        }
        if bw * JUMP_CHECK_SHORTFALL >= self.jump_bw {
            return;
        }
        self.full_bw = bw;
        self.full_bw_count = 0;
        self.pacing_rate = Some(HIGH_GAIN * bw);
        self.cwnd = self
            .cwnd
            .min(self.inflight(STARTUP_CWND_GAIN))
            .max(MIN_CWND * self.segment_size);
    }

    /// gain × BDP + quanta, bytes (draft-00 BBRInflight).
    fn inflight(&self, gain: f64) -> u64 {
        match self.min_rtt {
            None => INITIAL_CWND * self.segment_size,
            Some(rtt) => ((gain * self.btl_bw.get() * rtt.as_secs_f64()) as u64)
                .saturating_add(QUANTA * self.segment_size),
        }
    }

    fn update_bw(&mut self, s: &RateSample, app_limited: bool) {
        self.round_start = false;
        if !(s.delivery_rate > 0.0 && s.delivery_rate.is_finite()) || s.interval.is_zero() {
            return;
        }
        // A round ends when a packet sent after the previous round ended is acknowledged.
        if s.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = s.total_delivered;
            self.round_count += 1;
            self.round_start = true;
        }
        if !app_limited || s.delivery_rate >= self.btl_bw.get() {
            self.btl_bw.update(self.round_count, s.delivery_rate);
        }
    }

    /// Deviation (BBRv3's `bw_lo`, see [`congested_round`]): after a round
    /// that overflowed the queue, BtlBw falls to the most that round
    /// delivered.
    fn adapt_to_congestion(&mut self, s: &RateSample) {
        let congested = self.congested_round.on_sample(
            self.round_start,
            self.min_rtt,
            self.random_loss.get(),
            s,
        );
        if let Some(bw_latest) = congested.filter(|_| self.full_bw_reached) {
            self.btl_bw.cap(bw_latest);
        }
    }

    fn update_cycle_phase(&mut self, now: Instant, s: &RateSample) {
        if self.mode != BbrMode::ProbeBw {
            return;
        }
        let full_length = now - self.cycle_stamp > self.min_rtt.unwrap_or_default();
        let gain = self.pacing_gain();
        let prior_in_flight = s.in_flight + s.newly_acked + s.newly_lost;
        let next = if gain > 1.0 {
            // Probe until the extra data is in flight or the queue overflows.
            full_length && (s.newly_lost > 0 || prior_in_flight >= self.probe_inflight(gain))
        } else if gain < 1.0 {
            // Drain until the queue the probe made is gone.
            full_length || prior_in_flight <= self.inflight(1.0)
        } else {
            full_length
        };
        if next {
            self.advance_cycle(now);
        }
    }

    fn advance_cycle(&mut self, now: Instant) {
        self.cycle_idx = (self.cycle_idx + 1) % GAIN_CYCLE.len();
        self.cycle_stamp = now;
        match self.cycle_idx {
            0 => self.ceiling.on_probe_start(),
            // The probe's packets are acknowledged or lost by now.
            PROBE_JUDGED_PHASE => {
                let p = self.random_loss.get();
                let floor = (self.inflight(1.0) as f64 / (1.0 - p)) as u64;
                let bound = self.inflight(CWND_GAIN);
                self.ceiling
                    .on_probe_judged(p, floor, bound, self.segment_size);
            }
            _ => {}
        }
    }

    /// In-flight data a probe at `gain` aims for, within the ceiling.
    fn probe_inflight(&self, gain: f64) -> u64 {
        let target = self.inflight(gain);
        self.ceiling.get().map_or(target, |c| target.min(c))
    }

    fn check_full_bw_reached(&mut self, s: &RateSample, app_limited: bool) {
        if self.full_bw_reached {
            return;
        }
        // Deviation (BBRv2's startup exit, draft-cardwell-iccrg-bbr-
        // congestion-control-02 §4.3.1.3): a round losing more than
        // STARTUP_LOSS_THRESH of what it delivered while the RTT shows a
        // queue ends STARTUP, so a queue smaller than the BDP is not
        // overrun for three more rounds.
        self.round_lost += s.newly_lost;
        self.round_delivered += s.newly_acked;
        if self.round_start {
            // Only loss with a standing queue (RTT well above the minimum):
            // random loss is not a sign of a full pipe. Queueing on the ACK
            // path (full duplex) is not ours and does not count.
            let rtt = s.rtt.saturating_sub(s.ack_queue_delay);
            let queued = self
                .min_rtt()
                .is_some_and(|m| rtt.as_secs_f64() > m.as_secs_f64() * STARTUP_QUEUE_RTT_RATIO);
            let lossy = queued
                && self.round_lost as f64
                    > STARTUP_LOSS_THRESH * (self.round_lost + self.round_delivered) as f64;
            self.round_lost = 0;
            self.round_delivered = 0;
            if lossy {
                self.full_bw_reached = true;
                return;
            }
        }
        if !self.round_start || app_limited {
            return;
        }
        let bw = self.btl_bw.get();
        if bw >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, now: Instant, s: &RateSample) {
        if self.mode == BbrMode::Startup && self.full_bw_reached {
            self.mode = BbrMode::Drain;
            self.ssthresh = Some(self.inflight(1.0));
        }
        if self.mode == BbrMode::Drain && s.in_flight <= self.inflight(1.0) {
            self.enter_probe_bw(now, s.total_delivered);
        }
    }

    fn enter_probe_bw(&mut self, now: Instant, seed: u64) {
        self.mode = BbrMode::ProbeBw;
        // Flows that start together should not probe in lockstep; the
        // delivered count differs between them and is reproducible.
        let offset = (mix(seed) % CYCLE_RAND) as usize;
        self.cycle_idx = GAIN_CYCLE.len() - 1 - offset;
        self.advance_cycle(now);
    }

    fn update_min_rtt(&mut self, now: Instant, s: &RateSample) {
        // A sample this close to RTprop shows the path all but empty:
        // draining it in PROBE_RTT would only find the same minimum.
        if self
            .min_rtt
            .is_some_and(|m| !s.rtt.is_zero() && s.rtt <= m.mul_f64(SIMILAR_RTT))
        {
            self.min_rtt_stamp = now;
        }
        if !s.rtt.is_zero() && self.min_rtt.is_none_or(|m| s.rtt < m) {
            self.min_rtt = Some(s.rtt);
            self.min_rtt_stamp = now;
        }
        // Deviation (BBRv3's two filters, see the module docs): an expired
        // RTprop still sizes PROBE_RTT's cwnd, and what PROBE_RTT measures
        // replaces it when PROBE_RTT ends.
        let expired = self.min_rtt.is_some() && now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if expired && self.mode != BbrMode::ProbeRtt {
            self.save_cwnd();
            self.mode = BbrMode::ProbeRtt;
            self.probe_rtt_done = None;
            self.probe_rtt_min = None;
        }
        if self.mode != BbrMode::ProbeRtt {
            return;
        }
        if !s.rtt.is_zero() {
            self.probe_rtt_min = Some(self.probe_rtt_min.map_or(s.rtt, |m| m.min(s.rtt)));
        }
        self.app_limited_until = s.total_delivered + s.in_flight;
        // Deviation: a sample within SIMILAR_RTT of RTprop has measured it
        // again, and holding the window down longer only idles the link.
        let measured_again = self
            .probe_rtt_min
            .zip(self.min_rtt)
            .is_some_and(|(probe, min)| probe <= min.mul_f64(SIMILAR_RTT));
        let held = match self.probe_rtt_done {
            None if s.in_flight <= self.probe_rtt_cwnd() => {
                // The queue is drained: hold for 200 ms and one full round.
                self.probe_rtt_done = Some(now + PROBE_RTT_DURATION);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = s.total_delivered;
                false
            }
            Some(done) => {
                self.probe_rtt_round_done |= self.round_start;
                self.probe_rtt_round_done && now > done
            }
            None => false,
        };
        if measured_again || held {
            // Measured again, RTprop only falls: a creep of up to 12.5 %
            // per PROBE_RTT would add up.
            if let Some(measured) = self.probe_rtt_min.take() {
                self.min_rtt = Some(match self.min_rtt {
                    Some(min) if measured_again => min.min(measured),
                    _ => measured,
                });
            }
            self.min_rtt_stamp = now;
            self.restore_cwnd();
            if self.full_bw_reached {
                self.enter_probe_bw(now, s.total_delivered);
            } else {
                self.mode = BbrMode::Startup;
            }
        }
    }

    fn save_cwnd(&mut self) {
        // Keep the larger if already reduced, so a second cut does not lose it.
        self.prior_cwnd = if self.timeout_at.is_none() && self.mode != BbrMode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    fn set_pacing_rate(&mut self) {
        // Until the pipe is full the rate only rises, from HIGH_GAIN × the
        // window over the RTT at the first sample (Linux
        // `bbr_init_pacing_rate_from_rtt`): a first sample of a small
        // request sent before the data would start the data at a trickle.
        if self.pacing_rate.is_none() {
            if let Some(rtt) = self.min_rtt.filter(|r| !r.is_zero()) {
                self.pacing_rate = Some(HIGH_GAIN * self.cwnd as f64 / rtt.as_secs_f64());
            }
        }
        let bw = self.btl_bw.get();
        if bw <= 0.0 {
            return;
        }
        let mut rate = self.pacing_gain() * bw;
        if self.mode == BbrMode::ProbeBw {
            rate /= 1.0 - self.random_loss.get();
            // No slower than the peer is receiving: a queue built while the
            // link was slow drains at once when it speeds up.
            let (receive_rate, round) = self.receive_rate;
            if self.pacing_gain() >= 1.0 && round == self.round_count {
                rate = rate.max(receive_rate.min(RECEIVE_RATE_MAX_GAIN * bw));
            }
        }
        // Until the pipe is full, a lower sample must not slow the startup.
        if self.full_bw_reached || self.pacing_rate.is_none_or(|r| rate > r) {
            self.pacing_rate = Some(rate);
        }
    }

    fn set_cwnd(&mut self, s: &RateSample) {
        // Data whose ACK waits in the other direction's queue is in flight
        // without being queued by us: one BtlBw × that delay more, not scaled
        // by the gain, so our own queue stays within what v1 allows.
        let ack_path = (self.btl_bw.get() * s.ack_queue_delay.as_secs_f64()) as u64;
        let aggregation = self
            .ack_aggregation
            .cwnd_bonus(self.btl_bw.get(), self.full_bw_reached);
        let mut target = self
            .inflight(self.cwnd_gain())
            .saturating_add(ack_path)
            .saturating_add(aggregation);
        // Only the probe is held under the ceiling: cruising at BtlBw keeps
        // about one BDP in flight anyway, and cwnd's headroom there absorbs
        // ACK loss and aggregation. The ceiling bounds the whole window, as
        // BBRv3's inflight_hi does (draft-ietf-ccwg-bbr, BBRBoundCwndForModel):
        // it was measured in flight, ACK path and aggregation included, and
        // adding them again let every probe overflow a 20-packet queue
        // in bursts. Never below what cruising over the ACK path needs.
        if self.mode == BbrMode::ProbeBw && self.pacing_gain() > 1.0 {
            if let Some(ceiling) = self.ceiling.get() {
                target = target.min(ceiling.max(self.inflight(1.0).saturating_add(ack_path)));
            }
        }
        if self.full_bw_reached {
            self.cwnd = (self.cwnd + s.newly_acked).min(target);
        } else if self.cwnd < target || s.total_delivered < INITIAL_CWND * self.segment_size {
            self.cwnd += s.newly_acked;
        }
        self.cwnd = self
            .cwnd
            .min(self.max_cwnd)
            .max(MIN_CWND * self.segment_size);
        if self.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    /// cwnd while PROBE_RTT holds (draft-02 BBRProbeRTTCwnd): half the
    /// estimated BDP, at least [`MIN_CWND`] packets.
    fn probe_rtt_cwnd(&self) -> u64 {
        let bdp = match self.min_rtt {
            None => 0,
            Some(rtt) => (PROBE_RTT_CWND_GAIN * self.btl_bw.get() * rtt.as_secs_f64()) as u64,
        };
        bdp.max(MIN_CWND * self.segment_size)
    }
}

/// SplitMix64's finaliser: spreads nearby seeds over all start phases.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Controller for Bbr {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Bbr
    }

    fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.train.on_sent(now, bytes);
    }

    fn on_ack_frame(&mut self, _now: Instant, peer_rx_us: Option<u64>) {
        self.train
            .on_frame(peer_rx_us.map(|us| Instant::from_nanos(us.saturating_mul(1000))));
    }

    fn on_ack(&mut self, now: Instant, acked: &Acked, _rtt: &RttEstimator) {
        let rx = acked
            .peer_rx_us
            .map(|us| Instant::from_nanos(us.saturating_mul(1000)));
        if let Some(est) = self.train.on_ack(now, acked.sent_at, acked.bytes, rx) {
            self.jump(est, now - acked.sent_at);
        }
        // A packet sent after the RTO got through: the path works again.
        if self.timeout_at.is_some_and(|t| acked.sent_at >= t) {
            self.timeout_at = None;
            self.restore_cwnd();
        }
    }

    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool {
        match event.cause {
            Cause::Loss => {
                if let Some(est) = self.train.on_lost(now, event.sent_at, event.packets) {
                    self.jump(est, now - event.sent_at);
                }
            }
            Cause::Timeout => self.train.abort(),
            Cause::Ecn | Cause::SendFailure => {}
        }
        if event.cause != Cause::Timeout {
            return false;
        }
        self.save_cwnd();
        self.timeout_at = Some(now);
        // As Linux: STARTUP's plateau detection starts over after an RTO.
        self.full_bw = 0.0;
        let before = self.cwnd;
        self.cwnd = MIN_CWND * self.segment_size;
        self.cwnd < before
    }

    fn on_rate_sample(&mut self, now: Instant, s: &RateSample) {
        let app_limited = s.is_app_limited || s.prior_delivered < self.app_limited_until;
        self.update_bw(s, app_limited);
        self.check_jump();
        self.adapt_to_congestion(s);
        if s.receive_rate > 0.0 {
            self.receive_rate = (s.receive_rate, self.round_count);
        }
        self.ack_aggregation.on_ack(
            now,
            self.round_start,
            self.btl_bw.get(),
            s.newly_acked,
            self.cwnd,
            self.segment_size,
        );
        if self.mode == BbrMode::ProbeBw {
            let prior_in_flight = s.in_flight + s.newly_acked + s.newly_lost;
            self.ceiling
                .on_sample(prior_in_flight, s.newly_acked, s.newly_lost);
        }
        self.update_cycle_phase(now, s);
        self.check_full_bw_reached(s, app_limited);
        self.check_drain(now, s);
        self.update_min_rtt(now, s);
        // Cruise phases after the one following the probe: losses detected
        // then are of packets sent without a probe's queue.
        let eligible = self.mode == BbrMode::ProbeBw && self.cycle_idx >= 3;
        self.random_loss
            .on_sample(self.round_start, eligible, self.min_rtt, s);
        self.set_pacing_rate();
        self.set_cwnd(s);
    }

    fn on_spurious_loss(&mut self, _now: Instant) {
        if self.timeout_at.take().is_some() {
            self.restore_cwnd();
        }
    }

    fn on_spurious_timeout(&mut self, now: Instant) {
        self.on_spurious_loss(now);
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.pacing_rate
    }

    fn unpaced(&self) -> bool {
        self.mode == BbrMode::Startup && !self.full_bw_reached && self.train.awaits_flight()
    }

    fn in_slow_start(&self) -> bool {
        self.mode == BbrMode::Startup
    }

    fn state_name(&self) -> &'static str {
        match self.mode {
            BbrMode::Startup => "startup",
            BbrMode::Drain => "drain",
            BbrMode::ProbeBw => "probe_bw",
            BbrMode::ProbeRtt => "probe_rtt",
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn metrics(&self) -> ControllerMetrics {
        ControllerMetrics {
            window: self.cwnd,
            ssthresh: self.ssthresh,
        }
    }
}

#[cfg(test)]
mod tests;
