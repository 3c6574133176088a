//! Hole punching, sans-IO: the connectivity checks of ICE (RFC 8445),
//! reduced to what two peers that met at relays need. Each side sends
//! small punches to the addresses the relays saw the other at, from the
//! socket its session uses, and answers every punch that proves the pair's
//! secret. A punch opens our NAT's mapping towards the peer; an answer
//! that echoes our punch's nonce under the secret proves the way there
//! and back, and its source is where a direct connection can go. A punch
//! from an address we did not know (a symmetric NAT's fresh mapping, RFC
//! 8445's peer-reflexive candidate) is punched in turn, once per punch it
//! sent, so a replayed punch with a forged source amplifies at most 2x.
//!
//! The secret never travels in clear (the relays seal it to each end), so
//! an observer of the wire can replay punches but never answer one.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use rand::RngCore;

use super::seal::{punch_mac, punch_proves};
use super::wire::{Message, MAC_LEN, TOKEN_LEN};
use crate::crypto::SessionRng;
use crate::Instant;

/// Between the first punches to one address: a few per round trip of any
/// real path, so both NATs open within one of the other side's round trips.
pub const PUNCH_INTERVAL: Duration = Duration::from_millis(20);
/// Punches sent at [`PUNCH_INTERVAL`] before the interval doubles (ICE
/// retransmits its checks with backoff too, RFC 8445 §14.3).
const FAST_PUNCHES: u32 = 5;
/// The longest interval between punches.
const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// How long an address is punched before giving up on it.
pub const PUNCH_FOR: Duration = Duration::from_secs(5);
/// Addresses punched at once (relays' views and peer-reflexive ones).
const MAX_TARGETS: usize = 8;
/// Secrets accepted at once (one per relay the peers met at).
const MAX_TOKENS: usize = 8;
/// Answers waiting to go; more are dropped, as a flood's would be.
const MAX_ANSWERS: usize = 32;
/// Punches a peer-reflexive address may have banked.
const MAX_CREDIT: u32 = 4;

struct Target {
    addr: SocketAddr,
    token: [u8; TOKEN_LEN],
    /// Our punches carry it; an answer must echo it.
    nonce: u64,
    next: Instant,
    until: Instant,
    sent: u32,
    answered: bool,
    /// Peer-reflexive: punches it may still get, one per punch it sent.
    /// `None` for an address a relay reported.
    credit: Option<u32>,
    /// A punch from it brought our next punch forward once already.
    triggered: bool,
}

impl Target {
    /// Still punched: not answered, punches left, and not past `until`.
    fn active(&self) -> bool {
        !self.answered && self.credit != Some(0) && self.next < self.until
    }

    fn due(&self, now: Instant) -> bool {
        self.active() && self.next <= now && now < self.until
    }

    fn interval(&self) -> Duration {
        match self.sent.checked_sub(FAST_PUNCHES) {
            None => PUNCH_INTERVAL,
            Some(k) => (PUNCH_INTERVAL * 2u32.saturating_pow(k + 1)).min(MAX_INTERVAL),
        }
    }
}

/// One side's punching.
pub struct Puncher {
    targets: Vec<Target>,
    tokens: Vec<[u8; TOKEN_LEN]>,
    answers: VecDeque<(SocketAddr, Vec<u8>)>,
    /// Addresses that answered, not yet taken by `poll_reachable`.
    reachable: VecDeque<SocketAddr>,
    rng: SessionRng,
}

impl std::fmt::Debug for Puncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puncher")
            .field("targets", &self.targets.len())
            .finish()
    }
}

impl Puncher {
    /// A puncher drawing its nonces from `seed`.
    pub fn new(seed: [u8; 32]) -> Puncher {
        Puncher {
            targets: Vec::new(),
            tokens: Vec::new(),
            answers: VecDeque::new(),
            reachable: VecDeque::new(),
            rng: SessionRng::new(seed),
        }
    }

