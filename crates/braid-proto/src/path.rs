//! One connection of a session: its packet-number space, what it has in
//! flight, loss detection and retransmission timer, its congestion
//! controller, and the packets it has received and must acknowledge.
//!
//! Loss detection follows RFC 9002 §6 and RFC 8985 (RACK): a packet is lost
//! when `packet_threshold` later packets were acknowledged, or when a later
//! packet was acknowledged and the packet is older than the reordering time
//! threshold. Reordering raises the packet threshold to the distance seen,
//! and each loss that proves spurious widens the time threshold. A tail-loss
//! probe (RFC 8985 §7) goes out two RTTs after the last send when ACKs stop,
//! so a lost tail costs about two RTTs rather than an RTO.
//!
//! Each ACK also yields a delivery-rate sample
//! (draft-cheng-iccrg-delivery-rate-estimation) for rate-based controllers.

use crate::ack_floor::AckFloor;
use crate::cc::{Acked, Cause, CongestionEvent, Controller, EceReceiver, RateSample};
use crate::owd::AckPathDelay;
use crate::pacing::{Pacer, AVOIDANCE_GAIN, SLOW_START_GAIN};
use crate::range_set::RangeSet;
use crate::rtt::{RtoConfig, RttEstimator};
use crate::send_stream::SendStream;
use crate::stats::{PathSample, PathState, PathStats};
use crate::wire::{AckFrame, MAX_ACK_RANGES};
use crate::Instant;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Packet threshold ceiling after reordering is seen.
const MAX_PACKET_THRESHOLD: u64 = 1024;
/// RACK's reordering-window multiplier ceiling (RFC 8985 §6.2: 16? it grows with DSACKs; we cap here).
const MAX_REO_MULT: u32 = 16;
/// Lost packets are remembered this many RTOs to detect spurious losses.
const LOST_MEMORY_RTOS: u32 = 4;
/// Received packet-number ranges remembered for duplicate detection; the
/// newest `MAX_ACK_RANGES` of them go in each ACK.
const RECEIVED_RANGES: usize = 1024;
/// Floor of the tail-loss probe timeout (RFC 8985 §7.2 uses 10 ms).
const MIN_PTO: Duration = Duration::from_millis(10);
/// Packets the first flight may send at once, before any RTT is known
/// (RFC 9002 §7.2's initial window).
const INITIAL_BURST_PACKETS: u64 = 10;
/// Round trips a delivery-rate maximum is kept before a lower sample may
/// replace it (BBR keeps its bandwidth maximum for 10 rounds; shorter here
/// so the scheduler follows a path that slows down).
const DELIVERY_RATE_RTTS: u32 = 4;

#[derive(Debug, Clone, Copy)]
pub(crate) struct SentPacket {
    pub sent_at: Instant,
    /// Window charge: stream payload bytes (at least 1 for a data packet).
    pub charge: u64,
    /// Offset of the segment carried, if any.
    pub segment: Option<u64>,
    pub retransmission: bool,
    // Delivery-rate state at send time.
    delivered: u64,
    delivered_time: Instant,
    /// The peer's clock at `delivered_time`'s delivery, µs, when known.
    delivered_rx_us: Option<u64>,
    first_sent_time: Instant,
    app_limited: bool,
}

/// What an acknowledged packet contributes to the ACK's rate sample.
#[derive(Debug, Clone, Copy)]
struct RateState {
    prior_delivered: u64,
    prior_time: Instant,
    prior_rx_us: Option<u64>,
    send_elapsed: Duration,
    rtt: Duration,
    app_limited: bool,
}

/// What an ACK frame did, for the session to act on.
#[derive(Debug, Default)]
pub(crate) struct AckOutcome {
    /// Packets newly acknowledged.
    pub newly_acked: u64,
    /// Lost packets found to have arrived after all.
    pub spurious: u64,
    /// Packets declared lost by this ACK's evidence.
    pub lost: u64,
    /// Whether the path came back from probing.
    pub revived: bool,
}

/// Why an ACK frame cannot come from an honest peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckError {
    /// It acknowledges a packet number not sent yet.
    NeverSent,
    /// It acknowledges a packet number we skipped on purpose: the peer
    /// acknowledges what it did not receive (an optimistic ACK).
    Skipped,
}

/// Skipped packet numbers remembered per path; older ones are forgotten
/// (an ACK covering one is then just not caught).
const SKIPPED_REMEMBERED: usize = 16;

