//! Static X25519 keys as users handle them: 64 hex digits each.

use super::rng::SessionRng;
use snow::params::DHChoice;
use snow::resolvers::{CryptoResolver, DefaultResolver};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;
use zeroize::Zeroizing;

/// Bytes of an X25519 key.
pub const KEY_LEN: usize = 32;

/// A key that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// Not 64 hexadecimal digits.
    #[error("a key is 64 hexadecimal digits")]
    Format,
}

/// A static public key; printed and parsed as 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; KEY_LEN]);

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        parse_hex(s).map(PublicKey)
    }
}

fn parse_hex(s: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let s = s.trim();
    if s.len() != 2 * KEY_LEN || !s.is_ascii() {
        return Err(KeyError::Format);
    }
    let mut out = [0u8; KEY_LEN];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| KeyError::Format)?;
    }
    Ok(out)
}

/// A static key pair. The secret half is wiped from memory on drop and
/// never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Keypair {
    secret: Zeroizing<[u8; KEY_LEN]>,
    public: PublicKey,
}

impl fmt::Debug for Keypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keypair")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl Keypair {
    /// A fresh key pair from `seed` (32 bytes from a CSPRNG).
    pub fn generate(seed: [u8; 32]) -> Keypair {
        let mut rng = SessionRng::new(seed);
        let mut secret = Zeroizing::new([0u8; KEY_LEN]);
        rng.fill(&mut secret[..]);
        Keypair::from_secret(*secret)
    }

    /// The pair whose secret half is `secret`.
    pub fn from_secret(secret: [u8; KEY_LEN]) -> Keypair {
        let mut dh = DefaultResolver
            .resolve_dh(&DHChoice::Curve25519)
            .expect("the default resolver has X25519");
        dh.set(&secret);
        let public = PublicKey(dh.pubkey().try_into().expect("32-byte public key"));
        Keypair {
            secret: Zeroizing::new(secret),
            public,
        }
    }

    /// Reads the secret half from 64 hex digits (a key file's content).
    pub fn from_secret_hex(s: &str) -> Result<Keypair, KeyError> {
        Ok(Keypair::from_secret(*Zeroizing::new(parse_hex(s)?)))
    }

    /// The secret half as 64 hex digits, for a key file.
    pub fn secret_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(self.secret.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The public half, which peers pin (a server's) or allow (a client's).
    pub fn public(&self) -> PublicKey {
        self.public
    }

    pub(crate) fn secret(&self) -> &[u8; KEY_LEN] {
        &self.secret
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_hex() {
        let k = Keypair::generate([7; 32]);
        let again = Keypair::from_secret_hex(&k.secret_hex()).unwrap();
        assert_eq!(again, k);
        let public: PublicKey = k.public().to_string().parse().unwrap();
        assert_eq!(public, k.public());
        assert_ne!(Keypair::generate([8; 32]).public(), k.public());
        assert!(!format!("{k:?}").contains(k.secret_hex().as_str()));
        assert_eq!("abc".parse::<PublicKey>(), Err(KeyError::Format));
        assert_eq!("zz".repeat(32).parse::<PublicKey>(), Err(KeyError::Format));
    }
}
