//! How a path recovers from loss: what an ACK frame, the tail-loss probe
//! and the retransmission timer do to its packets in flight, its RTT
//! estimate, its delivery rate and its congestion controller.
//!
//! An ACK frame touches all of them. The controller hears of spurious
//! losses, the frame, each newly acknowledged packet, ECN marks, the losses
//! the ACK reveals and last the rate sample, in that order: reordering the
//! calls in `on_ack_frame` changes what the controllers compute.
//!
//! A tail-loss probe (RFC 8985 §7) goes out two RTTs after the last send
//! when ACKs stop, so a lost tail costs about two RTTs rather than an RTO.
//!
//! A timeout that an ACK proves spurious (a delay spike, a cellular link
//! holding its queue through an outage) is undone as RFC 4015 responds to
//! it: its packets are in flight again, their segments no longer wait to
//! be resent, and the controller restores its window. Losses it declared
//! count towards a path MTU black hole only once an ACK confirms them.

use super::delivery_rate::AckSample;
use super::sent::{SentPacket, TimeoutVerdict};
use super::{micros_since, AckError, Path};
use crate::cc::{Acked, Cause, CongestionEvent};
use crate::rtt::{AckRoute, RtoConfig};
use crate::send_stream::SendStream;
use crate::stats::PathState;
use crate::trace::{EventKind, LossTimer, LossTrigger};
use crate::wire::AckFrame;
use crate::Instant;
use std::time::Duration;

/// What an ACK frame did, for the session to act on. The session reads
/// only `back_from_probing`; the counts are for tests and debugging.
#[derive(Debug, Default)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct AckOutcome {
    /// Packets newly acknowledged.
    pub newly_acked: u64,
    /// Lost packets found to have arrived after all.
    pub spurious: u64,
    /// Packets declared lost by this ACK's evidence.
    pub lost: u64,
    /// Whether the path came back from probing.
    pub back_from_probing: bool,
}

impl Path {
    /// When the tail-loss probe fires: two RTTs after the newest send, plus
    /// the peer's ACK delay (RFC 8985 §7.2), once per flight.
    pub fn tlp_deadline(&self, max_ack_delay: Duration) -> Option<Instant> {
        if self.state != PathState::Active || self.sent.is_empty() || !self.rtt.has_sample() {
            return None;
        }
        let srtt = self.rtt.srtt_or(Duration::ZERO);
        self.timers.tlp_deadline(srtt, max_ack_delay)
    }

    /// The tail-loss probe fired: returns the segment to probe with when
    /// there is nothing new to send (the newest one in flight here).
    pub fn on_tlp(&mut self, now: Instant) -> Option<u64> {
        let timer = LossTimer::TailLossProbe;
        (self.trace.tracer).record(
            now,
            EventKind::TimerExpired {
                path: self.id,
                timer,
            },
        );
        self.timers.on_tlp(now);
        self.stats.tail_loss_probes += 1;
        self.sent.newest_segment()
    }

    /// When the retransmission (or, while probing, the probe) timer fires.
    pub fn rto_deadline(&self, cfg: &RtoConfig, max_probe: Duration) -> Option<Instant> {
        if self.state == PathState::Closed {
            return None;
        }
        let rto = self.rtt.rto(cfg, self.timers.backoffs());
        if self.state == PathState::Probing {
            return Some(self.timers.probe_deadline(rto.min(max_probe)));
        }
        if self.sent.is_empty() {
            return None;
        }
        Some(self.timers.rto_deadline(rto))
    }