#[derive(Debug)]
pub(crate) struct Path {
    pub id: u8,
    pub state: PathState,
    next_pn: u64,
    /// Packet numbers left out on purpose, most recent last.
    skipped: VecDeque<u64>,
    /// The next packet number to leave out (0: not chosen yet), and the
    /// gap it was chosen in.
    pub skip_at: u64,
    pub skip_gap: u64,
    /// In flight, keyed by packet number.
    sent: BTreeMap<u64, SentPacket>,
    /// Declared lost, remembered for a while to detect spurious losses.
    lost: BTreeMap<u64, SentPacket>,
    in_flight: u64,
    largest_acked: Option<u64>,
    pub rtt: RttEstimator,
    pub cc: Box<dyn Controller>,
    /// Consecutive RTO expiries without an acknowledgement.
    pub backoffs: u32,
    /// Time the retransmission timer counts from.
    rto_anchor: Instant,
    pub loss_deadline: Option<Instant>,
    packet_threshold: u64,
    reo_mult: u32,
    reo_raised_at: Option<Instant>,
    // Delivery-rate estimation.
    delivered: u64,
    delivered_time: Instant,
    /// The peer's receive time of the newest delivery, µs (see [`AckFrame::rx_timestamp_us`]).
    delivered_rx_us: Option<u64>,
    first_sent_time: Instant,
    /// `delivered` value until which samples are application-limited; 0 = not.
    app_limited_until: u64,
    pub pacer: Pacer,
    /// When the pacer next lets a packet go, if it held one back.
    pub pacing_wakeup: Option<Instant>,
    /// Send time of the newest ack-eliciting packet.
    last_eliciting: Instant,
    /// When the tail-loss probe of the current flight fired, if it has.
    tlp_fired: Option<Instant>,
    /// One packet may exceed the window and the pacer: the tail-loss probe.
    pub tlp_credit: bool,
    // Receiving side.
    pub received: RangeSet,
    /// Which received ranges our ACKs no longer need to list.
    ack_floor: AckFloor,
    /// Packets below this were forgotten: a late one is not listed again.
    forgotten_below: u64,
    largest_received_at: Instant,
    /// Receive time of the largest ack-eliciting packet, for
    /// [`AckFrame::rx_timestamp_us`]: the sender can date only packets it
    /// tracks, and ACK-only packets are not tracked.
    largest_eliciting: Option<(u64, Instant)>,
    /// Origin of this path's ACK timestamps, ours and (in ACKs) the peer's.
    epoch: Instant,
    /// Queueing on the path our ACKs come back on.
    ack_path: AckPathDelay,
    /// Ack-eliciting packets since our last ACK on this path.
    pub unacked_eliciting: u32,
    pub ack_deadline: Option<Instant>,
    /// Reordering or a gap: acknowledge at once.
    pub ack_now: bool,
    pub ce_received: u64,
    peer_ce: u64,
    /// MB-ECN level of what arrives here, and an update owed to the peer.
    ece: EceReceiver,
    pub ece_pending: Option<u16>,
    // Frames waiting for a packet on this path.
    pub probe_pending: bool,
    pub close_pending: bool,
    pub hello_pending: bool,
    pub hello_ack_pending: bool,
    pub last_sent: Instant,
    pub stats: PathStats,
    sampled_acked: u64,
    /// Windowed maximum of recent delivery-rate samples, bytes/s, and when
    /// it was taken (the scheduler's estimate of what the path delivers).
    delivery_rate: f64,
    delivery_rate_at: Instant,
    /// First rate sample of the current group of samples sharing one
    /// delivery point (`prior_delivered`, bytes delivered, interval); see
    /// `update_delivery_rate`.
    rate_group: Option<(u64, u64, Duration)>,
    /// Bytes of the initial window: groups starting no later are measured
    /// by difference.
    first_flight: u64,
}

