//! Rendezvous: how two peers that cannot reach each other's address (both
//! behind NATs or firewalls) meet at a relay anyone can run, learn their
//! public addresses, punch a direct path, and keep the relay as a path of
//! the same session. The protocol is in docs/reach.md.
//!
//! Both the relay ([`Server`]) and each end's side of the meeting
//! ([`Client`]) are sans-IO state machines here, so the runtime, the
//! simulator and the fuzzers run the same decisions.
//!
//! The relay pairs two clients by a public handle: the digest of a code's
//! nameplate (its number, never its words) or of a receiver's public key.
//! It tells each the address it sees the other at (STUN-like, RFC 8489)
//! and forwards datagrams between the two addresses of a pair, and only
//! those (TURN-like, RFC 8656, but paired, never an open proxy). The
//! session on top is sealed end to end: the relay sees ciphertext, and
//! the handshake binds the two ends, not the relay.

mod carrier;
mod client;
mod hosts;
mod opening;
mod punch;
mod seal;
mod server;
pub mod wire;

pub use carrier::{Carrier, TCP_AFTER, UDP_PROBE};
pub use client::{
    host_candidates, same_addr, Client, Event, Role, FIRST_RETRY, MAX_RETRY, REFRESH,
    SILENT_REFRESH,
};
pub use opening::{Found, Opening, DIRECT_GRACE, OTHER_RELAYS_GRACE};
pub use punch::{Puncher, PUNCH_FOR, PUNCH_INTERVAL};
pub use server::{Handle, Refusals, Server, ServerConfig, ServerStats, REPLACE_AFTER};

pub use wire::{is_rendezvous, Message, Refusal, MAX_CANDIDATES};

use crate::PublicKey;
use ring::digest;

/// The handle of a one-time code: its nameplate, the number before the
/// first dash (the words stay secret; the number is public by design, as
/// in magic-wormhole). `code` is normalised first.
pub fn code_handle(code: &str) -> Handle {
    let code = crate::crypto::normalize_code(code);
    let nameplate = code.split('-').next().unwrap_or_default();
    handle(b"code", nameplate.as_bytes())
}

/// The handle of a receiver's public key.
pub fn key_handle(key: &PublicKey) -> Handle {
    handle(b"key", &key.0)
}

fn handle(kind: &[u8], value: &[u8]) -> Handle {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(b"braid rendezvous handle v1\0");
    ctx.update(kind);
    ctx.update(b"\0");
    ctx.update(value);
    ctx.finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 is 32 bytes")
}

#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod carrier_tests;
#[cfg(test)]
mod tests;
