//! Why a transfer failed, as a stable code, an exit status and words that
//! say what the user can do about it. A wrong key or code is not "cannot
//! reach" (the peer was reached), and a socket we could not bind is ours,
//! not the network's.

use crate::side::Side;
use braid_proto::{CloseCode, SessionError};
use std::fmt;

/// The exit statuses of `braid send` and `braid recv` (docs/transfer-json.md).
pub const EXIT_HELP: &str = "\
Exit status:
  0    verified: the file arrived whole and both sides checked its BLAKE3 hash
  1    the transfer failed (the peer stopped or vanished, corrupted content)
  2    the command line is wrong
  3    the peer could not be reached: no answer, nothing listening, unknown host,
       no relay answered, nobody waiting under the code or key at the relays
  4    the peer would not take the session: refused, wrong key, wrong code,
       a code spent by wrong guesses; or a relay refused (the code or key is
       in use, the relay is full)
  5    a local error: a file, a directory, a socket of this machine
  130  interrupted (SIGINT, Ctrl-C); 143 terminated (SIGTERM)";

/// What kind of failure, from the user's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nobody answered the handshake in time.
    NoAnswer,
    /// The peer's host said nothing listens on the port (ICMP).
    NothingListening,
    /// The peer's host name did not resolve.
    CannotResolve,
    /// No rendezvous relay answered at all (down, or UDP to it blocked).
    NoRelay,
    /// The relays answered, but no peer came under the code or key.
    NoPeer,
    /// A rendezvous relay refused to register or pair us.
    RelayRefused,
    /// The peer answered that it will not take the session (mode mismatch).
    Refused,
    /// Key mode: the peer did not accept our key, or is not the key we pinned.
    WrongKey,
    /// Code mode: the peer did not prove it knows the code.
    WrongCode,
    /// The receiver's one-time code is spent after too many wrong guesses.
    CodeSpent,
    /// The two sides speak different versions or controllers.
    Incompatible,
    /// The peer stopped the transfer on purpose (interrupted).
    Aborted,
    /// The peer failed on its side (disk full, file exists, ...).
    PeerFailed,
    /// The connection went silent or made no progress.
    ConnectionLost,
    /// The content did not verify or was incomplete.
    Corrupted,
    /// The peer broke the protocol or is not a braid transfer.
    Protocol,
    /// This machine: a file, a directory, a socket.
    Local,
    /// A signal stopped us; the exit status is 128 + its number.
    Interrupted(u8),
    /// Anything else.
    Failed,
}

impl Kind {
    /// The stable string of the JSON record's `error.code`.
    pub fn code(self) -> &'static str {
        match self {
            Kind::NoAnswer => "no_answer",
            Kind::NothingListening => "nothing_listening",
            Kind::CannotResolve => "cannot_resolve",
            Kind::NoRelay => "no_relay",
            Kind::NoPeer => "no_peer",
            Kind::RelayRefused => "relay_refused",
            Kind::Refused => "refused",
            Kind::WrongKey => "wrong_key",
            Kind::WrongCode => "wrong_code",
            Kind::CodeSpent => "code_spent",
            Kind::Incompatible => "incompatible",
            Kind::Aborted => "aborted",
            Kind::PeerFailed => "peer_failed",
            Kind::ConnectionLost => "connection_lost",
            Kind::Corrupted => "corrupted",
            Kind::Protocol => "protocol",
            Kind::Local => "local",
            Kind::Interrupted(_) => "interrupted",
            Kind::Failed => "failed",
        }
    }

    /// The process exit status (see [`EXIT_HELP`]).
    pub fn exit_status(self) -> u8 {
        match self {
            Kind::NoAnswer
            | Kind::NothingListening
            | Kind::CannotResolve
            | Kind::NoRelay
            | Kind::NoPeer => 3,
            Kind::Refused
            | Kind::RelayRefused
            | Kind::WrongKey
            | Kind::WrongCode
            | Kind::CodeSpent
            | Kind::Incompatible => 4,
            Kind::Local => 5,
            Kind::Interrupted(status) => status,
            Kind::Aborted
            | Kind::PeerFailed
            | Kind::ConnectionLost
            | Kind::Corrupted
            | Kind::Protocol
            | Kind::Failed => 1,
        }
    }
}