    /// The retransmission timer fired: everything in flight is lost. Returns
    /// whether the path just started probing (two expiries in a row).
    pub fn on_rto(&mut self, now: Instant, send: &mut SendStream) -> bool {
        let timer = LossTimer::Rto;
        (self.trace.tracer).record(
            now,
            EventKind::TimerExpired {
                path: self.id,
                timer,
            },
        );
        self.stats.timeouts += 1;
        let newest = self.sent.newest().map(|p| p.sent_at);
        let lost = self.sent.declare_timed_out();
        let count = self.on_all_lost(now, &lost, LossTrigger::Timeout, send);
        // Only an MTU probe in flight was too big: the path is fine.
        self.timers.on_rto(now, count > 0);
        if count == 0 {
            return false;
        }
        if let Some(sent_at) = newest {
            self.signal_congestion(now, Cause::Timeout, sent_at, count);
        }
        let backed_off = self.timers.backoffs() >= 2;
        let started = self.state == PathState::Active && backed_off;
        if self.state != PathState::Closed && backed_off {
            self.state = PathState::Probing;
            self.pending.probe = true;
        }
        started
    }

    /// The path is closed: all it had in flight must travel elsewhere.
    pub fn close(&mut self, now: Instant, send: &mut SendStream) {
        self.trace.stale = true;
        self.declare_all_lost(now, LossTrigger::PathClosed, send);
        self.state = PathState::Closed;
        self.acks.on_path_closed();
        self.pending.probe = false;
    }

    /// Checks an ACK frame's ranges before anything acts on them.
    pub fn validate_ack(&self, ack: &AckFrame) -> Result<(), AckError> {
        self.numbers.validate_ack(ack)
    }

    /// Processes an ACK frame for this path's packets.
    pub fn on_ack_frame(
        &mut self,
        now: Instant,
        ack: &AckFrame,
        route: AckRoute,
        max_ack_delay: Duration,
        send: &mut SendStream,
    ) -> AckOutcome {
        debug_assert!(
            ack.ranges.iter().all(|&(_, hi)| hi < self.numbers.next()),
            "validated by validate_ack"
        );
        self.acks.on_peer_ack(&ack.ranges);
        self.short.on_peer_ack(ack.largest(), ack.short_headers);
        let srtt = self.rtt.srtt_or(Duration::ZERO);
        let acked = self.sent.on_ack(now, &ack.ranges, srtt);
        if self.trace.tracer.is_on() {
            self.trace_acked(now, &acked.late, 0);
            self.trace_acked(now, &acked.newly, acked.spurious.len());
        }
        self.on_spurious_losses(now, &acked.spurious, send);
        if let Some(TimeoutVerdict::Spurious(revived)) = &acked.timeout {
            self.on_spurious_timeout(now, revived, send);
        }
        self.on_late_acked(now, &acked.late, send);
        self.own_rtt_sample(now, ack, route, &acked.newly, acked.largest_before);
        let lost_before = self.stats.lost_bytes;
        let mut out = AckOutcome {
            spurious: acked.spurious.len() as u64,
            newly_acked: acked.late.len() as u64,
            ..AckOutcome::default()
        };
        if !acked.late.is_empty() {
            self.timers.end_flight();
            out.back_from_probing = self.on_progress(now);
        }
        let Some(&(largest_pn, largest)) = acked.newly.last() else {
            return out;
        };
        self.timers.end_flight();
        let is_new_largest = acked.largest_before.is_none_or(|l| largest_pn > l);
        // The peer's receive time dates this delivery when the ACK's largest
        // ack-eliciting packet, which it is the time of, is among the newly
        // acknowledged: ours is then the largest acknowledged so far (any
        // larger one in the ACK would be newly acknowledged or already so).
        let rx_us = is_new_largest.then_some(ack.rx_timestamp_us);
        if is_new_largest && largest_pn == ack.largest() {
            self.on_rtt_sample(now, ack, route, max_ack_delay, largest.sent_at);
        }
        // A frame filling a hole below an earlier largest shows reordering:
        // its receive time is not its packets'.
        let in_order = acked.largest_before.is_none_or(|l| acked.newly[0].0 > l);
        self.cc.on_ack_frame(now, rx_us.filter(|_| in_order));
        let rx_times = if in_order { &ack.rx_times[..] } else { &[] };
        let sample = self.on_newly_acked(now, &acked.newly, rx_us, rx_times, send);
        if let Some(TimeoutVerdict::Confirmed { lo, hi }) = acked.timeout {
            self.on_confirmed_timeout(now, lo, hi);
        }
        out.newly_acked += acked.newly.len() as u64;
        out.back_from_probing |= self.on_progress(now);
        self.on_peer_ce(now, ack.ce_count, out.newly_acked, largest.sent_at);
        let in_stall;
        (out.lost, in_stall) = self.declare_threshold_losses(now, send);
        let lost = (self.stats.lost_bytes - lost_before).saturating_sub(in_stall);
        let (in_flight, queue_delay) = (self.in_flight(), self.ack_path.get());
        if let Some(s) =
            self.delivery
                .on_ack_end(now, sample, lost, &self.rtt, in_flight, queue_delay)
        {
            self.cc.on_rate_sample(now, &s);
        }
        out
    }

