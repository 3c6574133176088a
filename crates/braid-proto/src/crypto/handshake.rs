//! The one-round-trip handshake: Noise IK (pinned key) or SPAKE2 + Noise
//! NNpsk2 (one-time code). Each side's first message carries the session
//! parameters as its payload, so the negotiation is authenticated too.

use super::keys::Keypair;
use super::rng::SessionRng;
use super::{PacketKeys, PublicKey, Security};
use crate::wire::MAX_NOISE_MESSAGE;
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};
use spake2::{Ed25519Group, Identity, Password, Spake2};
use thiserror::Error;
use zeroize::Zeroizing;

/// Handshake patterns, as the CLIENT_HELLO's mode byte names them.
pub(crate) mod mode {
    pub const PINNED: u8 = 1;
    pub const CODE: u8 = 2;
}

const IK: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";
const NN_PSK2: &str = "Noise_NNpsk2_25519_ChaChaPoly_BLAKE2s";
/// SPAKE2 identities: the two roles, so a message cannot be reflected.
const PAKE_CLIENT: &[u8] = b"braid client";
const PAKE_SERVER: &[u8] = b"braid server";

/// Why a handshake message was not accepted. None of these end a session:
/// an unauthenticated message is dropped and the real one still counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub(crate) enum HandshakeError {
    /// This side does not offer the mode the client asked for.
    #[error("handshake mode not offered")]
    Mode,
    /// The message did not decrypt or authenticate (wrong key or code, or forged).
    #[error("handshake message did not authenticate")]
    Auth,
    /// The client's key is not among the allowed ones.
    #[error("client key not allowed")]
    NotAllowed,
}

/// snow's default primitives with the session's seeded random source.
struct Resolver(SessionRng);

impl CryptoResolver for Resolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(self.0.clone()))
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

pub(crate) fn builder(pattern: &str, rng: &mut SessionRng) -> Builder<'static> {
    let resolver = Resolver(SessionRng::new(rng.seed()));
    Builder::with_resolver(
        pattern.parse().expect("valid Noise pattern"),
        Box::new(resolver),
    )
}

/// Binds the handshake to this protocol, session and mode.
fn prologue(session_id: u64, mode: u8) -> [u8; 15] {
    let mut p = [0u8; 15];
    p[..5].copy_from_slice(b"braid");
    p[5] = crate::wire::VERSION;
    p[6..14].copy_from_slice(&session_id.to_be_bytes());
    p[14] = mode;
    p
}

fn pake_start(code: &str, client: bool, seed: [u8; 32]) -> (Spake2<Ed25519Group>, Vec<u8>) {
    let password = Password::new(Zeroizing::new(super::normalize_code(code)).as_bytes());
    let (a, b) = (Identity::new(PAKE_CLIENT), Identity::new(PAKE_SERVER));
    let rng = SessionRng::new(seed);
    if client {
        Spake2::<Ed25519Group>::start_a_with_rng(&password, &a, &b, rng)
    } else {
        Spake2::<Ed25519Group>::start_b_with_rng(&password, &a, &b, rng)
    }
}

/// SPAKE2's shared secret as Noise's 32-byte PSK.
fn pake_psk(state: Spake2<Ed25519Group>, peer_msg: &[u8]) -> Result<[u8; 32], HandshakeError> {
    let key = state.finish(peer_msg).map_err(|_| HandshakeError::Auth)?;
    key.as_slice().try_into().map_err(|_| HandshakeError::Auth)
}

/// The client's half: its first message, kept for retransmission, and what
/// it needs to read the answer.
pub(crate) struct ClientHandshake {
    noise: HandshakeState,
    mode: u8,
    /// Code mode: the code and the seed of our SPAKE2 scalar, so the state
    /// can be rebuilt for each answer (a forged answer must not use it up).
    pake: Option<(Zeroizing<String>, [u8; 32])>,
    pake_msg: Vec<u8>,
    noise_msg: Vec<u8>,
}

