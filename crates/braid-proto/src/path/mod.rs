//! One connection of a session: its packet numbers, what it has in flight,
//! its congestion controller and pacer, and the ACKs it owes the peer.
//!
//! Each part has its own file: [`sent`] (sent packets and loss detection),
//! [`delivery_rate`] (the delivery-rate estimate), [`ack_owed`] (what we owe
//! the peer in ACKs, with its [`range_set`] and [`ack_floor`]),
//! [`packet_number`], the [`pacing`] pacer with its wake-up, the
//! [`ack_path_delay`] estimate, the [`probe_timers`] (tail-loss probe,
//! retransmission timeout and its backoff), what was [`heard`] when, the
//! round trips measured without acknowledged packets ([`exchange_rtt`]),
//! the timeouts the give-up rules count with the losses that size a
//! silence ([`rto_count`]), the [`replay`] window, address [`validation`],
//! [`pmtud`] and [`short_headers`]; [`recovery`] says what ACK frames and
//! timeouts do to them all. This file holds the path together and sends
//! on it.

mod ack_floor;
mod ack_owed;
mod ack_path_delay;
mod delivery_rate;
mod exchange_rtt;
mod heard;
mod loss_tally;
mod pacing;
mod packet_number;
mod pmtud;
mod probe_timers;
mod range_set;
mod recovery;
mod replay;
mod rto_count;
mod sent;
mod short_headers;
mod validation;

pub(crate) use packet_number::AckError;
pub(crate) use validation::{Candidate, PathResponses};

use crate::cc::Controller;
use crate::rtt::{RtoConfig, RttEstimator};
use crate::stats::{PathSample, PathState, PathStats};
use crate::trace::PathTrace;
use crate::wire::AckFrame;
use crate::{Instant, PathId};
use ack_owed::{AcksOwed, Arrival};
use ack_path_delay::AckPathDelay;
use delivery_rate::DeliveryRate;
use exchange_rtt::ExchangeRtt;
use heard::Heard;
use pacing::{Pacer, AVOIDANCE_GAIN, SLOW_START_GAIN};
use packet_number::PacketNumbers;
use pmtud::Pmtud;
use probe_timers::ProbeTimers;
use rand::Rng;
use replay::ReplayWindow;
use rto_count::RtoCount;
use sent::{SentPacket, SentPackets};
use short_headers::ShortHeaders;
use std::time::Duration;
use validation::Validation;

/// Packets the first flight may send at once, before any RTT is known
/// (RFC 9002 §7.2's initial window).
const INITIAL_BURST_PACKETS: u64 = 10;

/// Control frames waiting for a packet on this path.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PendingFrames {
    pub hello: bool,
    pub hello_ack: bool,
    pub close: bool,
    pub probe: bool,
}

/// The least time without a packet from the peer, while it should be
/// sending, that makes a connection count as silent.
const QUIET_FLOOR: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub(crate) struct Path {
    id: PathId,
    state: PathState,
    numbers: PacketNumbers,
    sent: SentPackets,
    delivery: DeliveryRate,
    acks: AcksOwed,
    rtt: RttEstimator,
    cc: Box<dyn Controller>,
    /// The tail-loss probe, retransmission and probe timers.
    timers: ProbeTimers,
    /// The pacer, and when it lets the packet it held back go.
    pacer: Pacer,
    /// Origin of this path's ACK timestamps, ours and (in ACKs) the peer's:
    /// the session's, shared by its connections.
    epoch: Instant,
    /// Queueing on the path our ACKs come back on.
    ack_path: AckPathDelay,
    pub pending: PendingFrames,
    stats: PathStats,
    /// Round trips the handshake and path challenges measured, and how
    /// late the client's opening arrived here.
    exchange: ExchangeRtt,
    /// Whether and when the peer was last heard here.
    heard: Heard,
    /// The packet numbers authenticated here, against replays.
    replay: ReplayWindow,
    /// The address's validation until it completes; `None` once validated.
    validation: Option<Validation>,
    /// Retransmission timeouts as the session's give-up rules count
    /// them, and the losses that fix how many make a silence.
    rtos: RtoCount,
    /// Its events for the session's log, and what the log last said of it.
    pub trace: PathTrace,
    /// Path MTU discovery.
    pmtud: Pmtud,
    /// Whether packets here may leave out the session id and path.
    short: ShortHeaders,
}