/// A failure with its kind and the sentence to print.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// As an error for `?`, found again by [`classify`] under any context.
    pub fn err(kind: Kind, message: impl Into<String>) -> anyhow::Error {
        Failure::new(kind, message).into()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// `e` as a local failure (a file, a key file, a socket of ours), unless
/// it is a usage error or already classified.
pub fn local(e: anyhow::Error) -> anyhow::Error {
    if e.is::<crate::usage::UsageError>() || e.chain().any(|c| c.is::<Failure>()) {
        return e;
    }
    Failure::err(Kind::Local, braid::text::escape(&format!("{e:#}")))
}

/// How this side protects the session, which decides what a failed
/// handshake means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Code,
    Key,
    Insecure,
}

impl Mode {
    pub fn of(security: &braid_proto::crypto::Security) -> Mode {
        if !security.is_sealed() {
            Mode::Insecure
        } else if security.one_time_code().is_some() {
            Mode::Code
        } else {
            Mode::Key
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Code => "code",
            Mode::Key => "key",
            Mode::Insecure => "insecure",
        }
    }
}

/// What the words need: who we are and whom we talk to.
#[derive(Debug, Clone)]
pub struct Context {
    /// Which side we are (the peer is the other).
    pub side: Side,
    /// The peer's address(es) as the user gave or saw them.
    pub peer: String,
    pub mode: Mode,
    /// The two ends met at rendezvous relays.
    pub relayed: bool,
}

/// The failure behind `e`: a [`Failure`] anywhere in the chain as it is;
/// a runtime error in words; a file or socket error of ours as local.
pub fn classify(e: &anyhow::Error, ctx: &Context) -> Failure {
    if let Some(f) = e.chain().find_map(|c| c.downcast_ref::<Failure>()) {
        return f.clone();
    }
    if let Some(b) = e.chain().find_map(braid_error) {
        return from_runtime(b, ctx);
    }
    let message = braid::text::escape(&format!("{e:#}"));
    if e.chain().any(|c| c.is::<std::io::Error>()) {
        return Failure::new(Kind::Local, message);
    }
    Failure::new(Kind::Failed, message)
}