impl std::fmt::Debug for ClientHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHandshake")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ClientHandshake {
    /// Starts the handshake; `payload` (the session parameters) travels in
    /// the first message. `sec` was validated for a client.
    pub fn new(
        sec: &Security,
        session_id: u64,
        payload: &[u8],
        rng: &mut SessionRng,
    ) -> ClientHandshake {
        let (mode, mut noise, pake, pake_msg) = if let Security::Pinned { peer, identity } = sec {
            let identity = identity
                .clone()
                .unwrap_or_else(|| Keypair::generate(rng.seed()));
            let noise = builder(IK, rng)
                .prologue(&prologue(session_id, mode::PINNED))
                .and_then(|b| b.local_private_key(identity.secret()))
                .and_then(|b| b.remote_public_key(&peer.0))
                .and_then(|b| b.build_initiator())
                .expect("valid IK parameters");
            (mode::PINNED, noise, None, Vec::new())
        } else {
            let code = Zeroizing::new(
                sec.one_time_code()
                    .expect("validated: a client has a peer key or a code")
                    .to_owned(),
            );
            let seed = rng.seed();
            let (_, msg) = pake_start(&code, true, seed);
            let noise = builder(NN_PSK2, rng)
                .prologue(&prologue(session_id, mode::CODE))
                .and_then(|b| b.build_initiator())
                .expect("valid NNpsk2 parameters");
            (mode::CODE, noise, Some((code, seed)), msg)
        };
        let mut noise_msg = vec![0u8; MAX_NOISE_MESSAGE];
        let n = noise
            .write_message(payload, &mut noise_msg)
            .expect("first message fits");
        noise_msg.truncate(n);
        ClientHandshake {
            noise,
            mode,
            pake,
            pake_msg,
            noise_msg,
        }
    }

    pub fn mode(&self) -> u8 {
        self.mode
    }

    /// The SPAKE2 message (empty with a pinned key) and Noise's first message.
    pub fn message(&self) -> (&[u8], &[u8]) {
        (&self.pake_msg, &self.noise_msg)
    }

    /// Reads the server's answer; on success returns its payload and the
    /// session's keys. A failure leaves the handshake as it was.
    pub fn read_answer(
        &mut self,
        pake_msg: &[u8],
        noise_msg: &[u8],
    ) -> Result<(Vec<u8>, PacketKeys), HandshakeError> {
        if let Some((code, seed)) = &self.pake {
            let (state, _) = pake_start(code, true, *seed);
            let psk = pake_psk(state, pake_msg)?;
            self.noise
                .set_psk(2, &psk)
                .map_err(|_| HandshakeError::Auth)?;
        }
        let mut payload = vec![0u8; noise_msg.len()];
        let n = self
            .noise
            .read_message(noise_msg, &mut payload)
            .map_err(|_| HandshakeError::Auth)?;
        payload.truncate(n);
        let (to_server, to_client) = self.noise.dangerously_get_raw_split();
        Ok((payload, PacketKeys::new(to_server, to_client)))
    }
}

/// The server's half, between reading the client's message and answering.
pub(crate) struct ServerHandshake {
    noise: HandshakeState,
    pake_msg: Vec<u8>,
    /// The client's static key (key mode), authenticated by its message.
    client: Option<PublicKey>,
}

impl ServerHandshake {
    /// The client's static key, in key mode.
    pub fn client(&self) -> Option<PublicKey> {
        self.client
    }

    /// Reads a client's first message; returns the handshake and the
    /// client's payload. Nothing is kept if it fails.
    pub fn read(
        sec: &Security,
        session_id: u64,
        mode: u8,
        pake_msg: &[u8],
        noise_msg: &[u8],
        rng: &mut SessionRng,
    ) -> Result<(ServerHandshake, Vec<u8>), HandshakeError> {
        let (identity, allowed_clients) = match sec {
            Security::Server {
                identity,
                allowed_clients,
                ..
            } => (Some(identity), &allowed_clients[..]),
            _ => (None, &[][..]),
        };
        let (mut noise, our_pake) = match (mode, identity, sec.one_time_code()) {
            (mode::PINNED, Some(identity), _) => {
                let noise = builder(IK, rng)
                    .prologue(&prologue(session_id, mode))
                    .and_then(|b| b.local_private_key(identity.secret()))
                    .and_then(|b| b.build_responder())
                    .expect("valid IK parameters");
                (noise, Vec::new())
            }
            (mode::CODE, _, Some(code)) => {
                let (state, msg) = pake_start(code, false, rng.seed());
                let psk = pake_psk(state, pake_msg)?;
                let noise = builder(NN_PSK2, rng)
                    .prologue(&prologue(session_id, mode))
                    .and_then(|b| b.psk(2, &psk))
                    .and_then(|b| b.build_responder())
                    .expect("valid NNpsk2 parameters");
                (noise, msg)
            }
            _ => return Err(HandshakeError::Mode),
        };
        let mut payload = vec![0u8; noise_msg.len()];
        let n = noise
            .read_message(noise_msg, &mut payload)
            .map_err(|_| HandshakeError::Auth)?;
        payload.truncate(n);
        let client = noise
            .get_remote_static()
            .and_then(|k| <[u8; 32]>::try_from(k).ok())
            .map(PublicKey);
        if mode == mode::PINNED
            && !allowed_clients.is_empty()
            && !client.is_some_and(|k| allowed_clients.contains(&k))
        {
            return Err(HandshakeError::NotAllowed);
        }
        Ok((
            ServerHandshake {
                noise,
                pake_msg: our_pake,
                client,
            },
            payload,
        ))
    }

