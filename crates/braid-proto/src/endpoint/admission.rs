//! Which handshakes get a half-open session: a bounded table, counted per
//! address prefix, where a client that proved its address (by echoing a
//! retry token) always finds room by pushing out one that did not, or the
//! oldest of the most crowded prefix.

use crate::counts::Counts;
use crate::{Instant, PublicKey};
use std::collections::HashMap;
use std::net::IpAddr;

/// Addresses that one party plausibly holds many of: an IPv4 /24 or an
/// IPv6 /56 (a home or small-site delegation, RFC 6177). Limits count per
/// prefix, not per address, so an attacker with a block of addresses is
/// one party.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prefix {
    /// The first three bytes of an IPv4 address.
    V4([u8; 3]),
    /// The first seven bytes of an IPv6 address.
    V6([u8; 7]),
}

impl Prefix {
    /// The prefix `ip` belongs to (IPv4-mapped IPv6 counts as IPv4).
    pub fn of(ip: IpAddr) -> Prefix {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(a) => {
                let o = a.octets();
                Prefix::V4([o[0], o[1], o[2]])
            }
            IpAddr::V6(a) => {
                let mut p = [0u8; 7];
                p.copy_from_slice(&a.octets()[..7]);
                Prefix::V6(p)
            }
        }
    }
}

/// One half-open session.
#[derive(Debug, Clone, Copy)]
pub(super) struct HalfOpen {
    pub prefix: Prefix,
    pub since: Instant,
    /// Its opening echoed a valid retry token.
    pub validated: bool,
    /// It answered a one-time-code handshake: one guess spent.
    pub code: bool,
    /// The client's key (key mode), counted once the session is established.
    pub key: Option<PublicKey>,
}

/// What to do with an opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admit {
    /// Open a session, after evicting this half-open one if `Some`.
    Open(Option<u64>),
    /// Answer with a retry token and keep nothing.
    Retry,
    /// Keep nothing and say nothing.
    Drop,
}

/// The half-open sessions, by session id.
#[derive(Debug, Default)]
pub(super) struct HalfOpenTable {
    entries: HashMap<u64, HalfOpen>,
    per_prefix: Counts<Prefix>,
}

impl HalfOpenTable {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Half-open sessions that answered a code handshake.
    pub fn code_answers(&self) -> u32 {
        self.entries.values().filter(|h| h.code).count() as u32
    }

    pub fn in_prefix(&self, prefix: Prefix) -> usize {
        self.per_prefix.get(prefix)
    }

    pub fn insert(&mut self, id: u64, h: HalfOpen) {
        if let Some(old) = self.entries.insert(id, h) {
            self.per_prefix.remove(old.prefix);
        }
        self.per_prefix.add(h.prefix);
    }

    pub fn remove(&mut self, id: u64) -> Option<HalfOpen> {
        let h = self.entries.remove(&id)?;
        self.per_prefix.remove(h.prefix);
        Some(h)
    }

    /// Decides on an opening from `prefix`. `validated`: it echoed a valid
    /// token; `needs_token`: this opening must have one to be answered.
    /// Under load (many half-open sessions, or many from its prefix) an
    /// unvalidated opening is asked for a token, never dropped in silence;
    /// a validated one always gets a session, in a full table by pushing
    /// out an unvalidated one or else the oldest of the most crowded
    /// prefix, so a flood from one block of addresses displaces itself.
    pub fn admit(
        &self,
        prefix: Prefix,
        validated: bool,
        needs_token: bool,
        limits: &Limits,
    ) -> Admit {
        let loaded = self.len() >= limits.retry_from || self.in_prefix(prefix) >= limits.per_prefix;
        if !validated && (needs_token || loaded) {
            return Admit::Retry;
        }
        if self.len() < limits.total {
            return Admit::Open(None);
        }
        let victim = self.oldest(|h| !h.validated).or_else(|| {
            let crowded = self.most_crowded();
            self.oldest(|h| Some(h.prefix) == crowded)
        });
        victim.map_or(Admit::Drop, |id| Admit::Open(Some(id)))
    }