impl Path {
    pub fn new(
        id: u8,
        cc: Box<dyn Controller>,
        packet_threshold: u32,
        mtu: u16,
        now: Instant,
    ) -> Self {
        Path {
            id,
            state: PathState::Active,
            next_pn: 0,
            skipped: VecDeque::new(),
            skip_at: 0,
            skip_gap: 0,
            sent: BTreeMap::new(),
            lost: BTreeMap::new(),
            in_flight: 0,
            largest_acked: None,
            rtt: RttEstimator::default(),
            cc,
            backoffs: 0,
            rto_anchor: now,
            loss_deadline: None,
            packet_threshold: u64::from(packet_threshold),
            reo_mult: 0,
            reo_raised_at: None,
            delivered: 0,
            delivered_time: now,
            delivered_rx_us: None,
            first_sent_time: now,
            app_limited_until: 0,
            pacer: Pacer::new(now, INITIAL_BURST_PACKETS * u64::from(mtu)),
            pacing_wakeup: None,
            last_eliciting: now,
            tlp_fired: None,
            tlp_credit: false,
            received: RangeSet::new(RECEIVED_RANGES),
            ack_floor: AckFloor::default(),
            forgotten_below: 0,
            largest_received_at: now,
            largest_eliciting: None,
            epoch: now,
            ack_path: AckPathDelay::default(),
            unacked_eliciting: 0,
            ack_deadline: None,
            ack_now: false,
            ce_received: 0,
            peer_ce: 0,
            ece: EceReceiver::default(),
            ece_pending: None,
            probe_pending: false,
            close_pending: false,
            hello_pending: false,
            hello_ack_pending: false,
            last_sent: now,
            stats: PathStats::default(),
            sampled_acked: 0,
            delivery_rate: 0.0,
            delivery_rate_at: now,
            rate_group: None,
            first_flight: INITIAL_BURST_PACKETS * u64::from(mtu),
        }
    }

    pub fn next_packet_number(&mut self) -> u64 {
        let pn = self.next_pn;
        self.next_pn += 1;
        pn
    }

    /// The number the next packet will carry.
    pub fn peek_packet_number(&self) -> u64 {
        self.next_pn
    }

    /// Leaves out the next packet number (RFC 9000 §21.4): no honest peer
    /// can acknowledge it.
    pub fn skip_packet_number(&mut self) {
        if self.skipped.len() == SKIPPED_REMEMBERED {
            self.skipped.pop_front();
        }
        self.skipped.push_back(self.next_pn);
        self.next_pn += 1;
    }

    /// Checks an ACK frame's ranges before anything acts on them.
    pub fn validate_ack(&self, ack: &AckFrame) -> Result<(), AckError> {
        for &(lo, hi) in &ack.ranges {
            if hi >= self.next_pn {
                return Err(AckError::NeverSent);
            }
            // `skipped` is in ascending order: the first at or above `lo`.
            let i = self.skipped.partition_point(|&s| s < lo);
            if self.skipped.get(i).is_some_and(|&s| s <= hi) {
                return Err(AckError::Skipped);
            }
        }
        Ok(())
    }

    pub fn is_usable(&self) -> bool {
        self.state != PathState::Closed
    }

    pub fn has_in_flight(&self) -> bool {
        !self.sent.is_empty()
    }

    /// Whether the window admits a data packet of `charge` bytes.
    pub fn can_send_data(&self, charge: u64) -> bool {
        self.state == PathState::Active
            && (self.in_flight == 0
                || self.in_flight + charge <= self.cc.window()
                || self.tlp_credit)
    }

    /// The controller's pacing rate, or a gain over window / sRTT; `None`
    /// before the first RTT sample.
    pub fn pacing_rate(&self) -> Option<f64> {
        self.cc.pacing_rate().or_else(|| {
            let srtt = self
                .rtt
                .has_sample()
                .then(|| self.rtt.srtt_or(Duration::ZERO))?;
            let gain = if self.cc.in_slow_start() {
                SLOW_START_GAIN
            } else {
                AVOIDANCE_GAIN
            };
            Some(gain * self.cc.window() as f64 / srtt.as_secs_f64().max(1e-4))
        })
    }

    /// When a data packet of `charge` bytes may leave under pacing (`None` = now).
    pub fn pacing_delay(&mut self, now: Instant, charge: u64, mtu: u64) -> Option<Instant> {
        if self.tlp_credit {
            return None;
        }
        let rate = self.pacing_rate();
        self.pacer.set_rate(now, rate, mtu);
        self.pacer.delay(now, charge)
    }

    /// The sender had nothing to send while this path's window had room:
    /// rate samples until what is in flight now is delivered understate the path.
    pub fn on_app_limited(&mut self) {
        if self.state == PathState::Active && self.in_flight < self.cc.window() {
            self.app_limited_until = (self.delivered + self.in_flight).max(1);
        }
    }

