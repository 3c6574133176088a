//! One side's meeting, sans-IO: asks every relay to pair it (a sender
//! joins, a receiver registers and keeps its registration fresh, which also
//! keeps its NAT's mapping open), agrees keys with each relay, punches the
//! addresses the relays report, and says what it found as [`Event`]s. The
//! runtime sends what [`Client::poll_transmit`] gives from the session's
//! socket and feeds back every rendezvous datagram that arrives there.
//!
//! An answer is believed only if it echoes the nonce of one of our last
//! few requests (so nobody who did not see a request can forge one), and a
//! pairing only if it opens under our key with that relay (so nobody who
//! did see it can either).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use rand::RngCore;

use super::carrier::{Carrier, CarrierChoice};
use super::punch::Puncher;
use super::seal::{EndKeys, Hello};
use super::wire::{
    flags, Answer, Message, Refusal, Request, Sealed, COOKIE_LEN, MAC_LEN, MAX_CANDIDATES,
    PROOF_AT, TOKEN_LEN,
};
use super::Handle;
use crate::crypto::SessionRng;
use crate::Instant;

/// First wait for a relay's answer; doubled per attempt up to
/// [`MAX_RETRY`]. A relay answers within one round trip.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);
/// See [`FIRST_RETRY`].
pub const MAX_RETRY: Duration = Duration::from_secs(2);
/// Between refreshes of a registration or a pair: well inside the relay's
/// 30 s and a NAT's shortest UDP timeouts (RFC 4787 asks for at least
/// 2 min, some give 30 s), and soon enough after a NAT rebinds that the
/// relay's connection comes back within a few of the session's timeouts.
pub const REFRESH: Duration = Duration::from_secs(2);
/// While a connection of ours goes unanswered, how often the relays are
/// asked whether our address moved: a NAT that rebound is found within a
/// round trip to them, and a path that is simply dead costs a request a
/// second.
pub const SILENT_REFRESH: Duration = Duration::from_secs(1);
/// Request nonces remembered: answers to older requests are not believed.
const NONCES_KEPT: usize = 4;

/// Whether we wait for a peer or look for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Wait under the handle (a receiver).
    Register,
    /// Pair with whoever waits under it (a sender).
    Join,
}

/// What the meeting found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A relay holds our registration and sees us at `reflexive`.
    Registered {
        /// The relay.
        relay: SocketAddr,
        /// Our address as it sees it.
        reflexive: SocketAddr,
    },
    /// A relay paired us (again, if the peer moved): it forwards between
    /// us and the peer from now on.
    Paired {
        /// The relay.
        relay: SocketAddr,
        /// Our address as it sees it.
        reflexive: SocketAddr,
        /// The peer's, unless it keeps it to itself.
        peer: Option<SocketAddr>,
    },
    /// A relay refused a request (it may still accept a later one).
    Refused {
        /// The relay.
        relay: SocketAddr,
        /// Why.
        why: Refusal,
    },
    /// The peer answered a punch from this address: a direct connection
    /// can go there.
    Reachable(SocketAddr),
    /// Every datagram to `relay` (our requests, and the session's through
    /// it) goes over a TCP stream to it from now on (`tcp`: its UDP went
    /// unanswered for [`super::TCP_AFTER`], or TCP was asked for), or over
    /// UDP again (it answered there; the stream can close).
    Carrier {
        /// The relay.
        relay: SocketAddr,
        /// TCP (else UDP).
        tcp: bool,
    },
}

impl Event {
    /// Where the session of an end in `role` opens a connection after this
    /// event, if it has none there yet: a sender's, to each relay that
    /// paired it and to each address that answered a punch. A receiver's
    /// session learns its connections from the sender's packets.
    pub fn connection(&self, role: Role) -> Option<SocketAddr> {
        match (role, self) {
            (Role::Join, Event::Paired { relay, .. }) => Some(*relay),
            (Role::Join, Event::Reachable(addr)) => Some(*addr),
            _ => None,
        }
    }
}

struct RelayEnd {
    addr: SocketAddr,
    /// The relay's latest cookie for our address on each carrier
    /// ([`Carrier::index`]): the two are different addresses to it.
    cookies: [[u8; COOKIE_LEN]; 2],
    /// UDP or TCP, and when to move.
    carrier: CarrierChoice,
    hello: Hello,
    keys: Option<EndKeys>,
    nonces: VecDeque<u64>,
    next: Instant,
    wait: Duration,
    /// Registered or paired: refresh every [`REFRESH`].
    settled: bool,
    token: Option<[u8; TOKEN_LEN]>,
    peer: Option<SocketAddr>,
    /// Our address as the relay last saw it.
    reflexive: Option<SocketAddr>,
    /// The next request releases our pair.
    release: bool,
    /// The next request is our last: it ends our pair and registration.
    leave: bool,
    /// Nothing more is asked of this relay.
    gone: bool,
    /// A session ran through this relay's pair.
    had_session: bool,
    /// The relay answered one of our requests (a cookie, a refusal or a
    /// sealed answer that opened).
    answered: bool,
}