    /// Records the newly acknowledged packets as runs of consecutive numbers.
    fn trace_acked(&mut self, now: Instant, newly: &[(u64, SentPacket)], spurious: usize) {
        let path = self.id;
        let mut runs = newly.iter().map(|&(pn, _)| pn).peekable();
        while let Some(first) = runs.next() {
            let mut last = first;
            while runs.peek() == Some(&(last + 1)) {
                last += 1;
                runs.next();
            }
            let kind = EventKind::PacketsAcked { path, first, last };
            self.trace.tracer.record(now, kind);
        }
        for _ in 0..spurious {
            self.trace
                .tracer
                .record(now, EventKind::SpuriousLoss { path });
        }
    }

    /// Packets declared lost arrived after all: their data is delivered.
    fn on_spurious_losses(&mut self, now: Instant, packets: &[SentPacket], send: &mut SendStream) {
        for p in packets {
            self.stats.spurious_losses += 1;
            self.rtos.losses_mut().on_found();
            self.delivery.on_late_delivery(p.charge);
            self.cc.on_spurious_loss(now);
            if let Some(offset) = p.segment {
                send.on_acked(offset);
            }
        }
    }

    /// An ACK proved the last timeouts spurious: the packets they declared
    /// lost are in flight again (`revived`), counted neither lost nor
    /// spurious, and the controller undoes their cut.
    fn on_spurious_timeout(
        &mut self,
        now: Instant,
        revived: &[(u64, SentPacket)],
        send: &mut SendStream,
    ) {
        self.stats.spurious_timeouts += 1;
        for (_, p) in revived {
            self.stats.lost_packets = self.stats.lost_packets.saturating_sub(1);
            self.stats.lost_bytes = self.stats.lost_bytes.saturating_sub(p.charge);
            self.rtos.losses_mut().on_found();
            if let Some(offset) = p.segment {
                self.stats.lost_data_packets = self.stats.lost_data_packets.saturating_sub(1);
                send.on_revived(offset);
            }
            let path = self.id;
            self.trace
                .tracer
                .record(now, EventKind::SpuriousLoss { path });
        }
        tracing::debug!(
            path = self.id.0,
            packets = revived.len(),
            "retransmission timeout was spurious"
        );
        self.cc.on_spurious_timeout(now);
    }

    /// Packets revived after a spurious timeout arrived: delivered, but
    /// neither a rate nor an RTT sample, and the controller already
    /// counted them when they were sent.
    fn on_late_acked(&mut self, now: Instant, late: &[(u64, SentPacket)], send: &mut SendStream) {
        for &(pn, p) in late {
            self.pmtud.on_acked(now, pn, p.size);
            self.delivery.on_late_delivery(p.charge);
            if let Some(offset) = p.segment {
                send.on_acked(offset);
            }
        }
    }

    /// An ACK of a later packet confirmed the last timeouts: what they
    /// declared lost and is not acknowledged now may show a black hole.
    /// Counted after the ACK's packets, so a larger one acknowledged since
    /// clears them, as it does losses the thresholds find.
    fn on_confirmed_timeout(&mut self, now: Instant, lo: u64, hi: u64) {
        for &(pn, p) in self.sent.lost_between(lo, hi) {
            if self.pmtud.on_lost(now, pn, p.size) {
                tracing::debug!(
                    path = self.id.0,
                    "path MTU black hole: back to the base size"
                );
            }
        }
    }