    /// Writes the answer carrying `payload`; returns our SPAKE2 message,
    /// Noise's second message and the session's keys.
    pub fn answer(mut self, payload: &[u8]) -> (Vec<u8>, Vec<u8>, PacketKeys) {
        let mut msg = vec![0u8; MAX_NOISE_MESSAGE];
        let n = self
            .noise
            .write_message(payload, &mut msg)
            .expect("answer fits");
        msg.truncate(n);
        let (to_server, to_client) = self.noise.dangerously_get_raw_split();
        (self.pake_msg, msg, PacketKeys::new(to_client, to_server))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(client: &Security, server: &Security) -> Result<(Vec<u8>, Vec<u8>), HandshakeError> {
        let mut rng = SessionRng::new([1; 32]);
        let mut c = ClientHandshake::new(client, 9, b"offer", &mut rng);
        let (pake, noise) = c.message();
        let (s, offer) = ServerHandshake::read(server, 9, c.mode(), pake, noise, &mut rng)?;
        let (pake, noise, server_keys) = s.answer(b"answer");
        let (answer, mut client_keys) = c.read_answer(&pake, &noise)?;
        // The keys agree: what one seals, the other opens.
        let mut d = vec![0u8; crate::wire::HEADER_LEN];
        d[0] = crate::wire::VERSION | 0x60; // a 4-byte packet number
        d.extend_from_slice(b"x");
        client_keys.seal(&mut d, 0, crate::PathId(0), 0);
        let now = crate::Instant::ZERO;
        assert_eq!(
            server_keys
                .open(now, &mut d, crate::PathId(0), 0)
                .unwrap()
                .0,
            b"x"
        );
        Ok((offer, answer))
    }

    #[test]
    fn pinned_key_and_code_handshakes_complete() {
        let server = Keypair::generate([2; 32]);
        let (offer, answer) = run(
            &Security::pinned(server.public()),
            &Security::server(server.clone()),
        )
        .unwrap();
        assert_eq!((&offer[..], &answer[..]), (&b"offer"[..], &b"answer"[..]));
        run(
            &Security::code("7-tidy-otter"),
            &Security::code("7-tidy-otter"),
        )
        .unwrap();
        // A code set directly, as typed, is normalised here too.
        let typed = Security::Code(" 7 Tidy__OTTER".into());
        run(&typed, &Security::code("7-tidy-otter")).unwrap();
        run(&Security::code("7-tidy-otter"), &typed).unwrap();
    }

    #[test]
    fn wrong_key_wrong_code_and_unlisted_client_fail() {
        let server = Keypair::generate([2; 32]);
        let other = Keypair::generate([3; 32]);
        let pinned_wrong = run(
            &Security::pinned(other.public()),
            &Security::server(server.clone()),
        );
        assert_eq!(pinned_wrong.unwrap_err(), HandshakeError::Auth);
        // A wrong code is only found out by the client, when the answer fails.
        let code = run(
            &Security::code("7-tidy-otter"),
            &Security::code("7-tidy-owl"),
        );
        assert_eq!(code.unwrap_err(), HandshakeError::Auth);
        let only_other = Security::Server {
            identity: server.clone(),
            allowed_clients: vec![other.public()],
            code: None,
        };
        let unlisted = run(&Security::pinned(server.public()), &only_other);
        assert_eq!(unlisted.unwrap_err(), HandshakeError::NotAllowed);
        let listed = Security::Pinned {
            peer: server.public(),
            identity: Some(other),
        };
        run(&listed, &only_other).unwrap();
        assert_eq!(
            run(&Security::code("x"), &Security::server(server)).unwrap_err(),
            HandshakeError::Mode
        );
    }

    #[test]
    fn a_forged_answer_does_not_spoil_the_real_one() {
        let server = Keypair::generate([2; 32]);
        for (client, srv) in [
            (
                Security::pinned(server.public()),
                Security::server(server.clone()),
            ),
            (Security::code("4-lazy-fox"), Security::code("4-lazy-fox")),
        ] {
            let mut rng = SessionRng::new([5; 32]);
            let mut c = ClientHandshake::new(&client, 1, b"", &mut rng);
            let (pake, noise) = c.message();
            let (s, _) = ServerHandshake::read(&srv, 1, c.mode(), pake, noise, &mut rng).unwrap();
            let (pake, noise, _) = s.answer(b"");
            let mut forged = noise.clone();
            *forged.last_mut().unwrap() ^= 1;
            assert_eq!(
                c.read_answer(&pake, &forged).unwrap_err(),
                HandshakeError::Auth
            );
            c.read_answer(&pake, &noise).unwrap();
        }
    }
}