/// One side's meeting at its relays.
pub struct Client {
    role: Role,
    handle: Handle,
    direct: bool,
    relays: Vec<RelayEnd>,
    puncher: Puncher,
    rng: SessionRng,
    events: VecDeque<Event>,
    /// A sender that released its pairs asks no more.
    done: bool,
    /// Our local addresses, offered to the peer (ICE host candidates).
    candidates: Vec<SocketAddr>,
    /// While a connection is unanswered: when the relays may be asked again.
    silent_refresh_at: Option<Instant>,
    /// A receiver leaving because wrong guesses spent its code.
    spent: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("role", &self.role)
            .field("relays", &self.relays.len())
            .finish_non_exhaustive()
    }
}

/// Of an end's local addresses, those worth offering a peer, at most
/// [`MAX_CANDIDATES`], IPv4 and IPv6 alternating: never unspecified,
/// loopback (only the same host reaches it, and the relay's view of a
/// host on loopback is already one), link-local (it needs the link's
/// interface named), multicast, or port 0.
pub fn host_candidates(local: &[SocketAddr]) -> Vec<SocketAddr> {
    let usable = |a: &SocketAddr| {
        let ip = a.ip().to_canonical();
        let link_local = match ip {
            std::net::IpAddr::V4(v4) => v4.is_link_local() || v4.is_broadcast(),
            std::net::IpAddr::V6(v6) => v6.is_unicast_link_local(),
        };
        a.port() != 0
            && !ip.is_unspecified()
            && !ip.is_loopback()
            && !ip.is_multicast()
            && !link_local
    };
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for a in local.iter().filter(|a| usable(a)) {
        let a = SocketAddr::new(a.ip().to_canonical(), a.port());
        let family = if a.is_ipv4() { &mut v4 } else { &mut v6 };
        if !family.contains(&a) {
            family.push(a);
        }
    }
    let mut out = Vec::with_capacity(MAX_CANDIDATES);
    let (mut v4, mut v6) = (v4.into_iter(), v6.into_iter());
    while out.len() < MAX_CANDIDATES {
        let next: Vec<SocketAddr> = v4.next().into_iter().chain(v6.next()).collect();
        if next.is_empty() {
            break;
        }
        out.extend(next);
    }
    out.truncate(MAX_CANDIDATES);
    out
}

/// Whether two addresses are the same, an IPv4 one and its IPv4-mapped
/// IPv6 form included (a dual-stack socket sees an IPv4 relay as the latter).
pub fn same_addr(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && a.ip().to_canonical() == b.ip().to_canonical()
}

impl Client {
    /// A meeting under `handle` at `relays`, starting at `now`. Without
    /// `direct`, we neither punch nor let the relays tell the peer our
    /// address. `seed` draws nonces and key agreements.
    pub fn new(
        now: Instant,
        role: Role,
        handle: Handle,
        relays: &[SocketAddr],
        direct: bool,
        seed: [u8; 32],
    ) -> Client {
        let mut rng = SessionRng::new(seed);
        let register = role == Role::Register;
        let relays = relays
            .iter()
            .map(|&addr| RelayEnd {
                addr,
                cookies: [[0; COOKIE_LEN]; 2],
                carrier: CarrierChoice::new(),
                hello: Hello::new(&mut rng, &handle, register),
                keys: None,
                nonces: VecDeque::with_capacity(NONCES_KEPT),
                next: now,
                wait: FIRST_RETRY,
                settled: false,
                token: None,
                peer: None,
                reflexive: None,
                release: false,
                leave: false,
                gone: false,
                had_session: false,
                answered: false,
            })
            .collect();
        Client {
            role,
            handle,
            direct,
            relays,
            puncher: Puncher::new(rng.seed()),
            rng,
            events: VecDeque::new(),
            done: false,
            candidates: Vec::new(),
            silent_refresh_at: None,
            spent: false,
        }
    }

