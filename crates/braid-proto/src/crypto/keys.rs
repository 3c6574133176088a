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
    let mut out = [0u8; KEY_LEN];
    parse_hex_into(s, &mut out)?;
    Ok(out)
}

/// Parses 64 hex digits into `out` (which may be a secret's wiped buffer).
fn parse_hex_into(s: &str, out: &mut [u8; KEY_LEN]) -> Result<(), KeyError> {
    let s = s.trim();
    if s.len() != 2 * KEY_LEN || !s.is_ascii() {
        return Err(KeyError::Format);
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| KeyError::Format)?;
    }
    Ok(())
}

/// A static key pair. The secret half lives in a [`Zeroizing`] buffer, so
/// it is wiped from memory when the pair (or a clone) is dropped, and it is
/// never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Keypair {
    secret: Zeroizing<[u8; KEY_LEN]>,
    public: PublicKey,
}

/// Its only secret, `secret`, is a `Zeroizing` buffer.
impl zeroize::ZeroizeOnDrop for Keypair {}

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
        Keypair::with_secret(secret)
    }

    /// The pair whose secret half is `secret`. The caller's array is a
    /// copy this pair cannot wipe; prefer [`Keypair::from_secret_hex`] or
    /// wipe it after.
    pub fn from_secret(secret: [u8; KEY_LEN]) -> Keypair {
        Keypair::with_secret(Zeroizing::new(secret))
    }

    /// The pair around a secret already in a wiped buffer (no copy made).
    fn with_secret(secret: Zeroizing<[u8; KEY_LEN]>) -> Keypair {
        let mut dh = DefaultResolver
            .resolve_dh(&DHChoice::Curve25519)
            .expect("the default resolver has X25519");
        dh.set(&secret[..]);
        let public = PublicKey(dh.pubkey().try_into().expect("32-byte public key"));
        Keypair { secret, public }
    }

    /// Reads the secret half from 64 hex digits (a key file's content),
    /// straight into the wiped buffer.
    pub fn from_secret_hex(s: &str) -> Result<Keypair, KeyError> {
        let mut secret = Zeroizing::new([0u8; KEY_LEN]);
        parse_hex_into(s, &mut secret)?;
        Ok(Keypair::with_secret(secret))
    }

    /// The secret half as 64 hex digits, for a key file; written into one
    /// allocation that is wiped on drop, with room for a final newline.
    pub fn secret_hex(&self) -> Zeroizing<String> {
        use std::fmt::Write as _;
        let mut hex = Zeroizing::new(String::with_capacity(2 * KEY_LEN + 1));
        for b in self.secret.iter() {
            let _ = write!(hex, "{b:02x}");
        }
        hex
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
        assert_eq!(
            Keypair::from_secret_hex(&"zz".repeat(32)),
            Err(KeyError::Format)
        );
    }

    #[test]
    fn a_secret_is_wiped_on_drop() {
        fn wiped_on_drop<T: zeroize::ZeroizeOnDrop>() {}
        wiped_on_drop::<Keypair>();
        let k = Keypair::generate([9; 32]);
        let hex = k.secret_hex();
        assert_eq!(hex.len(), 2 * KEY_LEN);
        assert!(hex.capacity() > hex.len(), "room for a newline, no copy");
        assert_eq!(Keypair::from_secret(*k.secret()), k);
    }
}