    /// Records an ack-eliciting packet.
    pub fn on_sent(
        &mut self,
        now: Instant,
        pn: u64,
        charge: u64,
        segment: Option<u64>,
        retransmission: bool,
    ) {
        if self.sent.is_empty() {
            self.rto_anchor = now;
            // Rate samples start afresh after an idle period (draft §3.2).
            self.first_sent_time = now;
            self.delivered_time = now;
            self.delivered_rx_us = None;
        }
        let packet = SentPacket {
            sent_at: now,
            charge,
            segment,
            retransmission,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            delivered_rx_us: self.delivered_rx_us,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited_until != 0,
        };
        self.in_flight += charge;
        self.last_eliciting = now;
        if self.tlp_credit && charge > 0 {
            self.tlp_credit = false;
        }
        self.pacer.on_sent(now, charge);
        self.cc.on_sent(now, charge);
        self.sent.insert(pn, packet);
    }

    /// When the tail-loss probe fires: two RTTs after the newest send, plus
    /// the peer's ACK delay (RFC 8985 §7.2), once per flight.
    pub fn tlp_deadline(&self, max_ack_delay: Duration) -> Option<Instant> {
        if self.state != PathState::Active || self.sent.is_empty() || self.tlp_fired.is_some() {
            return None;
        }
        if !self.rtt.has_sample() {
            return None;
        }
        let pto = (self.rtt.srtt_or(Duration::ZERO) * 2).max(MIN_PTO) + max_ack_delay;
        Some(self.last_eliciting + pto)
    }

    /// The tail-loss probe fired: returns the segment to probe with when
    /// there is nothing new to send (the newest one in flight here).
    pub fn on_tlp(&mut self, now: Instant) -> Option<u64> {
        self.tlp_fired = Some(now);
        self.tlp_credit = true;
        self.stats.tail_loss_probes += 1;
        self.sent.values().rev().find_map(|p| p.segment)
    }

    /// When the retransmission (or, while probing, the probe) timer fires.
    pub fn rto_deadline(&self, cfg: &RtoConfig, max_probe: Duration) -> Option<Instant> {
        if self.state == PathState::Closed {
            return None;
        }
        if self.state == PathState::Probing {
            let wait = self.rtt.rto(cfg, self.backoffs).min(max_probe);
            return Some(self.last_sent + wait);
        }
        if self.sent.is_empty() {
            return None;
        }
        // RFC 8985 §7.3: the RTO is re-armed when the probe goes out.
        let anchor = self
            .tlp_fired
            .map_or(self.rto_anchor, |t| t.max(self.rto_anchor));
        Some(anchor + self.rtt.rto(cfg, self.backoffs))
    }

    /// The time threshold of RFC 8985 §6.2: RTT plus a reordering window
    /// that starts at RTT/8 (RFC 9002's 9/8) and widens per spurious loss.
    fn loss_delay(&self) -> Duration {
        let rtt = self
            .rtt
            .srtt_or(Duration::from_millis(100))
            .max(self.rtt.latest());
        let reo = (self.rtt.min() / 4) * self.reo_mult;
        // RFC 8985 §6.2: the reordering window never exceeds sRTT.
        let reo = reo.min(self.rtt.srtt_or(rtt));
        rtt + (rtt / 8).max(reo).max(Duration::from_millis(1))
    }

