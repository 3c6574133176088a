//! What each side keeps of the handshake until it is done: a client its
//! Noise state, the server's retry token and what unauthenticated answers
//! said; a server its answer, to repeat it, and when the client's opening
//! last came. Once the peer confirms, all of it is dropped.

use super::give_up::{commitment_of, GiveUp, COMMITMENT_LEN};
use crate::crypto::ClientHandshake;
use crate::error::SessionError;
use crate::{Instant, PublicKey};
use std::time::Duration;

/// RETRYs answered with an opening at once; later ones only replace the
/// token the next scheduled opening carries. A token lives 10 s and a
/// handshake may try for 75 s, so every RETRY must count; but a server
/// (or forger) answering each opening with one must not make a ping-pong
/// of them.
const MAX_RETRIES: u32 = 4;

/// How long a handshake still waits for an authentic answer once one
/// that does not authenticate, or a refusal in clear, has arrived. A wrong
/// code or key is then reported in seconds rather than after the full
/// handshake timeout (75 s, meant for answers that cannot get through),
/// while a forged answer cannot end a handshake whose server answers: its
/// answer comes a round trip after each HELLO, and HELLOs repeat within
/// a second or two meanwhile. Forging one takes the session id, which
/// only an on-path attacker sees, and such an attacker can drop the
/// answers anyway.
const UNAUTHENTIC_GRACE: Duration = Duration::from_secs(3);

/// A server session the client has not confirmed (by a packet only our
/// answer lets it make) within this long of its last opening is dropped:
/// half-open sessions cost memory that anyone who can send a datagram
/// could claim (the endpoint also caps their number). A client repeats its
/// opening at least every `max_probe_interval` (1 s) while it waits, so a
/// lost answer does not expire it. A client that has the answer stops
/// repeating it and keeps probing until `MIN_SILENCE` (10 s) of silence:
/// the session must outlive that, or an outage just after the handshake
/// that the client rides out ends at a server that forgot it (TCP keeps a
/// SYN_RECV connection for its SYN-ACK retries, 63 s on Linux).
const UNCONFIRMED_TIMEOUT: Duration =
    crate::config::MIN_SILENCE.saturating_add(Duration::from_secs(5));
/// However often its opening repeats, an unconfirmed server session ends
/// this long after it was created: a client tries for the handshake
/// timeout (75 s by default), and copies of its opening that anyone on
/// the path could replay must not hold the session, and the endpoint's
/// half-open slot, for ever.
const UNCONFIRMED_LIFETIME: Duration =
    crate::config::HANDSHAKE_TIMEOUT.saturating_add(UNCONFIRMED_TIMEOUT);

/// The handshake, by side, until the peer confirms it.
#[derive(Debug)]
pub(in crate::session) enum Handshake {
    /// A client until the server's answer arrives.
    Client(Client),
    /// A server until its client sends something only our answer lets
    /// it send.
    Server(Server),
    /// The peer confirmed the handshake: data may flow.
    Done {
        /// When the peer's first packet after our answer arrived, if one
        /// did (a server's; later connections' lag is measured from it).
        confirmed_at: Option<Instant>,
    },
}

impl Handshake {
    /// Whether the peer has shown it completed the handshake.
    pub fn is_done(&self) -> bool {
        matches!(self, Handshake::Done { .. })
    }

    /// The peer confirmed the handshake; `at`, when that was first shown
    /// by a packet of its own. Later confirmations change nothing.
    pub fn confirm(&mut self, at: Option<Instant>) {
        if !self.is_done() {
            *self = Handshake::Done { confirmed_at: at };
        }
    }

    /// When the peer confirmed, if a packet of its own showed it.
    pub fn confirmed_at(&self) -> Option<Instant> {
        match self {
            Handshake::Done { confirmed_at } => *confirmed_at,
            _ => None,
        }
    }

    /// A client's handshake in progress.
    pub fn client(&self) -> Option<&Client> {
        match self {
            Handshake::Client(c) => Some(c),
            _ => None,
        }
    }

    /// A client's handshake in progress.
    pub fn client_mut(&mut self) -> Option<&mut Client> {
        match self {
            Handshake::Client(c) => Some(c),
            _ => None,
        }
    }

    /// A server's handshake in progress.
    pub fn server(&self) -> Option<&Server> {
        match self {
            Handshake::Server(s) => Some(s),
            _ => None,
        }
    }

    /// A server's handshake in progress.
    pub fn server_mut(&mut self) -> Option<&mut Server> {
        match self {
            Handshake::Server(s) => Some(s),
            _ => None,
        }
    }

    /// A sealed client's Noise state, while it awaits the answer.
    pub fn client_noise(&self) -> Option<&ClientHandshake> {
        self.client()?.noise()
    }