    /// The oldest entry matching `f` (ties: lowest id, so runs replay).
    fn oldest(&self, f: impl Fn(&HalfOpen) -> bool) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, h)| f(h))
            .min_by_key(|(&id, h)| (h.since, id))
            .map(|(&id, _)| id)
    }

    fn most_crowded(&self) -> Option<Prefix> {
        self.per_prefix
            .iter()
            .max_by_key(|&(p, n)| (n, p))
            .map(|(p, _)| p)
    }
}

/// The table's bounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub total: usize,
    pub per_prefix: usize,
    /// From this many half-open sessions on, every opening must echo a token.
    pub retry_from: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        total: 4,
        per_prefix: 3,
        retry_from: 2,
    };

    fn p(last: u8) -> Prefix {
        Prefix::of(IpAddr::from([10, 0, last, 1]))
    }

    fn entry(prefix: Prefix, at: u64, validated: bool) -> HalfOpen {
        HalfOpen {
            prefix,
            since: Instant::from_nanos(at),
            validated,
            code: false,
            key: None,
        }
    }

    #[test]
    fn prefixes_group_blocks_of_addresses() {
        let a = Prefix::of("192.0.2.1".parse().unwrap());
        assert_eq!(a, Prefix::of("192.0.2.200".parse().unwrap()));
        assert_eq!(a, Prefix::of("::ffff:192.0.2.7".parse().unwrap()));
        assert_ne!(a, Prefix::of("192.0.3.1".parse().unwrap()));
        let b = Prefix::of("2001:db8:0:ab00::1".parse().unwrap());
        assert_eq!(b, Prefix::of("2001:db8:0:abff::9".parse().unwrap()));
        assert_ne!(b, Prefix::of("2001:db8:0:ac00::1".parse().unwrap()));
    }

    #[test]
    fn a_full_table_asks_for_tokens_and_makes_room_for_them() {
        let mut t = HalfOpenTable::default();
        assert_eq!(t.admit(p(1), false, false, &LIMITS), Admit::Open(None));
        t.insert(1, entry(p(1), 1, false));
        t.insert(2, entry(p(2), 2, false));
        // Past the retry threshold: no token, no session, but an answer.
        assert_eq!(t.admit(p(3), false, false, &LIMITS), Admit::Retry);
        assert_eq!(t.admit(p(3), true, false, &LIMITS), Admit::Open(None));
        t.insert(3, entry(p(3), 3, true));
        t.insert(4, entry(p(4), 4, true));
        // Full: a validated opening pushes out the oldest unvalidated one.
        assert_eq!(t.admit(p(5), true, false, &LIMITS), Admit::Open(Some(1)));
        t.remove(1);
        t.remove(2);
        t.insert(5, entry(p(3), 5, true));
        t.insert(6, entry(p(3), 6, true));
        // All validated: the oldest of the most crowded prefix goes.
        assert_eq!(t.admit(p(9), true, false, &LIMITS), Admit::Open(Some(3)));
    }

    #[test]
    fn a_crowded_prefix_must_prove_its_addresses() {
        let mut t = HalfOpenTable::default();
        let roomy = Limits {
            retry_from: 100,
            ..LIMITS
        };
        for id in 0..3 {
            t.insert(id, entry(p(7), id, true));
        }
        assert_eq!(t.in_prefix(p(7)), 3);
        assert_eq!(t.admit(p(7), false, false, &roomy), Admit::Retry);
        assert_eq!(t.admit(p(8), false, false, &roomy), Admit::Open(None));
        // Proven addresses of a busy prefix still get in while there is room.
        assert_eq!(t.admit(p(7), true, false, &roomy), Admit::Open(None));
        t.insert(3, entry(p(7), 3, true));
        // Full: the crowded prefix's oldest makes room, whoever asks.
        assert_eq!(t.admit(p(8), true, false, &roomy), Admit::Open(Some(0)));
        t.remove(0);
        assert_eq!(t.in_prefix(p(7)), 3);
    }
}
