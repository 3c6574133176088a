//! What a path owes the peer in ACKs: the packet numbers it received, when
//! the next ACK is due, and the congestion feedback (the CE count and the
//! MB-ECN level) that goes with it.
//!
//! An ACK goes at once after a gap, reordering or every `ack_every`
//! ack-eliciting packets, and otherwise within the delayed-ACK time.

use super::ack_floor::AckFloor;
use super::micros_since;
use super::range_set::RangeSet;
use crate::cc::EceReceiver;
use crate::wire::{AckFrame, MAX_ACK_RANGES, MAX_RX_TIMES};
use crate::Instant;
use std::time::Duration;

/// Received packet-number ranges remembered for duplicate detection; the
/// newest `MAX_ACK_RANGES` of them go in each ACK.
const RECEIVED_RANGES: usize = 1024;
/// ACKs that repeat a packet's receive time: one lost ACK does not lose
/// the first flight's spacing.
const RX_TIME_REPORTS: u8 = 3;

/// Where a new packet number fell among those received before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arrival {
    /// Beyond the largest, after `holes` numbers not received (yet).
    Beyond { holes: u64 },
    /// Below the largest: reordered, or filling a hole.
    Late,
}

#[derive(Debug)]
pub(super) struct AcksOwed {
    received: RangeSet,
    /// Which received ranges our ACKs no longer need to list.
    ack_floor: AckFloor,
    /// Packets below this were forgotten: a late one is not listed again.
    forgotten_below: u64,
    largest_received_at: Instant,
    /// Receive time of the largest ack-eliciting packet, for
    /// [`AckFrame::rx_timestamp_us`]: the sender can date only packets it
    /// tracks, and ACK-only packets are not tracked.
    largest_eliciting: Option<(u64, Instant)>,
    /// Receive times of the path's first ack-eliciting packets not yet
    /// reported [`RX_TIME_REPORTS`] times, for [`AckFrame::rx_times`]: a
    /// receiver that reads the first flight in one batch still tells the
    /// sender how it arrived. With the reports left for each.
    rx_times: Vec<(u64, Instant, u8)>,
    /// How many more packets get their own receive time.
    rx_times_left: usize,
    /// Ack-eliciting packets since our last ACK.
    unacked_eliciting: u32,
    deadline: Option<Instant>,
    /// Reordering or a gap: acknowledge at once.
    ack_now: bool,
    ce_received: u64,
    /// MB-ECN level of what arrives here, and an update owed to the peer.
    ece: EceReceiver,
    ece_pending: Option<u16>,
    /// The ranges vector of the last ACK frame sent, for the next one to
    /// fill: a vector allocated per ACK cost more than filling it.
    spare_ranges: Vec<(u64, u64)>,
}

impl AcksOwed {
    pub fn new(now: Instant) -> Self {
        AcksOwed {
            received: RangeSet::new(RECEIVED_RANGES),
            ack_floor: AckFloor::default(),
            forgotten_below: 0,
            largest_received_at: now,
            largest_eliciting: None,
            rx_times: Vec::new(),
            rx_times_left: MAX_RX_TIMES,
            unacked_eliciting: 0,
            deadline: None,
            ack_now: false,
            ce_received: 0,
            ece: EceReceiver::default(),
            ece_pending: None,
            spare_ranges: Vec::new(),
        }
    }

