//! Datagram packetization-layer path MTU discovery (DPLPMTUD, RFC 8899),
//! as QUIC uses it (RFC 9000 §14.3), for one connection.
//!
//! Sizes are UDP payload bytes. The connection starts at the base size,
//! which the negotiated segment size already fits, and never goes below
//! it. While searching it sends one padded PING at a time (a probe),
//! binary-searching between the largest size acknowledged and the smallest
//! that failed (or the ceiling the runtime found for the route). A probe
//! is lost [`MAX_PROBES`] times before its size counts as too big; its loss
//! says nothing of congestion and it is never retransmitted. Once the
//! search ends, it starts again after [`RAISE_TIMER`]. Packets above the
//! base lost one after another, with no later one above the base
//! acknowledged ([`BLACK_HOLE_LOSSES`]), mean the route's MTU fell: back
//! to the base size and search again.
//!
//! Only what an authenticated ACK says moves this state: the session
//! calls [`Pmtud::on_acked`] and [`Pmtud::on_lost`] from its loss
//! detection, never from a datagram's header.

use crate::Instant;
use std::time::Duration;

/// Probes of one size lost before that size counts as too big (RFC 8899
/// §5.1.2, MAX_PROBES).
pub(crate) const MAX_PROBES: u8 = 3;
/// Time after a search ends before the next looks for a larger MTU (RFC
/// 8899 §5.1.1, PMTU_RAISE_TIMER).
pub(crate) const RAISE_TIMER: Duration = Duration::from_secs(600);
/// A search stops once the bounds are this close: a smaller step gains
/// under 1.5 % at Ethernet's MTU and costs a round trip per probe.
const MIN_STEP: u16 = 20;
/// Packets above the base size lost in a row, none acknowledged in
/// between, that mean a black hole (RFC 8899 §4.3). A congestion loss
/// burst is followed by an acknowledged packet of full size; a black hole
/// lets only smaller ones through.
pub(crate) const BLACK_HOLE_LOSSES: u32 = 4;

/// What the search is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Looking for a larger size: `fails` probes of `probe` lost so far.
    Searching { probe: u16, fails: u8 },
    /// Done until `until`.
    Complete { until: Instant },
}

#[derive(Debug, Clone)]
pub(crate) struct Pmtud {
    base: u16,
    ceiling: u16,
    /// The largest size acknowledged: what data packets may use.
    current: u16,
    /// The smallest size known too big (probes lost), above `current`.
    too_big: u16,
    phase: Phase,
    /// Packet number of the probe in flight.
    in_flight: Option<(u64, u16)>,
    /// Packets above the base lost in a row (see [`BLACK_HOLE_LOSSES`]).
    suspicious: u32,
    /// The largest packet number above the base acknowledged.
    largest_big_acked: Option<u64>,
    /// Black holes found, for the path's statistics.
    black_holes: u32,
}

impl Pmtud {
    /// A search between `base` and `ceiling` (both UDP payload bytes),
    /// starting now. A ceiling at or below the base disables it.
    pub fn new(base: u16, ceiling: u16, now: Instant) -> Self {
        let ceiling = ceiling.max(base);
        let mut p = Pmtud {
            base,
            ceiling,
            current: base,
            too_big: ceiling.saturating_add(1),
            phase: Phase::Complete { until: now },
            in_flight: None,
            suspicious: 0,
            largest_big_acked: None,
            black_holes: 0,
        };
        p.start_search(now);
        p
    }

    /// The largest datagram data packets may use.
    pub fn current(&self) -> u16 {
        self.current
    }

    /// The size every connection starts from.
    pub fn base(&self) -> u16 {
        self.base
    }

    pub fn black_holes(&self) -> u32 {
        self.black_holes
    }

    /// The size of the probe to send now, if one is due: searching, and
    /// none in flight.
    pub fn probe_due(&mut self, now: Instant) -> Option<u16> {
        if let Phase::Complete { until } = self.phase {
            if now < until || self.ceiling <= self.base {
                return None;
            }
            self.too_big = self.ceiling.saturating_add(1);
            self.start_search(now);
        }
        match self.phase {
            Phase::Searching { probe, .. } if self.in_flight.is_none() => Some(probe),
            _ => None,
        }
    }

