//! Address validation (RFC 9000 §8). A connection the server learns of
//! mid-session carries no stream data until the peer echoes an
//! unpredictable challenge on it, and until then the server sends on it at
//! most three times the bytes it received there, so a forged or replayed
//! packet can neither steer the stream to a third party nor turn us into
//! an amplifier. The connection a session opened on is validated by the
//! handshake itself: the client's first sealed packet proves it received
//! our answer.
//!
//! A connection moves to a new address only as RFC 9000 §9.3 has it: the
//! caller names the address of the highest-numbered authentic packet a
//! [`Candidate`], the candidate alone receives a challenge while the stream
//! keeps to the old address, and the move happens when the candidate itself
//! answers. A forwarder that races copies of genuine packets from its own
//! address then diverts nothing unless it also carries our packets to the
//! peer and back, and stalls nothing, since the old address carries the
//! stream meanwhile.
//!
//! Three parts: a connection's own [`Validation`] (held by its
//! [`Path`]), the session's one [`Candidate`], and the
//! [`PathResponses`] the session owes the peer's challenges (a queue at
//! session level, as quinn-proto keeps its `PathResponses`).

use super::Path;
use crate::rtt::Exchange;
use crate::{Instant, PathId};
use std::collections::VecDeque;
use std::time::Duration;

/// Bytes we may send per byte received on an unvalidated connection.
const AMPLIFICATION_FACTOR: u64 = 3;
/// Challenges sent before the connection is given up.
const MAX_CHALLENGES: u32 = 6;
/// Challenge answers waiting to be sent, at most.
const MAX_PENDING_RESPONSES: usize = 8;
/// Bytes of a datagram that carries only a PATH_CHALLENGE, sealed.
const CHALLENGE_DATAGRAM: usize = crate::wire::HEADER_LEN + 9 + crate::crypto::TAG_LEN;

/// Credit earned by a datagram of `len` bytes received.
fn credit_for(len: usize) -> u64 {
    AMPLIFICATION_FACTOR * len as u64
}

/// When the challenge after the `sent`-th goes: after a doubling initial
/// RTO, at most 8 s.
fn next_challenge(now: Instant, initial_rto: Duration, sent: u32) -> Instant {
    now + initial_rto
        .mul_f64(2f64.powi(sent.min(10) as i32))
        .min(Duration::from_secs(8))
}

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

impl Validation {
    /// A validation started by a datagram of `len` bytes at `now`: by
    /// `challenge`, or by the handshake when it is `None`.
    pub fn new(now: Instant, len: usize, challenge: Option<[u8; 8]>) -> Self {
        Validation {
            challenge,
            credit: credit_for(len),
            due: now,
            sent: 0,
            sent_at: None,
        }
    }

    /// Whether the handshake validates the connection (no challenge).
    pub fn is_by_handshake(&self) -> bool {
        self.challenge.is_none()
    }

    /// An authenticated datagram of `len` bytes arrived.
    pub fn on_received(&mut self, len: usize) {
        self.credit += credit_for(len);
    }

    /// Whether `size` more bytes may go out now.
    pub fn allows(&self, size: usize) -> bool {
        self.credit >= size as u64
    }

    /// Counts `size` bytes sent against the credit.
    pub fn charge(&mut self, size: usize) {
        self.credit = self.credit.saturating_sub(size as u64);
    }

    /// The challenge to send now, if one is due and the credit allows.
    pub fn due_challenge(&self, now: Instant) -> Option<[u8; 8]> {
        let data = self.challenge?;
        (now >= self.due && self.allows(CHALLENGE_DATAGRAM)).then_some(data)
    }

    /// A challenge went out: the next one after a backed-off initial RTO.
    pub fn on_challenge_sent(&mut self, now: Instant, initial_rto: Duration) {
        self.sent_at = Some(Exchange::sent(self.sent_at, now));
        self.sent += 1;
        self.due = next_challenge(now, initial_rto, self.sent);
    }

