//! A rendezvous relay's state, sans-IO: registrations, pairs, and which
//! datagram goes where. The runtime feeds it every datagram with its
//! source address and the time, and sends what it says.
//!
//! Nothing is kept for an address until it has echoed a cookie (the
//! relay's stateless proof that it receives there, as a TURN nonce or a
//! WireGuard cookie), every answer is smaller than the padded request that
//! caused it, and every table has a bound.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::wire::{Message, Refusal, HANDLE_LEN, REQUEST_LEN, TOKEN_LEN};
use crate::crypto::{RetryKey, SessionRng};
use crate::Instant;

/// A public handle peers meet under: a digest of a code's nameplate or of
/// a receiver's public key ([`super::code_handle`], [`super::key_handle`]).
pub type Handle = [u8; HANDLE_LEN];

/// Cookies name this instead of a session id.
const COOKIE_SCOPE: u64 = u64::from_be_bytes(*b"rzcookie");

/// What a relay's operator may bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Clients waiting under a handle at once.
    pub max_registrations: usize,
    /// Pairs forwarding at once.
    pub max_pairs: usize,
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
    /// Ends of pairs that moved to a new address (a NAT rebound).
    pub rebound: u64,
}

struct Registration {
    addr: SocketAddr,
    expires: Instant,
    /// The pair it is in, if any: one peer at a time.
    pair: Option<u64>,
}

