//! Address validation at session level (the parts are in
//! [`crate::path::validation`](crate::path)): the server's migration
//! candidate, challenges and responses in the order the session sends
//! them, and the connections given up when their challenges go unanswered.

use super::{Event, Session};
use crate::path::{Candidate, PathResponses};
use crate::trace::EventKind;
use crate::Instant;
use crate::PathId;

/// Address validation that belongs to no one connection: the server's
/// migration candidate and its connections' addresses, and the
/// PATH_RESPONSEs owed to the peer.
#[derive(Debug, Default)]
pub(super) struct Challenges {
    /// An address a confirmed connection may move to, being probed.
    pub candidate: Option<Candidate>,
    /// PATH_RESPONSEs owed.
    pub responses: PathResponses,
    /// Where a server's connections send, and the candidate's address.
    pub addresses: super::migration::Addresses,
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
        match &mut self.challenges.candidate {
            Some(c) if c.is_probing(path) => c.on_received(len),
            _ => {
                let mut challenge = [0u8; 8];
                self.rng.fill(&mut challenge);
                self.challenges.candidate = Some(Candidate::new(now, path, len, challenge));
            }
        }
    }

    /// Forgets the candidate of `path`: the peer's highest-numbered packet
    /// came from the connection's own address again.
    pub fn cancel_candidate(&mut self, path: PathId) {
        if self
            .challenges
            .candidate
            .as_ref()
            .is_some_and(|c| c.path() == path)
        {
            self.challenges.candidate = None;
        }
    }

    /// Whether `path`'s candidate echoed its challenge in the datagram just
    /// handled (once: the candidate is then forgotten). The caller checks
    /// that the datagram came from the candidate's address, and if it
    /// moves the connection, tells [`Session::handle_address_moved`].
    pub fn take_candidate_answer(&mut self, path: PathId) -> bool {
        self.challenges
            .candidate
            .take_if(|c| c.is_answered(path))
            .is_some()
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
        let (path, data) = self.challenges.candidate.as_ref()?.due_challenge(now)?;
        self.paths
            .get(&path)
            .is_some_and(|p| p.is_usable())
            .then_some((path, data))
    }

    pub(super) fn on_candidate_challenge_sent(&mut self, now: Instant, size: usize) {
        let rto = self.cfg.rto.initial_rto;
        if let Some(c) = &mut self.challenges.candidate {
            c.on_challenge_sent(now, size, rto);
        }
    }

    /// A datagram of `len` bytes on `path` starts its validation: by a
    /// challenge, or by the handshake if `challenge` is false.
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
        if let Some(p) = self.paths.get_mut(&path) {
            p.start_validation(now, len, challenge);
        }
    }

    /// An authenticated datagram of `len` bytes arrived on `path`.
    pub(super) fn credit_received(&mut self, path: PathId, len: usize) {
        let confirmed = self.handshake.is_done();
        if let Some(p) = self.paths.get_mut(&path) {
            p.credit_received(len, confirmed);
        }
    }

    pub(super) fn on_path_response(&mut self, now: Instant, path: PathId, data: [u8; 8]) {
        if self
            .challenges
            .candidate
            .as_mut()
            .is_some_and(|c| c.on_response(path, data))
        {
            return;
        }
        let validated = self
            .paths
            .get_mut(&path)
            .is_some_and(|p| p.on_path_response(now, data));
        if validated {
            tracing::debug!(path = path.0, "connection validated");
            self.trace_event(now, EventKind::PathValidated { path });
            self.notices.push(Event::PathUp(path));
        } else {
            self.counters.unexpected += 1;
        }
    }

    pub(super) fn on_path_challenge(&mut self, path: PathId, data: [u8; 8]) {
        self.challenges.responses.push(path, data);
    }

    /// Whether `size` more bytes may go out on `path` now.
    pub(super) fn amplification_allows(&self, path: PathId, size: usize) -> bool {
        self.paths
            .get(&path)
            .is_none_or(|p| p.amplification_allows(size))
    }

    /// Counts `size` bytes sent on `path` against its credit.
    pub(super) fn charge_amplification(&mut self, path: PathId, size: usize) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.charge_amplification(size);
        }
    }

    /// A challenge went out on `path`: the next one after a backed-off RTO.
    pub(super) fn on_challenge_sent(&mut self, now: Instant, path: PathId) {
        let rto = self.cfg.rto.initial_rto;
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_challenge_sent(now, rto);
        }
    }

    /// The challenge to send on a connection now, if any is due and its
    /// credit allows.
    pub(super) fn due_challenge(&self, now: Instant) -> Option<(PathId, [u8; 8])> {
        self.paths
            .values()
            .find_map(|p| Some((p.id(), p.due_challenge(now)?)))
    }

    /// When the next challenge is due (one without credit waits for the
    /// peer's next datagram instead).
    pub(super) fn validation_deadline(&self) -> Option<Instant> {
        let candidate = self
            .challenges
            .candidate
            .as_ref()
            .and_then(|c| c.deadline());
        self.paths
            .values()
            .filter_map(|p| p.validation_deadline())
            .chain(candidate)
            .min()
    }

    /// Gives up connections whose challenges all went unanswered.
    pub(super) fn expire_validations(&mut self, now: Instant) {
        // A candidate that never answers is forgotten; the connection
        // stays where it was.
        if self
            .challenges
            .candidate
            .as_ref()
            .is_some_and(|c| c.is_expired(now))
        {
            self.challenges.candidate = None;
        }
        let dead: Vec<PathId> = self
            .paths
            .values_mut()
            .filter_map(|p| p.take_expired_validation(now).then_some(p.id()))
            .collect();
        for id in dead {
            self.on_path_closed(now, id);
        }
    }
}