    /// When the next challenge is due (one without credit waits for the
    /// peer's next datagram instead), or the last goes unanswered.
    pub fn deadline(&self) -> Option<Instant> {
        (self.challenge.is_some()
            && (self.allows(CHALLENGE_DATAGRAM) || self.sent >= MAX_CHALLENGES))
            .then_some(self.due)
    }

    /// Whether every challenge went unanswered.
    pub fn is_expired(&self, now: Instant) -> bool {
        self.challenge.is_some() && self.sent >= MAX_CHALLENGES && now >= self.due
    }

    /// Whether `data` echoes our challenge.
    pub fn is_answered_by(&self, data: [u8; 8]) -> bool {
        self.challenge == Some(data)
    }

    /// The connection's round trip if the echo arrived at `at`: unknown
    /// when the challenges went too far apart to tell which it answers.
    pub fn rtt(&self, at: Instant) -> Option<Duration> {
        self.sent_at.and_then(|e| e.rtt(at))
    }
}

/// An address a connection may move to, being probed: one per session.
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

impl Candidate {
    /// A candidate for `path`'s new address, from which a datagram of
    /// `len` bytes came at `now`.
    pub fn new(now: Instant, path: PathId, len: usize, challenge: [u8; 8]) -> Self {
        Candidate {
            path,
            challenge,
            credit: credit_for(len),
            due: now,
            sent: 0,
            answered: false,
        }
    }

    /// The connection whose new address this is.
    pub fn path(&self) -> PathId {
        self.path
    }

    /// Whether this candidate of `path` still awaits its answer.
    pub fn is_probing(&self, path: PathId) -> bool {
        self.path == path && !self.answered
    }

    /// Whether the candidate of `path` echoed its challenge.
    pub fn is_answered(&self, path: PathId) -> bool {
        self.path == path && self.answered
    }

    /// Another datagram of `len` bytes came from the candidate.
    pub fn on_received(&mut self, len: usize) {
        self.credit += credit_for(len);
    }

    /// The challenge, if one is due now and the credit allows.
    pub fn due_challenge(&self, now: Instant) -> Option<(PathId, [u8; 8])> {
        (!self.answered
            && now >= self.due
            && self.sent < MAX_CHALLENGES
            && self.credit >= CHALLENGE_DATAGRAM as u64)
            .then_some((self.path, self.challenge))
    }

    /// A challenge datagram of `size` bytes went to the candidate.
    pub fn on_challenge_sent(&mut self, now: Instant, size: usize, initial_rto: Duration) {
        self.credit = self.credit.saturating_sub(size as u64);
        self.sent += 1;
        self.due = next_challenge(now, initial_rto, self.sent);
    }

    /// A PATH_RESPONSE with `data` arrived on `path`; whether it was the
    /// candidate's answer.
    pub fn on_response(&mut self, path: PathId, data: [u8; 8]) -> bool {
        let ours = self.path == path && self.challenge == data;
        if ours {
            self.answered = true;
        }
        ours
    }

    /// When the next challenge is due, or the last goes unanswered.
    pub fn deadline(&self) -> Option<Instant> {
        (!self.answered
            && (self.credit >= CHALLENGE_DATAGRAM as u64 || self.sent >= MAX_CHALLENGES))
            .then_some(self.due)
    }

    /// Whether every challenge went unanswered: the candidate is forgotten
    /// and the connection stays where it was.
    pub fn is_expired(&self, now: Instant) -> bool {
        !self.answered && self.sent >= MAX_CHALLENGES && now >= self.due
    }
}

/// PATH_RESPONSEs owed, in the order their challenges arrived.
#[derive(Debug, Default)]
pub(crate) struct PathResponses(VecDeque<(PathId, [u8; 8])>);

impl PathResponses {
    /// The peer challenged `path` with `data`; beyond a few owed, dropped
    /// (the peer repeats its challenges).
    pub fn push(&mut self, path: PathId, data: [u8; 8]) {
        if self.0.len() < MAX_PENDING_RESPONSES {
            self.0.push_back((path, data));
        }
    }

