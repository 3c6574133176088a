//! Hole punching, sans-IO: the connectivity checks of ICE (RFC 8445),
//! reduced to what two peers that met at relays need. Each side sends
//! small punches to the addresses the relays saw the other at, from the
//! socket its session uses, and answers every punch that carries the pair's
//! token. A punch opens our NAT's mapping towards the peer; an answer
//! proves the way there and back, and its source is where a direct
//! connection can go. A punch from an address we did not know (a
//! symmetric NAT's fresh mapping, RFC 8445's peer-reflexive candidate) is
//! punched in turn.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use super::wire::{Message, TOKEN_LEN};
use crate::Instant;

/// Between two punches to one address: a few per round trip of any real
/// path, so both NATs open within one of the other side's round trips.
pub const PUNCH_INTERVAL: Duration = Duration::from_millis(20);
/// How long an address is punched before giving up on it.
pub const PUNCH_FOR: Duration = Duration::from_secs(5);
/// Addresses punched at once (relays' views and peer-reflexive ones).
const MAX_TARGETS: usize = 8;
/// Tokens accepted at once (one per relay the peers met at).
const MAX_TOKENS: usize = 8;
/// Answers waiting to go; more are dropped, as a flood's would be.
const MAX_ANSWERS: usize = 32;

struct Target {
    addr: SocketAddr,
    token: [u8; TOKEN_LEN],
    next: Instant,
    until: Instant,
    answered: bool,
}

/// One side's punching.
#[derive(Default)]
pub struct Puncher {
    targets: Vec<Target>,
    tokens: Vec<[u8; TOKEN_LEN]>,
    answers: VecDeque<(SocketAddr, Vec<u8>)>,
    /// Addresses that answered, not yet taken by `poll_reachable`.
    reachable: VecDeque<SocketAddr>,
}

impl std::fmt::Debug for Puncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puncher")
            .field("targets", &self.targets.len())
            .finish()
    }
}

impl Puncher {
    /// A relay paired us, or told us the peer moved: punch `peer` with
    /// `token`, from now on (again, if it was punched before and has gone
    /// quiet).
    pub fn add_peer(&mut self, now: Instant, peer: SocketAddr, token: [u8; TOKEN_LEN]) {
        if !self.tokens.contains(&token) && self.tokens.len() < MAX_TOKENS {
            self.tokens.push(token);
        }
        self.add_target(now, peer, token, true);
    }

    fn add_target(&mut self, now: Instant, addr: SocketAddr, token: [u8; TOKEN_LEN], rearm: bool) {
        if let Some(t) = self.targets.iter_mut().find(|t| t.addr == addr) {
            // Punched before: once it has gone quiet, again if asked (a NAT
            // that rebinds needs a new hole); while it is being punched, as is.
            if rearm && (t.answered || now >= t.until) {
                *t = Target {
                    addr,
                    token,
                    next: now,
                    until: now + PUNCH_FOR,
                    answered: false,
                };
            }
            return;
        }
        if self.targets.len() >= MAX_TARGETS {
            return;
        }
        self.targets.push(Target {
            addr,
            token,
            next: now,
            until: now + PUNCH_FOR,
            answered: false,
        });
    }