    /// The ACK's largest packet, sent at `sent_at`, gives an RTT sample and
    /// a one-way delay sample of the ACK path. The reported ACK delay counts
    /// up to the peer's declared limit (RFC 9002 §5.3).
    fn on_rtt_sample(
        &mut self,
        now: Instant,
        ack: &AckFrame,
        route: AckRoute,
        max_ack_delay: Duration,
        sent_at: Instant,
    ) {
        let delay = Duration::from_micros(ack.ack_delay_us).min(max_ack_delay);
        let rtt = now - sent_at;
        self.rtt.update_via(route, rtt, delay);
        let forward = ack.rx_timestamp_us as i64 - micros_since(sent_at, self.epoch) as i64;
        let most = rtt.saturating_sub(self.rtt.min());
        self.ack_path
            .on_sample(now, rtt.saturating_sub(delay), forward, most);
    }

    /// The connection's own round trip, for reports: dated by this ACK
    /// when it newly acknowledged its largest packet, else by the copy
    /// that did, if this is the original that came back on the connection.
    fn own_rtt_sample(
        &mut self,
        now: Instant,
        ack: &AckFrame,
        route: AckRoute,
        newly: &[(u64, SentPacket)],
        largest_before: Option<u64>,
    ) {
        let dated = newly
            .last()
            .filter(|&&(pn, _)| pn == ack.largest() && largest_before.is_none_or(|l| pn > l))
            .map(|(_, p)| p.sent_at);
        self.rtt.own_mut().on_ack(now, route, ack.largest(), dated);
    }

    /// Delivers newly acknowledged packets to the rate estimate, the
    /// controller and the stream; returns the ACK's rate sample so far.
    fn on_newly_acked(
        &mut self,
        now: Instant,
        newly: &[(u64, SentPacket)],
        rx_us: Option<u64>,
        rx_times: &[(u64, u64)],
        send: &mut SendStream,
    ) -> AckSample {
        let mut sample = AckSample::new(rx_us);
        for (pn, p) in newly {
            self.pmtud.on_acked(now, *pn, p.size);
            self.delivery.on_acked(now, p, &mut sample);
            let acked = Acked {
                bytes: p.charge,
                sent_at: p.sent_at,
                retransmission: p.retransmission,
                // At most MAX_RX_TIMES entries.
                peer_rx_us: rx_times.iter().find(|&&(n, _)| n == *pn).map(|&(_, us)| us),
            };
            self.cc.on_ack(now, &acked, &self.rtt);
            if let Some(offset) = p.segment {
                send.on_acked(offset);
            }
        }
        sample
    }

    /// Something new was acknowledged: the retransmission timer starts over
    /// without backoff. Returns whether the path came back from probing.
    fn on_progress(&mut self, now: Instant) -> bool {
        self.timers.on_progress(now);
        if self.state == PathState::Probing {
            self.state = PathState::Active;
            return true;
        }
        false
    }

    /// The peer's CE count rose: a congestion signal per new mark, and no
    /// more marks than the ACK newly acknowledged packets (RFC 9000
    /// §13.4.2.1): the count is the peer's word.
    fn on_peer_ce(&mut self, now: Instant, ce_count: u64, newly_acked: u64, sent_at: Instant) {
        if let Some(marks) = self.sent.on_peer_ce(ce_count, newly_acked) {
            self.stats.ecn_marks += marks;
            self.signal_congestion(now, Cause::Ecn, sent_at, marks);
        }
    }

    /// Declares lost what the threshold rules say is; arms the loss timer for the rest.
    pub fn detect_losses(&mut self, now: Instant, send: &mut SendStream) -> u64 {
        self.declare_threshold_losses(now, send).0
    }

