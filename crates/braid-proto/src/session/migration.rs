//! Where a session's connections send: a client's where it opened them; a
//! server's (RFC 9000 §9.3) where the opening came from, then wherever the
//! core follows the peer, with the candidate a connection may move to
//! while it is challenged and the address it last moved away from; and,
//! for any session, which address each connection is bound to for short
//! headers. The caller tells the session where each datagram came from
//! and sends where each [`Transmit::to`](super::Transmit) says.
//!
//! Before the client confirms, the answer goes where the latest opening
//! came from: a copy of the opening raced from a third party's address
//! cannot keep the answer from the client, whose own repeats win it back.
//! An authentic packet moves the connection only if it is the
//! highest-numbered so far and its address then answers a challenge; the
//! stream keeps to the old address meanwhile. After a move the old address
//! is challenged too, and stays validated for a while: if the move was an
//! attacker's copies, the peer's own next packets from there move the
//! connection back at once.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::{Datagram, Session};
use crate::wire::{Frame, Frames, Header};
use crate::{Instant, PathId, Role};

/// How long an address a connection moved away from stays validated: a
/// few round trips of any real path.
const FORMER_RECENT: Duration = Duration::from_secs(3);

/// How long after another connection held its address a connection asks
/// for it again (its datagrams go with long headers meanwhile): once a
/// second, one table lookup, however fast the datagrams come.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// A session's addresses.
#[derive(Debug, Default)]
pub(super) struct Addresses {
    remotes: BTreeMap<PathId, SocketAddr>,
    /// An address a connection may move to, while it is challenged.
    candidate: Option<(PathId, SocketAddr)>,
    /// The address a connection last moved away from, still validated.
    former: Option<(PathId, SocketAddr, Instant)>,
    /// The address each connection was last bound to on its socket (for
    /// short headers), and when to ask again if another connection held it.
    bound: BTreeMap<PathId, (SocketAddr, Option<Instant>)>,
}

impl Addresses {
    /// Whether `addr` is the address connection `path` last moved away
    /// from, still validated at `now`.
    fn is_recent_former(&self, now: Instant, path: PathId, addr: SocketAddr) -> bool {
        self.former
            .is_some_and(|(p, f, until)| p == path && f == addr && now < until)
    }
}

/// What [`Session::handle_datagram_from`] did with a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handled {
    /// Whether it authenticated.
    pub authentic: bool,
    /// The connection's new address, when the core moved it there (or
    /// first learnt it): the caller's routes follow.
    pub moved_to: Option<SocketAddr>,
}

/// What [`Session::follow`] needs to know of a datagram a server session
/// just handled, read before and after handling it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    /// The connection's largest authentic packet number before it.
    pub largest: Option<u64>,
    /// Whether the client had confirmed the handshake before it.
    pub confirmed: bool,
    /// Whether it is a client's opening, in clear.
    pub opening: bool,
    /// Whether it authenticated.
    pub authentic: bool,
    /// Its size.
    pub len: usize,
}

impl Session {
    /// Where connection `path` sends: a client's, the address it opens the
    /// connection to; a server's, the address its opening came from (its
    /// answer goes there), which [`Session::follow`] moves after.
    pub fn set_remote(&mut self, path: PathId, to: SocketAddr) {
        self.challenges.addresses.remotes.insert(path, to);
    }

    /// Where connection `path` sends, once told.
    pub fn remote(&self, path: PathId) -> Option<SocketAddr> {
        self.challenges.addresses.remotes.get(&path).copied()
    }

    /// Where a datagram whose [`Transmit::to_candidate`](super::Transmit)
    /// is set goes.
    pub fn candidate_address(&self, path: PathId) -> Option<SocketAddr> {
        self.challenges
            .addresses
            .candidate
            .filter(|(p, _)| *p == path)
            .map(|(_, a)| a)
    }

    /// Handles a datagram that arrived from `from` (see
    /// [`Session::handle_datagram`]); a server's connection then follows
    /// its peer as the module says. A client's connections send where
    /// they were opened.
    pub fn handle_datagram_from(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: Datagram<'_>,
    ) -> Handled {
        let path = datagram.path;
        let confirmed = self.is_peer_confirmed();
        let before = Arrival {
            largest: self.largest_received(path),
            confirmed,
            // Read before opening, which works in place; only a half-open
            // session asks.
            opening: !confirmed && is_opening(datagram.bytes),
            authentic: false,
            len: datagram.bytes.len(),
        };
        let authentic = self.handle_datagram(now, datagram);
        let moved_to = match self.role() {
            Role::Server => self.follow(
                now,
                path,
                from,
                Arrival {
                    authentic,
                    ..before
                },
            ),
            Role::Client => None,
        };
        Handled {
            authentic,
            moved_to,
        }
    }

