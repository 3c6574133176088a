//! Keys between a client and a relay, and the pair's punch secret in use.
//!
//! A client's first request carries the first message of a Noise NN
//! handshake (snow); the relay's first answer carries the second, so the
//! two share keys no observer of the wire learns. From then on the relay
//! seals every REGISTERED and PAIRED to that client (ChaCha20-Poly1305,
//! ring, under a per-client counter), and the client's requests carry an
//! HMAC-SHA256 (ring) under the other key. The MAC covers the cookie, which
//! the relay bound to the address it came from and the time, so a request
//! proves "this end, from this address, now"; a rebinding end moves with
//! it, and a sniffed request moves nothing elsewhere. The pair's punch
//! secret travels only sealed. Nothing here is hand-made cryptography.

use ring::{aead, hmac};
use snow::HandshakeState;
use zeroize::Zeroizing;

use super::wire::{HELLO_LEN, KEYED_LEN, MAC_LEN, PROOF_AT, TOKEN_LEN};
use super::Handle;
use crate::crypto::{builder, SessionRng};

const NN: &str = "Noise_NN_25519_ChaChaPoly_BLAKE2s";

/// Binds the agreement to this protocol, the handle and the role.
fn prologue(handle: &Handle, register: bool) -> Vec<u8> {
    let mut p = b"braid rendezvous 2\0".to_vec();
    p.push(u8::from(register));
    p.extend_from_slice(handle);
    p
}

/// The keys one client and one relay share. Kept as bytes (a relay holds
/// two per pair; ring's expanded keys are ten times larger) and expanded
/// per use, once a refresh.
pub(crate) struct EndKeys {
    /// Client to relay: MACs of requests.
    prove: Zeroizing<[u8; 32]>,
    /// Relay to client: sealed answers.
    answer: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for EndKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndKeys(..)")
    }
}

impl EndKeys {
    fn from_split(to_relay: [u8; 32], to_client: [u8; 32]) -> EndKeys {
        EndKeys {
            prove: Zeroizing::new(to_relay),
            answer: Zeroizing::new(to_client),
        }
    }

    fn prove_key(&self) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, &*self.prove)
    }

    fn answer_key(&self) -> aead::LessSafeKey {
        let key =
            aead::UnboundKey::new(&aead::CHACHA20_POLY1305, &*self.answer).expect("a 32-byte key");
        aead::LessSafeKey::new(key)
    }

    /// The relay's side: reads a client's `hello` and returns the keys and
    /// the answer that gives the client the same keys.
    pub fn answer_hello(
        rng: &mut SessionRng,
        handle: &Handle,
        register: bool,
        hello: &[u8; HELLO_LEN],
    ) -> Option<(EndKeys, [u8; KEYED_LEN])> {
        let mut noise = builder(NN, rng)
            .prologue(&prologue(handle, register))
            .and_then(|b| b.build_responder())
            .ok()?;
        noise.read_message(hello, &mut [0u8; 64]).ok()?;
        let mut out = [0u8; 128];
        let n = noise.write_message(&[], &mut out).ok()?;
        let keyed = out[..n].try_into().ok()?;
        let (to_relay, to_client) = noise.dangerously_get_raw_split();
        Some((EndKeys::from_split(to_relay, to_client), keyed))
    }

    /// The MAC a request's first [`PROOF_AT`] bytes carry.
    pub fn prove(&self, request: &[u8]) -> [u8; MAC_LEN] {
        let tag = hmac::sign(&self.prove_key(), &request[..PROOF_AT]);
        tag.as_ref().try_into().expect("HMAC-SHA256 is 32 bytes")
    }

    /// Whether an encoded request carries this end's proof.
    pub fn proves(&self, request: &[u8]) -> bool {
        request.len() >= PROOF_AT + MAC_LEN
            && hmac::verify(
                &self.prove_key(),
                &request[..PROOF_AT],
                &request[PROOF_AT..PROOF_AT + MAC_LEN],
            )
            .is_ok()
    }

    /// `plain` sealed under the answer key with `counter` as the nonce,
    /// `header` authenticated beside it. The relay never reuses a counter.
    pub fn seal(&self, counter: u64, header: &[u8], plain: &[u8]) -> Vec<u8> {
        let mut body = plain.to_vec();
        self.answer_key()
            .seal_in_place_append_tag(nonce(counter), aead::Aad::from(header), &mut body)
            .expect("a short answer seals");
        body
    }

    /// The plaintext of a sealed answer, if it authenticates.
    pub fn open(&self, counter: u64, header: &[u8], body: &[u8]) -> Option<Vec<u8>> {
        let mut buf = body.to_vec();
        let n = self
            .answer_key()
            .open_in_place(nonce(counter), aead::Aad::from(header), &mut buf)
            .ok()?
            .len();
        buf.truncate(n);
        Some(buf)
    }
}

