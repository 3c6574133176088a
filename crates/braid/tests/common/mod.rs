//! What the runtime's tests share.
#![allow(dead_code)]

use braid::{Keypair, Security, Session, SessionConfig};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// `len` bytes that differ from one offset to the next.
pub fn content(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 13) as u8)
        .collect()
}

/// Writes `data` in pieces of `piece` bytes, `pause` apart (time for
/// whatever the test does meanwhile), ends the stream and reads back the
/// peer's answer: the hash [`answer_with_hash`] sends.
pub async fn send_in_pieces(
    s: &mut Session,
    data: &[u8],
    piece: usize,
    pause: Duration,
) -> Vec<u8> {
    for chunk in data.chunks(piece) {
        s.write_all(chunk).await.unwrap();
        tokio::time::sleep(pause).await;
    }
    s.shutdown().await.unwrap();
    let mut hash = Vec::new();
    s.read_to_end(&mut hash).await.unwrap();
    hash
}

/// Reads the peer's stream to its end and answers with its BLAKE3;
/// returns what it read. The caller ends its own direction.
pub async fn answer_with_hash(s: &mut Session) -> std::io::Result<Vec<u8>> {
    let mut got = Vec::new();
    s.read_to_end(&mut got).await?;
    s.write_all(blake3::hash(&got).as_bytes()).await?;
    Ok(got)
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

/// A code both ends of the rendezvous tests meet under.
pub const CODE: &str = "417-amber-walrus";

/// A session secured by [`CODE`], patient enough for a busy machine.
pub fn code_cfg() -> SessionConfig {
    SessionConfig {
        security: braid::Security::code(CODE),
        handshake_timeout: std::time::Duration::from_secs(10),
        ..SessionConfig::default()
    }
}

/// Receives one stream on `listener` and answers with its length.
pub fn receive(listener: braid::Listener) -> tokio::task::JoinHandle<anyhow::Result<Vec<u8>>> {
    tokio::spawn(async move {
        let mut s = listener.accept().await?;
        let mut got = Vec::new();
        s.read_to_end(&mut got).await?;
        s.write_all(&(got.len() as u64).to_be_bytes()).await?;
        s.shutdown().await?;
        Ok(got)
    })
}
