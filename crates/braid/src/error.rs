//! Why a session or endpoint failed, as one typed error with a clear message.

use braid_proto::{ConfigError, SessionError};
use std::io;
use std::time::Duration;
use thiserror::Error;

/// A failure of the runtime. Losing some paths is not an error: only
/// losing all of them for the idle timeout is.
#[derive(Debug, Clone, Error)]
pub enum Error {
    /// No answer to the handshake within the handshake timeout.
    #[error("handshake timed out after {0:?}: nobody answered (is `braid recv` running there?)")]
    HandshakeTimeout(Duration),
    /// Nothing new was acknowledged for the retry limit's number of RTOs,
    /// or nothing arrived at all for the silent limit's, while data was
    /// outstanding: the peer or every path went silent.
    #[error("{0}")]
    NoProgress(SessionError),
    /// Nothing arrived from the peer for the whole idle timeout.
    #[error("idle timeout: nothing received from the peer for {0:?}")]
    IdleTimeout(Duration),
    /// No path delivered anything for the idle timeout while data was
    /// waiting to be delivered (or every path was down).
    #[error("all paths down: no connection answered for {0:?}")]
    AllPathsDown(Duration),
    /// The peer aborted the session or went away.
    #[error("peer closed the session (code {code}): {reason}")]
    PeerClosed { code: u64, reason: String },
    /// This side aborted the session.
    #[error("session aborted locally (code {code}): {reason}")]
    Aborted { code: u64, reason: String },
    /// The peer refused our parameters or broke the protocol.
    #[error("{0}")]
    Protocol(SessionError),
    /// Our own configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// A socket operation failed.
    #[error("{context}: {message}")]
    Io {
        context: String,
        kind: io::ErrorKind,
        message: String,
    },
    /// Too many handshakes with a one-time code failed: someone may be
    /// guessing it, so the listener stopped.
    #[error("{0} handshakes failed (wrong code?); stopped listening, since each may be a guess at the code: start again with a new code")]
    CodeGuessLimit(u32),
    /// The endpoint the session runs on was shut down.
    #[error("the endpoint was closed")]
    EndpointClosed,
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

    /// The runtime's error for a failed core session; `all_paths_down`
    /// tells an idle timeout with every path unanswered apart.
    pub fn from_session(e: &SessionError, all_paths_down: bool) -> Error {
        match e {
            SessionError::HandshakeTimeout(d) => Error::HandshakeTimeout(*d),
            SessionError::NoProgress { .. } | SessionError::PeerSilent { .. } => {
                Error::NoProgress(e.clone())
            }
            SessionError::IdleTimeout(d) if all_paths_down => Error::AllPathsDown(*d),
            SessionError::IdleTimeout(d) => Error::IdleTimeout(*d),
            SessionError::PeerAborted { code, reason } => Error::PeerClosed {
                code: *code,
                reason: reason.clone(),
            },
            SessionError::LocallyAborted { code, reason } => Error::Aborted {
                code: *code,
                reason: reason.clone(),
            },
            SessionError::AllPathsClosed => Error::AllPathsDown(Duration::ZERO),
            SessionError::UnauthenticatedRefusal { .. }
            | SessionError::HandshakeUnauthenticated(_)
            | SessionError::VersionMismatch { .. }
            | SessionError::UnknownController(_)
            | SessionError::Protocol(_) => Error::Protocol(e.clone()),
        }
    }

    /// The `io::ErrorKind` an `AsyncRead`/`AsyncWrite` caller sees.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Error::HandshakeTimeout(_) | Error::IdleTimeout(_) => io::ErrorKind::TimedOut,
            Error::NoProgress(_) | Error::AllPathsDown(_) => io::ErrorKind::NotConnected,
            Error::PeerClosed { .. } => io::ErrorKind::ConnectionReset,
            Error::Aborted { .. } | Error::EndpointClosed => io::ErrorKind::ConnectionAborted,
            Error::CodeGuessLimit(_) => io::ErrorKind::PermissionDenied,
            Error::Protocol(_) => io::ErrorKind::InvalidData,
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