    /// A relay paired us, or told us the peer moved: punch `peer` with
    /// the pair's secret `token`, from now on (again, if it was punched
    /// before and has gone quiet).
    pub fn add_peer(&mut self, now: Instant, peer: SocketAddr, token: [u8; TOKEN_LEN]) {
        self.add_token(token);
        self.add_target(now, peer, token, None);
    }

    /// A pair's secret whose punches we answer, even if no address of the
    /// peer is known (it keeps its address to itself, but may punch us).
    pub fn add_token(&mut self, token: [u8; TOKEN_LEN]) {
        if !self.tokens.contains(&token) && self.tokens.len() < MAX_TOKENS {
            self.tokens.push(token);
        }
    }

    fn add_target(
        &mut self,
        now: Instant,
        addr: SocketAddr,
        token: [u8; TOKEN_LEN],
        credit: Option<u32>,
    ) {
        let nonce = self.rng.next_u64();
        let fresh = Target {
            addr,
            token,
            nonce,
            next: now,
            until: now + PUNCH_FOR,
            sent: 0,
            answered: false,
            credit,
            triggered: false,
        };
        if let Some(t) = self.targets.iter_mut().find(|t| t.addr == addr) {
            let quiet = t.answered || now >= t.until;
            match (credit, t.credit) {
                // A relay's report: once it has gone quiet, again (a NAT
                // that rebinds needs a new hole); while punched, as is.
                (None, reflexive) if quiet || reflexive.is_some() => *t = fresh,
                (None, _) => {}
                // Another punch from a peer-reflexive address: one more of ours.
                (Some(_), Some(c)) if !t.answered => {
                    t.credit = Some((c + 1).min(MAX_CREDIT));
                    t.until = t.until.max(now + PUNCH_FOR);
                }
                // A punch from an address we punch: our next goes at once
                // (ICE's triggered check, RFC 8445 section 7.3.1.4), so
                // the way is proven a round trip after the later side
                // learned of it. Once per target: replays cannot make us
                // punch faster.
                (Some(_), None) if !t.answered && !t.triggered && now < t.until => {
                    t.triggered = true;
                    t.next = now;
                }
                (Some(_), _) => {}
            }
            return;
        }
        if self.targets.len() < MAX_TARGETS {
            self.targets.push(fresh);
        }
    }

