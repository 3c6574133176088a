//! Packet protection: who the peer is, the handshake that proves it, and
//! the keys that seal every datagram after it.
//!
//! The handshake is Noise (the `snow` crate), in one of two patterns:
//! - **pinned key**: `Noise_IK_25519_ChaChaPoly_BLAKE2s`. The client knows
//!   the server's static public key (as SSH and WireGuard users do) and
//!   presents its own, so either side may restrict who it talks to.
//! - **one-time code**: a short code both people know is stretched by
//!   SPAKE2 (the `spake2` crate) into a 32-byte secret that keys
//!   `Noise_NNpsk2_25519_ChaChaPoly_BLAKE2s`; a low-entropy code never
//!   becomes a key directly, so a passive observer learns nothing and an
//!   active one gets one guess per attempt.
//!
//! Both finish in one round trip and split into two directional keys that
//! seal datagrams with AES-256-GCM (`ring`): the public header is the
//! associated data and the nonce is (path, packet number), which a path
//! never reuses. The keys of each direction are a ratchet: a sender starts
//! a new key phase every `key_update_packets` packets or
//! `key_update_interval` (a header bit says which phase sealed a datagram,
//! and the peer follows), so no key seals near AES-GCM's limit and an old
//! key, once zeroised, opens nothing more. Nothing here is hand-made
//! cryptography; the primitives come from those crates. Randomness is an
//! input (a seeded CSPRNG per session), so the simulator stays
//! reproducible.

mod handshake;
mod keys;
mod packet;
mod retry;
mod rng;

pub(crate) use handshake::{mode, ClientHandshake, ServerHandshake};
pub use keys::{KeyError, Keypair, PublicKey};
pub(crate) use packet::{PacketKeys, UpdatePolicy};
pub use packet::{AES_GCM_PACKET_LIMIT, TAG_LEN};
pub(crate) use retry::RetryKey;
pub(crate) use rng::SessionRng;

/// How a session authenticates its peer and protects its datagrams.
///
/// A client sets exactly one of `peer`, `code` or `insecure`; a server sets
/// `identity` (pinned-key clients), `code`, or both, or `insecure`. The
/// default sets nothing, and a session refuses to start with it: running
/// unprotected is a choice, never an accident.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Security {
    /// This side's static key pair. A server needs one for pinned-key
    /// clients; a client presents it (a fresh one per session if `None`).
    pub identity: Option<Keypair>,
    /// Client: the server's public key, pinned.
    pub peer: Option<PublicKey>,
    /// Server: when non-empty, only clients presenting one of these keys
    /// are accepted (pinned-key mode only).
    pub allowed_clients: Vec<PublicKey>,
    /// A one-time code both sides know (SPAKE2 then Noise NNpsk2).
    pub code: Option<String>,
    /// No encryption and no authentication: anyone who sees a datagram
    /// can read the stream, forge data, or end the session.
    pub insecure: bool,
}

impl Security {
    /// Unprotected datagrams (the simulator's and benchmarks' default).
    pub fn insecure() -> Security {
        Security {
            insecure: true,
            ..Security::default()
        }
    }

    /// A client that pins the server's key.
    pub fn pinned(peer: PublicKey) -> Security {
        Security {
            peer: Some(peer),
            ..Security::default()
        }
    }

    /// A server identified by `identity`.
    pub fn server(identity: Keypair) -> Security {
        Security {
            identity: Some(identity),
            ..Security::default()
        }
    }

    /// Either side of a one-time code, normalised ([`normalize_code`]).
    pub fn code(code: impl AsRef<str>) -> Security {
        Security {
            code: Some(normalize_code(code.as_ref())),
            ..Security::default()
        }
    }

    /// Whether datagrams are sealed.
    pub fn is_sealed(&self) -> bool {
        !self.insecure
    }

    /// Checks the combination for a client (`client`) or a server.
    pub(crate) fn validate(&self, client: bool) -> Result<(), &'static str> {
        let sealed = self.identity.is_some()
            || self.peer.is_some()
            || self.code.is_some()
            || !self.allowed_clients.is_empty();
        if self.insecure {
            return if sealed {
                Err("insecure excludes keys and codes")
            } else {
                Ok(())
            };
        }
        if self
            .code
            .as_deref()
            .is_some_and(|c| normalize_code(c).is_empty())
        {
            return Err("the code is empty");
        }
        if client {
            match (self.peer.is_some(), self.code.is_some()) {
                (true, true) => Err("a client uses either a pinned key or a code, not both"),
                (false, false) => Err("no way to authenticate the server: pin its key, use a code, or choose insecure"),
                _ => Ok(()),
            }
        } else if self.identity.is_none() && self.code.is_none() {
            Err("a server needs a key pair, a code, or insecure")
        } else {
            Ok(())
        }
    }
}

/// A one-time code as the handshake uses it: lowercase, each run of
/// spaces, dashes or underscores made one `-`, none at either end. So
/// `464 River Attic`, ` 464-river_attic ` and `464-river-attic` are the
/// same code, and a typing difference never costs a guess.
pub fn normalize_code(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut gap = false;
    for c in code.chars() {
        if c.is_whitespace() || c == '-' || c == '_' {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push('-');
        }
        gap = false;
        out.extend(c.to_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_normalise_to_one_spelling() {
        for typed in [
            "464-river-attic",
            "464 river attic",
            "464-River-Attic",
            " 464-river-attic ",
            "464  --river__ATTIC\t",
            "-464_river attic-",
        ] {
            assert_eq!(normalize_code(typed), "464-river-attic", "{typed:?}");
        }
        assert_eq!(normalize_code(""), "");
        assert_eq!(normalize_code(" - _ "), "");
        assert_eq!(normalize_code("x"), "x");
        assert_eq!(normalize_code("ÄBC-ß"), "äbc-ß");
    }

    #[test]
    fn code_security_holds_the_normal_form() {
        assert_eq!(
            Security::code(" 7 Purple  Sausage"),
            Security::code("7-purple-sausage")
        );
        assert_eq!(
            Security::code("- -").validate(true),
            Err("the code is empty")
        );
    }
}