    /// A punch from `from`. Returns whether it carried a token of ours.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        token: [u8; TOKEN_LEN],
        answer: bool,
    ) -> bool {
        if !self.tokens.contains(&token) {
            return false;
        }
        if answer {
            match self.targets.iter_mut().find(|t| t.addr == from) {
                Some(t) if !t.answered => {
                    t.answered = true;
                    self.reachable.push_back(from);
                }
                Some(_) => {}
                // Answers come only from addresses we punched.
                None => return false,
            }
        } else {
            if self.answers.len() < MAX_ANSWERS {
                self.answers.push_back((
                    from,
                    Message::Punch {
                        token,
                        answer: true,
                    }
                    .encode(),
                ));
            }
            // Its NAT may have given it a new port for us: punch that too.
            self.add_target(now, from, token, false);
        }
        true
    }

    /// The next punch or answer to send, if one is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        if let Some(a) = self.answers.pop_front() {
            return Some(a);
        }
        let t = self
            .targets
            .iter_mut()
            .find(|t| !t.answered && t.next <= now && now < t.until)?;
        t.next = now + PUNCH_INTERVAL;
        let punch = Message::Punch {
            token: t.token,
            answer: false,
        };
        Some((t.addr, punch.encode()))
    }

    /// When the next punch is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.targets
            .iter()
            .filter(|t| !t.answered && t.next < t.until)
            .map(|t| t.next)
            .min()
    }

    /// An address that answered a punch: a direct connection can go there.
    pub fn poll_reachable(&mut self) -> Option<SocketAddr> {
        self.reachable.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(b: &[u8]) -> Message {
        Message::decode(b).unwrap()
    }

    /// Delivers everything each side sends, if `passes(from, to)`, until
    /// `end`; returns what each side found reachable.
    fn run(
        a: &mut Puncher,
        b: &mut Puncher,
        (a_addr, b_addr): (SocketAddr, SocketAddr),
        passes: impl Fn(SocketAddr, SocketAddr) -> bool,
    ) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
        let mut found = (Vec::new(), Vec::new());
        let mut now = Instant::ZERO;
        while now < Instant::ZERO + PUNCH_FOR + PUNCH_INTERVAL {
            step(a, b, a_addr, b_addr, now, &passes, &mut found.0);
            step(b, a, b_addr, a_addr, now, &passes, &mut found.1);
            now += Duration::from_millis(5);
        }
        found
    }

    fn step(
        me: &mut Puncher,
        other: &mut Puncher,
        my_addr: SocketAddr,
        other_addr: SocketAddr,
        now: Instant,
        passes: &impl Fn(SocketAddr, SocketAddr) -> bool,
        found: &mut Vec<SocketAddr>,
    ) {
        while let Some((to, bytes)) = me.poll_transmit(now) {
            let Message::Punch { token, answer } = decode(&bytes) else {
                panic!()
            };
            if passes(my_addr, to) && to == other_addr {
                other.handle(now, my_addr, token, answer);
            }
        }
        found.extend(std::iter::from_fn(|| me.poll_reachable()));
    }

    #[test]
    fn both_sides_find_each_other_when_both_ways_pass() {
        let (x, y): (SocketAddr, SocketAddr) = (
            "198.18.1.1:1".parse().unwrap(),
            "198.18.2.2:2".parse().unwrap(),
        );
        let (mut a, mut b) = (Puncher::default(), Puncher::default());
        a.add_peer(Instant::ZERO, y, [1; 16]);
        b.add_peer(Instant::ZERO, x, [1; 16]);
        assert_eq!(run(&mut a, &mut b, (x, y), |_, _| true), (vec![y], vec![x]));
    }

    #[test]
    fn a_peer_reflexive_address_is_learned_from_its_punch() {
        // B's NAT gives it a new port towards A: the relay's view of B is
        // stale, but A answers B's punches from the new one.
        let (x, y_new, y_stale): (SocketAddr, SocketAddr, SocketAddr) = (
            "198.18.1.1:1".parse().unwrap(),
            "198.18.2.2:3".parse().unwrap(),
            "198.18.2.2:2".parse().unwrap(),
        );
        let (mut a, mut b) = (Puncher::default(), Puncher::default());
        a.add_peer(Instant::ZERO, y_stale, [1; 16]);
        b.add_peer(Instant::ZERO, x, [1; 16]);
        let (fa, fb) = run(&mut a, &mut b, (x, y_new), |_, _| true);
        assert_eq!((fa, fb), (vec![y_new], vec![x]));
    }

    #[test]
    fn punches_without_the_token_open_nothing_and_punching_stops() {
        let x: SocketAddr = "198.18.1.1:1".parse().unwrap();
        let mallory: SocketAddr = "203.0.113.1:1".parse().unwrap();
        let mut a = Puncher::default();
        a.add_peer(Instant::ZERO, x, [1; 16]);
        assert!(!a.handle(Instant::ZERO, mallory, [2; 16], false));
        assert!(!a.handle(Instant::ZERO, mallory, [2; 16], true));
        // An answer from an address we never punched is not believed.
        assert!(!a.handle(Instant::ZERO, mallory, [1; 16], true));
        assert_eq!(a.poll_reachable(), None);
        let mut sent = 0;
        let mut now = Instant::ZERO;
        while now < Instant::ZERO + PUNCH_FOR * 2 {
            while let Some((to, _)) = a.poll_transmit(now) {
                assert_eq!(to, x);
                sent += 1;
            }
            now += Duration::from_millis(1);
        }
        let most = (PUNCH_FOR.as_millis() / PUNCH_INTERVAL.as_millis()) as usize + 1;
        assert!(sent <= most, "{sent} punches");
        assert_eq!(a.poll_timeout(), None);
    }
}

#[cfg(test)]
mod rearm_tests {
    use super::*;

    #[test]
    fn a_peer_reported_again_after_it_went_quiet_is_punched_again() {
        let x: SocketAddr = "198.18.1.1:1".parse().unwrap();
        let mut p = Puncher::default();
        p.add_peer(Instant::ZERO, x, [1; 16]);
        assert!(p.poll_transmit(Instant::ZERO).is_some());
        assert!(p.handle(Instant::ZERO, x, [1; 16], true));
        assert_eq!(p.poll_reachable(), Some(x));
        assert_eq!(p.poll_timeout(), None, "answered: quiet");
        // Its punches do not restart ours; a relay's report does.
        let later = Instant::ZERO + Duration::from_secs(1);
        p.handle(later, x, [1; 16], false);
        assert!(p.poll_transmit(later).is_some(), "the answer");
        assert!(p.poll_transmit(later).is_none());
        p.add_peer(later, x, [1; 16]);
        assert!(p.poll_transmit(later).is_some());
        assert!(p.handle(later, x, [1; 16], true));
        assert_eq!(p.poll_reachable(), Some(x), "reachable again");
    }
}