    /// The oldest response owed.
    pub fn pop(&mut self) -> Option<(PathId, [u8; 8])> {
        self.0.pop_front()
    }
}

/// A connection's own validation, as the session asks about it.
impl Path {
    /// Whether this connection may carry stream data (its address answered).
    pub fn is_validated(&self) -> bool {
        self.validation.is_none()
    }

    /// A datagram of `len` bytes at `now` starts the address's validation:
    /// by `challenge`, or by the handshake if it is `None`.
    pub fn start_validation(&mut self, now: Instant, len: usize, challenge: Option<[u8; 8]>) {
        self.validation = Some(Validation::new(now, len, challenge));
    }

    /// An authenticated datagram of `len` bytes arrived here. Once the
    /// peer has `confirmed` the handshake, that validates the handshake's
    /// connection.
    pub fn credit_received(&mut self, len: usize, confirmed: bool) {
        if let Some(v) = &mut self.validation {
            v.on_received(len);
            if v.is_by_handshake() && confirmed {
                self.validation = None;
            }
        }
    }

    /// Whether `size` more bytes may go out here now.
    pub fn amplification_allows(&self, size: usize) -> bool {
        self.validation.as_ref().is_none_or(|v| v.allows(size))
    }

    /// Counts `size` bytes sent here against the validation's credit.
    pub fn charge_amplification(&mut self, size: usize) {
        if let Some(v) = &mut self.validation {
            v.charge(size);
        }
    }

    /// The challenge to send here now, if one is due and the credit allows.
    pub fn due_challenge(&self, now: Instant) -> Option<[u8; 8]> {
        self.validation
            .as_ref()?
            .due_challenge(now)
            .filter(|_| self.is_usable())
    }

    /// A challenge went out here.
    pub fn on_challenge_sent(&mut self, now: Instant, initial_rto: Duration) {
        if let Some(v) = &mut self.validation {
            v.on_challenge_sent(now, initial_rto);
        }
    }

    /// When the validation next needs a timer.
    pub fn validation_deadline(&self) -> Option<Instant> {
        self.validation.as_ref()?.deadline()
    }

    /// Whether every challenge went unanswered; if so the validation ends
    /// here and the caller closes the connection.
    pub fn take_expired_validation(&mut self, now: Instant) -> bool {
        let expired = self.validation.as_ref().is_some_and(|v| v.is_expired(now));
        if expired {
            self.validation = None;
        }
        expired
    }

