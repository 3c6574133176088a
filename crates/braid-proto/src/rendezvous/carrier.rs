//! Which carrier one relay's datagrams take: UDP, or a framed TCP stream
//! to the same relay when UDP gets no answer (a network that lets only TCP
//! out, as iroh's relays and Tailscale's DERP are reached). The decision is
//! the meeting's ([`super::Client`]); the runtime opens or closes the
//! stream when told ([`super::Event::Carrier`]) and says on which carrier
//! each answer came ([`super::Client::handle_via`]).
//!
//! On UDP, an end whose requests to a relay got no answer over UDP for
//! [`TCP_AFTER`] moves to TCP. On TCP it keeps asking over UDP too, every
//! [`UDP_PROBE`], and moves back once the relay answers such a probe with
//! a sealed answer: the relay then already sends to our UDP address (a
//! proved request from a new address moves an end, as after a NAT
//! rebinding), so closing the stream loses nothing in flight there.

use std::time::Duration;

use crate::Instant;

/// UDP silence from a relay, while asking it, after which its datagrams go
/// over TCP: requests were repeated at 0.25, 0.75 and 1.75 s by then (or
/// one refresh was lost and the next is late), so a lost datagram or two
/// does not move an end that UDP serves.
pub const TCP_AFTER: Duration = Duration::from_secs(3);
/// While on TCP, between requests over UDP that look whether it answers
/// again.
pub const UDP_PROBE: Duration = Duration::from_secs(2);

/// What carries an end's datagrams to a relay and back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Carrier {
    /// Datagrams as they are.
    #[default]
    Udp,
    /// Each datagram as one frame of a TCP stream to the relay: a 2-byte
    /// big-endian length, then the datagram.
    Tcp,
}

impl Carrier {
    pub(crate) fn index(self) -> usize {
        match self {
            Carrier::Udp => 0,
            Carrier::Tcp => 1,
        }
    }
}

/// One relay's carrier and what decides it.
#[derive(Debug, Clone)]
pub(crate) struct CarrierChoice {
    on: Carrier,
    /// TCP only: the user said UDP is blocked; no probes.
    tcp_only: bool,
    /// The first request over UDP since the relay last answered over UDP.
    unanswered_since: Option<Instant>,
    /// While on TCP: when to ask over UDP next.
    probe_at: Instant,
}

impl CarrierChoice {
    pub fn new() -> CarrierChoice {
        CarrierChoice {
            on: Carrier::Udp,
            tcp_only: false,
            unanswered_since: None,
            probe_at: Instant::ZERO,
        }
    }

    /// The carrier requests and the session's datagrams take now.
    pub fn carrier(&self) -> Carrier {
        self.on
    }

    /// TCP from now on, and never UDP again. Whether that is a change.
    pub fn force_tcp(&mut self) -> bool {
        self.tcp_only = true;
        self.unanswered_since = None;
        std::mem::replace(&mut self.on, Carrier::Tcp) != Carrier::Tcp
    }

    /// A request went to the relay over `carrier` at `now`.
    pub fn on_sent(&mut self, now: Instant, carrier: Carrier) {
        if carrier == Carrier::Udp {
            self.unanswered_since.get_or_insert(now);
        }
    }

    /// The relay answered over `carrier`; `sealed`: with a sealed answer
    /// that opened, which it sends only once it holds our end at the
    /// address the request came from. Returns the new carrier if it changed.
    pub fn on_answer(&mut self, carrier: Carrier, sealed: bool) -> Option<Carrier> {
        if carrier != Carrier::Udp {
            return None;
        }
        self.unanswered_since = None;
        if self.on == Carrier::Tcp && sealed && !self.tcp_only {
            self.on = Carrier::Udp;
            return Some(Carrier::Udp);
        }
        None
    }

    /// Asks over UDP at once (a cookie for our UDP address just came).
    pub fn probe_now(&mut self, now: Instant) {
        self.probe_at = self.probe_at.min(now);
    }