    /// Records a received packet number: where it fell, or `None` for a
    /// duplicate. An ack-eliciting packet is acknowledged within
    /// `max_delay`, or at once when it is the `ack_every`th since the last ACK.
    pub fn on_received(
        &mut self,
        now: Instant,
        pn: u64,
        ack_eliciting: bool,
        max_delay: Duration,
        ack_every: u32,
    ) -> Option<Arrival> {
        if pn < self.forgotten_below {
            // Long declared lost by the sender: only its data counts.
            return Some(Arrival::Late);
        }
        let largest = self.received.max();
        if !self.received.insert(pn) {
            return None;
        }
        let arrival = match largest {
            Some(l) if pn < l => Arrival::Late,
            _ => Arrival::Beyond {
                holes: pn - largest.map_or(0, |l| l + 1),
            },
        };
        match arrival {
            Arrival::Beyond { holes } => {
                self.largest_received_at = now;
                if holes > 0 && largest.is_some() {
                    self.ack_now = true; // a gap: tell the sender soon
                }
            }
            Arrival::Late => self.ack_now = true, // reordered or filling a gap
        }
        if ack_eliciting {
            if self.largest_eliciting.is_none_or(|(l, _)| pn > l) {
                self.largest_eliciting = Some((pn, now));
            }
            if self.rx_times_left > 0 {
                self.rx_times_left -= 1;
                self.rx_times.push((pn, now, RX_TIME_REPORTS));
            }
            self.unacked_eliciting += 1;
            if self.unacked_eliciting >= ack_every {
                self.ack_now = true;
            }
            self.deadline.get_or_insert(now + max_delay);
        }
        Some(arrival)
    }

    /// The largest packet number received, if any.
    pub fn largest(&self) -> Option<u64> {
        self.received.max()
    }

    /// A received packet carried an ECN CE mark.
    pub fn on_ce(&mut self) {
        self.ce_received += 1;
    }

    /// Folds a received packet's MB-ECN level into the feedback owed.
    pub fn on_mbecn(&mut self, level: u8) {
        if let Some(ece) = self.ece.on_packet(level) {
            self.ece_pending = Some(ece);
        }
    }

    /// Whether ack-eliciting packets arrived since our last ACK.
    pub fn is_owed(&self) -> bool {
        self.unacked_eliciting > 0
    }

    /// Whether an ACK should go out now.
    pub fn is_due(&self, now: Instant) -> bool {
        let ack = self.ack_now || self.deadline.is_some_and(|d| d <= now);
        (self.is_owed() && ack) || self.ece_pending.is_some()
    }