    /// A PATH_RESPONSE with `data` arrived at `now`; whether it validated
    /// the connection (and dated its round trip, if it could).
    pub fn on_path_response(&mut self, now: Instant, data: [u8; 8]) -> bool {
        let Some(v) = self.validation.take_if(|v| v.is_answered_by(data)) else {
            return false;
        };
        match v.rtt(now) {
            Some(rtt) => self.on_exchange_rtt(rtt),
            // Repeated challenges leave the round trip unknown; a guess
            // from the opening is no better then.
            None => self.forget_opening_lag(),
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const RTO: Duration = Duration::from_millis(200);

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a_challenge_backs_off_and_expires_after_the_last() {
        let mut v = Validation::new(t(0), 1200, Some([7; 8]));
        assert!(!v.is_by_handshake());
        assert_eq!(v.due_challenge(t(0)), Some([7; 8]));
        v.on_challenge_sent(t(0), RTO);
        assert_eq!(v.deadline(), Some(t(400)), "twice the initial RTO");
        assert_eq!(v.due_challenge(t(399)), None);
        assert_eq!(v.due_challenge(t(400)), Some([7; 8]));
        let mut now = t(400);
        for _ in 1..MAX_CHALLENGES {
            v.on_challenge_sent(now, RTO);
            now = v.deadline().expect("armed");
        }
        // 400, 800, 1600, 3200, 6400, then capped at 8 s.
        assert_eq!(now, t(400 + 800 + 1600 + 3200 + 6400 + 8000));
        assert!(!v.is_expired(now.saturating_sub(MS)));
        assert!(v.is_expired(now));
    }

    #[test]
    fn credit_is_three_times_what_arrived() {
        let mut v = Validation::new(t(0), 100, None);
        assert!(v.is_by_handshake());
        assert!(v.allows(300) && !v.allows(301));
        v.charge(250);
        assert!(!v.allows(51));
        v.on_received(10);
        assert!(v.allows(80));
        v.charge(1000);
        assert!(!v.allows(1));
        // The handshake's validation sends no challenge and sets no timer.
        assert_eq!(v.due_challenge(t(5)), None);
        assert_eq!(v.deadline(), None);
        assert!(!v.is_expired(t(1_000_000)));
    }

    #[test]
    fn without_credit_a_challenge_waits_for_the_peer() {
        let mut v = Validation::new(t(0), 10, Some([1; 8]));
        assert_eq!(v.due_challenge(t(0)), None);
        assert_eq!(v.deadline(), None, "no timer either");
        v.on_received(CHALLENGE_DATAGRAM);
        assert_eq!(v.due_challenge(t(0)), Some([1; 8]));
        assert!(v.is_answered_by([1; 8]) && !v.is_answered_by([2; 8]));
    }

    #[test]
    fn repeated_challenges_leave_the_round_trip_unknown() {
        let mut once = Validation::new(t(0), 1200, Some([1; 8]));
        once.on_challenge_sent(t(0), RTO);
        assert_eq!(once.rtt(t(80)), Some(80 * MS));
        let mut twice = once.clone();
        twice.on_challenge_sent(t(400), RTO);
        assert_eq!(twice.rtt(t(480)), None);
    }

    #[test]
    fn a_candidate_is_answered_once_and_expires_unanswered() {
        let p = PathId(1);
        let mut c = Candidate::new(t(0), p, 1200, [9; 8]);
        assert!(c.is_probing(p) && !c.is_probing(PathId(0)));
        assert_eq!(c.due_challenge(t(0)), Some((p, [9; 8])));
        c.on_challenge_sent(t(0), 100, RTO);
        assert_eq!(c.deadline(), Some(t(400)));
        assert!(!c.on_response(PathId(0), [9; 8]), "another connection");
        assert!(!c.on_response(p, [8; 8]), "other data");
        assert!(!c.is_answered(p));
        assert!(c.on_response(p, [9; 8]));
        assert!(c.is_answered(p) && !c.is_probing(p));
        assert_eq!(c.due_challenge(t(400)), None);
        assert_eq!(c.deadline(), None);

        let mut c = Candidate::new(t(0), p, 1200, [9; 8]);
        let mut now = t(0);
        for _ in 0..MAX_CHALLENGES {
            assert!(c.due_challenge(now).is_some());
            c.on_challenge_sent(now, 1, RTO);
            now = c.deadline().expect("armed");
        }
        assert_eq!(c.due_challenge(now), None, "no more challenges");
        assert!(c.is_expired(now) && !c.is_expired(now.saturating_sub(MS)));
    }

    #[test]
    fn a_candidate_sends_only_what_its_credit_allows() {
        let p = PathId(0);
        let mut c = Candidate::new(t(0), p, 10, [3; 8]);
        assert_eq!(c.due_challenge(t(0)), None);
        assert_eq!(c.deadline(), None);
        c.on_received(CHALLENGE_DATAGRAM);
        assert_eq!(c.deadline(), Some(t(0)));
        c.on_challenge_sent(t(0), 30 + 3 * CHALLENGE_DATAGRAM, RTO);
        assert_eq!(c.due_challenge(t(1000)), None, "spent");
    }

    #[test]
    fn responses_go_in_order_and_are_bounded() {
        let mut r = PathResponses::default();
        for i in 0..10u8 {
            r.push(PathId(i % 2), [i; 8]);
        }
        let owed: Vec<_> = std::iter::from_fn(|| r.pop()).collect();
        assert_eq!(owed.len(), MAX_PENDING_RESPONSES);
        assert_eq!(owed[0], (PathId(0), [0; 8]));
        assert_eq!(owed[7], (PathId(1), [7; 8]));
    }
}
