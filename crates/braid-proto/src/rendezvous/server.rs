//! A rendezvous relay's state, sans-IO: registrations, pairs, and which
//! datagram goes where. The runtime feeds it every datagram with its
//! source address and the time, and sends what it says.
//!
//! Nothing is kept for an address until it has echoed a cookie (the
//! relay's stateless proof that it receives there, as a TURN nonce or a
//! WireGuard cookie); every answer is smaller than the padded request that
//! caused it and echoes its nonce; every table has a bound, in all and per
//! host. Each end agrees keys with the relay in its first request
//! ([`super::seal`]): what the relay tells it is sealed, and only a request
//! proved under its key refreshes, releases or moves its end.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::hosts::{Host, HostCounts};
use super::seal::EndKeys;
use super::wire::{
    flags, Answer, Message, Refusal, Request, Sealed, HELLO_LEN, KEYED_LEN, MAC_LEN, REQUEST_LEN,
    TOKEN_LEN,
};
use crate::crypto::{RetryKey, SessionRng};
use crate::Instant;

/// A public handle peers meet under: a digest of a code's nameplate or of
/// a receiver's public key ([`super::code_handle`], [`super::key_handle`]).
pub type Handle = [u8; super::wire::HANDLE_LEN];

/// Cookies name this instead of a session id.
const COOKIE_SCOPE: u64 = u64::from_be_bytes(*b"rzcookie");

/// A pair whose registered end has sent nothing through it for this long
/// can be taken by another joiner: its joiner never got a session going
/// (a squatter, or a sender that gave up). Long enough for a handshake
/// over any real path.
pub const REPLACE_AFTER: Duration = Duration::from_secs(1);

/// What a relay's operator may bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Clients waiting under a handle at once.
    pub max_registrations: usize,
    /// Pairs forwarding at once.
    pub max_pairs: usize,
    /// Registrations, and pairs joined, one host may hold (an IPv4 address
    /// or an IPv6 /64).
    pub max_per_host: usize,
    /// How long a registration lasts without a refresh.
    pub registration_lifetime: Duration,
    /// A pair that forwarded nothing for this long ends.
    pub pair_idle: Duration,
    /// Bytes per second forwarded for one pair, both ways together
    /// (`None`: no limit). Excess datagrams are dropped, as a router's
    /// policer does; the peers' congestion control sees loss.
    pub pair_rate: Option<u64>,
    /// Bytes one pair may have forwarded in all (`None`: no limit); beyond
    /// it, the pair ends.
    pub pair_quota: Option<u64>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_registrations: 10_000,
            max_pairs: 10_000,
            max_per_host: 32,
            registration_lifetime: Duration::from_secs(30),
            pair_idle: Duration::from_secs(30),
            pair_rate: None,
            pair_quota: None,
        }
    }
}

/// What a relay did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Registrations held now.
    pub registrations: usize,
    /// Pairs held now.
    pub pairs: usize,
    /// Pairs ever made.
    pub paired: u64,
    /// Datagrams and bytes forwarded between peers.
    pub forwarded_datagrams: u64,
    /// See `forwarded_datagrams`.
    pub forwarded_bytes: u64,
    /// Datagrams over a pair's rate or quota, dropped.
    pub dropped_over_limit: u64,
    /// Datagrams from an address in no pair, or malformed, dropped.
    pub dropped_unknown: u64,
    /// Requests answered with a cookie (no state kept).
    pub cookies: u64,
    /// Requests refused (busy, unknown handle, full).
    pub refused: u64,
    /// `refused`, by cause.
    pub refused_by: Refusals,
    /// Ends of pairs that moved to a new address (a NAT rebound).
    pub rebound: u64,
    /// Pairs taken over by a new joiner because the receiver never answered.
    pub replaced: u64,
    /// Pairs an end released.
    pub released: u64,
}

