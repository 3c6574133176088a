//! Kernel TCP through tokio: the baseline for what loopback allows with
//! segmentation, checksums and acknowledgements done in the kernel.

use crate::measure::PeerStats;
use crate::peer;
use anyhow::Result;
use std::net::SocketAddr;
use std::time::Instant;
use tokio::net::{TcpListener, TcpStream};

pub async fn serve(bytes: u64) -> Result<PeerStats> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    peer::announce(listener.local_addr()?.port(), "-");
    let (mut s, _) = listener.accept().await?;
    let t0 = Instant::now();
    let got = peer::receive(&mut s).await?;
    peer::expect(got, bytes)?;
    Ok(PeerStats {
        bytes: got,
        wall_s: t0.elapsed().as_secs_f64(),
        ..PeerStats::default()
    })
}

pub async fn send(addr: SocketAddr, bytes: u64) -> Result<PeerStats> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(addr).await?;
    peer::send(&mut s, bytes).await?;
    Ok(PeerStats {
        bytes,
        wall_s: t0.elapsed().as_secs_f64(),
        ..PeerStats::default()
    })
}
