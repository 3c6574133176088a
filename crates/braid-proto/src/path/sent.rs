//! A path's sent packets and loss detection.
//!
//! Loss detection follows RFC 9002 §6 and RFC 8985 (RACK): a packet is lost
//! when `packet_threshold` later packets were acknowledged, or when a later
//! packet was acknowledged and the packet is older than the reordering time
//! threshold. Reordering raises the packet threshold to the distance seen,
//! and each loss that proves spurious widens the time threshold. Lost
//! packets are remembered for a few RTOs so that a late ACK of one shows
//! the loss was spurious.
//!
//! A retransmission timeout declares everything in flight lost, and the
//! next ACK tells whether it was right (RFC 3522's detection, which packet
//! numbers make exact): one acknowledging a packet sent before the timeout
//! proves it spurious, and what it declared lost is in flight again before
//! the ACK is processed; one acknowledging only later packets confirms it.

use super::delivery_rate::SendState;
use crate::deque_map::DequeMap;
use crate::rtt::RttEstimator;
use crate::Instant;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::time::Duration;

/// Packet threshold ceiling after reordering is seen.
const MAX_PACKET_THRESHOLD: u64 = 1024;
/// Ceiling of RACK's reordering-window multiplier, which grows with each
/// round that finds a spurious retransmission (RFC 8985 §6.2).
const MAX_REO_MULT: u32 = 16;
/// Lost packets are remembered this many RTOs to detect spurious losses.
const LOST_MEMORY_RTOS: u32 = 4;

#[derive(Debug, Clone, Copy)]
pub(super) struct SentPacket {
    pub sent_at: Instant,
    /// Window charge: stream payload bytes (at least 1 for a data packet).
    pub charge: u64,
    /// Offset of the segment carried, if any.
    pub segment: Option<u64>,
    pub retransmission: bool,
    /// Back in flight after a timeout that proved spurious: its ACK is a
    /// late delivery, not a sample of the path now.
    pub revived: bool,
    /// UDP payload bytes, once sealed (0 until then), for path MTU discovery.
    pub size: u16,
    /// Delivery-rate state at send time.
    pub delivery: SendState,
}

/// Packets an ACK frame acknowledged, by ascending number: inline, since
/// an ACK mostly covers a packet or two and a vector's allocation per ACK
/// was most of the cost of gathering them.
pub(super) type Acked = SmallVec<[(u64, SentPacket); 4]>;

/// What an ACK frame's ranges did to the packets tracked.
#[derive(Debug)]
pub(super) struct AckedPackets {
    /// Newly acknowledged, by ascending packet number.
    pub newly: Acked,
    /// Revived packets newly acknowledged (out of `newly`), ascending.
    pub late: Vec<(u64, SentPacket)>,
    /// Declared lost, yet acknowledged now.
    pub spurious: Vec<SentPacket>,
    /// The largest packet number acknowledged before this ACK.
    pub largest_before: Option<u64>,
    /// What this ACK said of the last retransmission timeout, if it told.
    pub timeout: Option<TimeoutVerdict>,
}

/// What an ACK showed of the packets a retransmission timeout declared lost.
#[derive(Debug)]
pub(super) enum TimeoutVerdict {
    /// One of them arrived: all are in flight again (these, oldest first),
    /// and the ACK acknowledged the ones it covers as late deliveries.
    Spurious(Vec<(u64, SentPacket)>),
    /// A packet sent after the timeout arrived and none of them had: the
    /// ones numbered `lo..=hi` that are not acknowledged stay lost.
    Confirmed { lo: u64, hi: u64 },
}

#[derive(Debug)]
pub(super) struct SentPackets {
    /// In flight, keyed by packet number.
    sent: DequeMap<SentPacket>,
    /// Declared lost, remembered for a while to detect spurious losses;
    /// by packet number (losses are declared oldest first).
    lost: VecDeque<(u64, SentPacket)>,
    /// Window charge of `sent`.
    in_flight: u64,
    largest_acked: Option<u64>,
    packet_threshold: u64,
    reo_mult: u32,
    reo_raised_at: Option<Instant>,
    loss_deadline: Option<Instant>,
    /// Packet numbers the retransmission timeouts since the last verdict
    /// declared lost (everything then in flight: nothing older is).
    timed_out: Option<(u64, u64)>,
    /// The newest ack-eliciting packet's number, until its datagram is
    /// sealed and its size known.
    unsized_newest: Option<u64>,
    /// CE marks the peer has reported so far.
    peer_ce: u64,
}