    /// A server session handled a datagram on `path` from `from`, as `a`
    /// says: decides where the connection sends from now on. Returns its
    /// address when that changed (or was first learnt).
    fn follow(
        &mut self,
        now: Instant,
        path: PathId,
        from: SocketAddr,
        a: Arrival,
    ) -> Option<SocketAddr> {
        let highest = a.authentic && self.largest_received(path) > a.largest;
        let same = self.remote(path).map(|r| r == from);
        // An answer counts only from the candidate's own address.
        let answered = self.take_candidate_answer(path);
        let addresses = &self.challenges.addresses;
        let is_candidate = addresses.candidate == Some((path, from));
        let recent_former = |addr| addresses.is_recent_former(now, path, addr);
        let is_former = recent_former(from);
        let pending = addresses.candidate.filter(|(p, _)| *p == path);
        let probing_former = pending.is_some_and(|(_, c)| recent_former(c));
        match same {
            Some(true) => {
                // The peer is back where the connection sends: a pending
                // move is moot, but the old address's check after a move
                // goes on.
                if highest && pending.is_some() && !probing_former {
                    self.cancel_candidate(path);
                    self.challenges.addresses.candidate = None;
                }
                return None;
            }
            // A connection heard of for the first time; validated as any.
            None => return a.authentic.then(|| self.follow_to(path, from)),
            Some(false) => {}
        }
        if !a.confirmed && !a.authentic {
            // A clear datagram moves only a half-open session's answer,
            // and only when it is a repeated opening (which the core answers).
            return a.opening.then(|| self.follow_to(path, from));
        }
        if answered {
            if !is_candidate {
                return None;
            }
            self.challenges.addresses.candidate = None;
            // The old address still answers: it stays validated, and only
            // the peer's own packets from there move us back.
            return (!is_former).then(|| self.move_to(now, path, from, a.len));
        }
        if highest {
            if is_former {
                // Seen recently, and validated: no need to ask again (§9.3).
                return Some(self.move_to(now, path, from, a.len));
            }
            if !is_candidate {
                // Another address: its own challenge, credit and count, so
                // an answer meant for one address never validates another.
                self.cancel_candidate(path);
            }
            self.probe_candidate(now, path, a.len);
            self.challenges.addresses.candidate = Some((path, from));
        }
        None
    }

    /// Whether the caller should map `from` to connection `path` on its
    /// socket now, so that the peer may send short headers there: a
    /// datagram from `from` authenticated on `path`, whose connection sends
    /// to `from` from that socket (the caller knows its sockets), and
    /// `path` is not bound there yet, or was refused a while ago.
    pub fn wants_binding(&self, now: Instant, path: PathId, from: SocketAddr) -> bool {
        self.challenges
            .addresses
            .bound
            .get(&path)
            .is_none_or(|&(addr, retry_at)| addr != from || retry_at.is_some_and(|at| now >= at))
    }

    /// The caller mapped `from` to connection `path` (`took`), or another
    /// connection holds it: the peer may send short headers there, or not.
    pub fn on_binding(&mut self, now: Instant, path: PathId, from: SocketAddr, took: bool) {
        let retry_at = (!took).then(|| now + BIND_RETRY);
        self.challenges
            .addresses
            .bound
            .insert(path, (from, retry_at));
        self.accept_short_headers(path, took);
    }

    fn follow_to(&mut self, path: PathId, to: SocketAddr) -> SocketAddr {
        self.set_remote(path, to);
        to
    }

    /// Moves connection `path` to `to`, and challenges the address it
    /// leaves (RFC 9000 §9.3.3), which stays validated for [`FORMER_RECENT`].
    fn move_to(&mut self, now: Instant, path: PathId, to: SocketAddr, len: usize) -> SocketAddr {
        let Some(old) = self.challenges.addresses.remotes.insert(path, to) else {
            return to;
        };
        self.cancel_candidate(path);
        self.handle_address_moved(path);
        self.probe_candidate(now, path, len);
        self.challenges.addresses.candidate = Some((path, old));
        self.challenges.addresses.former = Some((path, old, now + FORMER_RECENT));
        to
    }
}

/// Whether `datagram` is a client's opening, in clear.
fn is_opening(datagram: &[u8]) -> bool {
    Header::decode(datagram).is_ok_and(|(_, payload)| {
        matches!(
            Frames::new(payload).next(),
            Some(Ok(Frame::ClientHello { .. } | Frame::Hello(_)))
        )
    })
}
