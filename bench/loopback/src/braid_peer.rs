//! braid through its library API, as an application would use it: default
//! `SessionConfig`, sealed (`Security::server` / `Security::pinned`) or
//! `Security::insecure()` on both sides, one connection.

use crate::measure::PeerStats;
use crate::peer;
use anyhow::{Context, Result};
use braid::{connect, Listener, PathSpec, PublicKey, Security, SessionConfig, SessionStats};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How long a finished session may take to drain before the child exits
/// anyway; outside the goodput clock.
const DRAIN: Duration = Duration::from_secs(5);

fn config(security: Security) -> SessionConfig {
    SessionConfig {
        security,
        ..SessionConfig::default()
    }
}

pub async fn serve(sealed: bool, bytes: u64) -> Result<PeerStats> {
    let (security, extra) = if sealed {
        let key = braid::random_keypair();
        let public = key.public().to_string();
        (Security::server(key), public)
    } else {
        (Security::insecure(), "-".to_string())
    };
    let listener = Listener::bind(([127, 0, 0, 1], 0).into(), config(security))?;
    peer::announce(listener.local_addr().port(), &extra);
    let mut s = listener.accept().await?;
    let t0 = Instant::now();
    let got = peer::receive(&mut s).await?;
    let wall = t0.elapsed();
    let stats = s.stats();
    // Drain, so the sender's end sees a clean close rather than an abort.
    let _ = tokio::time::timeout(DRAIN, s.ended()).await;
    drop(s);
    drop(listener);
    peer::expect(got, bytes)?;
    Ok(peer_stats(got, wall, &stats))
}

pub async fn send(sealed: bool, addr: SocketAddr, extra: &str, bytes: u64) -> Result<PeerStats> {
    let security = if sealed {
        let public: PublicKey = extra.parse().context("receiver's public key")?;
        Security::pinned(public)
    } else {
        Security::insecure()
    };
    let cfg = config(security);
    let t0 = Instant::now();
    let mut s = connect(&[PathSpec::to(addr)], cfg).await?;
    // shutdown() inside returns once all is acknowledged; the reply then
    // confirms the receiving application read it all.
    peer::send(&mut s, bytes).await?;
    let wall = t0.elapsed();
    let stats = s.stats();
    let _ = tokio::time::timeout(DRAIN, s.ended()).await;
    Ok(peer_stats(bytes, wall, &stats))
}

fn peer_stats(bytes: u64, wall: Duration, stats: &SessionStats) -> PeerStats {
    // braid_proto::PathStats is not re-exported by braid; sum in place.
    let tx = stats.paths.iter().map(|(_, p)| p.packets_sent).sum();
    let rx = stats.paths.iter().map(|(_, p)| p.packets_received).sum();
    PeerStats {
        bytes,
        wall_s: wall.as_secs_f64(),
        datagrams_tx: Some(tx),
        datagrams_rx: Some(rx),
        tx_ios: None,
        rx_ios: None,
        losses: Some(stats.retransmitted),
    }
}