impl SentPackets {
    pub fn new(packet_threshold: u64) -> Self {
        SentPackets {
            sent: DequeMap::default(),
            lost: VecDeque::new(),
            in_flight: 0,
            largest_acked: None,
            packet_threshold,
            reo_mult: 0,
            reo_raised_at: None,
            loss_deadline: None,
            timed_out: None,
            unsized_newest: None,
            peer_ce: 0,
        }
    }

    pub fn on_sent(&mut self, pn: u64, packet: SentPacket) {
        self.unsized_newest = Some(pn);
        self.in_flight += packet.charge;
        self.sent.insert(pn, packet);
    }

    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    /// The first datagram since the newest packet was recorded left,
    /// `size` bytes: that packet's size.
    pub fn on_datagram_sent(&mut self, size: usize) {
        if let Some(pn) = self.unsized_newest.take() {
            self.set_size(pn, u16::try_from(size).unwrap_or(u16::MAX));
        }
    }

    /// The peer's ACK reported `ce_count` CE marks in all: the new marks
    /// if the count rose, no more than the ACK newly acknowledged
    /// (RFC 9000 §13.4.2.1): the count is the peer's word.
    pub fn on_peer_ce(&mut self, ce_count: u64, newly_acked: u64) -> Option<u64> {
        if ce_count <= self.peer_ce {
            return None;
        }
        let marks = (ce_count - self.peer_ce).min(newly_acked);
        self.peer_ce = ce_count;
        Some(marks)
    }

    /// Records packet `pn`'s size once it is sealed.
    fn set_size(&mut self, pn: u64, size: u16) {
        if let Some(p) = self.sent.get_mut(pn) {
            p.size = size;
        }
    }

    /// Bytes in flight (window charge).
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The packet in flight sent last.
    pub fn newest(&self) -> Option<&SentPacket> {
        self.sent.last().map(|(_, p)| p)
    }

    /// The newest segment in flight, for a tail-loss probe to repeat.
    pub fn newest_segment(&self) -> Option<u64> {
        self.sent.values().rev().find_map(|p| p.segment)
    }

    /// When the packets not yet lost become lost by the time threshold.
    pub fn loss_deadline(&self) -> Option<Instant> {
        self.loss_deadline
    }