    /// Processes an ACK frame for this path's packets.
    pub fn on_ack_frame(
        &mut self,
        now: Instant,
        ack: &AckFrame,
        send: &mut SendStream,
    ) -> AckOutcome {
        let mut out = AckOutcome::default();
        let largest_before = self.largest_acked;
        let lost_before = self.stats.lost_bytes;
        let mut newly: Vec<(u64, SentPacket)> = Vec::new();
        // Ranges below every packet still tracked (sent or declared lost)
        // acknowledge nothing new: most of them, as ACKs repeat old ranges.
        let oldest = match (self.sent.keys().next(), self.lost.keys().next()) {
            (Some(&a), Some(&b)) => a.min(b),
            (Some(&a), None) | (None, Some(&a)) => a,
            (None, None) => u64::MAX,
        };
        for &(lo, hi) in &ack.ranges {
            debug_assert!(hi < self.next_pn, "validated by validate_ack");
            if hi < oldest {
                continue;
            }
            newly.extend(self.sent.range(lo..=hi).map(|(&pn, &p)| (pn, p)));
            let spurious: Vec<(u64, SentPacket)> =
                self.lost.range(lo..=hi).map(|(&pn, &p)| (pn, p)).collect();
            for (pn, p) in spurious {
                self.lost.remove(&pn);
                out.spurious += 1;
                self.stats.spurious_losses += 1;
                // It arrived after all: it still counts as delivered, and the
                // reordering it reveals widens both loss thresholds.
                self.delivered += p.charge;
                if let Some(largest) = self.largest_acked.filter(|&l| l > pn) {
                    let distance = (largest - pn + 1).min(MAX_PACKET_THRESHOLD);
                    self.packet_threshold = self.packet_threshold.max(distance);
                }
                // At most once per round trip (RFC 8985 §6.2 step 4).
                if self
                    .reo_raised_at
                    .is_none_or(|t| now >= t + self.rtt.srtt_or(Duration::ZERO))
                {
                    self.reo_mult = (self.reo_mult + 1).min(MAX_REO_MULT);
                    self.reo_raised_at = Some(now);
                }
                self.cc.on_spurious_loss(now);
                if let Some(offset) = p.segment {
                    send.on_acked(offset);
                }
            }
        }
        if newly.is_empty() {
            return out;
        }
        self.tlp_fired = None;
        self.tlp_credit = false;
        newly.sort_unstable_by_key(|&(pn, _)| pn);
        let (largest_pn, largest) = *newly.last().expect("non-empty");
        // The peer's receive time dates this delivery when the ACK's largest
        // ack-eliciting packet, which it is the time of, is among the newly
        // acknowledged: ours is then the largest acknowledged so far (any
        // larger one in the ACK would be newly acknowledged or already so).
        let rx_us = largest_before
            .is_none_or(|l| largest_pn > l)
            .then_some(ack.rx_timestamp_us);
        if largest_before.is_none_or(|l| largest_pn > l) {
            self.largest_acked = Some(largest_pn);
            if largest_pn == ack.largest() {
                let delay = Duration::from_micros(ack.ack_delay_us).min(Duration::from_secs(1));
                self.rtt.update(now - largest.sent_at, delay);
                let forward =
                    ack.rx_timestamp_us as i64 - micros_since(largest.sent_at, self.epoch) as i64;
                let rtt = (now - largest.sent_at).saturating_sub(delay);
                self.ack_path.on_sample(now, rtt, forward);
            }
        }
        if let Some(before) = largest_before {
            if let Some(&(first, _)) = newly.first() {
                if first < before {
                    let distance = before - first + 1;
                    self.packet_threshold = self
                        .packet_threshold
                        .max(distance.min(MAX_PACKET_THRESHOLD));
                }
            }
        }
        let mut rate: Option<RateState> = None;
        let mut acked_bytes = 0;
        // A frame filling a hole below an earlier largest shows reordering:
        // its receive time is not its packets'.
        let in_order = largest_before.is_none_or(|l| newly[0].0 > l);
        self.cc.on_ack_frame(now, rx_us.filter(|_| in_order));
        for &(pn, p) in &newly {
            self.sent.remove(&pn);
            self.in_flight -= p.charge;
            out.newly_acked += 1;
            acked_bytes += p.charge;
            self.delivered += p.charge;
            self.delivered_time = now;
            self.delivered_rx_us = rx_us;
            if rate.is_none_or(|r| p.delivered >= r.prior_delivered) {
                rate = Some(RateState {
                    prior_delivered: p.delivered,
                    prior_time: p.delivered_time,
                    prior_rx_us: p.delivered_rx_us,
                    send_elapsed: p.sent_at - p.first_sent_time,
                    rtt: now - p.sent_at,
                    app_limited: p.app_limited,
                });
                self.first_sent_time = p.sent_at;
            }
            let acked = Acked {
                bytes: p.charge,
                sent_at: p.sent_at,
                retransmission: p.retransmission,
            };
            self.cc.on_ack(now, &acked, &self.rtt);
            if let Some(offset) = p.segment {
                send.on_acked(offset);
            }
        }
        self.rto_anchor = now;
        self.backoffs = 0;
        if self.state == PathState::Probing {
            self.state = PathState::Active;
            out.revived = true;
        }
        if ack.ce_count > self.peer_ce {
            let marks = ack.ce_count - self.peer_ce;
            self.peer_ce = ack.ce_count;
            self.stats.ecn_marks += marks;
            self.signal_congestion(now, Cause::Ecn, largest.sent_at, marks);
        }
        out.lost = self.detect_losses(now, send);
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        if let Some(r) = rate {
            let lost = self.stats.lost_bytes - lost_before;
            let sample = self.rate_sample(now, r, rx_us, acked_bytes, lost);
            self.update_delivery_rate(now, &sample);
            self.cc.on_rate_sample(now, &sample);
        }
        out
    }

