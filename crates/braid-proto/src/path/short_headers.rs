//! Whether a connection's packets may leave out the session id and path
//! (the short header, see `wire::header`), both ways. Each side offers it
//! for the packets it receives, once the address they come from tells it
//! the session and connection (its runtime knows; the simulator's links
//! always do), and says so in every ACK of the connection, so a lost ACK
//! loses nothing and the offer can be withdrawn. A side sends short
//! headers while the peer's latest ACK offers them and nothing says its
//! address may have changed: after a retransmission timeout, until the
//! peer is heard again, its packets name the session in full, so that a
//! peer whose NAT rebound finds the session by its id and follows it.
//!
//! A side that only sends data never owes an ACK (the peer's ACKs elicit
//! none), so an offer it makes, or withdraws, rides on an ACK frame of its
//! own once a round trip until the peer's packets show the peer knows:
//! they arrive in the form offered.

use crate::Instant;
use std::time::Duration;

/// See the module documentation.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ShortHeaders {
    /// We can tell this connection's packets by their address.
    offered: bool,
    /// The peer can, as of the ACK that acknowledged `as_of`.
    peer_offers: bool,
    /// The largest packet number acknowledged with the peer's latest say:
    /// an older ACK, reordered, does not overrule a newer one.
    as_of: Option<u64>,
    /// Our offer changed and the peer's packets do not show it yet.
    untold: bool,
    /// When an ACK frame last carried it.
    told_at: Option<Instant>,
}

impl ShortHeaders {
    /// Whether we offer the peer short headers (our ACKs' flag).
    pub fn offered(&self) -> bool {
        self.offered
    }

    /// Whether we can tell this connection's packets by their address.
    pub fn set_offered(&mut self, offered: bool) {
        if offered != self.offered {
            self.offered = offered;
            self.untold = true;
            self.told_at = None;
        }
    }

    /// An authentic packet arrived here, in the short form or not.
    pub fn on_received(&mut self, short: bool) {
        if short == self.offered {
            self.untold = false;
        }
    }

    /// Whether an ACK frame should carry our offer now, though none is
    /// owed: it changed, the peer does not show it, and none carried it
    /// in the last round trip (`rtt`).
    pub fn offer_due(&self, now: Instant, rtt: Duration) -> bool {
        self.untold && self.told_at.is_none_or(|at| now >= at + rtt)
    }

    /// An ACK frame carried our offer.
    pub fn on_ack_sent(&mut self, now: Instant) {
        if self.untold {
            self.told_at = Some(now);
        }
    }

    /// The peer's ACK whose largest is `largest` says whether it offers
    /// short headers.
    pub fn on_peer_ack(&mut self, largest: u64, offers: bool) {
        if self.as_of.is_some_and(|l| largest < l) {
            return;
        }
        self.as_of = Some(largest);
        self.peer_offers = offers;
    }

    /// Whether our next packet may be short: the peer offers it and, if
    /// `silent`, no timeout since we last heard from it hints that our
    /// address changed on the way.
    pub fn may_send(&self, silent: bool) -> bool {
        self.peer_offers && !silent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_ack_decides_and_a_silence_sends_the_long_form() {
        let mut s = ShortHeaders::default();
        assert!(!s.may_send(false), "not before the peer offers");
        s.on_peer_ack(10, true);
        assert!(s.may_send(false));
        assert!(!s.may_send(true), "a timeout since last heard: long");
        // A reordered older ACK does not withdraw the newer offer...
        s.on_peer_ack(9, false);
        assert!(s.may_send(false));
        // ...but a newer one does.
        s.on_peer_ack(12, false);
        assert!(!s.may_send(false));
        s.set_offered(true);
        assert!(s.offered());
    }

    #[test]
    fn an_offer_rides_once_a_round_trip_until_the_peer_shows_it() {
        let rtt = Duration::from_millis(50);
        let at = |ms| Instant::ZERO + Duration::from_millis(ms);
        let mut s = ShortHeaders::default();
        assert!(!s.offer_due(at(0), rtt), "nothing offered, nothing to tell");
        s.set_offered(true);
        assert!(s.offer_due(at(0), rtt));
        s.on_ack_sent(at(0));
        assert!(!s.offer_due(at(49), rtt));
        assert!(s.offer_due(at(50), rtt));
        // A long packet does not show it; a short one does.
        s.on_received(false);
        assert!(s.offer_due(at(50), rtt));
        s.on_received(true);
        assert!(!s.offer_due(at(500), rtt));
        // Withdrawn: told until the peer's packets come long again.
        s.set_offered(false);
        assert!(s.offer_due(at(500), rtt));
        s.on_received(false);
        assert!(!s.offer_due(at(900), rtt));
    }
}
