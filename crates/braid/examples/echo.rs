//! An echo server and client over braid.
//!
//! ```sh
//! cargo run --example echo -- server 127.0.0.1:7000 secret-code
//! cargo run --example echo -- client 127.0.0.1:7000 secret-code "hello, braid"
//! ```
//!
//! Both sides know a one-time code, which a PAKE turns into the session's
//! keys; see `braid keygen` and `Security::pinned` for long-term keys.

use braid::{connect, Listener, PathSpec, Security, SessionConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["server", addr, code] => server(addr.parse()?, with_code(code)).await,
        ["client", addr, code, text] => client(addr.parse()?, with_code(code), text).await,
        _ => anyhow::bail!("usage: echo server ADDR CODE | echo client ADDR CODE TEXT"),
    }
}

fn with_code(code: &str) -> SessionConfig {
    SessionConfig {
        security: Security::code(code),
        ..SessionConfig::default()
    }
}

/// Echoes every session's stream back to it, many sessions at once.
async fn server(addr: SocketAddr, cfg: SessionConfig) -> anyhow::Result<()> {
    let listener = Listener::bind(addr, cfg)?;
    println!("echoing on {}", listener.local_addr());
    loop {
        let session = listener.accept().await?;
        tokio::spawn(async move {
            let id = session.id();
            let (mut rx, mut tx) = tokio::io::split(session);
            let copied = tokio::io::copy(&mut rx, &mut tx).await;
            let _ = tx.shutdown().await;
            println!("session {id:016x}: {copied:?} bytes echoed");
        });
    }
}

async fn client(addr: SocketAddr, cfg: SessionConfig, text: &str) -> anyhow::Result<()> {
    let mut session = connect(&[PathSpec::to(addr)], cfg).await?;
    session.write_all(text.as_bytes()).await?;
    session.shutdown().await?;
    let mut echoed = String::new();
    session.read_to_string(&mut echoed).await?;
    println!("{echoed}");
    // Acknowledge the server's last packets before the process exits.
    let _ = tokio::time::timeout(Duration::from_millis(200), session.closed()).await;
    Ok(())
}
