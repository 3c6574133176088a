//! How far back a receiver's ACK frames need to reach: RFC 9000 §13.2.4's
//! acknowledgement of ACKs.
//!
//! Packet numbers are never reused, so every lost packet leaves a hole in
//! the received set for good, and an ACK frame listing every range grows to
//! its limit of [`crate::wire::MAX_ACK_RANGES`] (about 300 bytes) once 128
//! packets have been lost; building and parsing those frames was ~40 % of
//! the simulator's time on a lossy one-way transfer, and in full duplex
//! they share the link and the queue with data.
//!
//! A range matters to the sender only until it has heard of it. Each
//! packet that carries one of our ACK frames is remembered with the largest
//! packet number that frame acknowledged; once the peer acknowledges that
//! packet, the frame has arrived, and later frames may leave out everything
//! up to that largest. A receiver that sends only ACKs would never hear
//! which of them arrived (ACK-only packets elicit no ACK), so once a round
//! trip, while it has more than [`PING_RANGES`] ranges, one of its ACK
//! packets also carries a PING (see [`AckFloor::wants_ping`]).
//!
//! In full duplex that acknowledgement comes a round trip and an ACK delay
//! later, and under jitter the ranges of that time outgrow what a data
//! packet carries along (four), so ACKs went in packets of their own again
//! (rudp loss-0pct-jitter-duplex with BBR: 40.5 Mbit/s one way, against
//! 42.8). While our data is in flight, a range is therefore also forgotten
//! once it has been reported for a while: in at least [`MIN_REPORTS`]
//! frames (all of them lost has probability 0.3^8 < 1e-4 at 30 % loss) and
//! for at least a minimum RTT (a hole filled later than that is one the
//! sender's RACK timer treats as lost anyway).

use crate::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Packets carrying our ACK frames remembered; at higher ACK rates the
/// oldest go first, which only delays forgetting until a newer one is
/// acknowledged (or shortens the time a range is kept while sending: it is
/// still reported 256 times).
const MAX_HISTORY: usize = 256;
/// ACK frames a range is reported in before it may be forgotten unheard.
const MIN_REPORTS: usize = 8;
/// Ranges a one-way receiver reports without asking for them to be
/// acknowledged. Each PING costs the sender an ACK-only packet, which on a
/// packet-rate-limited link takes a data packet's place in the queue and
/// delays the data behind it by one packet time: on NKP-0024's 128 pps
/// paths that pushed tail segments' ACKs past the moment the tail copies
/// judge them overdue (`session::tail_copy`), and 289 segments of a
/// lossless transfer went twice. A few ranges cost an ACK frame little,
/// and a lossless transfer has a few for good: the packet numbers its
/// sender skips on purpose (`packet_number`), about ten over 250 MB.
const PING_RANGES: usize = 16;

/// Our packets that carried an ACK frame, and the PINGs that ask the peer
/// to acknowledge them.
#[derive(Debug, Clone, Default)]
pub struct AckFloor {
    /// Packet number of ours, largest packet of the peer's it acknowledged;
    /// in increasing packet-number order.
    sent: VecDeque<(u64, u64)>,
    /// When each recent frame went, and its largest: see [`MIN_REPORTS`].
    reported: VecDeque<(Instant, u64)>,
    /// When an ACK packet of ours last carried a PING.
    last_ping: Option<Instant>,
}

impl AckFloor {
    /// Our packet `pn` carried an ACK frame whose largest was `largest`,
    /// at `now`. `hold` is the path's minimum RTT while our data is in
    /// flight: the packet number below which ranges were reported long
    /// and often enough to forget is returned, if there is one.
    pub fn on_ack_sent(
        &mut self,
        now: Instant,
        pn: u64,
        largest: u64,
        hold: Option<Duration>,
    ) -> Option<u64> {
        debug_assert!(self.sent.back().is_none_or(|&(last, _)| last < pn));
        if self.sent.len() == MAX_HISTORY {
            self.sent.pop_front();
        }
        self.sent.push_back((pn, largest));
        self.reported.push_back((now, largest));
        if self.reported.len() > MAX_HISTORY {
            self.reported.pop_front();
        }
        let cutoff = now.saturating_sub(hold?);
        // The newest frame old enough, with MIN_REPORTS frames after it.
        let last_old = self.reported.len().checked_sub(MIN_REPORTS + 1)?;
        let newest_old = (0..=last_old)
            .rev()
            .find(|&i| self.reported[i].0 <= cutoff)?;
        let floor = self.reported[newest_old].1;
        self.reported.drain(..newest_old);
        Some(floor)
    }