    /// [`Self::detect_losses`]; also returns the bytes lost among packets
    /// a spurious timeout revived. Those were lost in the stall that timed
    /// out, not at the rate the path runs at now: a rate sample leaves
    /// them out, or BBR would read them as random loss to pace through.
    fn declare_threshold_losses(&mut self, now: Instant, send: &mut SendStream) -> (u64, u64) {
        let lost = self.sent.detect_losses(now, &self.rtt);
        let Some(newest) = lost.last().map(|(_, p)| p.sent_at) else {
            return (0, 0);
        };
        let (mut count, mut in_stall) = (0, 0);
        for (pn, p) in &lost {
            let counted = self.on_lost(now, *pn, p, LossTrigger::Threshold, send);
            count += u64::from(counted);
            if counted && p.revived {
                in_stall += p.charge;
            }
        }
        tracing::trace!(path = self.id.0, count, "packets declared lost");
        // MTU probes' losses say nothing of congestion (RFC 9000 §14.4).
        if count > 0 {
            self.signal_congestion(now, Cause::Loss, newest, count);
        }
        (count, in_stall)
    }

    /// Declares everything in flight lost; returns how many packets were.
    fn declare_all_lost(&mut self, now: Instant, why: LossTrigger, send: &mut SendStream) -> u64 {
        let lost = self.sent.declare_all_lost();
        self.on_all_lost(now, &lost, why, send)
    }

    /// Counts the packets declared lost at once; returns how many were.
    fn on_all_lost(
        &mut self,
        now: Instant,
        lost: &[(u64, SentPacket)],
        why: LossTrigger,
        send: &mut SendStream,
    ) -> u64 {
        lost.iter()
            .map(|(pn, p)| u64::from(self.on_lost(now, *pn, p, why, send)))
            .sum()
    }

