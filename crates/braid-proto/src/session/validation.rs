//! Address validation (RFC 9000 §8). A connection the server learns of
//! mid-session carries no stream data until the peer echoes an
//! unpredictable challenge on it, and until then the server sends on it at most three
//! times the bytes it received there, so a forged or replayed packet can
//! neither steer the stream to a third party nor turn us into an amplifier.
//! The connection a session opened on is validated by the handshake
//! itself: the client's first sealed packet proves it received our answer.
//!
//! A connection moves to a new address only as RFC 9000 §9.3 has it: the caller names the address of the
//! highest-numbered authentic packet a *candidate*, the candidate alone
//! receives a challenge while the stream keeps to the old address, and
//! the move happens when the candidate itself answers. A forwarder that
//! races copies of genuine packets from its own address then diverts
//! nothing unless it also carries our packets to the peer and back, and
//! stalls nothing, since the old address carries the stream meanwhile.

use super::{Event, Session};
use crate::rtt::Exchange;
use crate::Instant;
use crate::PathId;
use std::time::Duration;

/// Bytes we may send per byte received on an unvalidated connection.
const AMPLIFICATION_FACTOR: u64 = 3;
/// Challenges sent before the connection is given up.
const MAX_CHALLENGES: u32 = 6;
/// Challenge answers waiting to be sent, at most.
const MAX_PENDING_RESPONSES: usize = 8;
/// Bytes of a datagram that carries only a PATH_CHALLENGE, sealed.
pub(super) const CHALLENGE_DATAGRAM: usize = crate::wire::HEADER_LEN + 9 + crate::crypto::TAG_LEN;

/// One connection's validation in progress.
#[derive(Debug, Clone)]
pub(crate) struct Validation {
    /// Data the peer must echo; `None` while the handshake validates.
    challenge: Option<[u8; 8]>,
    /// Bytes we may still send on the connection.
    credit: u64,
    /// When the challenge is (re)sent.
    due: Instant,
    sent: u32,
    /// When the first and the latest challenge went, to date the
    /// connection's round trip.
    sent_at: Option<Exchange>,
}

/// An address a connection may move to, being probed.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    path: PathId,
    challenge: [u8; 8],
    /// Bytes we may still send to the candidate (3x what came from it).
    credit: u64,
    due: Instant,
    sent: u32,
    answered: bool,
}

impl Session {
    /// Tells a server session that the authenticated datagram of `len`
    /// bytes it just handled on `path`, the highest-numbered there so far,
    /// came from an address other than the connection's: that address
    /// becomes the candidate, and is sent a challenge in a datagram whose
    /// [`Transmit::to_candidate`](super::Transmit::to_candidate) is set.
    /// The caller moves the connection there once
    /// [`Session::take_candidate_answer`] says the candidate answered.
    /// One candidate at a time: a new one replaces the last.
    pub fn probe_candidate(&mut self, now: Instant, path: PathId, len: usize) {
        let credit = AMPLIFICATION_FACTOR * len as u64;
        match &mut self.candidate {
            Some(c) if c.path == path && !c.answered => c.credit += credit,
            _ => {
                let mut challenge = [0u8; 8];
                self.rng.fill(&mut challenge);
                self.candidate = Some(Candidate {
                    path,
                    challenge,
                    credit,
                    due: now,
                    sent: 0,
                    answered: false,
                });
            }
        }
    }

    /// Forgets the candidate of `path`: the peer's highest-numbered packet
    /// came from the connection's own address again.
    pub fn cancel_candidate(&mut self, path: PathId) {
        if self.candidate.as_ref().is_some_and(|c| c.path == path) {
            self.candidate = None;
        }
    }

    /// Whether `path`'s candidate echoed its challenge in the datagram just
    /// handled (once: the candidate is then forgotten). The caller checks
    /// that the datagram came from the candidate's address, and if it
    /// moves the connection, tells [`Session::handle_address_moved`].
    pub fn take_candidate_answer(&mut self, path: PathId) -> bool {
        let answered = self
            .candidate
            .as_ref()
            .is_some_and(|c| c.path == path && c.answered);
        if answered {
            self.candidate = None;
        }
        answered
    }