    /// The peer acknowledged `ranges` of our packets (validated, highest
    /// first). Returns the packet number below which our later ACK frames
    /// need list nothing: one past the largest of the newest acknowledged
    /// frame of ours, if a new one was.
    pub fn on_peer_ack(&mut self, ranges: &[(u64, u64)]) -> Option<u64> {
        let &(_, top) = ranges.first()?;
        // Newest first: the newest acknowledged frame decides, and those
        // before it are done with either way.
        let end = self.sent.partition_point(|&(pn, _)| pn <= top);
        let newest = (0..end).rev().find(|&i| {
            let pn = self.sent[i].0;
            ranges.iter().any(|&(lo, hi)| lo <= pn && pn <= hi)
        })?;
        let floor = self.sent[newest].1.saturating_add(1);
        self.sent.drain(..=newest);
        Some(floor)
    }

    /// Whether an ACK-only packet leaving now should carry a PING: the
    /// receiver has more than [`PING_RANGES`] ranges to report, none of its
    /// packets that the peer would acknowledge is in flight, and the last
    /// PING went at least a round trip (`rtt`) ago.
    pub fn wants_ping(&self, now: Instant, ranges: usize, in_flight: bool, rtt: Duration) -> bool {
        ranges > PING_RANGES
            && !in_flight
            && self
                .last_ping
                .is_none_or(|at| now.saturating_duration_since(at) >= rtt)
    }

    /// An ACK packet of ours carried a PING.
    pub fn on_ping_sent(&mut self, now: Instant) {
        self.last_ping = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_up_to_the_newest_frame_the_peer_acknowledged() {
        let mut f = AckFloor::default();
        for (pn, largest) in [(1, 10), (2, 20), (4, 40), (5, 50)] {
            f.on_ack_sent(Instant::ZERO, pn, largest, None);
        }
        // Nothing of ours that carried an ACK: nothing learned.
        assert_eq!(f.on_peer_ack(&[(3, 3)]), None);
        // Packets 2 and 4 arrived (1 was lost): frame 4 decides.
        assert_eq!(f.on_peer_ack(&[(4, 4), (2, 2)]), Some(41));
        // Older frames are done with; 5 still counts.
        assert_eq!(f.on_peer_ack(&[(1, 2)]), None);
        assert_eq!(f.on_peer_ack(&[(5, 5)]), Some(51));
        assert_eq!(f.on_peer_ack(&[(0, 9)]), None);
    }

    #[test]
    fn history_is_bounded() {
        let mut f = AckFloor::default();
        for pn in 0..10 * MAX_HISTORY as u64 {
            f.on_ack_sent(Instant::ZERO, pn, pn, None);
        }
        assert_eq!(f.sent.len(), MAX_HISTORY);
        assert_eq!(f.on_peer_ack(&[(0, 100)]), None, "long forgotten");
        let last = 10 * MAX_HISTORY as u64 - 1;
        assert_eq!(f.on_peer_ack(&[(last, last)]), Some(last + 1));
    }

    #[test]
    fn while_sending_forgets_what_was_reported_long_and_often_enough() {
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let hold = Some(Duration::from_millis(10));
        let mut f = AckFloor::default();
        // Nine frames 1 ms apart: old enough never, often enough never.
        for i in 0..9u64 {
            let now = t0 + Duration::from_millis(i);
            assert_eq!(f.on_ack_sent(now, i, 10 * i, hold), None, "frame {i}");
        }
        // 10 ms after the first frame, with 8 reports after it: its largest.
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(f.on_ack_sent(at(10), 9, 100, hold), Some(0));
        assert_eq!(f.on_ack_sent(at(12), 10, 110, hold), Some(20));
        // Frames far apart in time: the count limits.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(f.on_ack_sent(later, 11, 120, hold), Some(30));
        // Not while nothing of ours is in flight.
        assert_eq!(f.on_ack_sent(later, 12, 130, None), None);
    }

    #[test]
    fn pings_once_a_round_trip_and_only_when_there_is_much_to_forget() {
        let rtt = Duration::from_millis(40);
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let many = PING_RANGES + 1;
        let mut f = AckFloor::default();
        assert!(
            !f.wants_ping(t0, 1, false, rtt),
            "one range: nothing to forget"
        );
        assert!(
            !f.wants_ping(t0, PING_RANGES, false, rtt),
            "a few ranges: not worth the sender's ACK"
        );
        assert!(
            !f.wants_ping(t0, many, true, rtt),
            "a packet of ours will be acknowledged"
        );
        assert!(f.wants_ping(t0, many, false, rtt));
        f.on_ping_sent(t0);
        assert!(!f.wants_ping(t0 + rtt / 2, many, false, rtt));
        assert!(f.wants_ping(t0 + rtt, many, false, rtt));
    }
}