    /// A probe of `size` went out as packet `pn`.
    pub fn on_probe_sent(&mut self, pn: u64, size: u16) {
        self.in_flight = Some((pn, size));
    }

    /// Whether packet `pn` is the probe in flight.
    pub fn is_probe(&self, pn: u64) -> bool {
        self.in_flight.is_some_and(|(p, _)| p == pn)
    }

    /// An authenticated ACK acknowledged packet `pn` of `size` bytes.
    pub fn on_acked(&mut self, now: Instant, pn: u64, size: u16) {
        if size > self.base {
            self.suspicious = 0;
            self.largest_big_acked = Some(self.largest_big_acked.map_or(pn, |l| l.max(pn)));
        }
        if !self.is_probe(pn) {
            return;
        }
        self.in_flight = None;
        self.current = self.current.max(size);
        self.next_probe(now);
    }

    /// Packet `pn` of `size` bytes was declared lost. Returns whether this
    /// loss revealed a black hole (the size fell back to the base).
    pub fn on_lost(&mut self, now: Instant, pn: u64, size: u16) -> bool {
        if self.is_probe(pn) {
            self.in_flight = None;
            if let Phase::Searching { probe, fails } = self.phase {
                if fails + 1 >= MAX_PROBES {
                    self.too_big = probe;
                    self.next_probe(now);
                } else {
                    self.phase = Phase::Searching {
                        probe,
                        fails: fails + 1,
                    };
                }
            }
            return false;
        }
        // Only packets of the size in use count: larger ones went out
        // before a fallback, and their loss is already known.
        let later_big_acked = self.largest_big_acked.is_some_and(|l| l > pn);
        if size <= self.base || size > self.current || later_big_acked {
            return false;
        }
        self.suspicious += 1;
        if self.suspicious < BLACK_HOLE_LOSSES {
            return false;
        }
        // RFC 8899 §5.2: back to the base, then search again from there.
        self.black_holes += 1;
        self.suspicious = 0;
        self.current = self.base;
        self.too_big = self.ceiling.saturating_add(1);
        self.in_flight = None;
        self.start_search(now);
        true
    }

    /// Searches from `current` up to `too_big`.
    fn start_search(&mut self, now: Instant) {
        self.phase = Phase::Complete { until: now };
        self.next_probe(now);
    }

