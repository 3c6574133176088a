//! How far back a receiver's ACK frames need to reach.
//!
//! Packet numbers are never reused, so every lost packet leaves a hole in
//! the received set for good, and an ACK frame listing every range grows to
//! its limit of [`crate::wire::MAX_ACK_RANGES`] (about 300 bytes) once 128
//! packets have been lost. On an idle return path that costs nothing; in
//! full duplex those ACKs share the link and the queue with data (13 % of
//! the bytes on rudp loss-0pct-jitter-duplex with BBR, seed 1).
//!
//! A range matters to the sender only until it has heard of it. QUIC tracks
//! which ACK frames the peer acknowledged (RFC 9000 §13.2.4); ours mostly
//! travel in ACK-only packets that are never acknowledged, so instead a
//! range is forgotten once it has been reported for a while: in at least
//! [`MIN_REPORTS`] frames (all of them lost has probability 0.3^8 < 1e-4 at
//! 30 % loss) and for at least a minimum RTT (a hole filled later than that
//! is one the sender's RACK timer treats as lost anyway). Ranges are
//! forgotten only while the path has data of ours in flight (see
//! `Path::on_ack_sent`). Forgetting cut the ACK bytes on that row from 13 %
//! to 3.6 % and let data packets carry the ACK again (the scheduler
//! piggybacks only up to four ranges).

use crate::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// ACK frames a range is reported in before it may be forgotten.
const MIN_REPORTS: usize = 8;
/// Frames remembered; at higher ACK rates the oldest go first, which only
/// shortens the time a range is kept (it is still reported 256 times).
const MAX_HISTORY: usize = 256;

/// The ACK frames sent: when, and the largest packet received by then.
#[derive(Debug, Clone, Default)]
pub struct AckFloor {
    sent: VecDeque<(Instant, u64)>,
}

impl AckFloor {
    /// Records an ACK frame sent at `now` when `largest` was the largest
    /// packet received; returns the packet number below which ranges have
    /// been reported long enough (`hold`) and often enough to forget.
    pub fn on_ack_sent(&mut self, now: Instant, largest: u64, hold: Duration) -> Option<u64> {
        self.sent.push_back((now, largest));
        if self.sent.len() > MAX_HISTORY {
            self.sent.pop_front();
        }
        let cutoff = now.saturating_sub(hold);
        // The newest frame old enough, with MIN_REPORTS frames after it.
        let reported = self.sent.len().checked_sub(MIN_REPORTS + 1)?;
        let newest_old = (0..=reported).rev().find(|&i| self.sent[i].0 <= cutoff)?;
        let floor = self.sent[newest_old].1;
        self.sent.drain(..newest_old);
        Some(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_only_what_was_reported_long_and_often_enough() {
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let hold = Duration::from_millis(10);
        let mut f = AckFloor::default();
        // Eight frames 1 ms apart: old enough never, often enough never.
        for i in 0..9u64 {
            let now = t0 + Duration::from_millis(i);
            assert_eq!(f.on_ack_sent(now, 10 * i, hold), None, "frame {i}");
        }
        // 10 ms after the first frame, with 8 reports after it: its largest.
        assert_eq!(
            f.on_ack_sent(t0 + Duration::from_millis(10), 100, hold),
            Some(0)
        );
        assert_eq!(
            f.on_ack_sent(t0 + Duration::from_millis(12), 110, hold),
            Some(20)
        );
        // Frames far apart in time: the count limits.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(f.on_ack_sent(later, 120, hold), Some(30));
    }
}