    /// A sealed server's answer, until the client confirms it.
    pub fn answer(&self) -> Option<&Answer> {
        self.server()?.answer.as_ref()
    }
}

/// A client's handshake until the server's answer opens it.
#[derive(Debug, Default)]
pub(in crate::session) struct Client {
    /// A sealed client's Noise state; `None` when insecure, or once its
    /// one guess at a code is spent.
    noise: Option<Box<ClientHandshake>>,
    /// A server's retry token to echo, and how many retries were obeyed.
    retry_token: Vec<u8>,
    retries: u32,
    /// What an unauthenticated refusal said, shown if the handshake fails.
    refusal_hint: Option<String>,
    /// What an unauthenticated "busy" said, likewise.
    busy_hint: Option<String>,
    /// Server answers that did not authenticate (a wrong code or key, or
    /// forgeries): what a handshake timeout then reports.
    unauthentic_answers: u32,
    /// When the first such answer or refusal arrived: the handshake then
    /// waits only [`UNAUTHENTIC_GRACE`] longer.
    first_unauthentic: Option<Instant>,
    /// With a code: the secret our opening committed to, revealed if the
    /// server's answer does not prove the code.
    give_up: Option<GiveUp>,
}

impl Client {
    /// A sealed client's handshake with its Noise state.
    pub fn sealed(noise: ClientHandshake, give_up: Option<GiveUp>) -> Self {
        Client {
            noise: Some(Box::new(noise)),
            give_up,
            ..Client::default()
        }
    }

    /// The secret that says we gave up, once (with a code).
    pub fn take_give_up(&mut self) -> Option<GiveUp> {
        self.give_up.take()
    }

    /// The Noise state, to write the opening with.
    pub fn noise(&self) -> Option<&ClientHandshake> {
        self.noise.as_deref()
    }

    /// The Noise state, to read an answer with.
    pub fn noise_mut(&mut self) -> Option<&mut ClientHandshake> {
        self.noise.as_deref_mut()
    }

    /// The Noise state is done with: the answer opened it, or a code's one
    /// guess went wrong.
    pub fn drop_noise(&mut self) {
        self.noise = None;
    }

    /// The token the opening echoes.
    pub fn retry_token(&self) -> &[u8] {
        &self.retry_token
    }

    /// A RETRY brought `token`; whether the opening goes again at once.
    pub fn on_retry(&mut self, token: &[u8]) -> bool {
        self.retry_token = token.to_vec();
        let again = self.retries < MAX_RETRIES;
        if again {
            self.retries += 1;
        }
        again
    }

    /// An answer that did not authenticate arrived at `now`.
    pub fn on_unauthentic_answer(&mut self, now: Instant) {
        self.unauthentic_answers += 1;
        self.first_unauthentic.get_or_insert(now);
    }

    /// A refusal in clear arrived at `now`: a hint, never obeyed. A
    /// listener that says it is busy may have room by the next HELLO, so
    /// that hint does not shorten the handshake.
    pub fn on_refusal(&mut self, now: Instant, code: u64, reason: String) {
        if code == crate::CloseCode::Busy.value() {
            self.busy_hint = Some(reason);
            return;
        }
        self.refusal_hint = Some(reason);
        self.first_unauthentic.get_or_insert(now);
    }

    /// When the handshake gives up, at `full` (its start plus the
    /// handshake timeout) or sooner once an unauthentic answer came.
    pub fn deadline(&self, full: Instant) -> Instant {
        match self.first_unauthentic {
            Some(at) => full.min(at + UNAUTHENTIC_GRACE),
            None => full,
        }
    }

    /// Why the handshake failed `after` its start.
    pub fn timeout_error(&mut self, after: Duration) -> SessionError {
        match self.refusal_hint.take() {
            Some(said) => SessionError::UnauthenticatedRefusal { after, said },
            None if self.busy_hint.is_some() => SessionError::ListenerBusy {
                after,
                said: self.busy_hint.take().unwrap_or_default(),
            },
            None if self.unauthentic_answers > 0 => SessionError::HandshakeUnauthenticated(after),
            None => SessionError::HandshakeTimeout(after),
        }
    }
}

/// A server's handshake until the client confirms.
#[derive(Debug)]
pub(in crate::session) struct Server {
    /// A sealed server's answer.
    answer: Option<Answer>,
    /// When the client's opening last arrived (the first or a repeat).
    last_hello: Instant,
}

impl Server {
    /// A server whose client's opening arrived at `now`.
    pub fn new(now: Instant) -> Self {
        Server {
            answer: None,
            last_hello: now,
        }
    }

    /// The client's opening (first or repeated) arrived at `now`.
    pub fn on_opening(&mut self, now: Instant) {
        self.last_hello = now;
    }

    /// A sealed server answered.
    pub fn set_answer(&mut self, answer: Answer) {
        self.answer = Some(answer);
    }

