//! A path's packet numbers: never reused, and now and then one left out
//! (RFC 9000 §21.4), so that a peer acknowledging what it did not receive
//! (an optimistic ACK, to inflate our window) gives itself away.

use crate::wire::AckFrame;
use rand::Rng;
use std::collections::VecDeque;

/// Packet numbers are skipped at random within gaps that start at this many
/// and double up to [`MAX_SKIP_GAP`]: an optimistic ACK is caught within a
/// few hundred packets early on, when inflating a window pays most, while
/// the holes, which every later ACK reports as a range, stay few (at 1 in
/// 256 they made ACKs carry up to 128 ranges and cost the simulator 40 % of
/// its speed).
const FIRST_SKIP_GAP: u64 = 256;
const MAX_SKIP_GAP: u64 = 1 << 16;
/// Skipped packet numbers remembered per path; older ones are forgotten
/// (an ACK covering one is then just not caught).
const SKIPPED_REMEMBERED: usize = 16;

/// Why an ACK frame cannot come from an honest peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckError {
    /// It acknowledges a packet number not sent yet.
    NeverSent,
    /// It acknowledges a packet number we skipped on purpose: the peer
    /// acknowledges what it did not receive (an optimistic ACK).
    Skipped,
}

#[derive(Debug, Default)]
pub(super) struct PacketNumbers {
    next: u64,
    /// Packet numbers left out on purpose, most recent last.
    skipped: VecDeque<u64>,
    /// The next packet number to leave out (0: not chosen yet), and the
    /// gap it was chosen in.
    skip_at: u64,
    skip_gap: u64,
    /// After a first "port unreachable": the packet number sent next then.
    /// Only a report about a packet from there on (a retransmission) is
    /// believed, so one forged report cannot end a handshake.
    unreachable_from: Option<u64>,
}

impl PacketNumbers {
    /// The number of the next packet, after leaving one out when its turn
    /// has come; `rng` places the holes.
    pub fn take(&mut self, rng: &mut impl Rng) -> u64 {
        if self.skip_at == 0 {
            self.skip_gap = FIRST_SKIP_GAP;
            self.skip_at = self.next + rng.gen_range(1..FIRST_SKIP_GAP);
        } else if self.next == self.skip_at {
            self.skip();
            self.skip_gap = (self.skip_gap * 2).min(MAX_SKIP_GAP);
            let gap = self.skip_gap;
            self.skip_at = self.next + rng.gen_range(gap / 2..gap);
        }
        let pn = self.next;
        self.next += 1;
        pn
    }

    /// The number the next packet would carry, were none left out.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Whether a packet numbered with low `bytes` bytes `truncated` left.
    pub fn has_sent(&self, truncated: u64, bytes: usize) -> bool {
        let next = self.next;
        next > 0 && crate::wire::expand_packet_number(Some(next - 1), truncated, bytes) < next
    }

    /// A believable "port unreachable" about the packet numbered `truncated`
    /// (its low `bytes` bytes): whether it recurs about a packet sent after
    /// the first such report, which alone is noted.
    pub fn on_unreachable(&mut self, truncated: u64, bytes: usize) -> bool {
        let next = self.next;
        let pn = crate::wire::expand_packet_number(next.checked_sub(1), truncated, bytes);
        match self.unreachable_from {
            Some(from) => pn >= from,
            None => {
                self.unreachable_from = Some(next);
                false
            }
        }
    }

    fn skip(&mut self) {
        if self.skipped.len() == SKIPPED_REMEMBERED {
            self.skipped.pop_front();
        }
        self.skipped.push_back(self.next);
        self.next += 1;
    }

    /// Checks an ACK frame's ranges before anything acts on them.
    pub fn validate_ack(&self, ack: &AckFrame) -> Result<(), AckError> {
        for &(lo, hi) in &ack.ranges {
            if hi >= self.next {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn ack(ranges: &[(u64, u64)]) -> AckFrame {
        AckFrame {
            ranges: ranges.to_vec(),
            ..AckFrame::default()
        }
    }

    /// Takes `n` numbers; returns them and the ones left out.
    fn take_n(numbers: &mut PacketNumbers, n: usize) -> (Vec<u64>, Vec<u64>) {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let taken: Vec<u64> = (0..n).map(|_| numbers.take(&mut rng)).collect();
        let holes = (0..numbers.next())
            .filter(|pn| taken.binary_search(pn).is_err())
            .collect();
        (taken, holes)
    }

    #[test]
    fn numbers_rise_and_holes_spread_out() {
        let mut numbers = PacketNumbers::default();
        let (taken, holes) = take_n(&mut numbers, 2000);
        assert!(taken.windows(2).all(|w| w[0] < w[1]), "never reused");
        // The first hole falls within the first gap, and the gap doubles:
        // 256, 512, 1024 and 2048 numbers leave room for three or four.
        assert!((3..=4).contains(&holes.len()), "{holes:?}");
        assert!(holes[0] < FIRST_SKIP_GAP);
        for w in holes.windows(3) {
            assert!(w[2] - w[1] > w[1] - w[0], "gaps widen: {holes:?}");
        }
    }

    #[test]
    fn acknowledging_a_hole_or_the_future_is_refused() {
        let mut numbers = PacketNumbers::default();
        let (taken, holes) = take_n(&mut numbers, 800);
        let (hole, next_hole) = (holes[0], holes[1]);
        let last = *taken.last().unwrap();
        let between = (hole + 1, next_hole - 1);
        assert_eq!(numbers.validate_ack(&ack(&[between])), Ok(()));
        assert_eq!(numbers.validate_ack(&ack(&[(0, hole - 1)])), Ok(()));
        assert_eq!(
            numbers.validate_ack(&ack(&[between, (0, hole)])),
            Err(AckError::Skipped)
        );
        assert_eq!(
            numbers.validate_ack(&ack(&[(last, last + 1)])),
            Err(AckError::NeverSent)
        );
    }

    #[test]
    fn only_the_newest_holes_are_remembered() {
        let mut numbers = PacketNumbers::default();
        for _ in 0..SKIPPED_REMEMBERED + 1 {
            numbers.skip();
        }
        // Number 0 was forgotten: an ACK of it is no longer caught.
        assert_eq!(numbers.validate_ack(&ack(&[(0, 0)])), Ok(()));
        assert_eq!(
            numbers.validate_ack(&ack(&[(1, 1)])),
            Err(AckError::Skipped)
        );
    }
}