    /// Keeps the largest rate sample of the last few round trips (BBR's
    /// BtlBw filter, shortened); an application-limited sample only raises it.
    ///
    /// Packets sent between the same two deliveries share one start of
    /// interval, and a sample's interval then includes any time the path
    /// sat idle before them: the first round trip of a path, or the gap
    /// after a first flight held to the initial window, would be read as a
    /// low rate until a packet sent after the gap is acknowledged, a queue
    /// later (NKP-0024 row 9: the fast path's 1024 packets/s read as ~900
    /// for over a second). Two samples of one group differ only by what
    /// arrived between their ACKs, so their difference measures the rate
    /// with the gap left out, over at least a quarter of the minimum RTT.
    /// Only for groups sent before the first flight was delivered: later,
    /// on a bursty link (examples/wifi-plus-lte), such short differences
    /// overstated the rate.
    fn update_delivery_rate(&mut self, now: Instant, s: &RateSample) {
        if s.delivery_rate <= 0.0 {
            return;
        }
        let mut rate = s.delivery_rate;
        match self.rate_group {
            Some((prior, delivered, interval)) if prior == s.prior_delivered => {
                let span = s.interval.saturating_sub(interval);
                if !s.is_app_limited
                    && s.delivered > delivered
                    && span >= self.rtt.min() / 4
                    && prior <= self.first_flight
                    && !span.is_zero()
                {
                    rate = rate.max((s.delivered - delivered) as f64 / span.as_secs_f64());
                }
            }
            _ => self.rate_group = Some((s.prior_delivered, s.delivered, s.interval)),
        }
        let window = self.rtt.srtt_or(Duration::from_secs(1)) * DELIVERY_RATE_RTTS;
        let expired = now >= self.delivery_rate_at + window;
        if rate >= self.delivery_rate || (expired && !s.is_app_limited) {
            self.delivery_rate = rate;
            self.delivery_rate_at = now;
        }
    }

    /// Bytes per second the path has recently delivered; 0 = not measured.
    pub fn delivery_rate(&self) -> f64 {
        self.delivery_rate
    }

    /// Bytes in flight (window charge).
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// draft-cheng-iccrg-delivery-rate-estimation §3.3: delivered bytes over
    /// the longer of the send and ACK intervals, so ACK compression cannot
    /// inflate the estimate. Where both ends of the interval carry the
    /// peer's receive timestamps, the ACK interval is measured on the
    /// receiver's clock instead: the ACK path's queueing then neither
    /// stretches it (a full-duplex peer's growing queue read as a bandwidth
    /// plateau) nor compresses it.
    fn rate_sample(
        &self,
        now: Instant,
        r: RateState,
        rx_us: Option<u64>,
        acked: u64,
        lost: u64,
    ) -> RateSample {
        let ack_elapsed = match (rx_us, r.prior_rx_us) {
            (Some(rx), Some(prior)) if rx >= prior => Duration::from_micros(rx - prior),
            _ => now - r.prior_time,
        };
        let interval = r.send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - r.prior_delivered;
        // An interval shorter than the minimum RTT cannot be right (§3.3).
        let valid = !interval.is_zero() && interval >= self.rtt.min().min(r.rtt);
        RateSample {
            delivery_rate: if valid {
                delivered as f64 / interval.as_secs_f64()
            } else {
                0.0
            },
            interval,
            delivered,
            prior_delivered: r.prior_delivered,
            total_delivered: self.delivered,
            rtt: r.rtt,
            is_app_limited: r.app_limited,
            newly_acked: acked,
            newly_lost: lost,
            in_flight: self.in_flight,
            ack_queue_delay: self.ack_path.get(),
        }
    }