    /// Offers the peer our local addresses from now on, so that two ends
    /// on one network find each other there (a NAT seldom loops traffic
    /// between its own hosts back inside). Only those a peer elsewhere
    /// could use are kept ([`host_candidates`]); none without `direct`.
    pub fn set_candidates(&mut self, local: &[SocketAddr]) {
        self.candidates = if self.direct {
            host_candidates(local)
        } else {
            Vec::new()
        };
    }

    /// Whether a connection of our sessions stopped being answered (it
    /// carries only probes): our NAT may have rebound, so every relay that
    /// holds us is asked at once (then at most once per
    /// [`SILENT_REFRESH`] while it lasts), and one that sees us at a new
    /// address moves our end there and tells the peer, who punches it.
    pub fn connections_answered(&mut self, now: Instant, all_answered: bool) {
        if all_answered {
            self.silent_refresh_at = None;
            return;
        }
        if self.silent_refresh_at.is_none_or(|at| now >= at) {
            self.silent_refresh_at = Some(now + SILENT_REFRESH);
            self.refresh(now);
        }
    }

    /// Asks every relay that holds us at once.
    pub fn refresh(&mut self, now: Instant) {
        for r in self.relays.iter_mut().filter(|r| r.settled) {
            r.next = r.next.min(now);
        }
    }

    /// Ends our pairs at every relay (our session is over, or the peer
    /// never began one); a receiver stays registered.
    pub fn release(&mut self, now: Instant) {
        for r in self.relays.iter_mut().filter(|r| r.token.is_some()) {
            r.ask_release(now);
        }
    }

    /// We are going away: the requests [`Client::poll_transmit`] gives
    /// next end our pairs and registrations at every relay that holds
    /// one, so the handle is free at once; nothing is asked after them.
    pub fn leave(&mut self, now: Instant) {
        self.leave_as(now, false);
    }

    /// As [`Client::leave`], for a code receiver whose code wrong guesses
    /// spent: the relays tell senders that come for a while after so
    /// ([`Refusal::Spent`]) rather than that nobody waits.
    pub fn leave_spent(&mut self, now: Instant) {
        self.leave_as(now, true);
    }

    fn leave_as(&mut self, now: Instant, spent: bool) {
        self.spent = spent && self.role == Role::Register;
        for r in self.relays.iter_mut() {
            r.leave = r.keys.is_some() && r.settled;
            r.gone = !r.leave;
            r.next = now;
        }
        self.puncher = Puncher::new([0; 32]);
    }

    /// Whether `relay` ever answered one of our requests: a relay that
    /// never did may be down, or UDP to it blocked.
    pub fn has_answered(&self, relay: SocketAddr) -> bool {
        self.relays
            .iter()
            .any(|r| r.answered && same_addr(r.addr, relay))
    }

    /// Whether a session runs through `relay` now. A pair whose session
    /// ended (or was ended: a peer that never sent data is closed by the
    /// listener) is released, so the relay pairs the next sender at once
    /// instead of holding the handle for its idle time.
    pub fn session_via(&mut self, now: Instant, relay: SocketAddr, alive: bool) {
        let Some(r) = self.relays.iter_mut().find(|r| same_addr(r.addr, relay)) else {
            return;
        };
        if alive {
            r.had_session |= r.token.is_some();
        } else if std::mem::take(&mut r.had_session) && r.token.is_some() {
            r.ask_release(now);
        }
    }

    /// Every relay's datagrams go over TCP from now on, and never over UDP
    /// again (the network is known to block UDP): each relay's
    /// [`Event::Carrier`] comes before anything is sent to it.
    pub fn use_tcp_only(&mut self) {
        for r in &mut self.relays {
            if r.carrier.force_tcp() {
                let relay = r.addr;
                self.events.push_back(Event::Carrier { relay, tcp: true });
            }
        }
    }

    /// The carrier datagrams to `relay` take now (UDP for any other address).
    pub fn carrier(&self, relay: SocketAddr) -> Carrier {
        self.relays
            .iter()
            .find(|r| same_addr(r.addr, relay))
            .map_or(Carrier::Udp, |r| r.carrier.carrier())
    }