impl Path {
    /// A fresh CUBIC connection of `paths` in a session, as the unit tests
    /// of recovery and the scheduler measure it: packet threshold 3, a
    /// 1,024-packet session window, created at time zero.
    #[cfg(test)]
    pub(crate) fn cubic_for_test(id: PathId, segment_size: u64, paths: usize) -> Path {
        let ctx = crate::cc::CcContext {
            segment_size,
            session_window_packets: 1024,
            max_window_packets: 1 << 16,
            paths,
        };
        let cc = crate::cc::Algorithm::Cubic.build(ctx);
        Path::new(id, cc, 3, segment_size as u16, Instant::ZERO, Instant::ZERO)
    }

    pub fn new(
        id: PathId,
        cc: Box<dyn Controller>,
        packet_threshold: u32,
        segment_size: u16,
        now: Instant,
        epoch: Instant,
    ) -> Self {
        Path {
            id,
            state: PathState::Active,
            numbers: PacketNumbers::default(),
            sent: SentPackets::new(u64::from(packet_threshold)),
            delivery: DeliveryRate::new(now, INITIAL_BURST_PACKETS * u64::from(segment_size)),
            acks: AcksOwed::new(now),
            rtt: RttEstimator::default(),
            cc,
            timers: ProbeTimers::new(now),
            pacer: Pacer::new(now, INITIAL_BURST_PACKETS * u64::from(segment_size)),
            epoch,
            ack_path: AckPathDelay::default(),
            pending: PendingFrames::default(),
            stats: PathStats::default(),
            exchange: ExchangeRtt::default(),
            heard: Heard::default(),
            replay: ReplayWindow::default(),
            validation: None,
            rtos: RtoCount::default(),
            trace: PathTrace::default(),
            // Off until the session knows its sizes (`set_pmtu_bounds`).
            pmtud: Pmtud::new(u16::MAX, 0, now),
            short: ShortHeaders::default(),
        }
    }

    // ---- getters ---------------------------------------------------------

    pub fn id(&self) -> PathId {
        self.id
    }

    pub fn state(&self) -> PathState {
        self.state
    }

    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// The RTO's multiplier of RTTVAR (see [`RttEstimator::set_var_factor`]).
    pub fn set_rto_var_factor(&mut self, k: f64) {
        self.rtt.set_var_factor(k);
    }

    /// The least round trip measured here: by acknowledged packets, or
    /// else by the handshake or a path challenge.
    pub fn least_rtt(&self) -> Option<Duration> {
        if self.rtt.has_sample() {
            Some(self.rtt.min())
        } else {
            self.exchange.least()
        }
    }

    /// How much later than on the first connection the client's opening
    /// (unsealed sessions) or first sealed packet arrived here. A client
    /// sends each on every connection at once, so this is how much longer
    /// this one's way is: the round trip's excess, if the ways back differ
    /// alike, is twice it.
    pub fn opening_lag(&self) -> Option<Duration> {
        self.exchange.opening_lag()
    }

    /// The client's opening or first sealed packet arrived here `lag` after
    /// its first on the first connection; only the first arrival counts.
    pub fn on_opening(&mut self, lag: Duration) {
        self.exchange.on_opening(lag);
    }

    /// The opening's lag is no guide to this connection's round trip.
    fn forget_opening_lag(&mut self) {
        self.exchange.forget_opening_lag();
    }

    /// The connection moved: what the handshake, a challenge or the
    /// opening measured no longer holds.
    pub fn forget_exchange_rtt(&mut self) {
        self.exchange.forget();
    }

    /// The handshake or a path challenge took `rtt` on this connection.
    pub fn on_exchange_rtt(&mut self, rtt: Duration) {
        self.exchange.on_rtt(rtt);
    }

    pub fn cc(&self) -> &dyn Controller {
        self.cc.as_ref()
    }

    pub fn cc_mut(&mut self) -> &mut dyn Controller {
        self.cc.as_mut()
    }

    /// Replaces the controller (once the negotiated parameters are known).
    pub fn set_cc(&mut self, cc: Box<dyn Controller>) {
        self.trace.stale = true;
        self.cc = cc;
    }

    pub fn is_usable(&self) -> bool {
        self.state != PathState::Closed
    }

