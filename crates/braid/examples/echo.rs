//! An echo server and client over braid.
//!
//! ```sh
//! cargo run --example echo -- server 127.0.0.1:7000
//! cargo run --example echo -- client 127.0.0.1:7000 "hello, braid"
//! ```

use braid::{connect, Listener, PathSpec, SessionConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["server", addr] => server(addr.parse()?).await,
        ["client", addr, text] => client(addr.parse()?, text).await,
        _ => anyhow::bail!("usage: echo server ADDR | echo client ADDR TEXT"),
    }
}

/// Echoes every session's stream back to it, many sessions at once.
async fn server(addr: SocketAddr) -> anyhow::Result<()> {
    let listener = Listener::bind(addr, SessionConfig::default())?;
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

async fn client(addr: SocketAddr, text: &str) -> anyhow::Result<()> {
    let mut session = connect(&[PathSpec::to(addr)], SessionConfig::default()).await?;
    session.write_all(text.as_bytes()).await?;
    session.shutdown().await?;
    let mut echoed = String::new();
    session.read_to_string(&mut echoed).await?;
    println!("{echoed}");
    // Acknowledge the server's last packets before the process exits.
    let _ = tokio::time::timeout(Duration::from_millis(200), session.closed()).await;
    Ok(())
}