    /// The next request, punch or answer to send, and where, whatever its
    /// carrier (a runtime without TCP, or the simulator, sends all over UDP).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>)> {
        self.poll_transmit_on(now).map(|(to, bytes, _)| (to, bytes))
    }

    /// The next request, punch or answer to send, where, and over which
    /// carrier. Moves a relay whose UDP went unanswered for
    /// [`super::TCP_AFTER`] to TCP first ([`Event::Carrier`]).
    pub fn poll_transmit_on(&mut self, now: Instant) -> Option<(SocketAddr, Vec<u8>, Carrier)> {
        if !self.done {
            self.check_carriers(now);
            if let Some(i) = self.relays.iter().position(|r| !r.gone && r.next <= now) {
                return Some(self.request(now, i));
            }
            let probe = self
                .relays
                .iter_mut()
                .position(|r| !r.gone && !r.leave && r.keys.is_some() && r.carrier.take_probe(now));
            if let Some(i) = probe {
                let flags = if self.direct { 0 } else { flags::NO_DIRECT };
                let bytes = self.encode_request(i, flags, Carrier::Udp);
                return Some((self.relays[i].addr, bytes, Carrier::Udp));
            }
        }
        let (to, bytes) = self.puncher.poll_transmit(now)?;
        Some((to, bytes, Carrier::Udp))
    }

    /// Moves each relay whose UDP went unanswered too long to TCP, and asks
    /// it at once there.
    fn check_carriers(&mut self, now: Instant) {
        for r in self.relays.iter_mut().filter(|r| !r.gone) {
            if r.carrier.poll(now).is_some() {
                r.next = now;
                let relay = r.addr;
                self.events.push_back(Event::Carrier { relay, tcp: true });
            }
        }
    }

    fn request(&mut self, now: Instant, i: usize) -> (SocketAddr, Vec<u8>, Carrier) {
        let r = &mut self.relays[i];
        let carrier = r.carrier.carrier();
        let mut flags = if self.direct { 0 } else { flags::NO_DIRECT };
        if std::mem::take(&mut r.leave) {
            flags |= flags::LEAVE;
            if self.spent {
                flags |= flags::SPENT;
            }
            r.settled = false;
        }
        if std::mem::take(&mut r.release) {
            flags |= flags::RELEASE;
            r.token = None;
            r.peer = None;
            self.done |= self.role == Role::Join && self.relays.iter().all(|r| r.token.is_none());
        }
        let bytes = self.encode_request(i, flags, carrier);
        let r = &mut self.relays[i];
        r.carrier.on_sent(now, carrier);
        r.gone |= flags & flags::LEAVE != 0;
        r.next = now + if r.settled { REFRESH } else { r.wait };
        r.wait = (r.wait * 2).min(MAX_RETRY);
        (r.addr, bytes, carrier)
    }

    /// A request to relay `i` with a fresh nonce, carrying the relay's
    /// cookie for our address on `carrier`, proved once keys are agreed.
    fn encode_request(&mut self, i: usize, flags: u8, carrier: Carrier) -> Vec<u8> {
        let nonce = self.rng.next_u64();
        let r = &mut self.relays[i];
        if r.nonces.len() == NONCES_KEPT {
            r.nonces.pop_front();
        }
        r.nonces.push_back(nonce);
        let request = Request {
            register: self.role == Role::Register,
            handle: self.handle,
            cookie: r.cookies[carrier.index()],
            nonce,
            flags,
            hello: r.hello.message(),
            candidates: self.candidates.clone(),
            proof: [0; MAC_LEN],
        };
        let mut bytes = request.encode();
        if let Some(keys) = &r.keys {
            let proof = keys.prove(&bytes);
            bytes[PROOF_AT..PROOF_AT + MAC_LEN].copy_from_slice(&proof);
        }
        bytes
    }

    /// When [`Client::poll_transmit`] next has something.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let (next_request, carriers) = if self.done {
            (None, None)
        } else {
            let live = || self.relays.iter().filter(|r| !r.gone);
            let carriers = live().filter_map(RelayEnd::carrier_timeout).min();
            (live().map(|r| r.next).min(), carriers)
        };
        [next_request, carriers, self.puncher.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// What was found since the last call.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(addr) = self.puncher.poll_reachable() {
            return Some(Event::Reachable(addr));
        }
        self.events.pop_front()
    }

    /// A rendezvous datagram from `from`, over UDP. Returns whether it was believed.
    pub fn handle(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) -> bool {
        self.handle_via(now, from, datagram, Carrier::Udp)
    }

    /// A rendezvous datagram from `from` that came over `carrier`. Returns
    /// whether it was believed. A relay that answers over UDP while we use
    /// TCP there shows UDP works again.
    pub fn handle_via(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        carrier: Carrier,
    ) -> bool {
        let Some(message) = Message::decode(datagram) else {
            return false;
        };
        if let Message::Punch { nonce, answer, mac } = message {
            return self.direct && self.puncher.handle(now, from, nonce, answer, &mac);
        }
        let Some(i) = self.relays.iter().position(|r| same_addr(r.addr, from)) else {
            return false;
        };
        let r = &mut self.relays[i];
        let relay = r.addr;
        let current = carrier == r.carrier.carrier();
        let mut sealed = false;
        match message {
            Message::Cookie { echo, cookie } if r.nonces.contains(&echo) => {
                r.cookies[carrier.index()] = cookie;
                if current {
                    r.next = now;
                } else if carrier == Carrier::Udp {
                    // A proved probe with it moves our end back to UDP.
                    r.carrier.probe_now(now);
                }
            }
            // A probe's refusal says nothing of the carrier in use.
            Message::Refused { echo, why } if r.nonces.contains(&echo) => {
                if current {
                    self.events.push_back(Event::Refused { relay, why });
                }
            }
            Message::Sealed(s) if r.nonces.contains(&s.echo) => {
                let Some(answer) = r.open(&s) else {
                    return false;
                };
                self.on_answer(now, i, answer);
                sealed = true;
            }
            _ => return false,
        }
        let r = &mut self.relays[i];
        r.answered = true;
        if r.carrier.on_answer(carrier, sealed).is_some() {
            // Back on UDP: the relay moved our end there; confirm at once
            // over UDP, so that no request still queued on the stream
            // moves it back for long.
            r.next = now;
            self.events.push_back(Event::Carrier { relay, tcp: false });
        }
        true
    }

    fn on_answer(&mut self, now: Instant, i: usize, answer: Answer) {
        let r = &mut self.relays[i];
        let relay = r.addr;
        if !r.settled {
            r.settled = true;
            r.wait = FIRST_RETRY;
            // Sooner if the key just agreed is to be confirmed.
            r.next = r.next.min(now + REFRESH);
        }
        let reflexive = match &answer {
            Answer::Registered { reflexive, .. } | Answer::Paired { reflexive, .. } => *reflexive,
        };
        let before = r.reflexive.replace(reflexive);
        match answer {
            Answer::Registered { reflexive, .. } => {
                // Not (or no longer) paired there.
                r.token = None;
                r.peer = None;
                self.events
                    .push_back(Event::Registered { relay, reflexive });
            }
            Answer::Paired {
                reflexive,
                peer,
                token,
                candidates,
            } => {
                // A new pair, the peer moved, or we did (our NAT rebound:
                // our new mapping must punch out before the peer's punches
                // pass a NAT that filters by address).
                let moved = before.is_some_and(|old| old != reflexive);
                let news = r.token != Some(token) || r.peer != peer || moved;
                if r.token != Some(token) {
                    r.had_session = false;
                }
                r.token = Some(token);
                r.peer = peer;
                if self.direct {
                    self.puncher.add_token(token);
                    if let (true, Some(peer)) = (news, peer) {
                        self.puncher.add_peer(now, peer, token);
                    }
                    if news {
                        // The peer's local addresses too, beside its
                        // public one; never one of ours, which would
                        // answer our own punches.
                        let theirs = host_candidates(&candidates);
                        for c in theirs.into_iter().filter(|c| {
                            Some(*c) != peer && !self.candidates.iter().any(|o| same_addr(*o, *c))
                        }) {
                            self.puncher.add_peer(now, c, token);
                        }
                    }
                }
                self.events.push_back(Event::Paired {
                    relay,
                    reflexive,
                    peer,
                });
            }
        }
    }
}

