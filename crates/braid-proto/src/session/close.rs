//! How a session ends on purpose: the codes the core puts in CLOSE frames,
//! the CLOSE we send, and the periods after a CLOSE (RFC 9000 §10.2).
//!
//! The side that closes enters a closing period of three retransmission
//! timeouts: it answers the peer's authentic packets with its CLOSE again,
//! ever less often, and discards everything else, so that a peer whose
//! copies were all lost still learns why rather than finding us silent.
//! The side that receives a CLOSE drains for as long: it answers that
//! CLOSE once with its own (RFC 9000 §10.2.2) and sends nothing else. A
//! closing side that hears the peer's CLOSE has nobody left to answer and
//! ends at once, so a process waiting for its CLOSE to go out exits a
//! round trip later, not three timeouts later.
//! The application hears of the end at once; only the driver stays.

use super::Session;
use crate::wire::{Frame, Frames};
use crate::{Instant, PathId};
use std::time::Duration;

/// Times a CLOSE frame is sent back to back when the session closes.
const CLOSE_REPEATS: u32 = 3;

/// Answers at most in one closing period, however many packets arrive.
const MAX_ANSWERS: u32 = 12;

/// The codes the core sends in CLOSE frames, as [`SessionError::PeerAborted`]
/// and [`SessionError::LocallyAborted`] report them. An application's own
/// codes ([`Session::abort`]) share the space and should avoid these.
///
/// [`SessionError::PeerAborted`]: crate::SessionError::PeerAborted
/// [`SessionError::LocallyAborted`]: crate::SessionError::LocallyAborted
/// [`Session::abort`]: crate::Session::abort
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// The peer speaks another protocol version.
    Version = 1,
    /// The peer asked for a congestion controller we do not know.
    Controller = 2,
    /// The peer broke the protocol ([`Violation`](crate::Violation)).
    Protocol = 3,
    /// The handshake's mode, key or client was refused, or the keys are
    /// spent.
    Security = 4,
    /// Neither side wrote stream data in the first-data timeout
    /// ([`SessionConfig::first_data_timeout`](crate::SessionConfig)).
    NoData = 5,
    /// A listener has no room for the opening now (said in clear, so a
    /// hint only); it may have some later.
    Busy = 6,
    /// A one-time-code client found the server's answer did not prove the
    /// code and gave up (said in clear, with the secret its opening
    /// committed to, so only the client that opened can say it).
    GaveUp = 7,
}

impl CloseCode {
    /// Every code, in wire order.
    pub const ALL: [CloseCode; 7] = [
        CloseCode::Version,
        CloseCode::Controller,
        CloseCode::Protocol,
        CloseCode::Security,
        CloseCode::NoData,
        CloseCode::Busy,
        CloseCode::GaveUp,
    ];

    /// The code's value on the wire.
    pub const fn value(self) -> u64 {
        self as u64
    }

    /// The core's code with this wire value, if it is one.
    pub fn from_value(value: u64) -> Option<CloseCode> {
        CloseCode::ALL.into_iter().find(|c| c.value() == value)
    }
}

impl From<CloseCode> for u64 {
    fn from(code: CloseCode) -> u64 {
        code.value()
    }
}

/// The CLOSE we send: its copies still due, and how it answers the peer
/// during the closing period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Close {
    /// The close code on the wire (the core's [`CloseCode`] or an
    /// application's).
    pub code: u64,
    /// The reason text.
    pub reason: String,
    /// Copies due now.
    pub left: u32,
    /// When the closing period ends, from the first copy sent; `None`
    /// before it, and for a session the peer never confirmed (a refused
    /// opening), which ends once its copies are out.
    until: Option<Instant>,
    /// Answers sent to the peer's packets, the last one's time and the
    /// wait before the next: it doubles with each answer.
    answers: u32,
    last_answer: Option<Instant>,
    gap: Duration,
    /// The peer closed too: nothing more to answer.
    peer_closed: bool,
    /// The one answer of a draining side to the peer's CLOSE: no closing
    /// period follows it.
    reply: bool,
}

impl Close {
    /// A CLOSE to send [`CLOSE_REPEATS`] times.
    pub fn new(code: u64, reason: String) -> Close {
        Close {
            code,
            reason,
            left: CLOSE_REPEATS,
            until: None,
            answers: 0,
            last_answer: None,
            gap: Duration::ZERO,
            peer_closed: false,
            reply: false,
        }
    }

    /// The single CLOSE a draining side answers the peer's with.
    pub fn reply(code: u64) -> Close {
        Close {
            left: 1,
            reply: true,
            ..Close::new(code, String::new())
        }
    }

    /// A copy went out at `now`. The first one opens a closing period of
    /// `period` when `linger`, with answers at least `gap` apart at first.
    pub fn on_sent(&mut self, now: Instant, linger: bool, period: Duration, gap: Duration) {
        self.left = self.left.saturating_sub(1);
        if linger && !self.reply && self.until.is_none() {
            self.until = Some(now + period);
            self.gap = gap.max(Duration::from_millis(1));
        }
    }