    /// Time passed: whether to move to TCP now.
    pub fn poll(&mut self, now: Instant) -> Option<Carrier> {
        let silent = self
            .unanswered_since
            .is_some_and(|since| now.saturating_duration_since(since) >= TCP_AFTER);
        if self.on == Carrier::Udp && silent {
            self.on = Carrier::Tcp;
            self.unanswered_since = None;
            self.probe_at = now + UDP_PROBE;
            return Some(Carrier::Tcp);
        }
        None
    }

    /// Whether a request over UDP is due (while on TCP); if so, it is
    /// taken as sent.
    pub fn take_probe(&mut self, now: Instant) -> bool {
        if self.on != Carrier::Tcp || self.tcp_only || self.probe_at > now {
            return false;
        }
        self.probe_at = now + UDP_PROBE;
        self.on_sent(now, Carrier::Udp);
        true
    }

    /// When [`CarrierChoice::poll`] or [`CarrierChoice::take_probe`] next
    /// has something.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.on {
            Carrier::Udp => self.unanswered_since.map(|since| since + TCP_AFTER),
            Carrier::Tcp if self.tcp_only => None,
            Carrier::Tcp => Some(self.probe_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn udp_silence_moves_to_tcp_after_three_seconds() {
        let mut c = CarrierChoice::new();
        c.on_sent(at(0), Carrier::Udp);
        c.on_sent(at(250), Carrier::Udp);
        assert_eq!(c.poll_timeout(), Some(at(3000)));
        assert_eq!(c.poll(at(2999)), None);
        assert_eq!(c.poll(at(3000)), Some(Carrier::Tcp));
        assert_eq!(c.carrier(), Carrier::Tcp);
        assert_eq!(c.poll(at(9000)), None, "told once");
    }

    #[test]
    fn an_answer_over_udp_keeps_udp() {
        let mut c = CarrierChoice::new();
        c.on_sent(at(0), Carrier::Udp);
        assert_eq!(c.on_answer(Carrier::Udp, false), None);
        assert_eq!(c.poll_timeout(), None);
        c.on_sent(at(2000), Carrier::Udp);
        // Silence counts from the first unanswered request.
        assert_eq!(c.poll(at(4999)), None);
        assert_eq!(c.poll(at(5000)), Some(Carrier::Tcp));
    }

    #[test]
    fn answers_over_tcp_do_not_reset_udp_silence() {
        let mut c = CarrierChoice::new();
        c.on_sent(at(0), Carrier::Udp);
        assert_eq!(c.on_answer(Carrier::Tcp, true), None);
        assert_eq!(c.poll(at(3000)), Some(Carrier::Tcp));
    }

    #[test]
    fn on_tcp_probes_udp_and_returns_on_a_sealed_answer() {
        let mut c = CarrierChoice::new();
        c.on_sent(at(0), Carrier::Udp);
        assert_eq!(c.poll(at(3000)), Some(Carrier::Tcp));
        assert_eq!(c.poll_timeout(), Some(at(5000)));
        assert!(!c.take_probe(at(4999)));
        assert!(c.take_probe(at(5000)));
        assert!(!c.take_probe(at(5001)), "one per interval");
        // A cookie over UDP: UDP works, but the relay holds us at the TCP
        // address until a proved request comes over UDP.
        assert_eq!(c.on_answer(Carrier::Udp, false), None);
        c.probe_now(at(5010));
        assert!(c.take_probe(at(5010)));
        assert_eq!(c.on_answer(Carrier::Udp, true), Some(Carrier::Udp));
        assert_eq!(c.carrier(), Carrier::Udp);
        // And the cycle can start again.
        c.on_sent(at(6000), Carrier::Udp);
        assert_eq!(c.poll(at(9000)), Some(Carrier::Tcp));
    }

    #[test]
    fn forced_tcp_never_probes_nor_returns() {
        let mut c = CarrierChoice::new();
        assert!(c.force_tcp());
        assert!(!c.force_tcp());
        assert_eq!(c.poll_timeout(), None);
        assert!(!c.take_probe(at(100_000)));
        assert_eq!(c.on_answer(Carrier::Udp, true), None);
        assert_eq!(c.carrier(), Carrier::Tcp);
    }
}