fn nonce(counter: u64) -> aead::Nonce {
    let mut n = [0u8; aead::NONCE_LEN];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    aead::Nonce::assume_unique_for_key(n)
}

/// A client's half of the agreement with one relay, until answered. The
/// handshake is rebuilt from its seed for each candidate answer, so a
/// forged one cannot use it up.
pub(crate) struct Hello {
    seed: [u8; 32],
    prologue: Vec<u8>,
    msg: [u8; HELLO_LEN],
}

impl Hello {
    pub fn new(rng: &mut SessionRng, handle: &Handle, register: bool) -> Hello {
        let seed = rng.seed();
        let prologue = prologue(handle, register);
        let (_, msg) = Self::start(seed, &prologue);
        Hello {
            seed,
            prologue,
            msg,
        }
    }

    fn start(seed: [u8; 32], prologue: &[u8]) -> (HandshakeState, [u8; HELLO_LEN]) {
        let mut noise = builder(NN, &mut SessionRng::new(seed))
            .prologue(prologue)
            .and_then(|b| b.build_initiator())
            .expect("valid NN parameters");
        let mut out = [0u8; 128];
        let n = noise.write_message(&[], &mut out).expect("fits");
        let msg = out[..n].try_into().expect("an NN first message is a key");
        (noise, msg)
    }

    /// What requests carry.
    pub fn message(&self) -> [u8; HELLO_LEN] {
        self.msg
    }

    /// The keys, if `keyed` is the relay's answer to this hello.
    pub fn finish(&self, keyed: &[u8; KEYED_LEN]) -> Option<EndKeys> {
        let (mut noise, _) = Self::start(self.seed, &self.prologue);
        noise.read_message(keyed, &mut [0u8; 64]).ok()?;
        let (to_relay, to_client) = noise.dangerously_get_raw_split();
        Some(EndKeys::from_split(to_relay, to_client))
    }
}

/// The MAC of a punch (or its answer) with `nonce` under a pair's secret.
pub(crate) fn punch_mac(token: &[u8; TOKEN_LEN], nonce: u64, answer: bool) -> [u8; MAC_LEN] {
    let tag = hmac::sign(&punch_key(token), &punch_message(nonce, answer));
    tag.as_ref().try_into().expect("HMAC-SHA256 is 32 bytes")
}

/// Whether `mac` is the MAC of that punch under `token`.
pub(crate) fn punch_proves(
    token: &[u8; TOKEN_LEN],
    nonce: u64,
    answer: bool,
    mac: &[u8; MAC_LEN],
) -> bool {
    hmac::verify(&punch_key(token), &punch_message(nonce, answer), mac).is_ok()
}

fn punch_key(token: &[u8; TOKEN_LEN]) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, token)
}

fn punch_message(nonce: u64, answer: bool) -> [u8; 21] {
    let mut m = [0u8; 21];
    m[..12].copy_from_slice(b"braid punch\0");
    m[12..20].copy_from_slice(&nonce.to_be_bytes());
    m[20] = u8::from(answer);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_agree_and_nothing_else_opens_or_proves() {
        let mut rng = SessionRng::new([1; 32]);
        let handle = [9; 32];
        let hello = Hello::new(&mut rng, &handle, true);
        let (relay, keyed) = EndKeys::answer_hello(&mut rng, &handle, true, &hello.message())
            .expect("a fresh hello is answered");
        let client = hello.finish(&keyed).expect("its answer keys the client");
        let sealed = relay.seal(3, b"hdr", b"paired");
        assert_eq!(
            client.open(3, b"hdr", &sealed).as_deref(),
            Some(&b"paired"[..])
        );
        assert_eq!(client.open(4, b"hdr", &sealed), None, "another counter");
        assert_eq!(client.open(3, b"hdx", &sealed), None, "another header");
        let mut request = vec![7u8; PROOF_AT + MAC_LEN];
        let proof = client.prove(&request);
        request[PROOF_AT..].copy_from_slice(&proof);
        assert!(relay.proves(&request));
        request[0] ^= 1;
        assert!(!relay.proves(&request));
        // Another role or handle agrees on nothing; a forged answer keys nothing.
        assert!(
            EndKeys::answer_hello(&mut rng, &handle, false, &hello.message())
                .and_then(|(_, k)| hello.finish(&k))
                .is_none()
        );
        assert!(hello.finish(&[0; KEYED_LEN]).is_none());
        // Still usable after the forgery.
        assert!(hello.finish(&keyed).is_some());
    }

    #[test]
    fn punch_macs_bind_secret_nonce_and_direction() {
        let mac = punch_mac(&[1; 16], 5, false);
        assert!(punch_proves(&[1; 16], 5, false, &mac));
        assert!(!punch_proves(&[2; 16], 5, false, &mac));
        assert!(!punch_proves(&[1; 16], 6, false, &mac));
        assert!(!punch_proves(&[1; 16], 5, true, &mac));
    }
}
