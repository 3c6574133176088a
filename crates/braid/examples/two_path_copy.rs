//! Copies a file over two paths at once, each through its own emulated
//! link (an emulator in this process), and checks the copy.
//!
//! ```sh
//! cargo run --release --example two_path_copy -- SOURCE DEST
//! ```

use braid::{connect, Emulator, EmulatorConfig, Listener, PathSpec, Security, SessionConfig};
use braid_link::{LinkConfig, Rate};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, dest] = &args[..] else {
        anyhow::bail!("usage: two_path_copy SOURCE DEST");
    };
    let data = tokio::fs::read(source).await?;
    let localhost: SocketAddr = ([127, 0, 0, 1], 0).into();

    // The receiver's key pair, pinned by the sender.
    let key = braid::random_keypair();
    let pinned = SessionConfig {
        security: Security::pinned(key.public()),
        ..SessionConfig::default()
    };
    let listener = Listener::bind(
        localhost,
        SessionConfig {
            security: Security::server(key),
            ..SessionConfig::default()
        },
    )?;
    let server = listener.local_addr();
    // A fast short path and a slow long one, as Wi-Fi and LTE might be.
    let fast = Emulator::start(EmulatorConfig::new(
        localhost,
        server,
        LinkConfig::new(Rate::mbit(40), Duration::from_millis(10)),
    ))?;
    let slow = Emulator::start(EmulatorConfig::new(
        localhost,
        server,
        LinkConfig::new(Rate::mbit(10), Duration::from_millis(40)),
    ))?;

    let dest = dest.clone();
    let receiver = tokio::spawn(async move {
        let mut session = listener.accept().await?;
        let mut got = Vec::new();
        session.read_to_end(&mut got).await?;
        tokio::fs::write(&dest, &got).await?;
        session.write_all(blake3::hash(&got).as_bytes()).await?;
        session.shutdown().await?;
        anyhow::Ok(())
    });

    let started = Instant::now();
    let paths = [
        PathSpec::to(fast.local_addr()),
        PathSpec::to(slow.local_addr()),
    ];
    let mut session = connect(&paths, pinned).await?;
    session.write_all(&data).await?;
    session.shutdown().await?;
    let mut hash = Vec::new();
    session.read_to_end(&mut hash).await?;
    receiver.await??;
    anyhow::ensure!(
        hash == blake3::hash(&data).as_bytes(),
        "the copy differs from the source"
    );
    let secs = started.elapsed().as_secs_f64();
    println!(
        "copied {} bytes in {secs:.2} s ({:.1} Mbit/s), verified",
        data.len(),
        data.len() as f64 * 8.0 / secs / 1e6
    );
    for (id, p) in session.stats().paths {
        println!(
            "  path {id}: {} stream bytes, sRTT {:?}",
            p.stream_bytes_acked, p.srtt
        );
    }
    Ok(())
}