/// Requests refused, by cause; together they are [`ServerStats::refused`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    /// A join under a handle nobody is registered under ([`Refusal::Unknown`]).
    pub unknown: u64,
    /// A handle another address holds, or whose receiver is paired
    /// ([`Refusal::Busy`]).
    pub busy: u64,
    /// The requester's host held [`ServerConfig::max_per_host`]
    /// registrations or pairs ([`Refusal::Full`]).
    pub host_full: u64,
    /// The relay held [`ServerConfig::max_registrations`] registrations or
    /// [`ServerConfig::max_pairs`] pairs ([`Refusal::Full`]).
    pub relay_full: u64,
}

/// Why a request is refused, as [`Refusals`] counts it; the wire tells
/// the two bounds apart no more than [`Refusal::Full`] does.
#[derive(Debug, Clone, Copy)]
enum Cause {
    Unknown,
    /// Counted as [`Refusals::unknown`]: nobody waits under the handle.
    Spent,
    Busy,
    HostFull,
    RelayFull,
}

/// One end's keys and what the relay tells it.
struct End {
    addr: SocketAddr,
    hello: [u8; HELLO_LEN],
    keys: EndKeys,
    /// The answer to `hello`, repeated until a proved request shows it arrived.
    keyed: [u8; KEYED_LEN],
    confirmed: bool,
    /// Nonce of the next sealed answer; never reused.
    counter: u64,
    /// The latest request's nonce, which answers echo.
    nonce: u64,
    no_direct: bool,
    /// Its local addresses, for its peer (none if `no_direct`).
    candidates: Vec<SocketAddr>,
}

impl End {
    fn new(from: SocketAddr, req: &Request, keys: EndKeys, keyed: [u8; KEYED_LEN]) -> End {
        End {
            addr: from,
            hello: req.hello,
            keys,
            keyed,
            confirmed: false,
            counter: 0,
            nonce: req.nonce,
            no_direct: req.flags & flags::NO_DIRECT != 0,
            candidates: req.candidates.clone(),
        }
    }

    /// Whether `bytes` is a request proved by this end, or its first
    /// request repeated from where it came (the answer was lost).
    fn owns(&self, from: SocketAddr, req: &Request, bytes: &[u8]) -> bool {
        if req.proof == [0; MAC_LEN] {
            return !self.confirmed && from == self.addr && req.hello == self.hello;
        }
        self.keys.proves(bytes)
    }

    fn update(&mut self, req: &Request) {
        self.confirmed |= req.proof != [0; MAC_LEN];
        self.nonce = req.nonce;
        self.no_direct = req.flags & flags::NO_DIRECT != 0;
        if self.candidates != req.candidates {
            self.candidates = req.candidates.clone();
        }
    }

    fn seal(&mut self, answer: Answer) -> Vec<u8> {
        let mut s = Sealed {
            echo: self.nonce,
            counter: self.counter,
            keyed: (!self.confirmed).then_some(self.keyed),
            body: Vec::new(),
        };
        self.counter += 1;
        s.body = self.keys.seal(s.counter, &s.header(), &answer.encode());
        Message::Sealed(s).encode()
    }

    fn paired(&mut self, peer: &End, token: [u8; TOKEN_LEN]) -> Vec<u8> {
        self.seal(Answer::Paired {
            reflexive: canonical(self.addr),
            peer: (!peer.no_direct).then(|| canonical(peer.addr)),
            token,
            candidates: if peer.no_direct {
                Vec::new()
            } else {
                peer.candidates.clone()
            },
        })
    }
}

struct Registration {
    end: End,
    expires: Instant,
    /// The pair it is in, if any: one peer at a time.
    pair: Option<u64>,
    /// Its receiver left because wrong guesses spent its code: kept until
    /// it lapses only to tell joiners so ([`Refusal::Spent`]); any
    /// REGISTER replaces it.
    spent: bool,
}

struct Pair {
    handle: Handle,
    joiner: End,
    /// The registered end's address (its `End` is in the registration).
    registered: SocketAddr,
    token: [u8; TOKEN_LEN],
    made: Instant,
    last: Instant,
    forwarded: u64,
    /// Datagrams the registered end sent through the pair.
    from_registered: u64,
    /// Token bucket of `pair_rate`: bytes that may go now.
    allowance: f64,
}