    /// A punch from `from`. Returns whether it proved a secret of ours.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        nonce: u64,
        answer: bool,
        mac: &[u8; MAC_LEN],
    ) -> bool {
        if answer {
            // Answers count only from an address we punched, echoing its nonce.
            let Some(t) = self
                .targets
                .iter_mut()
                .find(|t| t.addr == from && t.nonce == nonce)
            else {
                return false;
            };
            if !punch_proves(&t.token, nonce, true, mac) {
                return false;
            }
            if !t.answered {
                t.answered = true;
                self.reachable.push_back(from);
            }
            return true;
        }
        let Some(&token) = self
            .tokens
            .iter()
            .find(|t| punch_proves(t, nonce, false, mac))
        else {
            return false;
        };
        if self.answers.len() < MAX_ANSWERS {
            let mac = punch_mac(&token, nonce, true);
            let answer = Message::Punch {
                nonce,
                answer: true,
                mac,
            };
            self.answers.push_back((from, answer.encode()));
        }
        // Its NAT may have given it a new port for us: punch that too.
        self.add_target(now, from, token, Some(1));
        true
    }

    /// The next punch or answer to send, if one is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        if let Some(a) = self.answers.pop_front() {
            return Some(a);
        }
        let t = self.targets.iter_mut().find(|t| t.due(now))?;
        t.next = now + t.interval();
        t.sent += 1;
        if let Some(c) = &mut t.credit {
            *c -= 1;
        }
        let punch = Message::Punch {
            nonce: t.nonce,
            answer: false,
            mac: punch_mac(&t.token, t.nonce, false),
        };
        Some((t.addr, punch.encode()))
    }

    /// When the next punch is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.targets
            .iter()
            .filter(|t| t.active())
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

    fn punch_of(b: &[u8]) -> (u64, bool, [u8; MAC_LEN]) {
        let Some(Message::Punch { nonce, answer, mac }) = Message::decode(b) else {
            panic!("not a punch")
        };
        (nonce, answer, mac)
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// Delivers everything each side sends, if `passes(from, to)`, until
    /// punching ends; returns what each side found reachable.
    fn run(
        a: &mut Puncher,
        b: &mut Puncher,
        (a_addr, b_addr): (SocketAddr, SocketAddr),
        passes: impl Fn(SocketAddr, SocketAddr) -> bool,
    ) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
        let mut found = (Vec::new(), Vec::new());
        let mut now = Instant::ZERO;
        while now < Instant::ZERO + PUNCH_FOR + PUNCH_INTERVAL {
            step(a, b, (a_addr, b_addr), now, &passes, &mut found.0);
            step(b, a, (b_addr, a_addr), now, &passes, &mut found.1);
            now += Duration::from_millis(5);
        }
        found
    }

    fn step(
        me: &mut Puncher,
        other: &mut Puncher,
        (my_addr, other_addr): (SocketAddr, SocketAddr),
        now: Instant,
        passes: &impl Fn(SocketAddr, SocketAddr) -> bool,
        found: &mut Vec<SocketAddr>,
    ) {
        while let Some((to, bytes)) = me.poll_transmit(now) {
            let (nonce, answer, mac) = punch_of(&bytes);
            if passes(my_addr, to) && to == other_addr {
                other.handle(now, my_addr, nonce, answer, &mac);
            }
        }
        found.extend(std::iter::from_fn(|| me.poll_reachable()));
    }

    #[test]
    fn both_sides_find_each_other_when_both_ways_pass() {
        let (x, y) = (sa("198.18.1.1:1"), sa("198.18.2.2:2"));
        let (mut a, mut b) = (Puncher::new([1; 32]), Puncher::new([2; 32]));
        a.add_peer(Instant::ZERO, y, [1; 16]);
        b.add_peer(Instant::ZERO, x, [1; 16]);
        assert_eq!(run(&mut a, &mut b, (x, y), |_, _| true), (vec![y], vec![x]));
    }

    #[test]
    fn a_peer_reflexive_address_is_learned_from_its_punch() {
        // B's NAT gives it a new port towards A: the relay's view of B is
        // stale, but A answers B's punches from the new one.
        let (x, y_new, y_stale) = (sa("198.18.1.1:1"), sa("198.18.2.2:3"), sa("198.18.2.2:2"));
        let (mut a, mut b) = (Puncher::new([1; 32]), Puncher::new([2; 32]));
        a.add_peer(Instant::ZERO, y_stale, [1; 16]);
        b.add_peer(Instant::ZERO, x, [1; 16]);
        let (fa, fb) = run(&mut a, &mut b, (x, y_new), |_, _| true);
        assert_eq!((fa, fb), (vec![y_new], vec![x]));
    }

    #[test]
    fn an_observer_replays_punches_but_never_answers_one() {
        // Mallory sees every punch and answer between A and B, and sends
        // copies from her own address: A answers what she replays (1x) and
        // punches her back at most once per replay, but never finds her.
        let (y, mallory) = (sa("198.18.2.2:2"), sa("203.0.113.1:1"));
        let mut a = Puncher::new([1; 32]);
        a.add_peer(Instant::ZERO, y, [1; 16]);
        let (nonce, _, mac) = punch_of(&a.poll_transmit(Instant::ZERO).unwrap().1);
        // A punch of B's, captured, and A's own punch turned into an "answer".
        let b_punch = (7, false, punch_mac(&[1; 16], 7, false));
        let (mut received, mut sent) = (0, 0);
        for i in 0..50u64 {
            let now = Instant::ZERO + Duration::from_millis(i);
            for (n, ans, m) in [b_punch, (nonce, true, mac), (nonce, true, [0; 32])] {
                received += 46;
                a.handle(now, mallory, n, ans, &m);
            }
            while let Some((to, bytes)) = a.poll_transmit(now) {
                if to == mallory {
                    sent += bytes.len();
                    let (n, ans, m) = punch_of(&bytes);
                    // Her answer to A's punch cannot carry the MAC.
                    assert!(!a.handle(now, mallory, n, !ans, &m));
                }
            }
        }
        assert_eq!(a.poll_reachable(), None);
        assert!(sent <= received, "{sent} bytes for {received}");
    }

    #[test]
    fn a_forged_punch_opens_nothing_and_punching_backs_off_and_stops() {
        let (x, mallory) = (sa("198.18.1.1:1"), sa("203.0.113.1:1"));
        let mut a = Puncher::new([1; 32]);
        a.add_peer(Instant::ZERO, x, [1; 16]);
        let forged = punch_mac(&[2; 16], 1, false);
        assert!(!a.handle(Instant::ZERO, mallory, 1, false, &forged));
        assert!(!a.handle(Instant::ZERO, mallory, 1, true, &forged));
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
        // 5 at 20 ms, then 40, 80, ... 1 s: 13 in 5 s, not 250.
        assert!((10..=14).contains(&sent), "{sent} punches");
        assert_eq!(a.poll_timeout(), None);
    }

    #[test]
    fn a_peer_reported_again_after_it_went_quiet_is_punched_again() {
        let x = sa("198.18.1.1:1");
        let mut p = Puncher::new([1; 32]);
        p.add_peer(Instant::ZERO, x, [1; 16]);
        let (nonce, _, _) = punch_of(&p.poll_transmit(Instant::ZERO).unwrap().1);
        assert!(p.handle(
            Instant::ZERO,
            x,
            nonce,
            true,
            &punch_mac(&[1; 16], nonce, true)
        ));
        assert_eq!(p.poll_reachable(), Some(x));
        assert_eq!(p.poll_timeout(), None, "answered: quiet");
        // Its punches do not restart ours; a relay's report does.
        let later = Instant::ZERO + Duration::from_secs(1);
        p.handle(later, x, 9, false, &punch_mac(&[1; 16], 9, false));
        assert!(p.poll_transmit(later).is_some(), "the answer");
        assert!(p.poll_transmit(later).is_none());
        p.add_peer(later, x, [1; 16]);
        let (nonce, _, _) = punch_of(&p.poll_transmit(later).unwrap().1);
        assert!(p.handle(later, x, nonce, true, &punch_mac(&[1; 16], nonce, true)));
        assert_eq!(p.poll_reachable(), Some(x), "reachable again");
    }

    #[test]
    fn a_punch_from_an_address_we_punch_brings_ours_forward_once() {
        let x = sa("192.168.1.20:5000");
        let mut p = Puncher::new([1; 32]);
        p.add_peer(Instant::ZERO, x, [1; 16]);
        assert!(p.poll_transmit(Instant::ZERO).is_some());
        let soon = Instant::ZERO + Duration::from_millis(3);
        assert!(p.poll_transmit(soon).is_none(), "next one not yet due");
        // Its punch is answered, and ours goes at once.
        let punch = punch_mac(&[1; 16], 5, false);
        assert!(p.handle(soon, x, 5, false, &punch));
        let (_, answer, _) = punch_of(&p.poll_transmit(soon).unwrap().1);
        assert!(answer);
        let (_, answer, _) = punch_of(&p.poll_transmit(soon).unwrap().1);
        assert!(!answer, "the triggered punch");
        // A replay of it is answered, but brings nothing forward.
        let later = soon + Duration::from_millis(1);
        assert!(p.handle(later, x, 5, false, &punch));
        assert!(p.poll_transmit(later).is_some(), "the answer");
        assert!(
            p.poll_transmit(later).is_none(),
            "no second triggered punch"
        );
    }
}
