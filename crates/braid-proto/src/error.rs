//! Why a session ended without completing.

use std::time::Duration;
use thiserror::Error;

/// A session failure. Every variant says what happened in its message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionError {
    /// No answer to the handshake within the handshake timeout (the
    /// duration is how long it waited, as in the two variants below).
    #[error("handshake timed out after {0:?}: no answer from the peer")]
    HandshakeTimeout(Duration),
    /// No authenticated answer within a few seconds of an unauthenticated
    /// packet that claimed to refuse the session (a server that cannot
    /// authenticate itself to us, or a forgery: not trusted either way).
    #[error("handshake refused: no authenticated answer within {after:?}, and an unauthenticated packet said \"{said}\" (a server refuses when the client pinned another key than its own, when it does not allow the client's key, or when the two sides use different modes: code, key or insecure)")]
    UnauthenticatedRefusal {
        /// How long the handshake waited.
        after: Duration,
        /// The refusal's reason text, as received.
        said: String,
    },
    /// No authenticated answer within the handshake timeout, and an
    /// unauthenticated packet said the listener had no room (too many
    /// sessions, from our address block or key, or no memory).
    #[error("handshake timed out after {after:?}: the listener said it is busy (\"{said}\", unauthenticated) and had no room for the session")]
    ListenerBusy {
        /// How long the handshake waited.
        after: Duration,
        /// The reason text, as received.
        said: String,
    },
    /// Answers arrived but none authenticated within a few seconds of the
    /// first.
    #[error("handshake failed after {0:?}: the server answered, but its answer did not authenticate (a wrong code, or forged answers)")]
    HandshakeUnauthenticated(Duration),
    /// With a one-time code: an answer to the handshake did not
    /// authenticate. The code was wrong, or someone tried to intercept the
    /// session; either way nothing was sent, and the handshake ends at the
    /// first such answer so that a code gives one guess per handshake.
    #[error("the code was wrong, or someone tried to intercept the transfer: the server's answer did not prove it knows the code (nothing was sent)")]
    CodeRejected,
    /// The peer speaks another protocol version.
    #[error("peer speaks protocol version {peer}, we speak {ours}")]
    VersionMismatch {
        /// The version this side speaks.
        ours: u8,
        /// The version in the peer's answer.
        peer: u8,
    },
    /// The peer does not know the requested congestion controller.
    #[error("peer refused congestion controller {0:?}")]
    UnknownController(String),
    /// Data was outstanding and nothing new was acknowledged while every
    /// connection went through more retransmission timeouts than the retry
    /// limit allows.
    #[error("no progress: nothing new acknowledged for {after:?}, more than {rtos} retransmission timeouts on every connection (the retry limit), while data was outstanding")]
    NoProgress {
        /// Time since something new was last acknowledged.
        after: Duration,
        /// The retry limit, which every connection went past.
        rtos: u32,
    },
    /// Nothing at all arrived from the peer while every connection went
    /// through `rtos` retransmission timeouts (of data, or of keep-alive
    /// probes while the peer's data is still to come): the peer is gone or
    /// cut off.
    #[error("the peer went silent: nothing received for {after:?} over {rtos} retransmission timeouts on every connection (peer killed or unreachable)")]
    PeerSilent {
        /// Time since anything last arrived from the peer.
        after: Duration,
        /// Timeouts in a row on every connection (the silent limit).
        rtos: u32,
    },
    /// Nothing arrived from the peer for the whole idle timeout.
    #[error("idle timeout: nothing received from the peer for {0:?}")]
    IdleTimeout(Duration),
    /// The peer aborted the session.
    #[error("peer aborted the session (code {code}): {reason}")]
    PeerAborted {
        /// The peer's error code.
        code: u64,
        /// The peer's reason text.
        reason: String,
    },
    /// This side aborted the session.
    #[error("session aborted locally (code {code}): {reason}")]
    LocallyAborted {
        /// The error code sent to the peer.
        code: u64,
        /// The reason text sent to the peer.
        reason: String,
    },
    /// The peer broke the protocol.
    #[error("protocol violation by the peer: {0}")]
    Protocol(Violation),
    /// Every connection was closed.
    #[error("all connections of the session are closed")]
    AllPathsClosed,
    /// During the handshake, the peer's host answered every connection's
    /// opening with "port unreachable": nothing listens there.
    #[error("nothing is listening there: the host answered \"port unreachable\"")]
    NothingListening,
}

/// How the peer broke the protocol ([`SessionError::Protocol`]). The text
/// of each is also the reason of the CLOSE frame that tells the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum Violation {
    /// A BLOCKED frame named a flow-control limit we never advertised.
    #[error("BLOCKED at a limit never advertised")]
    BlockedBeyondLimit,
    /// Stream data beyond the window we advertised.
    #[error("stream data beyond the advertised window")]
    BeyondWindow,
    /// Stream data past the end the peer announced, or a second,
    /// different end.
    #[error("stream data inconsistent with its end")]
    BeyondEnd,
    /// Stream data in more separate pieces than its window allows.
    #[error("stream data in more pieces than its window allows")]
    TooFragmented,
    /// An ACK of a packet number we never sent.
    #[error("ACK of a packet number never sent")]
    AckNeverSent,
    /// An ACK of a packet number we skipped on purpose (an optimistic ACK).
    #[error("ACK of a skipped packet number (optimistic ACK)")]
    AckSkipped,
    /// An ACK's cumulative point or FIN beyond what we sent.
    #[error("ACK of stream data or a FIN never sent")]
    AckDataNeverSent,
    /// The server's handshake answer carried no parameters.
    #[error("handshake answer without parameters")]
    AnswerWithoutParameters,
    /// The server's handshake answer carried parameters out of range.
    #[error("handshake answer out of range")]
    AnswerOutOfRange,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_violation_reads_as_its_close_reason() {
        let e = SessionError::Protocol(Violation::AckSkipped);
        assert_eq!(
            e.to_string(),
            "protocol violation by the peer: ACK of a skipped packet number (optimistic ACK)"
        );
        assert_eq!(
            Violation::BlockedBeyondLimit.to_string(),
            "BLOCKED at a limit never advertised"
        );
    }
}
