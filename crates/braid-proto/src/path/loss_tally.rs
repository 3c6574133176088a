//! How often a packet between us and the peer is lost on one path, both
//! ways, and from that how many unanswered probes make a peer silent.
//!
//! A live peer looks dead when every probe or its answer is lost. After `n`
//! probes that happens with `q^n`, where `q = 1 - (1 - p)^2` is the chance a
//! probe round trip fails at loss share `p`. The silent limit is the `n` that
//! brings `q^n` under [`FALSE_SILENCE`]. The share is an upper confidence
//! bound, not the plain ratio: a path known from a handful of packets has
//! not shown that it delivers, and a small flow is the one an outage or a
//! flood on a shared queue silences.

/// The chance, per silence, of declaring a live peer gone that the limit
/// accepts: a few thousand packets at 25 % loss take 18 probes (about 16 s
/// at one probe a second), at 5 % 7, and at no loss a few hundred packets
/// leave the configured floor.
const FALSE_SILENCE: f64 = 1e-6;
/// Standard deviations of the Wilson score interval's upper bound (about
/// 98 % one-sided): 0 losses in 10 packets bound the share at 29 %, in 1,000
/// at 0.4 %.
const Z: f64 = 2.0;
/// Counts halve at this many packets, so the share follows the last few
/// thousand packets rather than the whole session.
const HALVE_AT: u64 = 4096;
/// Limits beyond this are as good as none: the idle timeout ends the
/// session first.
const MAX_LIMIT: u32 = 1024;

/// Packets that could have been lost and those that were, both directions
/// together: ours that needed an acknowledgement and the peer's by the
/// holes in its packet numbers (the few it skips on purpose, 1 in 256 at
/// most, count as lost: a little more patience). Only authenticated
/// packets reach it, and a peer that inflates it only delays its own
/// verdict, up to the retry limit or the idle timeout.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct LossTally {
    packets: u64,
    lost: u64,
}

impl LossTally {
    /// One of our ack-eliciting packets left.
    pub fn on_sent(&mut self) {
        self.add(1, 0);
    }

    /// One of ours was declared lost.
    pub fn on_lost(&mut self) {
        self.lost = (self.lost + 1).min(self.packets);
    }

    /// A packet counted lost arrived after all: an ACK of one of ours that
    /// was declared lost, or one of the peer's filling a hole.
    pub fn on_found(&mut self) {
        self.lost = self.lost.saturating_sub(1);
    }

    /// A packet of the peer's arrived beyond the largest so far, after
    /// `holes` numbers that did not arrive (yet).
    pub fn on_received(&mut self, holes: u64) {
        self.add(1 + holes, holes);
    }

    fn add(&mut self, packets: u64, lost: u64) {
        self.packets += packets;
        self.lost += lost;
        if self.packets >= HALVE_AT {
            self.packets /= 2;
            self.lost /= 2;
        }
    }

    /// The loss share's upper bound (Wilson score interval, [`Z`]).
    pub fn loss_bound(&self) -> f64 {
        if self.packets == 0 {
            return 1.0;
        }
        let n = self.packets as f64;
        let p = self.lost as f64 / n;
        let z2 = Z * Z;
        let centre = p + z2 / (2.0 * n);
        let spread = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
        ((centre + spread) / (1.0 + z2 / n)).min(1.0)
    }

    /// Unanswered probes after which a peer is silent on this path: at
    /// least `floor`, and enough that a live peer's answers are all lost
    /// with a chance under [`FALSE_SILENCE`].
    pub fn silent_limit(&self, floor: u32) -> u32 {
        let delivered = 1.0 - self.loss_bound();
        let round_trip_fails = 1.0 - delivered * delivered;
        if round_trip_fails <= 0.0 {
            return floor;
        }
        let needed = FALSE_SILENCE.ln() / round_trip_fails.ln();
        let needed = if needed.is_finite() {
            needed.ceil().min(f64::from(MAX_LIMIT)) as u32
        } else {
            MAX_LIMIT
        };
        needed.max(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(packets: u64, lost: u64) -> LossTally {
        let mut t = LossTally::default();
        for i in 0..packets {
            t.on_sent();
            if i < lost {
                t.on_lost();
            }
        }
        t
    }

    #[test]
    fn a_well_known_clean_path_keeps_the_floor() {
        assert_eq!(tally(1000, 0).silent_limit(5), 5);
        assert!(tally(1000, 0).loss_bound() < 0.005);
        // 1 % loss: round trips fail 2 % of the time, 4 probes would do.
        assert_eq!(tally(3000, 30).silent_limit(5), 5);
    }

    #[test]
    fn loss_asks_for_more_probes() {
        let five = tally(4000, 200).silent_limit(5);
        let quarter = tally(4000, 1000).silent_limit(5);
        assert!((6..=7).contains(&five), "{five}");
        assert!((17..=19).contains(&quarter), "{quarter}");
    }

    #[test]
    fn little_history_is_not_trusted() {
        // 16 packets, 2 lost: the share may well be a third.
        let few = tally(16, 2);
        assert!(few.loss_bound() > 0.3, "{}", few.loss_bound());
        assert!(few.silent_limit(5) > 20);
        assert_eq!(LossTally::default().silent_limit(5), MAX_LIMIT);
        assert_eq!(tally(10, 10).silent_limit(5), MAX_LIMIT);
    }

    #[test]
    fn holes_in_the_peers_numbers_count_both_ways() {
        let mut t = LossTally::default();
        for _ in 0..500 {
            t.on_received(1); // every other packet of the peer's lost
        }
        assert_eq!((t.packets, t.lost), (1000, 500));
        t.on_found();
        assert_eq!(t.lost, 499);
        for _ in 0..500 {
            t.on_found();
        }
        assert_eq!(t.lost, 0, "never below zero");
    }

    #[test]
    fn counts_halve_so_the_share_follows_recent_packets() {
        let mut t = tally(4000, 0);
        for _ in 0..4000 {
            t.on_sent();
            t.on_lost();
        }
        // Half of the clean start is forgotten at each halving.
        assert!(t.loss_bound() > 0.7, "{}", t.loss_bound());
        assert!(t.packets < HALVE_AT);
    }
}