impl RelayEnd {
    /// When the carrier next has something to decide or probe: probes need
    /// keys agreed (they are proved, so the relay can move our end).
    fn carrier_timeout(&self) -> Option<Instant> {
        match self.carrier.carrier() {
            Carrier::Tcp if self.keys.is_none() || self.leave => None,
            _ => self.carrier.poll_timeout(),
        }
    }

    /// The next request, sent now, releases our pair here.
    fn ask_release(&mut self, now: Instant) {
        self.release = true;
        self.next = now;
    }

    /// A sealed answer's content, if it opens under our key with this
    /// relay, or under the key its first answer gives (a relay that
    /// restarted, or our first answer): the new key is then ours, and
    /// the relay hears a proved request at once so it stops repeating it.
    fn open(&mut self, s: &Sealed) -> Option<Answer> {
        let header = s.header();
        let opened = self
            .keys
            .as_ref()
            .and_then(|k| k.open(s.counter, &header, &s.body));
        let plain = match (opened, &s.keyed) {
            (Some(plain), _) => plain,
            (None, Some(keyed)) => {
                let keys = self.hello.finish(keyed)?;
                let plain = keys.open(s.counter, &header, &s.body)?;
                self.keys = Some(keys);
                self.next = Instant::ZERO;
                plain
            }
            (None, None) => return None,
        };
        Answer::decode(&plain)
    }
}