    /// The connection moved to its validated candidate: the old address's
    /// round trip says nothing of the new one's.
    pub fn handle_address_moved(&mut self, path: PathId) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.forget_exchange_rtt();
        }
    }

    /// The candidate's challenge, if one is due and its credit allows.
    pub(super) fn due_candidate_challenge(&self, now: Instant) -> Option<(PathId, [u8; 8])> {
        let c = self.candidate.as_ref()?;
        (!c.answered
            && now >= c.due
            && c.sent < MAX_CHALLENGES
            && c.credit >= CHALLENGE_DATAGRAM as u64
            && self.paths.get(&c.path).is_some_and(|p| p.is_usable()))
        .then_some((c.path, c.challenge))
    }

    pub(super) fn on_candidate_challenge_sent(&mut self, now: Instant, size: usize) {
        let rto = self.cfg.rto.initial_rto;
        if let Some(c) = &mut self.candidate {
            c.credit = c.credit.saturating_sub(size as u64);
            c.sent += 1;
            c.due = now
                + rto
                    .mul_f64(2f64.powi(c.sent.min(10) as i32))
                    .min(Duration::from_secs(8));
        }
    }

    /// Whether connection `path` may carry stream data (its address answered).
    pub fn is_path_validated(&self, path: PathId) -> bool {
        !self.validations.contains_key(&path)
    }

    pub(super) fn start_validation(
        &mut self,
        now: Instant,
        path: PathId,
        len: usize,
        challenge: bool,
    ) {
        let challenge = challenge.then(|| {
            let mut data = [0u8; 8];
            self.rng.fill(&mut data);
            data
        });
        self.validations.insert(
            path,
            Validation {
                challenge,
                credit: AMPLIFICATION_FACTOR * len as u64,
                due: now,
                sent: 0,
                sent_at: None,
            },
        );
    }

    /// An authenticated datagram of `len` bytes arrived on `path`.
    pub(super) fn credit_received(&mut self, path: PathId, len: usize) {
        if let Some(v) = self.validations.get_mut(&path) {
            v.credit += AMPLIFICATION_FACTOR * len as u64;
            // The handshake's connection is proven by any sealed packet.
            if v.challenge.is_none() && self.peer_confirmed {
                self.validations.remove(&path);
            }
        }
    }

    pub(super) fn on_path_response(&mut self, now: Instant, path: PathId, data: [u8; 8]) {
        if let Some(c) = self
            .candidate
            .as_mut()
            .filter(|c| c.path == path && c.challenge == data)
        {
            c.answered = true;
            return;
        }
        let matches = self
            .validations
            .get(&path)
            .is_some_and(|v| v.challenge == Some(data));
        if matches {
            let v = self.validations.remove(&path).expect("matched");
            let rtt = v.sent_at.and_then(|e| e.rtt(now));
            if let Some(p) = self.paths.get_mut(&path) {
                match rtt {
                    Some(rtt) => p.on_exchange_rtt(rtt),
                    // Repeated challenges leave the round trip unknown; a
                    // guess from the opening is no better then.
                    None => p.forget_opening_lag(),
                }
            }
            self.events.push_back(Event::PathUp(path));
        } else {
            self.counters.unexpected += 1;
        }
    }

    pub(super) fn on_path_challenge(&mut self, path: PathId, data: [u8; 8]) {
        if self.responses.len() < MAX_PENDING_RESPONSES {
            self.responses.push_back((path, data));
        }
    }

    /// Whether `size` more bytes may go out on `path` now.
    pub(super) fn amplification_allows(&self, path: PathId, size: usize) -> bool {
        self.validations
            .get(&path)
            .is_none_or(|v| v.credit >= size as u64)
    }

    /// Counts `size` bytes sent on `path` against its credit.
    pub(super) fn charge_amplification(&mut self, path: PathId, size: usize) {
        if let Some(v) = self.validations.get_mut(&path) {
            v.credit = v.credit.saturating_sub(size as u64);
        }
    }

    /// The challenge to send on a connection now, if any is due and its
    /// credit allows.
    pub(super) fn due_challenge(&self, now: Instant) -> Option<(PathId, [u8; 8])> {
        self.validations.iter().find_map(|(&id, v)| {
            let data = v.challenge?;
            (now >= v.due
                && v.credit >= CHALLENGE_DATAGRAM as u64
                && self.paths.get(&id).is_some_and(|p| p.is_usable()))
            .then_some((id, data))
        })
    }

    /// A challenge went out on `path`: the next one after a backed-off RTO.
    pub(super) fn on_challenge_sent(&mut self, now: Instant, path: PathId) {
        let rto = self.cfg.rto.initial_rto;
        if let Some(v) = self.validations.get_mut(&path) {
            v.sent_at = Some(Exchange::sent(v.sent_at, now));
            v.sent += 1;
            v.due = now
                + rto
                    .mul_f64(2f64.powi(v.sent.min(10) as i32))
                    .min(Duration::from_secs(8));
        }
    }

    /// When the next challenge is due (one without credit waits for the
    /// peer's next datagram instead).
    pub(super) fn validation_deadline(&self) -> Option<Instant> {
        let candidate = self
            .candidate
            .as_ref()
            .filter(|c| {
                !c.answered && (c.credit >= CHALLENGE_DATAGRAM as u64 || c.sent >= MAX_CHALLENGES)
            })
            .map(|c| c.due);
        self.validations
            .values()
            .filter(|v| {
                v.challenge.is_some()
                    && (v.credit >= CHALLENGE_DATAGRAM as u64 || v.sent >= MAX_CHALLENGES)
            })
            .map(|v| v.due)
            .chain(candidate)
            .min()
    }

    /// Gives up connections whose challenges all went unanswered.
    pub(super) fn expire_validations(&mut self, now: Instant) {
        // A candidate that never answers is forgotten; the connection
        // stays where it was.
        if self
            .candidate
            .as_ref()
            .is_some_and(|c| !c.answered && c.sent >= MAX_CHALLENGES && now >= c.due)
        {
            self.candidate = None;
        }
        let dead: Vec<PathId> = self
            .validations
            .iter()
            .filter(|(_, v)| v.challenge.is_some() && v.sent >= MAX_CHALLENGES && now >= v.due)
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            self.validations.remove(&id);
            self.on_path_closed(id);
        }
    }
}
