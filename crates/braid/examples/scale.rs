//! Many sessions on one listener: what an idle session costs the server,
//! and many transfers at once.
//!
//! ```sh
//! cargo run --release -p braid --example scale -- idle 10000
//! cargo run --release -p braid --example scale -- transfers 1000
//! ```
//!
//! The listener runs in this process and the clients in a child process
//! (this program again), so the memory printed is the server's alone:
//! resident memory after the sessions are up, minus before, per session.
//! Sessions are sealed (pinned key) on one current_thread runtime per side;
//! `SERVER_THREADS=2` runs the listener's side on two worker threads.

use braid::{Endpoint, Listener, Security, SessionConfig};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TRANSFER: usize = 1 << 20;

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // SERVER_THREADS=2: the listener's side on a 2-worker runtime, to see
    // what a second core buys (the clients stay on one thread).
    let threads: usize = std::env::var("SERVER_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let rt = if threads > 1 && args.first().is_some_and(|a| a != "clients") {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [mode @ ("idle" | "transfers"), n] => rt.block_on(server(mode, n.parse()?)),
        ["clients", mode, n, addr, key] => {
            rt.block_on(clients(mode, n.parse()?, addr.parse()?, key))
        }
        _ => anyhow::bail!("usage: scale idle N | scale transfers N"),
    }
}

async fn server(mode: &str, n: usize) -> anyhow::Result<()> {
    let key = braid::random_keypair();
    let public = key.public().to_string();
    let cfg = SessionConfig {
        security: Security::server(key),
        ..SessionConfig::default()
    };
    let listener = Listener::bind(([127, 0, 0, 1], 0).into(), cfg)?;
    let addr = listener.local_addr();
    let before = rss();
    let started = Instant::now();
    let mut child = Command::new(std::env::current_exe()?)
        .args(["clients", mode, &n.to_string(), &addr.to_string(), &public])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut sessions = Vec::with_capacity(n);
    let mut handlers = Vec::new();
    for _ in 0..n {
        let mut s = tokio::time::timeout(Duration::from_secs(60), listener.accept())
            .await
            .map_err(|_| anyhow::anyhow!("no session for 60 s"))??;
        if mode == "idle" {
            sessions.push(s);
        } else {
            handlers.push(tokio::spawn(async move {
                let mut got = Vec::with_capacity(TRANSFER);
                s.read_to_end(&mut got).await?;
                s.write_all(blake3::hash(&got).as_bytes()).await?;
                s.shutdown().await?;
                anyhow::Ok(got.len())
            }));
        }
    }
    let accepted = started.elapsed();
    if mode == "idle" {
        // Let handshake leftovers and first keep-alives settle.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let grown = rss().saturating_sub(before);
        println!(
            "{n} idle sessions accepted in {:.2} s; server memory +{:.1} MB, {:.1} KB per session",
            accepted.as_secs_f64(),
            grown as f64 / 1e6,
            grown as f64 / n as f64 / 1024.0
        );
    } else {
        let mut bytes = 0;
        for h in handlers {
            bytes += h.await??;
        }
        println!(
            "{n} concurrent transfers of 1 MiB received in {:.2} s ({} bytes); server memory +{:.1} MB at the end",
            started.elapsed().as_secs_f64(),
            bytes,
            rss().saturating_sub(before) as f64 / 1e6
        );
    }
    // Tell the clients we are done; they report what they verified.
    drop(child.stdin.take());
    let out = BufReader::new(child.stdout.take().expect("piped"));
    for line in out.lines() {
        println!("{}", line?);
    }
    child.wait()?;
    drop(sessions);
    Ok(())
}

async fn clients(mode: &str, n: usize, to: SocketAddr, key: &str) -> anyhow::Result<()> {
    let cfg = SessionConfig {
        security: Security::pinned(key.parse()?),
        ..SessionConfig::default()
    };
    // One socket for all: sessions are told apart by their ids.
    let endpoint = Endpoint::bind(([127, 0, 0, 1], 0).into())?;
    // A listener keeps at most 16 half-open handshakes per source address
    // (a flood defence): from one address, open a few at a time.
    let opening = std::sync::Arc::new(tokio::sync::Semaphore::new(8));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let (endpoint, cfg) = (endpoint.clone(), cfg.clone());
        let mode = mode.to_string();
        let opening = opening.clone();
        tasks.push(tokio::spawn(async move {
            let permit = opening.acquire_owned().await?;
            let mut s = endpoint.connect(&[to], cfg).await?;
            drop(permit);
            if mode == "idle" {
                return anyhow::Ok((true, s));
            }
            let data: Vec<u8> = (0..TRANSFER).map(|j| ((i * 7 + j) % 253) as u8).collect();
            s.write_all(&data).await?;
            s.shutdown().await?;
            let mut echo = Vec::new();
            s.read_to_end(&mut echo).await?;
            anyhow::Ok((echo == blake3::hash(&data).as_bytes(), s))
        }));
    }
    let mut verified = 0;
    let mut failed = 0;
    let mut open = Vec::new();
    for t in tasks {
        match t.await? {
            Ok((ok, s)) => {
                verified += usize::from(ok);
                open.push(s);
            }
            Err(e) => {
                failed += 1;
                if failed == 1 {
                    eprintln!("first failure: {e:#}");
                }
            }
        }
    }
    let what = if mode == "idle" {
        "connected"
    } else {
        "verified"
    };
    let line = format!(
        "clients: {verified} of {n} {what} ({failed} failed) in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    // Hold idle sessions open until the server has measured.
    let mut stdin = String::new();
    let _ = tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut stdin)).await;
    println!("{line}");
    std::io::stdout().flush()?;
    Ok(())
}