    /// The next size halfway between the bounds, or the end of the search.
    fn next_probe(&mut self, now: Instant) {
        let top = self.too_big.saturating_sub(1).min(self.ceiling);
        if top <= self.current {
            self.phase = Phase::Complete {
                until: now + RAISE_TIMER,
            };
            return;
        }
        // The ceiling itself first: a route is usually as good as its
        // interface, and that ends the search in one round trip.
        let probe = if self.too_big > self.ceiling {
            top
        } else if top - self.current < MIN_STEP {
            self.phase = Phase::Complete {
                until: now + RAISE_TIMER,
            };
            return;
        } else {
            self.current + (top - self.current).div_ceil(2)
        };
        self.phase = Phase::Searching { probe, fails: 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }

    /// Runs a search against a route that carries up to `mtu` bytes;
    /// returns the sizes probed.
    fn converge(p: &mut Pmtud, mtu: u16, now: Instant) -> Vec<u16> {
        let mut probed = Vec::new();
        let mut pn = 1000;
        while let Some(size) = p.probe_due(now) {
            probed.push(size);
            p.on_probe_sent(pn, size);
            if size <= mtu {
                p.on_acked(now, pn, size);
            } else {
                assert!(!p.on_lost(now, pn, size));
            }
            pn += 1;
            assert!(probed.len() < 100, "the search ends");
        }
        probed
    }

    #[test]
    fn a_search_converges_to_the_route_mtu_and_no_further() {
        let mut p = Pmtud::new(1200, 1472, at(0));
        // The ceiling is probed first and holds.
        assert_eq!(converge(&mut p, 1472, at(0)), [1472]);
        assert_eq!(p.current(), 1472);
        // A tunnel under the interface: 1400 gets through, no more.
        let mut p = Pmtud::new(1200, 1472, at(0));
        let probed = converge(&mut p, 1400, at(0));
        assert!(p.current() <= 1400 && p.current() > 1400 - MIN_STEP);
        // Each failed size took MAX_PROBES probes.
        let failed = probed.iter().filter(|&&s| s > 1400).count();
        assert_eq!(failed % usize::from(MAX_PROBES), 0);
        assert!(probed.len() <= 3 * 4 + 6, "{probed:?}");
        // Never below the base, even if nothing above it gets through.
        let mut p = Pmtud::new(1200, 1472, at(0));
        converge(&mut p, 1000, at(0));
        assert_eq!(p.current(), 1200);
    }

    #[test]
    fn a_ceiling_at_the_base_never_probes() {
        let mut p = Pmtud::new(1416, 1400, at(0));
        assert_eq!(p.probe_due(at(0)), None);
        assert_eq!(p.probe_due(at(10_000)), None);
        assert_eq!(p.current(), 1416);
    }

    #[test]
    fn one_probe_at_a_time_and_lost_ones_are_not_retransmitted_but_retried_at_most_three_times() {
        let mut p = Pmtud::new(1200, 9000, at(0));
        let size = p.probe_due(at(0)).unwrap();
        p.on_probe_sent(1, size);
        assert_eq!(p.probe_due(at(0)), None, "one in flight");
        p.on_lost(at(1), 1, size);
        // A new packet number, the same size: a retry, not a retransmission.
        assert_eq!(p.probe_due(at(1)), Some(size));
        p.on_probe_sent(2, size);
        p.on_lost(at(1), 2, size);
        p.on_probe_sent(3, size);
        p.on_lost(at(1), 3, size);
        let next = p.probe_due(at(1)).unwrap();
        assert!(next < size, "three losses: a smaller size");
        assert_eq!(p.current(), 1200);
    }

    #[test]
    fn the_raise_timer_starts_a_new_search() {
        let mut p = Pmtud::new(1200, 1472, at(0));
        converge(&mut p, 1300, at(0));
        let found = p.current();
        assert!(found < 1472);
        assert_eq!(p.probe_due(at(599)), None);
        // The route improved meanwhile: the next search finds it.
        assert_eq!(converge(&mut p, 1472, at(600)).first(), Some(&1472));
        assert_eq!(p.current(), 1472);
    }

    #[test]
    fn a_black_hole_falls_back_to_the_base_and_searches_again() {
        let mut p = Pmtud::new(1200, 1472, at(0));
        converge(&mut p, 1472, at(0));
        // Data at 1472: a few acknowledged, then the route's MTU falls.
        // (The search's probes were packets 1000 on.)
        p.on_acked(at(1), 2010, 1472);
        for pn in 2011..2011 + u64::from(BLACK_HOLE_LOSSES) - 1 {
            assert!(!p.on_lost(at(2), pn, 1472));
        }
        assert_eq!(p.current(), 1472);
        assert!(p.on_lost(at(2), 2020, 1472));
        assert_eq!((p.current(), p.black_holes()), (1200, 1));
        // The rest of the flight sent at 1472 is lost too: no second fallback.
        for pn in 2021..2040 {
            assert!(!p.on_lost(at(2), pn, 1472));
        }
        // The search starts at once and settles under the new MTU.
        converge(&mut p, 1280, at(2));
        assert!(p.current() <= 1280 && p.current() > 1280 - MIN_STEP);
    }

    #[test]
    fn congestion_losses_followed_by_a_full_size_ack_are_no_black_hole() {
        let mut p = Pmtud::new(1200, 1472, at(0));
        converge(&mut p, 1472, at(0));
        // A burst of 10 lost, but packet 30, sent after them, arrived.
        p.on_acked(at(1), 2030, 1472);
        for pn in 2011..2021 {
            assert!(!p.on_lost(at(1), pn, 1472));
        }
        // Small packets lost say nothing either.
        for pn in 2031..2041 {
            assert!(!p.on_lost(at(1), pn, 1200));
        }
        assert_eq!(p.current(), 1472);
    }

    #[test]
    fn only_acknowledging_the_probe_itself_raises_the_size() {
        let mut p = Pmtud::new(1200, 1472, at(0));
        let size = p.probe_due(at(0)).unwrap();
        p.on_probe_sent(7, size);
        // An ACK of another packet, however large it claims to be, does not.
        p.on_acked(at(1), 6, 1200);
        p.on_acked(at(1), 8, 1200);
        assert_eq!(p.current(), 1200);
        p.on_acked(at(1), 7, size);
        assert_eq!(p.current(), size);
    }
}