    /// Takes what the ranges of an ACK frame newly acknowledge out of
    /// flight, and what they show arrived after all out of the lost; the
    /// reordering either reveals raises the loss thresholds. `srtt` is the
    /// smoothed RTT before this ACK's sample.
    pub fn on_ack(&mut self, now: Instant, ranges: &[(u64, u64)], srtt: Duration) -> AckedPackets {
        let mut timeout = self.revive_if_timed_out_spuriously(ranges);
        let largest_before = self.largest_acked;
        let mut newly = Acked::new();
        let mut spurious = Vec::new();
        // ACKs repeat old ranges, which acknowledge nothing new but the
        // holes they fill. Below the largest acknowledged before, only
        // those holes are still tracked: each is looked up in the ranges,
        // rather than every range in the packets (two tree searches per
        // range per ACK were a third of a 1 Gbit/s simulation).
        let fresh = largest_before.map_or(0, |l| l + 1);
        for (pn, &p) in self.sent.range(..fresh) {
            if covers(ranges, pn) {
                newly.push((pn, p));
            }
        }
        for &(lo, hi) in ranges {
            if hi < fresh {
                break; // highest first: the rest are older still
            }
            newly.extend(self.sent.range(lo.max(fresh)..=hi).map(|(pn, &p)| (pn, p)));
        }
        // Declared lost yet acknowledged. The lost packets between two
        // ranges are the holes the ACK reports, usually one or two, so one
        // walk up both finds them; then in the ranges' order (each range's
        // from its lowest), as they are handled.
        let mut found: Vec<(usize, u64)> = Vec::new();
        if let Some(&(lowest, _)) = ranges.last() {
            let mut i = self.lost.partition_point(|&(pn, _)| pn < lowest);
            for (r, &(lo, hi)) in ranges.iter().enumerate().rev() {
                while i < self.lost.len() && self.lost[i].0 < lo {
                    i += 1;
                }
                while i < self.lost.len() && self.lost[i].0 <= hi {
                    found.push((r, self.lost[i].0));
                    i += 1;
                }
            }
        }
        found.sort_unstable();
        for (_, pn) in found {
            let i = self.lost.partition_point(|&(n, _)| n < pn);
            let (_, p) = self.lost.remove(i).expect("found above");
            self.on_spurious_loss(now, pn, srtt);
            spurious.push(p);
        }
        newly.sort_unstable_by_key(|&(pn, _)| pn);
        // Revived packets are the oldest in flight.
        let any_revived = self.sent.first().is_some_and(|(_, p)| p.revived);
        for &(pn, p) in &newly {
            self.sent.remove(pn);
            self.in_flight -= p.charge;
        }
        // Delayed through the stall that timed out: their RTTs and the
        // burst of their ACKs say nothing of the path since.
        let late = if any_revived {
            let (late, current): (Acked, Acked) = newly.into_iter().partition(|(_, p)| p.revived);
            newly = current;
            late.into_vec()
        } else {
            Vec::new()
        };
        if let (Some(&(first, _)), Some(&(largest, _))) = (newly.first(), newly.last()) {
            if largest_before.is_none_or(|l| largest > l) {
                self.largest_acked = Some(largest);
            }
            // Filling a hole below the largest acknowledged: reordering.
            if let Some(before) = largest_before.filter(|&b| first < b) {
                let distance = before - first + 1;
                self.packet_threshold = self
                    .packet_threshold
                    .max(distance.min(MAX_PACKET_THRESHOLD));
            }
        }
        // A late packet judges the revived ones below it by the usual
        // thresholds: one still missing then was lost.
        if let Some(&(pn, _)) = late.last() {
            if self.largest_acked.is_none_or(|l| pn > l) {
                self.largest_acked = Some(pn);
            }
        }
        if let Some((lo, hi)) = self.timed_out {
            if newly.last().is_some_and(|&(pn, _)| pn > hi) {
                self.timed_out = None;
                timeout = Some(TimeoutVerdict::Confirmed { lo, hi });
            }
        }
        AckedPackets {
            newly,
            late,
            spurious,
            largest_before,
            timeout,
        }
    }

    /// If `ranges` cover a packet the last timeouts declared lost, puts all
    /// of those still remembered back in flight: the packets that arrive
    /// late are then acknowledged, not found spurious one by one, and the
    /// rest are judged by the usual thresholds against what arrived. A
    /// delay is not reordering: neither threshold widens.
    fn revive_if_timed_out_spuriously(&mut self, ranges: &[(u64, u64)]) -> Option<TimeoutVerdict> {
        let (lo, hi) = self.timed_out?;
        // One search per range: a remembered packet of the timeout's in it.
        let proof = ranges.iter().any(|&(a, b)| {
            let (a, b) = (a.max(lo), b.min(hi));
            let i = self.lost.partition_point(|&(pn, _)| pn < a);
            a <= b && self.lost.get(i).is_some_and(|&(pn, _)| pn <= b)
        });
        if !proof {
            return None;
        }
        let first = self.lost.partition_point(|&(pn, _)| pn < lo);
        let end = self.lost.partition_point(|&(pn, _)| pn <= hi);
        self.timed_out = None;
        let revived: Vec<_> = self.lost.drain(first..end).collect();
        // Newest first: each goes in front of the packets sent since.
        for &(pn, p) in revived.iter().rev() {
            self.in_flight += p.charge;
            let p = SentPacket { revived: true, ..p };
            self.sent.insert(pn, p);
        }
        Some(TimeoutVerdict::Spurious(revived))
    }

