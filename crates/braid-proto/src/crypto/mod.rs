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

pub(crate) use handshake::{builder, mode, ClientHandshake, ServerHandshake};
pub use keys::{KeyError, Keypair, PublicKey};
pub(crate) use packet::{PacketKeys, UpdatePolicy};
pub use packet::{AES_GCM_PACKET_LIMIT, TAG_LEN};
pub(crate) use retry::{RetryKey, RETRY_TOKEN_LEN};
pub(crate) use rng::SessionRng;

/// How a session authenticates its peer and protects its datagrams: one
/// of the modes a side may run in, so that no other combination can be
/// written down.
///
/// A client runs [`Pinned`](Security::Pinned), [`Code`](Security::Code) or
/// [`Insecure`](Security::Insecure); a server runs
/// [`Server`](Security::Server) (pinned-key clients, and a code too if it
/// gives one), [`Code`](Security::Code) or [`Insecure`](Security::Insecure).
/// The default, [`Unset`](Security::Unset), chooses nothing, and a session
/// refuses to start with it: running unprotected is a choice, never an
/// accident.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Security {
    /// Nothing chosen: a session refuses to start.
    #[default]
    Unset,
    /// No encryption and no authentication: anyone who sees a datagram
    /// can read the stream, forge data, or end the session.
    Insecure,
    /// A client that pins the server's public key.
    Pinned {
        /// The server's public key.
        peer: PublicKey,
        /// The key pair this client presents (a fresh one per session if
        /// `None`), for servers that allow only some clients.
        identity: Option<Keypair>,
    },
    /// Either side of a one-time code (SPAKE2 then Noise NNpsk2). Set
    /// directly, the code is normalised where it is used
    /// ([`normalize_code`]).
    Code(String),
    /// A server identified by its static key pair (pinned-key clients).
    Server {
        /// This server's static key pair.
        identity: Keypair,
        /// When non-empty, only clients presenting one of these keys are
        /// accepted (pinned-key mode only).
        allowed_clients: Vec<PublicKey>,
        /// A one-time code it also accepts clients with.
        code: Option<String>,
    },
}

impl Security {
    /// Unprotected datagrams (the simulator's and benchmarks' default).
    pub fn insecure() -> Security {
        Security::Insecure
    }

    /// A client that pins the server's key.
    pub fn pinned(peer: PublicKey) -> Security {
        Security::Pinned {
            peer,
            identity: None,
        }
    }

    /// A server identified by `identity`.
    pub fn server(identity: Keypair) -> Security {
        Security::Server {
            identity,
            allowed_clients: Vec::new(),
            code: None,
        }
    }

    /// Either side of a one-time code, normalised ([`normalize_code`]).
    pub fn code(code: impl AsRef<str>) -> Security {
        Security::Code(normalize_code(code.as_ref()))
    }

    /// Whether datagrams are sealed.
    pub fn is_sealed(&self) -> bool {
        *self != Security::Insecure
    }

    /// The one-time code this side takes, if any.
    pub fn one_time_code(&self) -> Option<&str> {
        match self {
            Security::Code(code)
            | Security::Server {
                code: Some(code), ..
            } => Some(code),
            _ => None,
        }
    }

    /// Checks that the mode is one a client (`client`) or a server runs.
    pub(crate) fn validate(&self, client: bool) -> Result<(), SecurityError> {
        if self
            .one_time_code()
            .is_some_and(|c| normalize_code(c).is_empty())
        {
            return Err(SecurityError::EmptyCode);
        }
        match self {
            Security::Insecure | Security::Code(_) => Ok(()),
            Security::Pinned { .. } if client => Ok(()),
            Security::Server { .. } if !client => Ok(()),
            _ if client => Err(SecurityError::NoServerAuthentication),
            _ => Err(SecurityError::NoServerCredential),
        }
    }
}

/// Why security settings cannot start a session
/// ([`ConfigError::Security`](crate::ConfigError::Security)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// The one-time code is empty once normalised.
    #[error("the code is empty")]
    EmptyCode,
    /// A client chose no way to authenticate the server.
    #[error("no way to authenticate the server: pin its key, use a code, or choose insecure")]
    NoServerAuthentication,
    /// A server chose neither a key pair, a code, nor insecure.
    #[error("a server needs a key pair, a code, or insecure")]
    NoServerCredential,
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
            Err(SecurityError::EmptyCode)
        );
    }

    #[test]
    fn each_side_runs_only_its_own_modes() {
        let key = Keypair::generate([1; 32]);
        let client = |s: &Security| s.validate(true);
        let server = |s: &Security| s.validate(false);
        for ok in [
            Security::insecure(),
            Security::code("7-purple-sausage"),
            Security::pinned(key.public()),
        ] {
            assert_eq!(client(&ok), Ok(()), "{ok:?}");
        }
        for ok in [
            Security::insecure(),
            Security::code("7-purple-sausage"),
            Security::server(key.clone()),
        ] {
            assert_eq!(server(&ok), Ok(()), "{ok:?}");
        }
        assert_eq!(
            client(&Security::Unset),
            Err(SecurityError::NoServerAuthentication)
        );
        assert_eq!(
            client(&Security::server(key.clone())),
            Err(SecurityError::NoServerAuthentication)
        );
        assert_eq!(
            server(&Security::Unset),
            Err(SecurityError::NoServerCredential)
        );
        assert_eq!(
            server(&Security::pinned(key.public())),
            Err(SecurityError::NoServerCredential)
        );
        let empty = Security::Server {
            identity: key,
            allowed_clients: Vec::new(),
            code: Some(" _ ".into()),
        };
        assert_eq!(server(&empty), Err(SecurityError::EmptyCode));
        assert!(!Security::insecure().is_sealed() && Security::Unset.is_sealed());
    }
}
