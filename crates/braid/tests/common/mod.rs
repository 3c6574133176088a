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

/// The process's resident memory, from /proc (0 where there is none).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