    /// Declares lost what the threshold rules say is; arms the loss timer for the rest.
    pub fn detect_losses(&mut self, now: Instant, send: &mut SendStream) -> u64 {
        self.loss_deadline = None;
        let Some(largest) = self.largest_acked else {
            return 0;
        };
        let delay = self.loss_delay();
        let mut lost = 0;
        let mut newest_lost = None;
        while let Some((&pn, &p)) = self.sent.first_key_value() {
            if pn >= largest {
                break;
            }
            let by_count = largest - pn >= self.packet_threshold;
            let by_time = p.sent_at + delay <= now;
            if !(by_count || by_time) {
                self.loss_deadline = Some(p.sent_at + delay);
                break;
            }
            self.declare_lost(pn, send);
            newest_lost = Some(p.sent_at);
            lost += 1;
        }
        if let Some(sent_at) = newest_lost {
            self.signal_congestion(now, Cause::Loss, sent_at, lost);
        }
        self.forget_old_losses(now);
        lost
    }

    /// Tells the controller of a congestion signal and counts the window
    /// decrease it caused under its cause.
    pub fn signal_congestion(
        &mut self,
        now: Instant,
        cause: Cause,
        sent_at: Instant,
        packets: u64,
    ) {
        let event = CongestionEvent {
            cause,
            sent_at,
            packets,
        };
        if self.cc.on_congestion(now, &event) {
            match cause {
                Cause::Loss | Cause::SendFailure => self.stats.loss_decreases += 1,
                Cause::Timeout => self.stats.timeout_decreases += 1,
                Cause::Ecn => self.stats.ecn_decreases += 1,
            }
        }
    }

    fn declare_lost(&mut self, pn: u64, send: &mut SendStream) {
        let p = self.sent.remove(&pn).expect("declared packet is in flight");
        self.in_flight -= p.charge;
        self.stats.lost_packets += 1;
        self.stats.lost_bytes += p.charge;
        if let Some(offset) = p.segment {
            send.on_lost(offset);
        }
        self.lost.insert(pn, p);
    }

    fn declare_all_lost(&mut self, send: &mut SendStream) {
        while let Some((&pn, _)) = self.sent.first_key_value() {
            self.declare_lost(pn, send);
        }
    }

    fn forget_old_losses(&mut self, now: Instant) {
        let keep = self
            .rtt
            .srtt_or(Duration::from_secs(1))
            .max(Duration::from_millis(250))
            * LOST_MEMORY_RTOS;
        while let Some((&pn, p)) = self.lost.first_key_value() {
            if p.sent_at + keep > now && self.lost.len() <= 4 * MAX_PACKET_THRESHOLD as usize {
                break;
            }
            self.lost.remove(&pn);
        }
    }

    /// The retransmission timer fired: everything in flight is lost. Returns
    /// whether the path just started probing (two expiries in a row).
    pub fn on_rto(&mut self, now: Instant, send: &mut SendStream) -> bool {
        self.stats.timeouts += 1;
        let count = self.sent.len() as u64;
        let newest = self.sent.last_key_value().map(|(_, p)| p.sent_at);
        self.declare_all_lost(send);
        self.loss_deadline = None;
        self.tlp_fired = None;
        self.tlp_credit = false;
        self.backoffs += 1;
        self.rto_anchor = now;
        if let Some(sent_at) = newest {
            self.signal_congestion(now, Cause::Timeout, sent_at, count);
        }
        let started = self.state == PathState::Active && self.backoffs >= 2;
        if self.state != PathState::Closed && self.backoffs >= 2 {
            self.state = PathState::Probing;
            self.probe_pending = true;
        }
        started
    }

    /// The path is closed: all it had in flight must travel elsewhere.
    pub fn close(&mut self, send: &mut SendStream) {
        self.declare_all_lost(send);
        self.state = PathState::Closed;
        self.loss_deadline = None;
        self.ack_deadline = None;
        self.unacked_eliciting = 0;
        self.probe_pending = false;
    }

    /// Records a received packet number; returns false for a duplicate.
    pub fn on_received(
        &mut self,
        now: Instant,
        pn: u64,
        ack_eliciting: bool,
        cfg_delay: Duration,
        ack_every: u32,
    ) -> bool {
        if pn < self.forgotten_below {
            return true; // long declared lost by the sender: only its data counts
        }
        let largest = self.received.max();
        if !self.received.insert(pn) {
            return false;
        }
        if largest.is_none_or(|l| pn > l) {
            self.largest_received_at = now;
            if largest.is_some_and(|l| pn > l + 1) {
                self.ack_now = true; // a gap: tell the sender soon
            }
        } else {
            self.ack_now = true; // reordered or filling a gap
        }
        if ack_eliciting {
            if self.largest_eliciting.is_none_or(|(l, _)| pn > l) {
                self.largest_eliciting = Some((pn, now));
            }
            self.unacked_eliciting += 1;
            if self.unacked_eliciting >= ack_every {
                self.ack_now = true;
            }
            self.ack_deadline.get_or_insert(now + cfg_delay);
        }
        true
    }