    /// Whether the peer went quiet on it: our last retransmission timeout
    /// went unanswered, or, while the peer should be sending (`expecting`),
    /// nothing new arrived for a few round trips ([`QUIET_FLOOR`] at least).
    pub fn is_silent(&self, now: Instant, expecting: bool) -> bool {
        let quiet_for = (3 * self.rtt.srtt_or(Duration::ZERO)).max(QUIET_FLOOR);
        let quiet = expecting
            && self
                .heard
                .last_received()
                .is_some_and(|t| now.saturating_duration_since(t) > quiet_for);
        self.is_usable() && (self.timers.backoffs() > 0 || quiet)
    }

    pub fn has_in_flight(&self) -> bool {
        !self.sent.is_empty()
    }

    /// Bytes in flight (window charge).
    pub fn in_flight(&self) -> u64 {
        self.sent.in_flight()
    }

    /// How long our ACKs take to come back at least, µs, less an unknown
    /// clock offset that every connection of the session shares: what
    /// separates a packet's arrival from its acknowledgement, compared
    /// across connections. `None` before the first timed ACK, which is
    /// also the first RTT sample.
    pub fn ack_path_base_us(&self) -> Option<i64> {
        self.ack_path.reverse_base_us()
    }

    /// Bytes per second the path has recently delivered; 0 = not measured.
    pub fn delivery_rate(&self) -> f64 {
        self.delivery.rate()
    }

    /// Whether the next packet is the tail-loss probe, which may exceed
    /// the window and the pacer.
    pub fn has_tlp_credit(&self) -> bool {
        self.timers.has_tlp_credit()
    }

    /// When the pacer lets the packet it held back go.
    pub fn pacing_wakeup(&self) -> Option<Instant> {
        self.pacer.wakeup()
    }

    /// When packets in flight become lost by the time threshold.
    pub fn loss_deadline(&self) -> Option<Instant> {
        self.sent.loss_deadline()
    }

    // ---- sending ---------------------------------------------------------

    /// The packet number of a datagram leaving now; `rng` decides which
    /// numbers are left out.
    pub fn take_packet_number(&mut self, rng: &mut impl Rng) -> u64 {
        self.numbers.take(rng)
    }

    /// Something authentic from the peer arrived on this path.
    pub fn on_heard(&mut self) {
        self.heard.on_authentic();
    }

    /// Whether anything authentic from the peer ever arrived on this path.
    pub fn was_heard(&self) -> bool {
        self.heard.any()
    }

    /// The largest packet number authenticated here, against which a
    /// header's truncated number expands.
    pub fn largest_received(&self) -> Option<u64> {
        self.replay.largest()
    }

    /// Records the authenticated packet number `pn`; false if it is a
    /// replay (seen already, or too old to tell).
    pub fn on_authenticated(&mut self, pn: u64) -> bool {
        if self.replay.is_replay(pn) {
            return false;
        }
        self.replay.insert(pn);
        true
    }

    /// A server's answer to the handshake went out on this path.
    pub fn on_answer_sent(&mut self, now: Instant) {
        self.exchange.on_answer_sent(now);
    }

    /// The handshake's round trip here, if the client's confirmation
    /// arrived at `at` and our answers went close enough together to tell.
    pub fn answer_rtt(&self, at: Instant) -> Option<Duration> {
        self.exchange.answer_rtt(at)
    }

    /// A retransmission timeout fired here. The first of a silence fixes
    /// how many make the peer silent here: at least `floor` (the session's
    /// silence limit), more the more this path has lost, or the less it
    /// has shown.
    pub fn count_rto(&mut self, floor: u32) {
        self.rtos.on_rto_after_losses(floor);
    }

    /// The session's give-up counts of this path's timeouts.
    pub fn rto_count(&self) -> &RtoCount {
        &self.rtos
    }

    /// Whether we can tell this connection's packets by their address, and
    /// so offer the peer short headers here.
    pub fn offer_short_headers(&mut self, offered: bool) {
        self.short.set_offered(offered);
    }

    /// An authentic packet arrived here, in the short form or not.
    pub fn on_header_form(&mut self, short: bool) {
        self.short.on_received(short);
    }

    /// Whether an ACK frame should go here to tell the peer our short
    /// header offer, though none is owed (see [`ShortHeaders`]).
    pub fn short_offer_due(&self, now: Instant) -> bool {
        let rtt = self.rtt.srtt_or(Duration::from_millis(100));
        self.short.offer_due(now, rtt)
    }

    /// Whether the next packet here may be short (see [`ShortHeaders`]).
    pub fn sends_short_headers(&self) -> bool {
        self.short.may_send(self.rtos.is_in_silence())
    }

