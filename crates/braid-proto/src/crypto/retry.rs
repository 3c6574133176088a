//! Stateless retry tokens: a server under load answers a handshake with a
//! token that proves, when echoed, that the client receives at its address
//! (QUIC's Retry, WireGuard's cookie). The token is an HMAC-SHA256 (`ring`)
//! of the address, the session id and a coarse time, so checking it needs
//! no state.

use ring::hmac;
use std::net::SocketAddr;

/// Seconds a token stays valid.
pub const RETRY_TOKEN_LIFETIME_S: u64 = 10;
/// Bytes of a token: the issue time, then the MAC.
pub const RETRY_TOKEN_LEN: usize = 8 + 32;

/// A server's secret for retry tokens; fresh per endpoint.
pub struct RetryKey(hmac::Key);

impl std::fmt::Debug for RetryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryKey(..)")
    }
}

fn message(addr: SocketAddr, session_id: u64, issued_s: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(40);
    match addr {
        SocketAddr::V4(a) => m.extend_from_slice(&a.ip().octets()),
        SocketAddr::V6(a) => m.extend_from_slice(&a.ip().octets()),
    }
    m.extend_from_slice(&addr.port().to_be_bytes());
    m.extend_from_slice(&session_id.to_be_bytes());
    m.extend_from_slice(&issued_s.to_be_bytes());
    m
}

impl RetryKey {
    /// A key from 32 random bytes.
    pub fn new(secret: [u8; 32]) -> RetryKey {
        RetryKey(hmac::Key::new(hmac::HMAC_SHA256, &secret))
    }

    /// A token for a client at `addr` opening `session_id`, at `now_s`
    /// (seconds on any clock that only moves forward).
    pub fn token(&self, addr: SocketAddr, session_id: u64, now_s: u64) -> Vec<u8> {
        let tag = hmac::sign(&self.0, &message(addr, session_id, now_s));
        let mut t = now_s.to_be_bytes().to_vec();
        t.extend_from_slice(tag.as_ref());
        t
    }

    /// Whether `token` was issued by this key for `addr` and `session_id`
    /// within the last 10 seconds (`RETRY_TOKEN_LIFETIME_S`).
    pub fn verify(&self, token: &[u8], addr: SocketAddr, session_id: u64, now_s: u64) -> bool {
        if token.len() != RETRY_TOKEN_LEN {
            return false;
        }
        let issued = u64::from_be_bytes(token[..8].try_into().expect("8 bytes"));
        if issued > now_s || now_s - issued > RETRY_TOKEN_LIFETIME_S {
            return false;
        }
        hmac::verify(&self.0, &message(addr, session_id, issued), &token[8..]).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_bind_address_session_and_time() {
        let k = RetryKey::new([3; 32]);
        let a: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let t = k.token(a, 7, 100);
        assert!(k.verify(&t, a, 7, 105));
        assert!(!k.verify(&t, "192.0.2.1:4001".parse().unwrap(), 7, 105));
        assert!(!k.verify(&t, a, 8, 105));
        assert!(!k.verify(&t, a, 7, 100 + RETRY_TOKEN_LIFETIME_S + 1));
        assert!(!RetryKey::new([4; 32]).verify(&t, a, 7, 105));
        let mut forged = t.clone();
        forged[0] ^= 1; // claims another issue time
        assert!(!k.verify(&forged, a, 7, 105));
    }
}
