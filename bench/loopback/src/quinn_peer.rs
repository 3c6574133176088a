//! quinn (QUIC over rustls with the ring provider) with a self-signed
//! certificate from rcgen, one bidirectional stream. quinn's defaults
//! otherwise, except that no window limits the transfer: stream receive
//! window and send window 16 MiB (as quinn's own `perf` tool lets one set),
//! and the sockets get the same 8 MiB buffers braid asks for. Without
//! `protect` (quinn-plain) the same handshake, then unprotected 1-RTT
//! packets (see `quinn_plain`).

use crate::measure::PeerStats;
use crate::peer::{self, CHUNK};
use crate::quinn_plain;
use anyhow::{anyhow, ensure, Context, Result};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ConnectionStats, Endpoint, EndpointConfig, TokioRuntime, TransportConfig, VarInt};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WINDOW: u32 = 16 << 20;
/// braid's `udp::DEFAULT_SOCKET_BUFFER`, so socket buffers are no difference.
const SOCKET_BUFFER: usize = 8 << 20;
/// How long to wait for the peer's close after the transfer; off the clock.
const LINGER: Duration = Duration::from_secs(5);

fn transport() -> TransportConfig {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(WINDOW));
    t.send_window(u64::from(WINDOW));
    // The connection receive window is unlimited (VarInt::MAX) by default,
    // already above 16 MiB: left as it is.
    t
}

/// A loopback UDP socket with both buffers at SOCKET_BUFFER; as root past
/// the sysctl caps (the FORCE options), as braid does.
fn udp_socket() -> Result<std::net::UdpSocket> {
    use std::os::fd::AsRawFd;
    let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let want = SOCKET_BUFFER as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let set = |opt| {
            // SAFETY: a valid socket fd and a live c_int of the length passed.
            unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&want as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            }
        };
        if set(force) != 0 {
            set(plain); // not root: as much as the sysctl cap allows
        }
    }
    Ok(sock)
}

fn endpoint(server: Option<quinn::ServerConfig>) -> Result<Endpoint> {
    Ok(Endpoint::new(
        EndpointConfig::default(),
        server,
        udp_socket()?,
        Arc::new(TokioRuntime),
    )?)
}

pub async fn serve(protect: bool, bytes: u64) -> Result<PeerStats> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
    let der = cert.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let mut cfg = quinn::ServerConfig::with_single_cert(vec![der.clone()], key.into())?;
    if !protect {
        cfg.crypto = Arc::new(quinn_plain::ServerConfig(cfg.crypto.clone()));
    }
    cfg.transport_config(Arc::new(transport()));
    let ep = endpoint(Some(cfg))?;
    peer::announce(ep.local_addr()?.port(), &hex(&der));

    let incoming = ep.accept().await.context("endpoint closed")?;
    let conn = incoming.await?;
    let (mut send, mut recv) = conn.accept_bi().await?;
    let t0 = Instant::now();
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while let Some(n) = recv.read(&mut buf).await? {
        got += n as u64;
    }
    send.write_all(&got.to_le_bytes()).await?;
    send.finish()?;
    let wall = t0.elapsed();
    // The sender closes once it has the reply; closing first could cut the
    // reply off.
    let _ = tokio::time::timeout(LINGER, conn.closed()).await;
    let stats = conn.stats();
    ep.close(VarInt::from_u32(0), b"done");
    peer::expect(got, bytes)?;
    Ok(peer_stats(got, wall, &stats))
}

pub async fn send(protect: bool, addr: SocketAddr, extra: &str, bytes: u64) -> Result<PeerStats> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(unhex(extra)?))?;
    let tls: Arc<dyn quinn::crypto::ClientConfig> = Arc::new(tls_client(roots)?);
    let mut cfg = quinn::ClientConfig::new(match protect {
        true => tls,
        false => Arc::new(quinn_plain::ClientConfig(tls)),
    });
    cfg.transport_config(Arc::new(transport()));
    let mut ep = endpoint(None)?;
    ep.set_default_client_config(cfg);

    let t0 = Instant::now();
    let conn = ep.connect(addr, "localhost")?.await?;
    let (mut send, mut recv) = conn.open_bi().await?;
    let chunk = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        send.write_all(&chunk[..n]).await?;
        left -= n as u64;
    }
    send.finish()?;
    let reply = recv.read_to_end(64).await?;
    let wall = t0.elapsed();
    let stats = conn.stats();
    conn.close(VarInt::from_u32(0), b"done");
    let _ = tokio::time::timeout(LINGER, ep.wait_idle()).await;
    peer::check_reply(&reply, bytes)?;
    Ok(peer_stats(bytes, wall, &stats))
}

/// What `quinn::ClientConfig::with_root_certificates` builds (ring provider,
/// TLS 1.3 only, early data on), spelled out because quinn keeps a
/// `ClientConfig`'s crypto private and quinn-plain has to wrap it.
fn tls_client(roots: rustls::RootCertStore) -> Result<QuicClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.enable_early_data = true;
    Ok(QuicClientConfig::try_from(tls)?)
}

fn peer_stats(bytes: u64, wall: Duration, stats: &ConnectionStats) -> PeerStats {
    PeerStats {
        bytes,
        wall_s: wall.as_secs_f64(),
        datagrams_tx: Some(stats.udp_tx.datagrams),
        datagrams_rx: Some(stats.udp_rx.datagrams),
        tx_ios: Some(stats.udp_tx.ios),
        rx_ios: Some(stats.udp_rx.ios),
        losses: Some(stats.path.lost_packets),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>> {
    ensure!(s.len().is_multiple_of(2), "odd-length hex");
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(s.get(i..i + 2).ok_or_else(|| anyhow!("not hex"))?, 16)
                .map_err(|e| anyhow!("certificate hex: {e}"))
        })
        .collect()
}