    /// Whether an ACK should go out now.
    pub fn ack_due(&self, now: Instant) -> bool {
        let ack = self.ack_now || self.ack_deadline.is_some_and(|d| d <= now);
        (self.unacked_eliciting > 0 && ack) || self.ece_pending.is_some()
    }

    /// Whether a due ACK must go now rather than ride on a data packet
    /// about to leave: the delayed-ACK timer expired, or MB-ECN feedback
    /// is owed.
    pub fn is_ack_urgent(&self, now: Instant) -> bool {
        self.ack_deadline.is_some_and(|d| d <= now) || self.ece_pending.is_some()
    }

    /// Folds a received packet's MB-ECN level into the feedback owed.
    pub fn on_mbecn(&mut self, level: u8) {
        if let Some(ece) = self.ece.on_packet(level) {
            self.ece_pending = Some(ece);
        }
    }

    /// Builds the ACK frame for this path's received packets.
    pub fn ack_frame(&self, now: Instant, cumulative: u64, fin: bool, max_data: u64) -> AckFrame {
        AckFrame {
            ranges: self.received.iter_desc(MAX_ACK_RANGES).collect(),
            ack_delay_us: (now - self.largest_received_at).as_micros() as u64,
            cumulative,
            fin,
            max_data,
            ce_count: self.ce_received,
            rx_timestamp_us: micros_since(
                self.largest_eliciting
                    .map_or(self.largest_received_at, |(_, at)| at),
                self.epoch,
            ),
        }
    }

    pub fn on_ack_sent(&mut self, now: Instant) {
        // Only while our data shares the link with these ACKs: on an idle
        // return path the full history costs nothing, and its late reports
        // of packets an RTO declared lost undo the timeout (loss-30pct alone
        // with bbr took 11-18 RTOs instead of 3-15 without it, seeds 1-6).
        let sending = self.in_flight > 0 && self.rtt.has_sample();
        if let Some(largest) = self.received.max().filter(|_| sending) {
            if let Some(floor) = self.ack_floor.on_ack_sent(now, largest, self.rtt.min()) {
                self.received.forget_below(floor);
                self.forgotten_below = self.forgotten_below.max(floor);
            }
        }
        self.unacked_eliciting = 0;
        self.ack_deadline = None;
        self.ack_now = false;
    }

    /// Refreshes the snapshot fields of `stats`.
    pub fn snapshot(&self, cfg: &RtoConfig) -> PathStats {
        let mut s = self.stats;
        s.state = self.state;
        s.window = self.cc.window();
        s.in_flight = self.in_flight;
        s.srtt = self.rtt.srtt_or(Duration::ZERO);
        s.rto = self.rtt.rto(cfg, self.backoffs);
        if let Some((min, avg, max)) = self.rtt.min_avg_max() {
            (s.rtt_min, s.rtt_avg, s.rtt_max) = (min, avg, max);
        }
        s.rtt_samples = self.rtt.samples();
        s
    }

    /// A time-series point; `interval` is the time since the previous one and
    /// `delivered` the stream bytes this path has delivered so far.
    pub fn sample(
        &mut self,
        now: Instant,
        interval: Duration,
        cfg: &RtoConfig,
        delivered: u64,
    ) -> PathSample {
        let acked = delivered - self.sampled_acked;
        self.sampled_acked = delivered;
        PathSample {
            at_s: now.as_secs_f64(),
            path: self.id,
            window: self.cc.window(),
            srtt: self.rtt.srtt_or(Duration::ZERO),
            rto: self.rtt.rto(cfg, self.backoffs),
            in_flight: self.in_flight,
            throughput_bps: acked as f64 * 8.0 / interval.as_secs_f64().max(1e-9),
        }
    }
}

/// Microseconds from `epoch` to `t` (0 before it).
fn micros_since(t: Instant, epoch: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_micros() as u64
}
