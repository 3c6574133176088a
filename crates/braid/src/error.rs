//! Why a session or endpoint failed, as one typed error with a clear message.

use braid_proto::{ConfigError, SessionError};
use std::io;
use thiserror::Error;

/// A failure of the runtime. A failed session carries the core's
/// [`SessionError`] as it is; losing some paths is not an error: only
/// losing all of them for the idle timeout is.
#[derive(Debug, Clone, Error)]
pub enum Error {
    /// The session failed; the core's error says why (no answer to the
    /// handshake, no progress, a silent or aborting peer, a protocol
    /// violation, ...).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The core's idle timeout while data of ours was waiting to be
    /// delivered or every path was down: no connection carried anything.
    #[error("all paths down: {0}")]
    AllPathsDown(SessionError),
    /// Our own configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// A socket operation failed.
    #[error("{context}: {message}")]
    Io {
        /// What we were doing.
        context: String,
        /// The system's error kind.
        kind: io::ErrorKind,
        /// The system's error, in words.
        message: String,
    },
    /// Too many handshakes with a one-time code failed: someone may be
    /// guessing it, so the listener stopped.
    #[error("{0} handshakes failed (wrong code?); stopped listening, since each may be a guess at the code: start again with a new code")]
    CodeGuessLimit(u32),
    /// The endpoint the session runs on was shut down.
    #[error("the endpoint was closed")]
    EndpointClosed,
    /// A rendezvous relay refused to pair or register us (the code or
    /// key is in use by another transfer, or the relay is full).
    #[error("relay {relay} refused: {refusal}")]
    RelayRefused {
        /// The last relay that refused.
        relay: std::net::SocketAddr,
        /// Why.
        refusal: braid_proto::rendezvous::Refusal,
    },
    /// No relay paired us with a peer in time: the relays answered, but
    /// nobody waited under the code or key.
    #[error(
        "no receiver came: {relays} said nobody is waiting under that code or key \
         (asked for {} s; is `braid recv` running with the same relay and code or key?)",
        secs(*waited)
    )]
    NoPeerAtRelays {
        /// The relays tried, as given.
        relays: String,
        /// How long we tried.
        waited: std::time::Duration,
    },
    /// No relay answered at all: it is down, or UDP to it is blocked (and
    /// TCP too, if it was tried).
    #[error(
        "no relay answered at {relays} ({}): nothing came back in {} s; \
         is `braid relay --serve` running there?",
        if *tcp_tried { "over UDP or TCP: does the network let either out?" } else { "is UDP to it allowed?" },
        secs(*waited)
    )]
    NoRelayAnswered {
        /// The relays that never answered, as given.
        relays: String,
        /// How long we waited.
        waited: std::time::Duration,
        /// Whether TCP to them was tried too.
        tcp_tried: bool,
    },
}

/// Seconds to a tenth.
fn secs(d: std::time::Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

impl Error {
    /// A socket error with what we were doing when it happened.
    pub fn io(context: impl Into<String>, e: &io::Error) -> Error {
        let message = match e.kind() {
            io::ErrorKind::AddrInUse => "address already in use".to_owned(),
            io::ErrorKind::AddrNotAvailable => "address not available on this host".to_owned(),
            _ => e.to_string(),
        };
        Error::Io {
            context: context.into(),
            kind: e.kind(),
            message,
        }
    }

    /// The runtime's error for a failed core session: the core's, marked
    /// [`Error::AllPathsDown`] when it is an idle timeout with every path
    /// unanswered (`all_paths_down`).
    pub fn from_session(e: SessionError, all_paths_down: bool) -> Error {
        match e {
            SessionError::IdleTimeout(_) if all_paths_down => Error::AllPathsDown(e),
            e => Error::Session(e),
        }
    }

    /// The `io::ErrorKind` an `AsyncRead`/`AsyncWrite` caller sees.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Error::Session(e) => match e {
                SessionError::HandshakeTimeout(_)
                | SessionError::IdleTimeout(_)
                | SessionError::ListenerBusy { .. } => io::ErrorKind::TimedOut,
                SessionError::NoProgress { .. }
                | SessionError::PeerSilent { .. }
                | SessionError::AllPathsClosed => io::ErrorKind::NotConnected,
                SessionError::NothingListening => io::ErrorKind::ConnectionRefused,
                SessionError::PeerAborted { .. } => io::ErrorKind::ConnectionReset,
                SessionError::LocallyAborted { .. } => io::ErrorKind::ConnectionAborted,
                // Refused or unauthenticated answers, protocol violations.
                SessionError::UnauthenticatedRefusal { .. }
                | SessionError::HandshakeUnauthenticated(_)
                | SessionError::CodeRejected
                | SessionError::VersionMismatch { .. }
                | SessionError::UnknownController(_)
                | SessionError::Protocol(_) => io::ErrorKind::InvalidData,
            },
            Error::AllPathsDown(_) => io::ErrorKind::NotConnected,
            Error::EndpointClosed => io::ErrorKind::ConnectionAborted,
            Error::RelayRefused { .. } => io::ErrorKind::ConnectionRefused,
            Error::NoPeerAtRelays { .. } | Error::NoRelayAnswered { .. } => io::ErrorKind::TimedOut,
            Error::CodeGuessLimit(_) => io::ErrorKind::PermissionDenied,
            Error::Config(_) => io::ErrorKind::InvalidInput,
            Error::Io { kind, .. } => *kind,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

/// Results of the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;