    /// Whether a due ACK must go now rather than ride on a data packet
    /// about to leave: the delayed-ACK timer expired, or MB-ECN feedback
    /// is owed.
    pub fn is_urgent(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now) || self.ece_pending.is_some()
    }

    /// When the delayed-ACK timer fires.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Ranges an ACK would list, before the frame's own limit.
    pub fn range_count(&self) -> usize {
        self.received.len()
    }

    /// The MB-ECN level the peer should hear, once.
    pub fn take_ece(&mut self) -> Option<u16> {
        self.ece_pending.take()
    }

    /// The ACK frame for the packets received, without single receive times
    /// (see [`Self::rx_times`]); timestamps count from `epoch`.
    pub fn frame(
        &mut self,
        now: Instant,
        epoch: Instant,
        cumulative: u64,
        fin: bool,
        max_data: u64,
    ) -> AckFrame {
        let mut ranges = std::mem::take(&mut self.spare_ranges);
        ranges.clear();
        ranges.extend(self.received.iter_desc(MAX_ACK_RANGES));
        AckFrame {
            ranges,
            ack_delay_us: (now - self.largest_received_at).as_micros() as u64,
            cumulative,
            fin,
            max_data,
            ce_count: self.ce_received,
            rx_timestamp_us: micros_since(
                self.largest_eliciting
                    .map_or(self.largest_received_at, |(_, at)| at),
                epoch,
            ),
            rx_times: Vec::new(),
            short_headers: false,
        }
    }

    /// An ACK frame from [`Self::frame`] was sent: its ranges vector
    /// serves the next one.
    pub fn recycle(&mut self, frame: AckFrame) {
        self.spare_ranges = frame.ranges;
    }

    /// The receive times still owed, for [`AckFrame::rx_times`] of an ACK
    /// that has room for them; timestamps count from `epoch`.
    pub fn rx_times(&self, epoch: Instant) -> Vec<(u64, u64)> {
        // Newest first, as the ranges.
        self.rx_times
            .iter()
            .rev()
            .map(|&(pn, at, _)| (pn, micros_since(at, epoch)))
            .collect()
    }

    /// An ACK went out in our packet `pn` at `now`, `with_rx_times` if it
    /// carried the receive times. `forget_after` is the path's minimum RTT
    /// while our data is in flight, when ranges reported long enough may
    /// be dropped from later ACKs unheard (see [`AckFloor`]).
    pub fn on_sent(
        &mut self,
        now: Instant,
        pn: u64,
        forget_after: Option<Duration>,
        with_rx_times: bool,
    ) {
        if let Some(largest) = self.received.max() {
            if let Some(floor) = self.ack_floor.on_ack_sent(now, pn, largest, forget_after) {
                self.forget_below(floor);
            }
        }
        self.unacked_eliciting = 0;
        self.deadline = None;
        self.ack_now = false;
        if with_rx_times {
            self.rx_times.retain_mut(|(_, _, left)| {
                *left -= 1;
                *left > 0
            });
        }
    }

    /// The peer acknowledged `ranges` of our packets (validated): ranges
    /// our ACK frames in them reported need not be listed again.
    pub fn on_peer_ack(&mut self, ranges: &[(u64, u64)]) {
        if let Some(floor) = self.ack_floor.on_peer_ack(ranges) {
            self.forget_below(floor);
        }
    }

    fn forget_below(&mut self, floor: u64) {
        self.received.forget_below(floor);
        self.forgotten_below = self.forgotten_below.max(floor);
    }

    /// Whether the ACK-only packet leaving now should carry a PING, so that
    /// the peer acknowledges it (see [`AckFloor`]); `in_flight` says whether
    /// a packet of ours the peer will acknowledge is on its way anyway.
    pub fn wants_ping(&self, now: Instant, in_flight: bool, rtt: Duration) -> bool {
        self.ack_floor
            .wants_ping(now, self.received.len(), in_flight, rtt)
    }

    /// The ACK packet leaving now carries a PING.
    pub fn on_ping_sent(&mut self, now: Instant) {
        self.ack_floor.on_ping_sent(now);
    }

    /// The path closed: nothing more is owed on it.
    pub fn on_path_closed(&mut self) {
        self.deadline = None;
        self.unacked_eliciting = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(25);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn receive(acks: &mut AcksOwed, now: Instant, pn: u64) -> bool {
        acks.on_received(now, pn, true, DELAY, 2).is_some()
    }

    #[test]
    fn one_packet_waits_for_the_delayed_ack_timer() {
        let mut acks = AcksOwed::new(at(0));
        assert!(!acks.is_owed() && !acks.is_due(at(0)));
        assert!(receive(&mut acks, at(10), 0));
        assert!(acks.is_owed());
        assert_eq!(acks.deadline(), Some(at(10) + DELAY));
        assert!(!acks.is_due(at(34)) && !acks.is_urgent(at(34)));
        assert!(acks.is_due(at(35)) && acks.is_urgent(at(35)));
        acks.on_sent(at(100), 100, None, true);
        assert!(!acks.is_owed() && acks.deadline().is_none());
    }

    #[test]
    fn the_first_packets_are_dated_one_by_one_in_three_acks() {
        let mut acks = AcksOwed::new(at(0));
        let frame = |acks: &mut AcksOwed| AckFrame {
            rx_times: acks.rx_times(at(0)),
            ..acks.frame(at(100), at(0), 0, false, 0)
        };
        // One batch: three packets, dated at their arrivals.
        for pn in 0..3 {
            receive(&mut acks, at(10 + pn), pn);
        }
        let dated = vec![(2, 12_000), (1, 11_000), (0, 10_000)];
        assert_eq!(frame(&mut acks).rx_times, dated);
        // An ACK riding on data has no room for them: still owed.
        acks.on_sent(at(100), 100, None, false);
        for pn in 0..u64::from(RX_TIME_REPORTS) {
            assert_eq!(
                frame(&mut acks).rx_times,
                dated,
                "one lost ACK loses nothing"
            );
            acks.on_sent(at(100), 101 + pn, None, true);
        }
        assert!(frame(&mut acks).rx_times.is_empty());
        // Only the first MAX_RX_TIMES packets are dated.
        for pn in 3..100 {
            receive(&mut acks, at(20), pn);
        }
        let dated = frame(&mut acks).rx_times;
        assert_eq!(dated.len(), MAX_RX_TIMES - 3);
        assert_eq!(dated.last(), Some(&(3, 20_000)));
        assert_eq!(dated.first(), Some(&(MAX_RX_TIMES as u64 - 1, 20_000)));
    }

    #[test]
    fn every_second_packet_a_gap_or_reordering_is_acknowledged_at_once() {
        let mut acks = AcksOwed::new(at(0));
        receive(&mut acks, at(0), 0);
        receive(&mut acks, at(1), 1);
        assert!(acks.is_due(at(1)) && !acks.is_urgent(at(1)));
        acks.on_sent(at(100), 100, None, true);
        receive(&mut acks, at(2), 3);
        assert!(acks.is_due(at(2)), "a gap");
        acks.on_sent(at(100), 101, None, true);
        receive(&mut acks, at(3), 2);
        assert!(acks.is_due(at(3)), "reordering");
        // A packet that elicits no ACK is recorded but owes none.
        acks.on_sent(at(100), 102, None, true);
        assert_eq!(
            acks.on_received(at(4), 4, false, DELAY, 2),
            Some(Arrival::Beyond { holes: 0 })
        );
        assert!(!acks.is_owed() && !acks.is_due(at(100)));
    }

    #[test]
    fn duplicates_are_reported() {
        let mut acks = AcksOwed::new(at(0));
        assert!(receive(&mut acks, at(0), 7));
        assert!(!receive(&mut acks, at(1), 7));
    }

    #[test]
    fn the_frame_lists_ranges_newest_first_with_delay_and_feedback() {
        let mut acks = AcksOwed::new(at(0));
        for pn in [0, 1, 2, 5, 6] {
            receive(&mut acks, at(10 + pn), pn);
        }
        // An ACK-only packet arrives last: it is not what the timestamp dates.
        acks.on_received(at(20), 7, false, DELAY, 2);
        acks.on_ce();
        acks.on_mbecn(3);
        let epoch = at(5);
        let f = acks.frame(at(24), epoch, 1000, false, 1 << 20);
        assert_eq!(f.ranges, [(5, 7), (0, 2)]);
        assert_eq!(f.ack_delay_us, 4000);
        assert_eq!(f.ce_count, 1);
        assert_eq!(f.rx_timestamp_us, 11_000, "packet 6, at 16 ms from 5 ms");
        assert!(acks.is_due(at(24)) && acks.is_urgent(at(24)), "ECE owed");
        assert!(acks.take_ece().is_some());
        assert!(acks.take_ece().is_none());
        assert_eq!(acks.range_count(), 2);
    }

    #[test]
    fn ranges_are_forgotten_once_the_peer_acknowledged_an_ack_reporting_them() {
        let mut acks = AcksOwed::new(at(0));
        for pn in [0, 2, 4] {
            receive(&mut acks, at(pn), pn);
        }
        // Our packet 10 reports 0, 2 and 4; packet 11 the same plus 6.
        acks.on_sent(at(100), 10, None, true);
        receive(&mut acks, at(6), 6);
        acks.on_sent(at(100), 11, None, true);
        assert_eq!(acks.range_count(), 4);
        acks.on_peer_ack(&[(12, 12)]);
        assert_eq!(acks.range_count(), 4, "no frame of ours acknowledged");
        acks.on_peer_ack(&[(10, 10)]);
        assert_eq!(acks.range_count(), 1, "kept: 6, above the frame's largest");
        assert_eq!(acks.frame(at(7), at(0), 0, false, 0).ranges, [(6, 6)]);
        // A late packet below the floor counts as received, not as news.
        assert_eq!(
            acks.on_received(at(8), 3, true, DELAY, 2),
            Some(Arrival::Late)
        );
        assert_eq!(acks.range_count(), 1);
    }
}