/// A runtime error, as it is or inside the `io::Error` a session's reads
/// and writes return.
fn braid_error<'a>(c: &'a (dyn std::error::Error + 'static)) -> Option<&'a braid::Error> {
    c.downcast_ref::<braid::Error>().or_else(|| {
        c.downcast_ref::<std::io::Error>()?
            .get_ref()?
            .downcast_ref::<braid::Error>()
    })
}

/// A runtime error in words.
pub fn from_runtime(e: &braid::Error, ctx: &Context) -> Failure {
    let peer = &ctx.peer;
    let said = braid::text::escape(&e.to_string());
    // The ICMP "port unreachable" of the handshake (RFC 8085 §5.2), which
    // the runtime reports as a refused connection, whichever variant
    // carries it. A socket error of ours with that kind is still ours.
    match e {
        braid::Error::RelayRefused {
            refusal: braid::rendezvous::Refusal::Spent,
            ..
        } => return Failure::new(Kind::CodeSpent, said),
        braid::Error::RelayRefused { .. } => return Failure::new(Kind::RelayRefused, said),
        braid::Error::NoPeerAtRelays { .. } => return Failure::new(Kind::NoPeer, said),
        braid::Error::NoRelayAnswered { .. } => return Failure::new(Kind::NoRelay, said),
        _ => {}
    }
    let refused_connection = e.kind() == std::io::ErrorKind::ConnectionRefused;
    if refused_connection && !matches!(e, braid::Error::Io { .. }) {
        return Failure::new(
            Kind::NothingListening,
            format!("nothing is listening on {peer} (is `braid recv` running there?)"),
        );
    }
    let session = match e {
        braid::Error::Session(s) | braid::Error::AllPathsDown(s) => s,
        braid::Error::Io { .. } | braid::Error::Config(_) => {
            return Failure::new(Kind::Local, said);
        }
        braid::Error::CodeGuessLimit(_) => return Failure::new(Kind::CodeSpent, said),
        _ => return Failure::new(Kind::ConnectionLost, said),
    };
    from_session(session, ctx, said)
}

/// A session's own error: what the handshake or the peer's close says
/// about why the transfer could not happen.
fn from_session(session: &SessionError, ctx: &Context, said: String) -> Failure {
    let peer = &ctx.peer;
    let wrong_code = || {
        Failure::new(
            Kind::WrongCode,
            format!(
                "wrong code (or someone tried to intercept): {peer} did not prove it knows \
                 the code; nothing was sent"
            ),
        )
    };
    match session {
        SessionError::HandshakeTimeout(after) if ctx.relayed => Failure::new(
            Kind::NoAnswer,
            format!(
                "a relay paired us with {}, but the handshake through it got no answer \
                 within {} (the peer stopped, or the relay stopped forwarding)",
                ctx.side.peer(),
                braid::text::duration(*after)
            ),
        ),
        SessionError::HandshakeTimeout(after) => Failure::new(
            Kind::NoAnswer,
            format!(
                "no answer from {peer}: the handshake timed out after {} \
                 (is `braid recv` running there?)",
                braid::text::duration(*after)
            ),
        ),
        SessionError::ListenerBusy { after, .. } => Failure::new(
            Kind::NoAnswer,
            format!(
                "{peer} is busy: it had no room for the session in {} (it said so \
                 unauthenticated; try again later)",
                braid::text::duration(*after)
            ),
        ),
        SessionError::CodeRejected => wrong_code(),
        SessionError::HandshakeUnauthenticated(_) if ctx.mode == Mode::Code => wrong_code(),
        SessionError::HandshakeUnauthenticated(_) => Failure::new(
            Kind::WrongKey,
            format!(
                "wrong key: the answer from {peer} did not prove it holds the key given with \
                 --peer (another receiver there, or forged answers)"
            ),
        ),
        SessionError::UnauthenticatedRefusal { .. } => refused(ctx),
        SessionError::VersionMismatch { .. } | SessionError::UnknownController(_) => Failure::new(
            Kind::Incompatible,
            format!("{peer} cannot serve this session: {said}"),
        ),
        SessionError::PeerAborted { code, reason } => from_peer_abort(*code, reason, ctx, said),
        SessionError::Protocol(_) => Failure::new(Kind::Protocol, said),
        // Our own abort: the reason was reported where it was decided.
        SessionError::LocallyAborted { .. } => Failure::new(Kind::Local, said),
        _ => Failure::new(
            Kind::ConnectionLost,
            format!("lost {} ({peer}): {said}", ctx.side.peer()),
        ),
    }
}

/// The peer's close: its code says who gave up and why.
fn from_peer_abort(code: u64, reason: &str, ctx: &Context, said: String) -> Failure {
    let peer = &ctx.peer;
    let reason = braid::text::escape(reason);
    match (code, CloseCode::from_value(code)) {
        (crate::close_codes::CLOSE_FAILED, _) => Failure::new(Kind::PeerFailed, reason),
        (crate::close_codes::CLOSE_INTERRUPTED, _) => Failure::new(Kind::Aborted, reason),
        // Authenticated, so its reason can be trusted and shown.
        (_, Some(CloseCode::Security)) if ctx.mode == Mode::Key => Failure::new(
            Kind::WrongKey,
            format!("{peer} did not accept our key: {reason}"),
        ),
        (_, Some(CloseCode::Security)) => {
            Failure::new(Kind::Refused, format!("refused by {peer}: {reason}"))
        }
        (_, Some(CloseCode::Version | CloseCode::Controller)) => Failure::new(
            Kind::Incompatible,
            format!("{peer} cannot serve this session: {reason}"),
        ),
        (_, Some(CloseCode::Busy)) => {
            Failure::new(Kind::NoAnswer, format!("{peer} is busy: {reason}"))
        }
        (_, Some(CloseCode::NoData)) => Failure::new(
            Kind::Aborted,
            format!("{peer} closed the session: {reason}"),
        ),
        _ => Failure::new(Kind::Protocol, said),
    }
}

/// The peer answered "refused" in clear, which by design says no more than
/// that: what it can mean depends on our mode.
fn refused(ctx: &Context) -> Failure {
    let peer = &ctx.peer;
    match ctx.mode {
        Mode::Key => Failure::new(
            Kind::WrongKey,
            format!(
                "wrong key: {peer} did not accept our key (the key given with --peer is not its \
                 key, it allows only other senders' keys with --allow, or it does not use keys)"
            ),
        ),
        Mode::Code => Failure::new(
            Kind::Refused,
            format!(
                "refused by {peer}: it does not take a code (started with --key or --insecure?)"
            ),
        ),
        Mode::Insecure => Failure::new(
            Kind::Refused,
            format!("refused by {peer}: it requires encryption (started without --insecure?)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;
    use std::time::Duration;

    fn ctx(mode: Mode) -> Context {
        Context {
            side: Side::Send,
            peer: "127.0.0.1:7000".into(),
            mode,
            relayed: false,
        }
    }

    fn session(e: SessionError, mode: Mode) -> Failure {
        from_runtime(&braid::Error::Session(e), &ctx(mode))
    }

    #[test]
    fn handshake_failures_say_what_happened() {
        let f = session(
            SessionError::HandshakeTimeout(Duration::from_secs(75)),
            Mode::Code,
        );
        assert_eq!((f.kind.code(), f.kind.exit_status()), ("no_answer", 3));
        assert!(
            f.message.contains("no answer from 127.0.0.1:7000"),
            "{}",
            f.message
        );
        assert!(f.message.contains("after 75.0 s"), "{}", f.message);
        let f = session(SessionError::CodeRejected, Mode::Code);
        assert_eq!((f.kind.code(), f.kind.exit_status()), ("wrong_code", 4));
        assert!(f
            .message
            .starts_with("wrong code (or someone tried to intercept)"));
        let refusal = SessionError::UnauthenticatedRefusal {
            after: Duration::from_secs(3),
            said: "refused".into(),
        };
        assert_eq!(session(refusal.clone(), Mode::Key).kind, Kind::WrongKey);
        assert_eq!(session(refusal, Mode::Insecure).kind, Kind::Refused);
        let unauth = SessionError::HandshakeUnauthenticated(Duration::from_secs(3));
        assert_eq!(session(unauth.clone(), Mode::Code).kind, Kind::WrongCode);
        assert_eq!(session(unauth, Mode::Key).kind, Kind::WrongKey);
        for f in [
            session(SessionError::CodeRejected, Mode::Code),
            session(
                SessionError::HandshakeUnauthenticated(Duration::ZERO),
                Mode::Key,
            ),
        ] {
            assert!(!f.message.contains("cannot reach"), "{}", f.message);
        }
    }

    #[test]
    fn meeting_at_relays_fails_with_its_own_causes() {
        use braid::rendezvous::Refusal;
        let relayed = Context {
            relayed: true,
            ..ctx(Mode::Code)
        };
        let relay = "127.0.0.1:7000".parse().unwrap();
        let cases = [
            (
                braid::Error::NoRelayAnswered {
                    relays: "127.0.0.1:7000".into(),
                    waited: Duration::from_secs(5),
                    tcp_tried: false,
                },
                ("no_relay", 3),
                "no relay answered at 127.0.0.1:7000 (is UDP to it allowed?)",
            ),
            (
                braid::Error::RelayRefused {
                    relay,
                    refusal: Refusal::Busy,
                },
                ("relay_refused", 4),
                "relay 127.0.0.1:7000 refused: that code or key is in use by another transfer",
            ),
            (
                braid::Error::RelayRefused {
                    relay,
                    refusal: Refusal::Spent,
                },
                ("code_spent", 4),
                "relay 127.0.0.1:7000 refused: the receiver that waited under that code stopped \
                 after too many wrong guesses",
            ),
            (
                braid::Error::RelayRefused {
                    relay,
                    refusal: Refusal::Full,
                },
                ("relay_refused", 4),
                "relay 127.0.0.1:7000 refused: the relay is full",
            ),
            (
                braid::Error::NoPeerAtRelays {
                    relays: "127.0.0.1:7000".into(),
                    waited: Duration::from_secs(75),
                },
                ("no_peer", 3),
                "no receiver came: 127.0.0.1:7000 said nobody is waiting under that code or key",
            ),
            (
                braid::Error::Session(SessionError::HandshakeTimeout(Duration::from_secs(75))),
                ("no_answer", 3),
                "a relay paired us with the receiver, but the handshake through it got no answer",
            ),
        ];
        for (e, (code, status), words) in cases {
            let f = from_runtime(&e, &relayed);
            assert_eq!((f.kind.code(), f.kind.exit_status()), (code, status));
            assert!(f.message.starts_with(words), "{}", f.message);
        }
    }

    #[test]
    fn a_bind_failure_is_local() {
        let io = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let e = braid::Error::io("cannot bind 127.0.0.1:7000", &io);
        let f = classify(&anyhow::Error::from(e), &ctx(Mode::Code));
        assert_eq!((f.kind, f.kind.exit_status()), (Kind::Local, 5));
        assert_eq!(
            f.message,
            "cannot bind 127.0.0.1:7000: address already in use"
        );
    }

    #[test]
    fn errors_are_found_under_context_and_inside_io_errors() {
        let aborted = braid::Error::Session(SessionError::PeerAborted {
            code: crate::close_codes::CLOSE_FAILED,
            reason: "receiver failed: No space left on device".into(),
        });
        let e = Err::<(), _>(std::io::Error::from(aborted))
            .context("writing out/x")
            .unwrap_err();
        let f = classify(&e, &ctx(Mode::Code));
        assert_eq!(f.kind, Kind::PeerFailed);
        assert_eq!(f.message, "receiver failed: No space left on device");
        let disk = Err::<(), _>(std::io::Error::other("No space left on device"))
            .context("writing out/x")
            .unwrap_err();
        assert_eq!(classify(&disk, &ctx(Mode::Code)).kind, Kind::Local);
        let typed = Err::<(), _>(Failure::err(Kind::Corrupted, "BLAKE3 mismatch"))
            .context("writing out/x")
            .unwrap_err();
        assert_eq!(classify(&typed, &ctx(Mode::Code)).kind, Kind::Corrupted);
    }

    #[test]
    fn a_peer_abort_is_read_by_its_close_code() {
        let aborted = |code: u64, mode| {
            let reason = "why".to_owned();
            session(SessionError::PeerAborted { code, reason }, mode).kind
        };
        let security = CloseCode::Security.into();
        assert_eq!(aborted(security, Mode::Key), Kind::WrongKey);
        assert_eq!(aborted(security, Mode::Code), Kind::Refused);
        for c in [CloseCode::Version, CloseCode::Controller] {
            assert_eq!(aborted(c.into(), Mode::Code), Kind::Incompatible);
        }
        assert_eq!(
            aborted(CloseCode::Protocol.into(), Mode::Key),
            Kind::Protocol
        );
        let failed = crate::close_codes::CLOSE_FAILED;
        assert_eq!(aborted(failed, Mode::Key), Kind::PeerFailed);
        let interrupted = crate::close_codes::CLOSE_INTERRUPTED;
        assert_eq!(aborted(interrupted, Mode::Key), Kind::Aborted);
    }
}
