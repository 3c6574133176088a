//! What the runtime's tests share.
#![allow(dead_code)]

use braid::{Keypair, Security, SessionConfig};

/// The listener's side of a sealed pair: its key pair.
pub fn server_cfg() -> SessionConfig {
    SessionConfig {
        security: Security::server(Keypair::generate([7; 32])),
        ..SessionConfig::default()
    }
}

/// The client's side: the listener's public key, pinned.
pub fn client_cfg() -> SessionConfig {
    SessionConfig {
        security: Security::pinned(Keypair::generate([7; 32]).public()),
        ..SessionConfig::default()
    }
}