    fn on_lost(
        &mut self,
        now: Instant,
        pn: u64,
        p: &SentPacket,
        trigger: LossTrigger,
        send: &mut SendStream,
    ) -> bool {
        let probe = self.pmtud.is_probe(pn);
        // A timeout's losses wait for the ACK that confirms them.
        if (probe || trigger != LossTrigger::Timeout) && self.pmtud.on_lost(now, pn, p.size) {
            tracing::debug!(
                path = self.id.0,
                "path MTU black hole: back to the base size"
            );
        }
        if probe {
            self.sent.forget_lost(pn);
            return false;
        }
        self.trace.tracer.record(
            now,
            EventKind::PacketLost {
                path: self.id,
                pn,
                bytes: p.segment.map_or(0, |_| p.charge),
                trigger,
            },
        );
        self.stats.lost_packets += 1;
        self.stats.lost_bytes += p.charge;
        self.rtos.losses_mut().on_lost();
        if let Some(offset) = p.segment {
            self.stats.lost_data_packets += 1;
            send.on_lost(offset);
        }
        true
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
        self.trace.stale = true;
        let event = CongestionEvent {
            cause,
            sent_at,
            packets,
            // `on_rto` counts the expiry before it signals.
            repeated: cause == Cause::Timeout && self.timers.backoffs() > 1,
        };
        if self.cc.on_congestion(now, &event) {
            match cause {
                Cause::Loss | Cause::SendFailure => self.stats.loss_decreases += 1,
                Cause::Timeout => self.stats.timeout_decreases += 1,
                Cause::Ecn => self.stats.ecn_decreases += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PathId;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    const SEGMENT_SIZE: u64 = 1200;
    const MS: Duration = Duration::from_millis(1);
    const MAX_ACK_DELAY: Duration = Duration::from_millis(25);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// A CUBIC path and the stream its packets would carry.
    struct Fixture {
        path: Path,
        rng: ChaCha20Rng,
        stream: SendStream,
    }

    impl Fixture {
        fn new() -> Self {
            Fixture {
                path: Path::cubic_for_test(PathId(0), SEGMENT_SIZE, 1),
                rng: ChaCha20Rng::seed_from_u64(3),
                stream: SendStream::new(SEGMENT_SIZE as u32, 1 << 20, 1024, 0),
            }
        }

        /// Sends `n` full packets at `now` (without stream data: the
        /// stream is not what is tested); returns their numbers.
        fn send(&mut self, now: Instant, n: usize) -> Vec<u64> {
            (0..n)
                .map(|_| {
                    let pn = self.path.take_packet_number(&mut self.rng);
                    self.path.on_sent(now, pn, SEGMENT_SIZE, None, false);
                    pn
                })
                .collect()
        }

        /// Sends `n` packets at `now`, each carrying the stream's next
        /// segment (a lost one first, as the session would); returns
        /// their numbers.
        fn send_data(&mut self, now: Instant, n: usize) -> Vec<u64> {
            (0..n)
                .map(|_| {
                    let p = self.stream.peek().expect("data to send");
                    self.stream.on_sent(p, PathId(0), None);
                    let pn = self.path.take_packet_number(&mut self.rng);
                    let charge = u64::from(p.len);
                    (self.path).on_sent(now, pn, charge, Some(p.offset), p.retransmission);
                    pn
                })
                .collect()
        }

        /// A stream with `segments` full segments written, the first of
        /// them sent at 0 and acknowledged at 100 ms (an RTT sample, so
        /// the timeout is sRTT-based, and lost packets are remembered).
        fn measured_with_data(segments: usize) -> Self {
            let mut f = Fixture::new();
            f.stream.update_max_data(1 << 20);
            let data = vec![7u8; segments * SEGMENT_SIZE as usize];
            assert_eq!(f.stream.write(&data), data.len());
            let first = f.send_data(at(0), 1);
            f.ack(at(100), &[(first[0], first[0])]);
            f
        }

        /// An ACK arriving `now` for `ranges`, highest first.
        fn ack(&mut self, now: Instant, ranges: &[(u64, u64)]) -> AckOutcome {
            let ack = AckFrame {
                ranges: ranges.to_vec(),
                ..AckFrame::default()
            };
            self.path
                .on_ack_frame(now, &ack, AckRoute::Own, MAX_ACK_DELAY, &mut self.stream)
        }
    }

    /// A peer that reports long ACK delays cannot shrink our RTT samples
    /// by more than the limit it declared.
    #[test]
    fn a_reported_ack_delay_counts_only_up_to_the_peers_limit() {
        let mut f = Fixture::new();
        // The first sample sets the minimum: 100 ms.
        let pns = f.send(at(0), 1);
        f.ack(at(100), &[(pns[0], pns[0])]);
        // Then 300 ms round trips, each ACK claiming it was held 190 ms.
        for i in 1..40u64 {
            let pns = f.send(at(1000 * i), 1);
            let ack = AckFrame {
                ranges: vec![(pns[0], pns[0])],
                ack_delay_us: 190_000,
                ..AckFrame::default()
            };
            let now = at(1000 * i + 300);
            f.path
                .on_ack_frame(now, &ack, AckRoute::Own, MAX_ACK_DELAY, &mut f.stream);
        }
        let srtt = f.path.rtt().srtt_or(Duration::ZERO);
        // Taking the claims at face value would leave 110 ms.
        assert!(
            srtt > 300 * MS - MAX_ACK_DELAY - 5 * MS,
            "smoothed RTT {srtt:?}: the peer's claimed delays were taken off"
        );
    }

    #[test]
    fn an_ack_frame_delivers_samples_and_declares_losses() {
        let mut f = Fixture::new();
        let pns = f.send(at(0), 10);
        let out = f.ack(at(100), &[(pns[4], pns[9])]);
        // Packets 0-3 have more than three later packets acknowledged.
        assert_eq!((out.newly_acked, out.lost, out.spurious), (6, 4, 0));
        assert!(!out.back_from_probing);
        assert_eq!(f.path.in_flight(), 0);
        assert_eq!(f.path.rtt().min(), 100 * MS);
        // 6 packets over the 100-ms round trip.
        let rate = f.path.delivery_rate();
        assert!((rate - 72_000.0).abs() < 1e-6, "{rate}");
        let stats = f.path.snapshot(&RtoConfig::default());
        assert_eq!(
            (stats.lost_packets, stats.lost_bytes),
            (4, 4 * SEGMENT_SIZE)
        );
        // The first two arrive late after all.
        let out = f.ack(at(110), &[(pns[4], pns[9]), (pns[0], pns[1])]);
        assert_eq!((out.newly_acked, out.lost, out.spurious), (0, 0, 2));
        let stats = f.path.snapshot(&RtoConfig::default());
        assert_eq!(stats.spurious_losses, 2);
    }

    /// The CE count is the peer's word: a jump counts as no more marks
    /// than the ACK newly acknowledged (RFC 9000 §13.4.2.1), and cannot
    /// overflow what the controller makes of them.
    #[test]
    fn a_ce_count_jump_counts_at_most_the_newly_acknowledged() {
        let mut f = Fixture::new();
        let pns = f.send(at(0), 10);
        let ack = AckFrame {
            ranges: vec![(pns[0], pns[5])],
            ce_count: (1 << 62) - 1,
            ..AckFrame::default()
        };
        f.path
            .on_ack_frame(at(100), &ack, AckRoute::Own, MAX_ACK_DELAY, &mut f.stream);
        let stats = f.path.snapshot(&RtoConfig::default());
        assert_eq!(stats.ecn_marks, 6);
    }

    #[test]
    fn a_tail_loss_probe_fires_two_rtts_after_the_last_send() {
        let mut f = Fixture::new();
        let pns = f.send(at(0), 1);
        f.ack(at(100), &[(pns[0], pns[0])]);
        assert_eq!(
            f.path.tlp_deadline(MAX_ACK_DELAY),
            None,
            "nothing in flight"
        );
        f.send(at(200), 3);
        let tlp = at(200) + 200 * MS + MAX_ACK_DELAY;
        assert_eq!(f.path.tlp_deadline(MAX_ACK_DELAY), Some(tlp));
        f.path.on_tlp(tlp);
        assert!(f.path.has_tlp_credit() && f.path.can_send_data(1 << 30));
        assert_eq!(f.path.tlp_deadline(MAX_ACK_DELAY), None, "once per flight");
        // The retransmission timer counts from the probe.
        let cfg = RtoConfig::default();
        let rto = f.path.rtt().rto(&cfg, 0);
        assert_eq!(f.path.rto_deadline(&cfg, Duration::MAX), Some(tlp + rto));
        // The probe spends the credit.
        f.send(tlp, 1);
        assert!(!f.path.has_tlp_credit());
    }

    /// A stall that holds the packets rather than losing them: the
    /// timeout fires, and an ACK of a packet sent before it proves it
    /// spurious. Nothing but the timeout's own probe is sent again, the
    /// packets are in flight again, and the window is back.
    #[test]
    fn a_timeout_an_earlier_packet_proves_spurious_is_undone() {
        let mut f = Fixture::measured_with_data(20);
        let cfg = RtoConfig::default();
        let pns = f.send_data(at(200), 10);
        let window = f.path.cc().window();
        let rto = f.path.rto_deadline(&cfg, Duration::MAX).expect("armed");
        f.path.on_rto(rto, &mut f.stream);
        assert_eq!(f.path.in_flight(), 0);
        assert!(f.path.cc().window() < window);
        // The timeout's probe: the oldest segment, sent again.
        let probe = f.send_data(rto, 1);
        let waiting = f.stream.peek().expect("more to send");
        assert!(waiting.retransmission, "the rest wait as lost");
        // The stall ends: the first five of the originals arrive.
        let out = f.ack(rto + 50 * MS, &[(pns[0], pns[4])]);
        assert!(out.newly_acked == 5 && out.lost == 0, "{out:?}");
        let stats = f.path.snapshot(&cfg);
        assert_eq!((stats.spurious_timeouts, stats.lost_packets), (1, 0));
        assert_eq!(f.path.cc().window(), window, "the cut is undone");
        // The other five and the probe are in flight; none waits as lost.
        assert_eq!(f.path.in_flight(), 6 * SEGMENT_SIZE);
        let next = f.stream.peek().expect("more to send");
        assert!(!next.retransmission, "{next:?}");
        // The rest arrive; nothing was declared lost after all.
        let out = f.ack(rto + 60 * MS, &[(pns[0], probe[0])]);
        assert_eq!((out.newly_acked, out.lost), (6, 0));
        assert_eq!(f.path.in_flight(), 0);
        let stats = f.path.snapshot(&cfg);
        assert_eq!((stats.lost_packets, stats.retransmitted), (0, 1));
    }

    /// The packets a timeout revived are delivered late: their ACKs are no
    /// RTT sample (the stall is over) nor a rate sample.
    #[test]
    fn a_revived_packets_ack_is_no_rtt_sample() {
        let mut f = Fixture::measured_with_data(10);
        let cfg = RtoConfig::default();
        let pns = f.send_data(at(200), 4);
        let rto = f.path.rto_deadline(&cfg, Duration::MAX).expect("armed");
        f.path.on_rto(rto, &mut f.stream);
        f.ack(rto + 900 * MS, &[(pns[0], pns[3])]);
        assert_eq!(f.path.rtt().latest(), 100 * MS);
        assert_eq!(f.path.in_flight(), 0);
    }

    /// When a packet sent after the timeout is acknowledged first, the
    /// timeout was right: what it declared lost stays lost and is sent
    /// again; an original arriving later is an ordinary spurious loss.
    #[test]
    fn a_timeout_a_later_packet_confirms_keeps_its_losses() {
        let mut f = Fixture::measured_with_data(20);
        let cfg = RtoConfig::default();
        let pns = f.send_data(at(200), 5);
        let rto = f.path.rto_deadline(&cfg, Duration::MAX).expect("armed");
        f.path.on_rto(rto, &mut f.stream);
        let probe = f.send_data(rto, 1);
        let out = f.ack(rto + 100 * MS, &[(probe[0], probe[0])]);
        assert_eq!((out.newly_acked, out.spurious), (1, 0));
        let next = f.stream.peek().expect("more to send");
        assert!(next.retransmission, "the other four wait as lost");
        let out = f.ack(rto + 110 * MS, &[(probe[0], probe[0]), (pns[1], pns[1])]);
        assert_eq!((out.newly_acked, out.spurious), (0, 1));
        let stats = f.path.snapshot(&cfg);
        assert_eq!(stats.spurious_timeouts, 0);
        assert_eq!((stats.lost_packets, stats.spurious_losses), (5, 1));
    }

    #[test]
    fn two_timeouts_in_a_row_start_probing_until_an_ack() {
        let mut f = Fixture::new();
        let cfg = RtoConfig::default();
        f.send(at(0), 2);
        assert_eq!(f.path.rto_deadline(&cfg, Duration::MAX), Some(at(1000)));
        assert!(!f.path.on_rto(at(1000), &mut f.stream));
        assert_eq!((f.path.in_flight(), f.path.state()), (0, PathState::Active));
        f.send(at(1000), 1);
        // Backed off: twice the initial RTO.
        assert_eq!(f.path.rto_deadline(&cfg, Duration::MAX), Some(at(3000)));
        let ssthresh = f.path.cc().metrics().ssthresh;
        assert!(f.path.on_rto(at(3000), &mut f.stream), "probing starts");
        // The second expiry times out the same data: ssthresh holds.
        assert_eq!(f.path.cc().metrics().ssthresh, ssthresh);
        assert_eq!(f.path.state(), PathState::Probing);
        assert!(f.path.pending.probe && !f.path.can_send_data(SEGMENT_SIZE));
        // While probing, the probe timer runs from the last send, capped.
        let probe = f.send(at(3000), 1);
        assert_eq!(f.path.rto_deadline(&cfg, 500 * MS), Some(at(3500)));
        let out = f.ack(at(3100), &[(probe[0], probe[0])]);
        assert!(out.back_from_probing);
        assert_eq!(f.path.state(), PathState::Active);
        let stats = f.path.snapshot(&cfg);
        assert_eq!((stats.timeouts, stats.lost_packets), (2, 3));
    }
}