    /// Whether nothing more is to be sent or answered (no closing period).
    pub fn is_spent(&self) -> bool {
        self.left == 0 && self.until.is_none()
    }

    /// When the closing period ends, if it started.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// An authentic packet from the peer arrived at `now`: one more copy
    /// is due if the last answer is old enough (the first answer goes at
    /// once), the period is not over, and the peer has not closed too.
    fn on_peer_packet(&mut self, now: Instant, carries_close: bool) {
        self.peer_closed |= carries_close;
        if carries_close {
            // The peer is closing or draining: nothing of ours is awaited.
            self.until = self.until.map(|until| until.min(now));
        }
        let in_period = self.until.is_some_and(|until| now < until);
        let waited = self.last_answer.is_none_or(|last| now >= last + self.gap);
        if self.peer_closed || !in_period || !waited || self.answers >= MAX_ANSWERS {
            return;
        }
        if self.last_answer.is_some() {
            self.gap = self.gap.saturating_mul(2);
        }
        self.last_answer = Some(now);
        self.answers += 1;
        self.left = self.left.max(1);
    }
}

/// How the session ends on purpose: our CLOSE while it is sent or
/// answers the peer, and the draining period after the peer's CLOSE.
#[derive(Debug, Default)]
pub(super) struct Ending {
    /// Our CLOSE: the copies to send, and the closing period in which it
    /// answers the peer.
    pub close: Option<Close>,
    /// When the draining period that followed the peer's CLOSE ends.
    drain_after_close: Option<Instant>,
}

impl Ending {
    /// Whether neither a CLOSE of ours nor a draining period is left.
    pub fn is_over(&self) -> bool {
        self.close.is_none() && self.drain_after_close.is_none()
    }

    /// Whether only the draining period after the peer's CLOSE is left.
    pub fn is_only_draining(&self) -> bool {
        self.close.is_none() && self.drain_after_close.is_some()
    }

    /// The peer closed with `code`: one CLOSE in answer, then draining
    /// until `until`.
    fn drain(&mut self, until: Instant, code: u64) {
        self.drain_after_close = Some(until);
        self.close = Some(Close::reply(code));
    }

    /// When the closing or draining period ends.
    fn deadline(&self) -> Option<Instant> {
        let closing = self.close.as_ref().and_then(Close::until);
        closing.or(self.drain_after_close)
    }
}

impl Session {
    /// An authentic packet arrived on `path` while we close: it moves
    /// nothing but the replay window and perhaps another copy of our
    /// CLOSE. Returns whether it was fresh (not a replay).
    pub(super) fn on_packet_while_closing(
        &mut self,
        now: Instant,
        path: PathId,
        packet_number: u64,
        payload: &[u8],
    ) -> bool {
        let Some(p) = self.paths.get_mut(&path).filter(|p| p.is_usable()) else {
            self.counters.unexpected += 1;
            return false;
        };
        // A replayed packet must not buy an answer either.
        if !p.on_authenticated(packet_number) {
            self.counters.duplicate_packets += 1;
            return false;
        }
        let carries_close = Frames::new(payload)
            .flatten()
            .any(|f| matches!(f, Frame::Close { .. }));
        let Some(close) = self.ending.close.as_mut() else {
            return false;
        };
        close.on_peer_packet(now, carries_close);
        // The answer goes back where the packet came from.
        self.liveness.on_heard(now, path);
        true
    }

    /// The peer's CLOSE (`code`) arrived: the session drains for the
    /// closing period's length, sending nothing but one CLOSE in answer,
    /// when the peer confirmed the handshake (a refused opening ends at
    /// once).
    pub(super) fn enter_draining(&mut self, code: u64) {
        self.state = super::State::Closed;
        if self.handshake.is_done() && self.ending.close.is_none() {
            let until = self.liveness.latest() + self.closing_period();
            self.ending.drain(until, code);
        }
    }

    /// How long closing and draining last: three of the largest
    /// retransmission timeouts (RFC 9000 §10.2's three PTOs).
    pub(super) fn closing_period(&self) -> Duration {
        self.largest_rto() * 3
    }

    /// The smallest smoothed RTT: the first wait between answers.
    pub(super) fn answer_gap(&self) -> Duration {
        self.paths
            .values()
            .filter(|p| p.rtt().has_sample())
            .map(|p| p.rtt().srtt_or(Duration::ZERO))
            .min()
            .unwrap_or(self.cfg.rto.initial_rto)
    }

    /// When the closing or draining period ends, if one runs.
    pub(super) fn ending_deadline(&self) -> Option<Instant> {
        self.ending.deadline()
    }

    /// The closing or draining period is over: nothing more will happen.
    pub(super) fn end_closing(&mut self) {
        self.ending = Ending::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_their_wire_values() {
        let values: Vec<u64> = CloseCode::ALL.iter().map(|c| c.value()).collect();
        assert_eq!(values, [1, 2, 3, 4, 5, 6, 7]);
        for c in CloseCode::ALL {
            assert_eq!(CloseCode::from_value(c.into()), Some(c));
        }
        assert_eq!(CloseCode::from_value(0), None);
        assert_eq!(CloseCode::from_value(16), None);
    }
}