    /// The transfer made progress: the retry limit counts afresh.
    pub fn on_session_progress(&mut self) {
        self.rtos.on_progress();
    }

    /// The peer was heard, here or on another path: its silence is over.
    pub fn on_silence_over(&mut self) {
        self.rtos.on_heard();
    }

    /// Whether a packet numbered with low `bytes` bytes `truncated` left
    /// on this path.
    pub fn has_sent(&self, truncated: u64, bytes: usize) -> bool {
        self.numbers.has_sent(truncated, bytes)
    }

    /// A believable "port unreachable" about the packet numbered `truncated`
    /// (its low `bytes` bytes): whether it recurs about a packet sent after
    /// the first such report, which alone is noted.
    pub fn on_unreachable(&mut self, truncated: u64, bytes: usize) -> bool {
        self.numbers.on_unreachable(truncated, bytes)
    }

    /// The largest packet number the peer acknowledged here, which the
    /// header's packet-number length is chosen from.
    pub fn largest_acked(&self) -> Option<u64> {
        self.sent.largest_acked()
    }

    /// Counts a datagram of `size` bytes sent.
    pub fn on_datagram_sent(&mut self, size: usize) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += size as u64;
        self.sent.on_datagram_sent(size);
    }

    // ---- path MTU discovery ------------------------------------------------

    /// Datagrams of `base` bytes (UDP payload) are known to fit; discovery
    /// searches up to `ceiling` (at or below `base`: off). A search under
    /// way starts over.
    pub fn set_pmtu_bounds(&mut self, base: u16, ceiling: u16, now: Instant) {
        self.pmtud = Pmtud::new(base, ceiling, now);
    }

    /// The largest datagram (UDP payload) this path carries as far as
    /// discovery knows.
    pub fn max_datagram(&self) -> u16 {
        self.pmtud.current()
    }

    /// The size of the MTU probe due now, if any: only while data flows
    /// here, so that later packets' ACKs tell its loss quickly (a lone
    /// lost probe would cost a retransmission timeout).
    pub fn pmtu_probe_due(&mut self, now: Instant) -> Option<u16> {
        if self.state != PathState::Active || self.sent.is_empty() || self.timers.tlp_fired() {
            return None;
        }
        self.pmtud.probe_due(now)
    }

    /// An MTU probe of `size` bytes went out as packet `pn`: ack-eliciting,
    /// outside the window (no stream bytes), never retransmitted.
    pub fn on_pmtu_probe_sent(&mut self, now: Instant, pn: u64, size: u16) {
        self.on_sent(now, pn, 0, None, false);
        self.pmtud.on_probe_sent(pn, size);
        self.stats.pmtu_probes += 1;
    }

    /// Whether the window admits a data packet of `charge` bytes.
    pub fn can_send_data(&self, charge: u64) -> bool {
        self.state == PathState::Active
            && (self.in_flight() == 0
                || self.in_flight() + charge <= self.window()
                || self.timers.has_tlp_credit())
    }

    /// The controller's window, but never under two of the datagrams
    /// discovery found (RFC 9002 §7.2's minimum window) once they outgrow
    /// the segments the controllers count in: a window of one datagram
    /// waits out the peer's ACK delay every round trip, and the rate that
    /// measures keeps the window there (16 KiB datagrams on loopback).
    fn window(&self) -> u64 {
        let window = self.cc.window();
        if self.pmtud.current() <= self.pmtud.base() {
            return window;
        }
        window.max(2 * u64::from(self.pmtud.current()))
    }

    /// The controller's pacing rate, or a gain over window / sRTT; `None`
    /// before the first RTT sample, or while the controller wants packets
    /// back to back (see [`Controller::unpaced`]).
    pub fn pacing_rate(&self) -> Option<f64> {
        if self.cc.unpaced() {
            return None;
        }
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

    /// Whether the pacer lets a data packet of `charge` bytes leave now;
    /// if not, the path remembers when it will.
    pub fn is_pacer_ready(&mut self, now: Instant, charge: u64, segment_size: u64) -> bool {
        if self.timers.has_tlp_credit() {
            return true;
        }
        let rate = self.pacing_rate();
        self.pacer.is_ready(now, rate, segment_size, charge)
    }

    /// Forgets a pacing wake-up that has come.
    pub fn on_pacing_timeout(&mut self, now: Instant) {
        self.pacer.on_timeout(now);
    }

    /// The sender had nothing to send while this path's window had room:
    /// rate samples until what is in flight now is delivered understate the path.
    pub fn on_app_limited(&mut self) {
        if self.state == PathState::Active && self.in_flight() < self.window() {
            self.delivery.on_app_limited(self.in_flight());
        }
    }

    /// Records an ack-eliciting packet; `segment` is the stream offset of
    /// the data it carries, if any.
    pub fn on_sent(
        &mut self,
        now: Instant,
        pn: u64,
        charge: u64,
        segment: Option<u64>,
        retransmission: bool,
    ) {
        let idle = self.sent.is_empty();
        self.timers.on_sent(now, idle, charge);
        if segment.is_some() {
            self.stats.data_packets_sent += 1;
            if retransmission {
                self.stats.retransmitted += 1;
            }
        }
        let packet = SentPacket {
            sent_at: now,
            charge,
            segment,
            retransmission,
            revived: false,
            size: 0,
            delivery: self.delivery.on_sent(now, idle),
        };
        self.rtos.losses_mut().on_sent();
        self.pacer.on_sent(now, charge);
        self.cc.on_sent(now, charge);
        self.sent.on_sent(pn, packet);
    }

    // ---- the peer's packets ----------------------------------------------

    /// Records a received packet number; returns false for a duplicate.
    pub fn on_received(
        &mut self,
        now: Instant,
        pn: u64,
        ack_eliciting: bool,
        max_ack_delay: Duration,
        ack_every: u32,
    ) -> bool {
        let arrival = self
            .acks
            .on_received(now, pn, ack_eliciting, max_ack_delay, ack_every);
        match arrival {
            Some(Arrival::Beyond { holes }) => self.rtos.losses_mut().on_received(holes),
            Some(Arrival::Late) => self.rtos.losses_mut().on_found(),
            None => return false,
        }
        self.heard.on_new_packet(now);
        self.stats.packets_received += 1;
        true
    }

    /// A stream frame of `len` bytes that the stream took arrived here.
    pub fn on_stream_received(&mut self, len: usize) {
        self.stats.stream_bytes_received += len as u64;
    }

    /// When the peer's latest new packet arrived here.
    pub fn last_received(&self) -> Option<Instant> {
        self.heard.last_received()
    }

    /// A received packet carried an ECN CE mark.
    pub fn on_ce_received(&mut self) {
        self.acks.on_ce();
    }

    /// Folds a received packet's MB-ECN level into the feedback owed.
    pub fn on_mbecn(&mut self, level: u8) {
        self.acks.on_mbecn(level);
    }

    /// Whether anything arrived from the peer on this path.
    pub fn has_received(&self) -> bool {
        self.acks.largest().is_some()
    }

    /// Whether ack-eliciting packets arrived since our last ACK.
    pub fn is_ack_owed(&self) -> bool {
        self.acks.is_owed()
    }

    /// Whether an ACK should go out now.
    pub fn ack_due(&self, now: Instant) -> bool {
        self.acks.is_due(now)
    }

    /// Whether a due ACK must go now rather than ride on a data packet
    /// about to leave: the delayed-ACK timer expired, or MB-ECN feedback
    /// is owed.
    pub fn is_ack_urgent(&self, now: Instant) -> bool {
        self.acks.is_urgent(now)
    }

    /// When the delayed-ACK timer fires.
    pub fn ack_deadline(&self) -> Option<Instant> {
        self.acks.deadline()
    }

    /// Ranges our next ACK would list.
    pub fn ack_range_count(&self) -> usize {
        self.acks.range_count()
    }

    /// The MB-ECN level the peer should hear, once.
    pub fn take_ece(&mut self) -> Option<u16> {
        self.acks.take_ece()
    }

    /// Builds the ACK frame for this path's received packets (without the
    /// single receive times: [`Path::ack_rx_times`]).
    pub fn ack_frame(
        &mut self,
        now: Instant,
        cumulative: u64,
        fin: bool,
        max_data: u64,
    ) -> AckFrame {
        AckFrame {
            short_headers: self.short.offered(),
            ..self.acks.frame(now, self.epoch, cumulative, fin, max_data)
        }
    }

    /// An ACK frame from [`Self::ack_frame`] went out: its vectors serve
    /// the next one.
    pub fn recycle_ack_frame(&mut self, frame: AckFrame) {
        self.acks.recycle(frame);
    }

    /// The first packets' receive times still owed, for an ACK with room.
    pub fn ack_rx_times(&self) -> Vec<(u64, u64)> {
        self.acks.rx_times(self.epoch)
    }

    /// An ACK went out in our packet `pn`; `with_rx_times` if it carried
    /// the receive times.
    pub fn on_ack_sent(&mut self, now: Instant, pn: u64, with_rx_times: bool) {
        self.short.on_ack_sent(now);
        // Reported ranges are dropped unheard only while our data shares
        // the link with these ACKs: on an idle return path the full
        // history costs nothing, and its late reports of packets an RTO
        // declared lost undo the timeout, which on a very lossy path
        // multiplied the RTOs.
        let sending = self.in_flight() > 0 && self.rtt.has_sample();
        self.acks
            .on_sent(now, pn, sending.then(|| self.rtt.min()), with_rx_times);
    }

    /// Whether an ACK-only packet leaving now should carry a PING, so that
    /// the peer acknowledges it and the ranges it reports can be forgotten:
    /// once a round trip, when nothing else of ours will be acknowledged.
    pub fn ack_wants_ping(&self, now: Instant, default_rtt: Duration) -> bool {
        let rtt = if self.rtt.has_sample() {
            self.rtt.srtt_or(default_rtt)
        } else {
            self.exchange.least().unwrap_or(default_rtt)
        };
        self.acks.wants_ping(now, self.has_in_flight(), rtt)
    }

    /// The ACK packet leaving now carries a PING.
    pub fn on_ack_ping_sent(&mut self, now: Instant) {
        self.acks.on_ping_sent(now);
    }

    // ---- statistics ------------------------------------------------------

    /// Its figures for the session's log.
    pub fn trace_metrics(&self) -> crate::trace::Metrics {
        let rtt = self.rtt.has_sample();
        let slot = self.cc.rate_slot();
        crate::trace::Metrics {
            cwnd: Some(self.cc.window()),
            in_flight: Some(self.in_flight()),
            srtt: rtt.then(|| self.rtt.srtt_or(Duration::ZERO)),
            latest_rtt: rtt.then(|| self.rtt.latest()),
            min_rtt: rtt.then(|| self.rtt.min()),
            rttvar: rtt.then(|| self.rtt.rttvar()),
            pacing_rate: self.pacing_rate().map(|r| r as u64),
            ssthresh: self.cc.metrics().ssthresh,
            slot_budget: slot.map(|s| s.0),
            slot_width: slot.map(|s| s.1),
        }
    }

    /// Refreshes the snapshot fields of `stats`.
    pub fn snapshot(&self, cfg: &RtoConfig) -> PathStats {
        let mut s = self.stats;
        s.state = self.state;
        s.window = self.cc.window();
        s.ssthresh = self.cc.metrics().ssthresh;
        s.pacing_rate = self.cc.pacing_rate();
        s.in_flight = self.in_flight();
        s.srtt = self.rtt.srtt_or(Duration::ZERO);
        s.rto = self.rtt.rto(cfg, self.timers.backoffs());
        if let Some((min, avg, max)) = self.rtt.min_avg_max() {
            (s.rtt_min, s.rtt_avg, s.rtt_max) = (min, avg, max);
        }
        s.rtt_samples = self.rtt.samples();
        s.rtt_p95 = self.rtt.p95().unwrap_or_default();
        if let Some((min, avg, max, p95)) = self.rtt.own().summary() {
            (s.own_rtt_min, s.own_rtt_avg, s.own_rtt_max, s.own_rtt_p95) = (min, avg, max, p95);
        }
        s.own_rtt_samples = self.rtt.own().samples();
        s.max_datagram = self.pmtud.current();
        s.pmtu_black_holes = self.pmtud.black_holes();
        s
    }

    /// A time-series point; `interval` is the time since the previous one and
    /// `acked` the stream bytes this path delivered in it.
    pub fn sample(
        &self,
        now: Instant,
        interval: Duration,
        cfg: &RtoConfig,
        acked: u64,
    ) -> PathSample {
        PathSample {
            at_s: now.as_secs_f64(),
            path: self.id,
            window: self.cc.window(),
            srtt: self.rtt.srtt_or(Duration::ZERO),
            rto: self.rtt.rto(cfg, self.timers.backoffs()),
            in_flight: self.in_flight(),
            throughput_bps: acked as f64 * 8.0 / interval.as_secs_f64().max(1e-9),
        }
    }
}

/// Microseconds from `epoch` to `t` (0 before it).
fn micros_since(t: Instant, epoch: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_micros() as u64
}