    /// Declared lost and remembered, numbered `lo..=hi`.
    pub fn lost_between(&self, lo: u64, hi: u64) -> impl Iterator<Item = &(u64, SentPacket)> {
        let first = self.lost.partition_point(|&(pn, _)| pn < lo);
        self.lost
            .range(first..)
            .take_while(move |&&(pn, _)| pn <= hi)
    }

    /// Stops remembering lost packet `pn`: its ACK, should one come, would
    /// prove nothing (a path MTU probe's).
    pub fn forget_lost(&mut self, pn: u64) {
        let i = self.lost.partition_point(|&(n, _)| n < pn);
        if self.lost.get(i).is_some_and(|&(n, _)| n == pn) {
            self.lost.remove(i);
        }
    }

    /// Packet `pn`, declared lost, arrived after all: the reordering it
    /// reveals widens both loss thresholds.
    fn on_spurious_loss(&mut self, now: Instant, pn: u64, srtt: Duration) {
        if let Some(largest) = self.largest_acked.filter(|&l| l > pn) {
            let distance = (largest - pn + 1).min(MAX_PACKET_THRESHOLD);
            self.packet_threshold = self.packet_threshold.max(distance);
        }
        // At most once per round trip (RFC 8985 §6.2 step 4).
        if self.reo_raised_at.is_none_or(|t| now >= t + srtt) {
            self.reo_mult = (self.reo_mult + 1).min(MAX_REO_MULT);
            self.reo_raised_at = Some(now);
        }
    }

    /// Declares lost what the threshold rules say is, oldest first, and
    /// arms the loss timer for the rest.
    pub fn detect_losses(&mut self, now: Instant, rtt: &RttEstimator) -> Vec<(u64, SentPacket)> {
        self.loss_deadline = None;
        let mut lost = Vec::new();
        let Some(largest) = self.largest_acked else {
            return lost;
        };
        let delay = self.loss_delay(rtt);
        while let Some((pn, &p)) = self.sent.first() {
            if pn >= largest {
                break;
            }
            let by_count = largest - pn >= self.packet_threshold;
            let by_time = p.sent_at + delay <= now;
            if !(by_count || by_time) {
                self.loss_deadline = Some(p.sent_at + delay);
                break;
            }
            lost.push((pn, self.declare_lost(pn)));
        }
        self.forget_old_losses(now, rtt);
        lost
    }

    /// Declares everything in flight lost, oldest first, as the
    /// retransmission timer expired: the next ACK judges it.
    pub fn declare_timed_out(&mut self) -> Vec<(u64, SentPacket)> {
        let lost = self.declare_everything_lost();
        if let (Some(&(first, _)), Some(&(last, _))) = (lost.first(), lost.last()) {
            let lo = self.timed_out.map_or(first, |(lo, _)| lo);
            self.timed_out = Some((lo, last));
        }
        lost
    }

    /// Declares everything in flight lost, oldest first, for good (the path closed).
    pub fn declare_all_lost(&mut self) -> Vec<(u64, SentPacket)> {
        self.timed_out = None;
        self.declare_everything_lost()
    }

    fn declare_everything_lost(&mut self) -> Vec<(u64, SentPacket)> {
        let mut lost = Vec::with_capacity(self.sent.len());
        while let Some((pn, _)) = self.sent.first() {
            lost.push((pn, self.declare_lost(pn)));
        }
        self.loss_deadline = None;
        lost
    }

    fn declare_lost(&mut self, pn: u64) -> SentPacket {
        let p = self.sent.remove(pn).expect("declared packet is in flight");
        self.in_flight -= p.charge;
        // Oldest first: numbers only grow here.
        let at = self.lost.partition_point(|&(n, _)| n < pn);
        self.lost.insert(at, (pn, p));
        p
    }

    /// The time threshold of RFC 8985 §6.2: RTT plus a reordering window
    /// that starts at RTT/8 (RFC 9002's 9/8) and widens per spurious loss.
    fn loss_delay(&self, rtt: &RttEstimator) -> Duration {
        let srtt = rtt.srtt_or(Duration::from_millis(100)).max(rtt.latest());
        let reo = (rtt.min() / 4) * self.reo_mult;
        // RFC 8985 §6.2: the reordering window never exceeds sRTT.
        let reo = reo.min(rtt.srtt_or(srtt));
        srtt + (srtt / 8).max(reo).max(Duration::from_millis(1))
    }