struct Pair {
    handle: Handle,
    joiner: SocketAddr,
    registered: SocketAddr,
    token: [u8; TOKEN_LEN],
    last: Instant,
    forwarded: u64,
    /// Token bucket of `pair_rate`: bytes that may go now.
    allowance: f64,
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
    next_pair: u64,
    stats: ServerStats,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Server {
    /// A relay with bounds `cfg`; `seed` keys its cookies and draws tokens.
    pub fn new(cfg: ServerConfig, seed: [u8; 32]) -> Server {
        let mut rng = SessionRng::new(seed);
        Server {
            cfg,
            cookies: RetryKey::new(rng.seed()),
            rng,
            registrations: HashMap::new(),
            pairs: HashMap::new(),
            by_addr: HashMap::new(),
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
        replies: &mut Vec<(SocketAddr, Vec<u8>)>,
    ) -> Option<SocketAddr> {
        if !super::wire::is_rendezvous(datagram) {
            return self.forward(now, from, datagram.len());
        }
        match Message::decode(datagram) {
            Some(Message::Register {
                handle,
                cookie,
                token,
            }) => {
                if self.cookie_ok(now, from, &cookie, replies)
                    && !self.rebind(from, handle, token, true, replies)
                {
                    self.register(now, from, handle, replies);
                }
            }
            Some(Message::Join {
                handle,
                cookie,
                token,
            }) => {
                if self.cookie_ok(now, from, &cookie, replies)
                    && !self.rebind(from, handle, token, false, replies)
                {
                    self.join(now, from, handle, replies);
                }
            }
            // Answers and punches are not for a relay.
            _ => self.stats.dropped_unknown += 1,
        }
        None
    }

    /// Drops lapsed registrations and idle pairs; call about once a second.
    pub fn expire(&mut self, now: Instant) {
        self.registrations
            .retain(|_, r| r.pair.is_some() || r.expires > now);
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

    fn now_s(now: Instant) -> u64 {
        now.as_nanos() / 1_000_000_000
    }

    /// Whether `cookie` proves `from` receives; if not, it gets one.
    fn cookie_ok(
        &mut self,
        now: Instant,
        from: SocketAddr,
        cookie: &[u8],
        replies: &mut Vec<(SocketAddr, Vec<u8>)>,
    ) -> bool {
        let now_s = Self::now_s(now);
        if self.cookies.verify(cookie, from, COOKIE_SCOPE, now_s) {
            return true;
        }
        self.stats.cookies += 1;
        let token = self.cookies.token(from, COOKIE_SCOPE, now_s);
        let cookie = token.try_into().expect("a retry token is a cookie");
        replies.push((from, Message::Cookie(cookie).encode()));
        false
    }

    fn refuse(&mut self, to: SocketAddr, why: Refusal, replies: &mut Vec<(SocketAddr, Vec<u8>)>) {
        self.stats.refused += 1;
        replies.push((to, Message::Refused(why).encode()));
    }

    fn register(
        &mut self,
        now: Instant,
        from: SocketAddr,
        handle: Handle,
        replies: &mut Vec<(SocketAddr, Vec<u8>)>,
    ) {
        let expires = now + self.cfg.registration_lifetime;
        let full = self.registrations.len() >= self.cfg.max_registrations;
        match self.registrations.get_mut(&handle) {
            Some(r) if r.addr == from => r.expires = expires,
            // Another address holds it, until it lapses.
            Some(r) if r.pair.is_some() || r.expires > now => {
                return self.refuse(from, Refusal::Busy, replies)
            }
            Some(r) => {
                r.addr = from;
                r.expires = expires;
            }
            None if full => {
                self.expire(now);
                if self.registrations.len() >= self.cfg.max_registrations {
                    return self.refuse(from, Refusal::Full, replies);
                }
                return self.register(now, from, handle, replies);
            }
            None => {
                self.registrations.insert(
                    handle,
                    Registration {
                        addr: from,
                        expires,
                        pair: None,
                    },
                );
            }
        }
        let lifetime_s =
            u16::try_from(self.cfg.registration_lifetime.as_secs()).unwrap_or(u16::MAX);
        replies.push((
            from,
            Message::Registered {
                reflexive: canonical(from),
                lifetime_s,
            }
            .encode(),
        ));
    }

    fn join(
        &mut self,
        now: Instant,
        from: SocketAddr,
        handle: Handle,
        replies: &mut Vec<(SocketAddr, Vec<u8>)>,
    ) {
        // A repeated JOIN (its answer was lost) gets the same answer.
        if let Some(p) = self.by_addr.get(&from).and_then(|id| self.pairs.get(id)) {
            if p.joiner == from && p.handle == handle {
                let (registered, token) = (p.registered, p.token);
                replies.push((from, paired(from, registered, token)));
                return;
            }
            return self.refuse(from, Refusal::Busy, replies);
        }
        let Some(r) = self
            .registrations
            .get(&handle)
            .filter(|r| r.addr != from && (r.pair.is_some() || r.expires > now))
        else {
            return self.refuse(from, Refusal::Unknown, replies);
        };
        if r.pair.is_some() || self.by_addr.contains_key(&r.addr) {
            return self.refuse(from, Refusal::Busy, replies);
        }
        let registered = r.addr;
        if self.pairs.len() >= self.cfg.max_pairs {
            self.expire(now);
            if self.pairs.len() >= self.cfg.max_pairs {
                return self.refuse(from, Refusal::Full, replies);
            }
        }
        let mut token = [0u8; TOKEN_LEN];
        self.rng.fill(&mut token);
        let id = self.next_pair;
        self.next_pair += 1;
        self.pairs.insert(
            id,
            Pair {
                handle,
                joiner: from,
                registered,
                token,
                last: now,
                forwarded: 0,
                allowance: self.burst(),
            },
        );
        self.by_addr.insert(from, id);
        self.by_addr.insert(registered, id);
        if let Some(r) = self.registrations.get_mut(&handle) {
            r.pair = Some(id);
        }
        self.stats.paired += 1;
        // Both answers together are no larger than the JOIN.
        debug_assert!(2 * paired(from, registered, token).len() <= REQUEST_LEN);
        replies.push((from, paired(from, registered, token)));
        replies.push((registered, paired(registered, from, token)));
    }

    /// A paired client's refresh from an address in no pair, with its
    /// pair's token: its NAT rebound, so its end of the pair (the
    /// registered end for a REGISTER, the joiner for a JOIN) moves to
    /// `from`, which the cookie showed receives. Only the two ends (and
    /// we) know the token. Whether it moved.
    fn rebind(
        &mut self,
        from: SocketAddr,
        handle: Handle,
        token: [u8; TOKEN_LEN],
        registered_end: bool,
        replies: &mut Vec<(SocketAddr, Vec<u8>)>,
    ) -> bool {
        if token == [0; TOKEN_LEN] || self.by_addr.contains_key(&from) {
            return false;
        }
        let Some(r) = self.registrations.get_mut(&handle) else {
            return false;
        };
        let Some(p) = r.pair.and_then(|id| self.pairs.get_mut(&id)) else {
            return false;
        };
        if p.token != token {
            return false;
        }
        let end = if registered_end {
            &mut p.registered
        } else {
            &mut p.joiner
        };
        let old = std::mem::replace(end, from);
        let (peer, id) = (
            if registered_end {
                p.joiner
            } else {
                p.registered
            },
            r.pair,
        );
        if registered_end {
            r.addr = from;
        }
        self.by_addr.remove(&old);
        self.by_addr.insert(from, id.expect("paired"));
        self.stats.rebound += 1;
        // Both ends learn the new address: the other one punches it, so a
        // direct path through a NAT that filters by address opens again.
        // The two answers together fit in the request.
        replies.push((from, paired(from, peer, token)));
        replies.push((peer, paired(peer, from, token)));
        true
    }

    fn unpair(&mut self, id: u64) {
        let Some(p) = self.pairs.remove(&id) else {
            return;
        };
        self.by_addr.remove(&p.joiner);
        self.by_addr.remove(&p.registered);
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
        Some(if from == p.joiner {
            p.registered
        } else {
            p.joiner
        })
    }
}

fn paired(reflexive: SocketAddr, peer: SocketAddr, token: [u8; TOKEN_LEN]) -> Vec<u8> {
    Message::Paired {
        reflexive: canonical(reflexive),
        peer: canonical(peer),
        token,
    }
    .encode()
}

/// An address as its owner knows it: on a dual-stack relay an IPv4 client
/// arrives as `::ffff:a.b.c.d`, which is `a.b.c.d` to the client.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}