    /// The answer, to send before a CLOSE the client could not open
    /// without it; it is not repeated after.
    pub fn take_answer(&mut self) -> Option<Answer> {
        self.answer.take()
    }

    /// Whether `noise` is the client's first message again.
    pub fn is_repeated_opening(&self, noise: &[u8]) -> bool {
        self.answer
            .as_ref()
            .is_some_and(|a| a.client_message == noise)
    }

    /// Whether `secret` is the one the client's opening committed to: the
    /// client gave up on our answer (a wrong code).
    pub fn is_given_up_by(&self, secret: &[u8]) -> bool {
        self.answer
            .as_ref()
            .and_then(|a| a.give_up)
            .is_some_and(|c| c == commitment_of(secret))
    }

    /// When a session created at `created` gives up on its client.
    pub fn deadline(&self, created: Instant) -> Instant {
        (self.last_hello + UNCONFIRMED_TIMEOUT).min(created + UNCONFIRMED_LIFETIME)
    }
}

/// What a sealed server keeps of its handshake until the client confirms:
/// the client's first message, to recognise its retransmissions, and our
/// answer, to repeat it.
#[derive(Debug)]
pub(in crate::session) struct Answer {
    pub client_message: Vec<u8>,
    /// The encoded SERVER_HELLO frame.
    pub frame: Vec<u8>,
    /// Key mode: the client's key and the date of its opening.
    pub opening: Option<(PublicKey, u64)>,
    /// Code mode: the commitment to the secret that gives up.
    pub give_up: Option<[u8; COMMITMENT_LEN]>,
}

impl Answer {
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn confirmation_drops_the_handshake_once() {
        let mut h = Handshake::Server(Server::new(t(0)));
        assert!(!h.is_done() && h.confirmed_at().is_none());
        h.confirm(Some(t(50)));
        assert!(h.is_done());
        h.confirm(Some(t(90)));
        assert_eq!(h.confirmed_at(), Some(t(50)), "the first counts");
        assert!(h.server().is_none() && h.answer().is_none());
    }

    #[test]
    fn an_unauthentic_answer_shortens_the_wait() {
        let mut c = Client::default();
        assert_eq!(c.deadline(t(75_000)), t(75_000));
        c.on_unauthentic_answer(t(1_000));
        c.on_unauthentic_answer(t(2_000));
        assert_eq!(c.deadline(t(75_000)), t(4_000), "from the first");
        assert_eq!(c.deadline(t(3_000)), t(3_000));
        assert!(matches!(
            c.timeout_error(Duration::from_secs(4)),
            SessionError::HandshakeUnauthenticated(_)
        ));
        let mut c = Client::default();
        assert!(matches!(
            c.timeout_error(Duration::from_secs(75)),
            SessionError::HandshakeTimeout(_)
        ));
        let security = crate::CloseCode::Security.value();
        c.on_refusal(t(500), security, "refused".into());
        assert_eq!(c.deadline(t(75_000)), t(3_500));
        match c.timeout_error(Duration::from_secs(3)) {
            SessionError::UnauthenticatedRefusal { said, .. } => assert_eq!(said, "refused"),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_busy_listener_is_waited_for_and_named_if_it_stays_busy() {
        let mut c = Client::default();
        c.on_refusal(t(500), crate::CloseCode::Busy.value(), "busy".into());
        assert_eq!(c.deadline(t(75_000)), t(75_000));
        match c.timeout_error(Duration::from_secs(75)) {
            SessionError::ListenerBusy { said, .. } => assert_eq!(said, "busy"),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn only_a_few_retries_resend_the_opening_at_once() {
        let mut c = Client::default();
        for i in 0..MAX_RETRIES {
            assert!(c.on_retry(&[i as u8]));
        }
        assert!(!c.on_retry(b"late"));
        assert_eq!(c.retry_token(), b"late", "the latest token is echoed");
    }

    #[test]
    fn a_half_open_server_lives_on_its_client_openings_but_not_forever() {
        let mut s = Server::new(t(0));
        assert_eq!(s.deadline(t(0)), t(0) + UNCONFIRMED_TIMEOUT);
        s.on_opening(t(10_000));
        assert_eq!(s.deadline(t(0)), t(10_000) + UNCONFIRMED_TIMEOUT);
        s.on_opening(t(1_000_000));
        assert_eq!(s.deadline(t(0)), t(0) + UNCONFIRMED_LIFETIME);
        assert!(!s.is_repeated_opening(b"hello"));
        s.set_answer(Answer {
            client_message: b"hello".to_vec(),
            frame: vec![1],
            opening: None,
            give_up: None,
        });
        assert!(s.is_repeated_opening(b"hello") && !s.is_repeated_opening(b"other"));
        assert_eq!(s.take_answer().map(|a| a.frame), Some(vec![1]));
        assert!(s.take_answer().is_none());
    }
}