    fn forget_old_losses(&mut self, now: Instant, rtt: &RttEstimator) {
        let keep = rtt
            .srtt_or(Duration::from_secs(1))
            .max(Duration::from_millis(250))
            * LOST_MEMORY_RTOS;
        while let Some((_, p)) = self.lost.front() {
            if p.sent_at + keep > now && self.lost.len() <= 4 * MAX_PACKET_THRESHOLD as usize {
                break;
            }
            self.lost.pop_front();
        }
    }
}

/// Whether `pn` is in `ranges` (disjoint, highest first).
fn covers(ranges: &[(u64, u64)], pn: u64) -> bool {
    let i = ranges.partition_point(|&(lo, _)| lo > pn);
    ranges.get(i).is_some_and(|&(_, hi)| hi >= pn)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn packet(sent_at: Instant) -> SentPacket {
        SentPacket {
            sent_at,
            charge: 1000,
            segment: None,
            retransmission: false,
            revived: false,
            size: 0,
            delivery: SendState::default(),
        }
    }

    /// Packets 0..n sent 1 ms apart from t = 0.
    fn sent(n: u64) -> SentPackets {
        let mut s = SentPackets::new(3);
        for pn in 0..n {
            s.on_sent(pn, packet(at(pn)));
        }
        s
    }

    fn rtt(ms: u64) -> RttEstimator {
        let mut rtt = RttEstimator::default();
        rtt.update(Duration::from_millis(ms), Duration::ZERO);
        rtt
    }

    fn pns(lost: &[(u64, SentPacket)]) -> Vec<u64> {
        lost.iter()
            .map(|(_, p)| p.sent_at.as_nanos() / 1_000_000)
            .collect()
    }

    #[test]
    fn an_ack_takes_its_packets_out_of_flight() {
        let mut s = sent(10);
        assert_eq!(s.in_flight(), 10_000);
        let acked = s.on_ack(at(50), &[(7, 8), (2, 4)], Duration::ZERO);
        let newly: Vec<u64> = acked.newly.iter().map(|&(pn, _)| pn).collect();
        assert_eq!(newly, [2, 3, 4, 7, 8]);
        assert_eq!(acked.largest_before, None);
        assert_eq!(s.largest_acked, Some(8));
        assert_eq!(s.in_flight(), 5_000);
        // Repeated ranges acknowledge nothing new.
        let again = s.on_ack(at(51), &[(7, 8), (2, 4)], Duration::ZERO);
        assert!(again.newly.is_empty() && again.spurious.is_empty());
        assert_eq!(again.largest_before, Some(8));
    }

    #[test]
    fn three_later_packets_make_a_loss() {
        let mut s = sent(10);
        s.on_ack(at(50), &[(4, 4)], Duration::ZERO);
        // 50 ms after the first send, with a 100 ms RTT: too early by time.
        let lost = s.detect_losses(at(50), &rtt(100));
        assert_eq!(pns(&lost), [0, 1]);
        assert_eq!(s.in_flight(), 7_000);
        // Packet 2 is lost once 112.5 ms (RTT·9/8) passed since it left.
        assert_eq!(s.loss_deadline(), Some(at(2) + 1125 * MS / 10));
        assert!(s.detect_losses(at(114), &rtt(100)).is_empty());
        assert_eq!(pns(&s.detect_losses(at(116), &rtt(100))), [2, 3]);
        assert_eq!(s.loss_deadline(), None, "nothing below the largest is left");
    }

    #[test]
    fn a_late_ack_of_a_lost_packet_raises_the_thresholds() {
        let mut s = sent(20);
        s.on_ack(at(50), &[(10, 10)], Duration::ZERO);
        let lost = s.detect_losses(at(50), &rtt(100));
        assert_eq!(lost.len(), 8);
        let acked = s.on_ack(at(60), &[(2, 2)], 100 * MS);
        assert!(acked.newly.is_empty());
        let spurious: Vec<_> = acked.spurious.iter().map(|&p| (0, p)).collect();
        assert_eq!(pns(&spurious), [2]);
        // Packet 2 arrived 9 packets behind the largest: reordering, not loss.
        assert_eq!(s.packet_threshold, 9);
        assert_eq!((s.reo_mult, s.reo_raised_at), (1, Some(at(60))));
        // A second spurious loss in the same round trip widens the window no further.
        s.on_ack(at(61), &[(3, 3)], 100 * MS);
        assert_eq!(s.reo_mult, 1);
        s.on_ack(at(160), &[(4, 4)], 100 * MS);
        assert_eq!(s.reo_mult, 2);
    }

    #[test]
    fn filling_a_hole_raises_the_packet_threshold() {
        let mut s = sent(10);
        s.on_ack(at(20), &[(9, 9)], Duration::ZERO);
        s.on_ack(at(21), &[(9, 9), (4, 5)], Duration::ZERO);
        assert_eq!(s.largest_acked, Some(9));
        assert_eq!(s.packet_threshold, 6);
    }

    #[test]
    fn a_timeout_loses_everything_and_old_losses_are_forgotten() {
        let mut s = sent(5);
        assert_eq!(pns(&s.declare_all_lost()), [0, 1, 2, 3, 4]);
        assert!(s.is_empty() && s.in_flight() == 0);
        assert_eq!(s.lost.len(), 5);
        // Kept 4 RTOs of at least 250 ms; no sample yet counts as 1 s.
        s.forget_old_losses(at(4000), &RttEstimator::default());
        assert_eq!(s.lost.len(), 4);
        s.forget_old_losses(at(1003), &rtt(100));
        assert_eq!(s.lost.len(), 1);
    }

    /// An ACK of one packet a timeout declared lost brings all of them
    /// back in flight; the acknowledged ones are late, and a delay widens
    /// neither loss threshold.
    #[test]
    fn a_timeout_an_earlier_packet_disproves_revives_its_packets() {
        let mut s = sent(5);
        assert_eq!(s.declare_timed_out().len(), 5);
        s.on_sent(5, packet(at(300)));
        let acked = s.on_ack(at(400), &[(1, 2)], Duration::ZERO);
        let Some(TimeoutVerdict::Spurious(revived)) = &acked.timeout else {
            panic!("{:?}", acked.timeout);
        };
        assert_eq!(revived.len(), 5);
        assert!(acked.newly.is_empty() && acked.spurious.is_empty());
        let late: Vec<u64> = acked.late.iter().map(|&(pn, _)| pn).collect();
        assert_eq!(late, [1, 2]);
        assert_eq!(s.in_flight(), 4_000, "0, 3, 4 and the probe");
        assert_eq!((s.packet_threshold, s.reo_mult), (3, 0));
        // Packet 0, below a late one and long gone, is judged lost.
        assert_eq!(pns(&s.detect_losses(at(400), &rtt(100))), [0]);
        // The verdict is given once.
        let acked = s.on_ack(at(401), &[(5, 5), (3, 4)], Duration::ZERO);
        assert!(acked.timeout.is_none());
        assert_eq!((acked.newly.len(), acked.late.len()), (1, 2));
    }

    /// An ACK of a packet sent after the timeout, and of none before it,
    /// confirms the timeout once; a late original is then a spurious loss.
    #[test]
    fn a_timeout_a_later_packet_confirms_keeps_its_losses() {
        let mut s = sent(3);
        s.declare_timed_out();
        s.on_sent(3, packet(at(300)));
        s.declare_timed_out();
        s.on_sent(4, packet(at(700)));
        let acked = s.on_ack(at(800), &[(4, 4)], Duration::ZERO);
        assert!(matches!(
            acked.timeout,
            Some(TimeoutVerdict::Confirmed { lo: 0, hi: 3 })
        ));
        assert_eq!(s.lost_between(0, 3).count(), 4);
        let acked = s.on_ack(at(810), &[(4, 4), (1, 1)], Duration::ZERO);
        assert!(acked.timeout.is_none() && acked.spurious.len() == 1);
    }
}