impl Pair {
    /// Whether a JOIN from `from` may take this pair: the receiver has sent
    /// nothing through it for [`REPLACE_AFTER`], and the joiner is another
    /// host (so a squatter cannot keep its own pair young).
    fn replaceable(&self, from: SocketAddr, now: Instant) -> bool {
        self.from_registered == 0
            && now.saturating_duration_since(self.made) >= REPLACE_AFTER
            && Host::of(from) != Host::of(self.joiner.addr)
    }
}

/// The relay's tables.
pub struct Server {
    cfg: ServerConfig,
    cookies: RetryKey,
    rng: SessionRng,
    registrations: HashMap<Handle, Registration>,
    pairs: HashMap<u64, Pair>,
    /// Both addresses of every pair.
    by_addr: HashMap<SocketAddr, u64>,
    /// Registrations per host, and pairs per joining host.
    registered_hosts: HostCounts,
    joined_hosts: HostCounts,
    next_pair: u64,
    stats: ServerStats,
}

type Replies = Vec<(SocketAddr, Vec<u8>)>;

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Server {
    /// A relay with bounds `cfg`; `seed` keys its cookies and draws its
    /// key agreements and pair secrets.
    pub fn new(cfg: ServerConfig, seed: [u8; 32]) -> Server {
        let mut rng = SessionRng::new(seed);
        Server {
            cfg,
            cookies: RetryKey::new(rng.seed()),
            rng,
            registrations: HashMap::new(),
            pairs: HashMap::new(),
            by_addr: HashMap::new(),
            registered_hosts: HostCounts::default(),
            joined_hosts: HostCounts::default(),
            next_pair: 0,
            stats: ServerStats::default(),
        }
    }

    /// Counters and table sizes.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            registrations: self.registrations.len(),
            pairs: self.pairs.len(),
            ..self.stats
        }
    }

    /// A datagram of `len` bytes from `from` at `now`. For a rendezvous
    /// request, answers go to `replies` and `None` is returned; for
    /// anything else, the address to forward it to unchanged, if `from` is
    /// in a pair and within its limits.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        replies: &mut Replies,
    ) -> Option<SocketAddr> {
        if !super::wire::is_rendezvous(datagram) {
            return self.forward(now, from, datagram.len());
        }
        match Message::decode(datagram) {
            Some(Message::Request(req)) => {
                if self.cookie_ok(now, from, &req, replies) {
                    if req.register {
                        self.register(now, from, &req, datagram, replies);
                    } else {
                        self.join(now, from, &req, datagram, replies);
                    }
                }
            }
            // Answers and punches are not for a relay.
            _ => self.stats.dropped_unknown += 1,
        }
        None
    }

    /// The secret of the pair under `handle`, for tests that look for it on the wire.
    #[cfg(test)]
    pub(crate) fn pair_token(&self, handle: &Handle) -> Option<[u8; TOKEN_LEN]> {
        let id = self.registrations.get(handle)?.pair?;
        Some(self.pairs[&id].token)
    }

    /// Whether a table is `at_limit`, even after what lapsed is dropped
    /// (only then: expiring is a walk over every entry).
    fn full(&mut self, now: Instant, at_limit: impl Fn(&Self) -> bool) -> bool {
        if !at_limit(self) {
            return false;
        }
        self.expire(now);
        at_limit(self)
    }

    /// Drops lapsed registrations and idle pairs; call about once a second.
    pub fn expire(&mut self, now: Instant) {
        let hosts = &mut self.registered_hosts;
        self.registrations.retain(|_, r| {
            let keep = r.pair.is_some() || r.expires > now;
            if !keep {
                hosts.remove(r.end.addr);
            }
            keep
        });
        let idle: Vec<u64> = self
            .pairs
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.last) >= self.cfg.pair_idle)
            .map(|(&id, _)| id)
            .collect();
        for id in idle {
            self.unpair(id);
        }
    }

    /// Whether the request's cookie proves `from` receives; if not, it gets one.
    fn cookie_ok(
        &mut self,
        now: Instant,
        from: SocketAddr,
        req: &Request,
        replies: &mut Replies,
    ) -> bool {
        let now_s = now.as_nanos() / 1_000_000_000;
        if self.cookies.verify(&req.cookie, from, COOKIE_SCOPE, now_s) {
            return true;
        }
        self.stats.cookies += 1;
        let token = self.cookies.token(from, COOKIE_SCOPE, now_s);
        let cookie = token.try_into().expect("a retry token is a cookie");
        let echo = req.nonce;
        replies.push((from, Message::Cookie { echo, cookie }.encode()));
        false
    }

    fn refuse(&mut self, to: SocketAddr, echo: u64, cause: Cause, replies: &mut Replies) {
        self.stats.refused += 1;
        let by = &mut self.stats.refused_by;
        let (count, why) = match cause {
            Cause::Unknown => (&mut by.unknown, Refusal::Unknown),
            Cause::Spent => (&mut by.unknown, Refusal::Spent),
            Cause::Busy => (&mut by.busy, Refusal::Busy),
            Cause::HostFull => (&mut by.host_full, Refusal::Full),
            Cause::RelayFull => (&mut by.relay_full, Refusal::Full),
        };
        *count += 1;
        replies.push((to, Message::Refused { echo, why }.encode()));
    }

    /// A new end for `from`, if its hello is well-formed.
    fn new_end(&mut self, from: SocketAddr, req: &Request) -> Option<End> {
        let (keys, keyed) =
            EndKeys::answer_hello(&mut self.rng, &req.handle, req.register, &req.hello)?;
        Some(End::new(from, req, keys, keyed))
    }

    fn register(
        &mut self,
        now: Instant,
        from: SocketAddr,
        req: &Request,
        bytes: &[u8],
        replies: &mut Replies,
    ) {
        let expires = now + self.cfg.registration_lifetime;
        match self.registrations.get_mut(&req.handle) {
            // A spent code's receiver is gone; whoever registers now is new.
            Some(r) if r.spent => {
                let gone = self.registrations.remove(&req.handle).expect("held");
                self.registered_hosts.remove(gone.end.addr);
            }
            Some(r) if r.end.owns(from, req, bytes) => {
                r.end.update(req);
                r.expires = expires;
                let (pair, moved) = (r.pair, r.end.addr != from);
                if moved && !self.move_registered(req.handle, from) {
                    return self.refuse(from, req.nonce, Cause::Busy, replies);
                }
                if req.flags & flags::LEAVE != 0 {
                    return self.leave(req.handle, req.flags & flags::SPENT != 0, expires);
                }
                match pair {
                    Some(id) if req.flags & flags::RELEASE != 0 => {
                        self.stats.released += 1;
                        self.unpair(id);
                    }
                    Some(id) => {
                        if moved {
                            // The joiner punches the new address.
                            self.answer_paired(id, false, replies);
                        }
                        return self.answer_paired(id, true, replies);
                    }
                    None => {}
                }
                let answer = self.registered_answer(from);
                let r = self.registrations.get_mut(&req.handle).expect("held");
                let reply = r.end.seal(answer);
                return replies.push((from, reply));
            }
            // Another address holds it, until it lapses.
            Some(r) if r.pair.is_some() || r.expires > now => {
                return self.refuse(from, req.nonce, Cause::Busy, replies)
            }
            Some(_) => {
                let lapsed = self.registrations.remove(&req.handle).expect("held");
                self.registered_hosts.remove(lapsed.end.addr);
            }
            None => {}
        }
        if self.registered_hosts.at_bound(from, self.cfg.max_per_host) {
            return self.refuse(from, req.nonce, Cause::HostFull, replies);
        }
        if self.full(now, |s| s.registrations.len() >= s.cfg.max_registrations) {
            return self.refuse(from, req.nonce, Cause::RelayFull, replies);
        }
        let Some(mut end) = self.new_end(from, req) else {
            self.stats.dropped_unknown += 1;
            return;
        };
        let reply = end.seal(self.registered_answer(from));
        self.registered_hosts.add(from);
        let registration = Registration {
            end,
            expires,
            pair: None,
            spent: false,
        };
        self.registrations.insert(req.handle, registration);
        replies.push((from, reply));
    }

    fn registered_answer(&self, addr: SocketAddr) -> Answer {
        Answer::Registered {
            reflexive: canonical(addr),
            lifetime_s: u16::try_from(self.cfg.registration_lifetime.as_secs()).unwrap_or(u16::MAX),
        }
    }

    fn join(
        &mut self,
        now: Instant,
        from: SocketAddr,
        req: &Request,
        bytes: &[u8],
        replies: &mut Replies,
    ) {
        let Some(r) = self
            .registrations
            .get(&req.handle)
            .filter(|r| r.pair.is_some() || r.expires > now)
        else {
            return self.refuse(from, req.nonce, Cause::Unknown, replies);
        };
        if r.spent {
            return self.refuse(from, req.nonce, Cause::Spent, replies);
        }
        if let Some(id) = r.pair {
            if self.join_paired(id, now, from, req, bytes, replies) {
                return;
            }
        }
        let registered = self.registrations[&req.handle].end.addr;
        if registered == from || self.by_addr.contains_key(&from) {
            return self.refuse(from, req.nonce, Cause::Busy, replies);
        }
        if self.joined_hosts.at_bound(from, self.cfg.max_per_host) {
            return self.refuse(from, req.nonce, Cause::HostFull, replies);
        }
        if self.full(now, |s| s.pairs.len() >= s.cfg.max_pairs) {
            return self.refuse(from, req.nonce, Cause::RelayFull, replies);
        }
        let Some(joiner) = self.new_end(from, req) else {
            self.stats.dropped_unknown += 1;
            return;
        };
        let mut token = [0u8; TOKEN_LEN];
        self.rng.fill(&mut token);
        let id = self.next_pair;
        self.next_pair += 1;
        self.pairs.insert(
            id,
            Pair {
                handle: req.handle,
                joiner,
                registered,
                token,
                made: now,
                last: now,
                forwarded: 0,
                from_registered: 0,
                allowance: self.burst(),
            },
        );
        self.by_addr.insert(from, id);
        self.by_addr.insert(registered, id);
        self.joined_hosts.add(from);
        self.registrations.get_mut(&req.handle).expect("held").pair = Some(id);
        self.stats.paired += 1;
        self.answer_paired(id, false, replies);
        self.answer_paired(id, true, replies);
        debug_assert!(replies.iter().map(|(_, r)| r.len()).sum::<usize>() <= REQUEST_LEN);
    }

    /// A JOIN under a handle whose receiver is in pair `id`: its own
    /// joiner's refresh, release or move, or another's, refused unless the
    /// pair may be replaced (then it is ended). Whether the request was
    /// dealt with; if not, the caller makes a new pair.
    fn join_paired(
        &mut self,
        id: u64,
        now: Instant,
        from: SocketAddr,
        req: &Request,
        bytes: &[u8],
        replies: &mut Replies,
    ) -> bool {
        let p = self.pairs.get_mut(&id).expect("registrations' pairs exist");
        if p.joiner.owns(from, req, bytes) {
            p.joiner.update(req);
            let moved = p.joiner.addr != from;
            if moved && !self.move_joiner(id, from) {
                self.refuse(from, req.nonce, Cause::Busy, replies);
            } else if req.flags & (flags::RELEASE | flags::LEAVE) != 0 {
                self.stats.released += 1;
                self.unpair(id);
            } else {
                if moved {
                    self.answer_paired(id, true, replies);
                }
                self.answer_paired(id, false, replies);
            }
            return true;
        }
        if !p.replaceable(from, now) {
            self.refuse(from, req.nonce, Cause::Busy, replies);
            return true;
        }
        self.stats.replaced += 1;
        self.unpair(id);
        false
    }

    /// Tells one end of pair `id` (the registered one if `registered`) where both are.
    fn answer_paired(&mut self, id: u64, registered: bool, replies: &mut Replies) {
        let p = self.pairs.get_mut(&id).expect("pair exists");
        let r = self
            .registrations
            .get_mut(&p.handle)
            .expect("a pair's registration exists");
        let (me, peer) = if registered {
            (&mut r.end, &p.joiner)
        } else {
            (&mut p.joiner, &r.end)
        };
        replies.push((me.addr, me.paired(peer, p.token)));
    }

    /// The registered end of `handle` proved itself from `to`: its NAT
    /// rebound. Whether it moved (not onto another pair's address).
    fn move_registered(&mut self, handle: Handle, to: SocketAddr) -> bool {
        let r = self.registrations.get_mut(&handle).expect("held");
        if let Some(id) = r.pair {
            if self.by_addr.contains_key(&to) {
                return false;
            }
            let p = self.pairs.get_mut(&id).expect("pair exists");
            self.by_addr.remove(&p.registered);
            self.by_addr.insert(to, id);
            p.registered = to;
        }
        self.registered_hosts.moved(r.end.addr, to);
        r.end.addr = to;
        self.stats.rebound += 1;
        true
    }

    /// As [`Server::move_registered`], for a pair's joiner.
    fn move_joiner(&mut self, id: u64, to: SocketAddr) -> bool {
        if self.by_addr.contains_key(&to) {
            return false;
        }
        let p = self.pairs.get_mut(&id).expect("pair exists");
        self.by_addr.remove(&p.joiner.addr);
        self.by_addr.insert(to, id);
        self.joined_hosts.moved(p.joiner.addr, to);
        p.joiner.addr = to;
        self.stats.rebound += 1;
        true
    }

    /// The registered end of `handle` goes away: its pair and registration
    /// end. If wrong guesses spent its code (`spent`), the registration
    /// stays until `expires`, only to tell joiners so.
    fn leave(&mut self, handle: Handle, spent: bool, expires: Instant) {
        if let Some(id) = self.registrations[&handle].pair {
            self.stats.released += 1;
            self.unpair(id);
        }
        if spent {
            let r = self.registrations.get_mut(&handle).expect("held");
            r.spent = true;
            r.expires = expires;
            return;
        }
        let r = self.registrations.remove(&handle).expect("held");
        self.registered_hosts.remove(r.end.addr);
    }

    fn unpair(&mut self, id: u64) {
        let Some(p) = self.pairs.remove(&id) else {
            return;
        };
        self.by_addr.remove(&p.joiner.addr);
        self.by_addr.remove(&p.registered);
        self.joined_hosts.remove(p.joiner.addr);
        if let Some(r) = self.registrations.get_mut(&p.handle) {
            if r.pair == Some(id) {
                r.pair = None;
            }
        }
    }

    /// The most a pair may send at once: 50 ms at its rate, and at least
    /// a GSO batch's worth.
    fn burst(&self) -> f64 {
        self.cfg
            .pair_rate
            .map_or(f64::INFINITY, |r| (r as f64 * 0.05).max(64.0 * 1500.0))
    }

    fn forward(&mut self, now: Instant, from: SocketAddr, len: usize) -> Option<SocketAddr> {
        let Some(&id) = self.by_addr.get(&from) else {
            self.stats.dropped_unknown += 1;
            return None;
        };
        let burst = self.burst();
        let (rate, quota, idle) = (self.cfg.pair_rate, self.cfg.pair_quota, self.cfg.pair_idle);
        let p = self.pairs.get_mut(&id).expect("indexed pairs exist");
        let elapsed = now.saturating_duration_since(p.last);
        if elapsed >= idle {
            self.unpair(id);
            self.stats.dropped_unknown += 1;
            return None;
        }
        if let Some(rate) = rate {
            p.allowance = (p.allowance + elapsed.as_secs_f64() * rate as f64).min(burst);
        }
        p.last = now;
        let over_quota = quota.is_some_and(|q| p.forwarded + len as u64 > q);
        if over_quota {
            self.unpair(id);
            self.stats.dropped_over_limit += 1;
            return None;
        }
        if p.allowance < len as f64 {
            self.stats.dropped_over_limit += 1;
            return None;
        }
        p.allowance -= len as f64;
        p.forwarded += len as u64;
        self.stats.forwarded_datagrams += 1;
        self.stats.forwarded_bytes += len as u64;
        if from == p.joiner.addr {
            Some(p.registered)
        } else {
            p.from_registered += 1;
            Some(p.joiner.addr)
        }
    }
}

/// An address as its owner knows it: on a dual-stack relay an IPv4 client
/// arrives as `::ffff:a.b.c.d`, which is `a.b.c.d` to the client.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}
