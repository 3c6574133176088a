//! How a one-time-code client that found the server's answer wrong says
//! so at once. Its opening carries a commitment (SHA-256) to a random
//! secret; giving up, it sends the secret in a clear CLOSE. The server
//! ends the half-open session only if the secret matches, so whoever saw
//! the opening (or anyone else) cannot end a handshake it did not make;
//! a client that sends nothing leaves the session to expire as before.
//! The wrong guess is then counted, and reported, a round trip after the
//! answer instead of when the half-open session times out.

use ring::digest;
use std::fmt::Write as _;

/// Bytes of the commitment a code opening carries after its date.
pub(crate) const COMMITMENT_LEN: usize = 32;

/// The secret a code client reveals when it gives up, as CLOSE reason text.
#[derive(Debug, Clone)]
pub(in crate::session) struct GiveUp {
    secret: String,
}

impl GiveUp {
    /// The secret of a session seeded with `seed` (secret and random),
    /// derived apart from the session's random stream, which it leaves
    /// as it was.
    pub fn from_seed(seed: &[u8; 32]) -> GiveUp {
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(b"braid code give-up secret v1\0");
        ctx.update(seed);
        GiveUp::new(
            ctx.finish()
                .as_ref()
                .try_into()
                .expect("SHA-256 is 32 bytes"),
        )
    }

    /// A secret from 32 random bytes.
    pub fn new(random: [u8; 32]) -> GiveUp {
        let mut secret = String::with_capacity(64);
        for b in random {
            let _ = write!(secret, "{b:02x}");
        }
        GiveUp { secret }
    }

    /// What the opening carries.
    pub fn commitment(&self) -> [u8; COMMITMENT_LEN] {
        commitment_of(self.secret.as_bytes())
    }

    /// The CLOSE's reason text.
    pub fn secret(&self) -> &str {
        &self.secret
    }
}

/// The commitment to `secret`: SHA-256 with a label of its own.
pub(in crate::session) fn commitment_of(secret: &[u8]) -> [u8; COMMITMENT_LEN] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(b"braid code give-up v1\0");
    ctx.update(secret);
    ctx.finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 is 32 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_secret_opens_its_commitment() {
        let g = GiveUp::new([7; 32]);
        assert_eq!(commitment_of(g.secret().as_bytes()), g.commitment());
        assert_ne!(
            commitment_of(GiveUp::new([8; 32]).secret().as_bytes()),
            g.commitment()
        );
        assert_ne!(commitment_of(&g.commitment()), g.commitment());
    }
}
