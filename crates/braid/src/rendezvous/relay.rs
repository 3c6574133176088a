//! A rendezvous relay on a real socket: the core's
//! [`braid_proto::rendezvous::Server`] decides, this task receives, answers
//! and forwards. A batch of datagrams from one peer (GRO) goes on to the
//! other as one batch (GSO), with its ECN mark. Ends whose UDP is blocked
//! reach it over TCP on the same port ([`super::relay_tcp`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_proto::rendezvous::{Server, ServerConfig, ServerStats};
use quinn_udp::RecvMeta;

use super::relay_tcp::{self, TcpEnds, TcpOptions, TcpStats};
use crate::endpoint::lock;
use crate::udp::{self, UdpIo, RECV_BATCH, RECV_BUFFER};
use crate::{clock, Error, Result};

/// How often lapsed registrations and idle pairs are dropped.
const EXPIRE_EVERY: Duration = Duration::from_secs(1);

/// A running rendezvous relay. Dropping it stops its task and closes its socket.
#[derive(Debug)]
pub struct RendezvousRelay {
    server: Arc<Mutex<Server>>,
    local: SocketAddr,
    tcp_local: Option<SocketAddr>,
    tcp: Arc<TcpEnds>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for RendezvousRelay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Tries of a free port for UDP and TCP both, when asked for port 0.
const PORT_TRIES: usize = 16;

impl RendezvousRelay {
    /// Binds `listen` for UDP, and for TCP at the same IP and port, and
    /// serves with the bounds of `cfg`. Needs a tokio runtime.
    pub fn start(listen: SocketAddr, cfg: ServerConfig) -> Result<RendezvousRelay> {
        RendezvousRelay::start_with(listen, cfg, Some(TcpOptions::default()))
    }

    /// As [`RendezvousRelay::start`], with TCP as `tcp` says (`None`: UDP only).
    pub fn start_with(
        listen: SocketAddr,
        cfg: ServerConfig,
        tcp: Option<TcpOptions>,
    ) -> Result<RendezvousRelay> {
        let cannot = |e: &std::io::Error| Error::io(format!("cannot listen on {listen}"), e);
        let mut tries = 0;
        let (io, listener) = loop {
            let io = UdpIo::bind(listen, udp::DEFAULT_SOCKET_BUFFER).map_err(|e| cannot(&e))?;
            let Some(opts) = &tcp else {
                break (io, None);
            };
            let at = opts.listen.unwrap_or(io.local_addr());
            match relay_tcp::bind(at) {
                Ok(l) => break (io, Some(l)),
                // Port 0 gave UDP a port whose TCP twin is taken: another.
                Err(e) if listen.port() == 0 && opts.listen.is_none() && tries < PORT_TRIES => {
                    tries += 1;
                    let _ = e;
                }
                Err(e) => return Err(Error::io(format!("cannot listen on TCP {at}"), &e)),
            }
        };
        let io = Arc::new(io);
        let local = io.local_addr();
        let tcp_local = listener.as_ref().and_then(|l| l.local_addr().ok());
        let server = Arc::new(Mutex::new(Server::new(cfg, crate::endpoint::os_seed())));
        let ends = Arc::new(TcpEnds::new(tcp.unwrap_or_default()));
        let mut tasks = vec![tokio::spawn(serve(
            io.clone(),
            server.clone(),
            ends.clone(),
        ))];
        if let Some(listener) = listener {
            let accept = relay_tcp::accept(listener, ends.clone(), server.clone(), io);
            tasks.push(tokio::spawn(accept));
        }
        Ok(RendezvousRelay {
            server,
            local,
            tcp_local,
            tcp: ends,
            tasks,
        })
    }

    /// The address clients reach the relay at.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address ends whose UDP is blocked reach it at over TCP, if it
    /// listens there.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_local
    }

    /// What its TCP side did so far.
    pub fn tcp_stats(&self) -> TcpStats {
        self.tcp.stats()
    }

    /// Counters and table sizes so far.
    pub fn stats(&self) -> ServerStats {
        lock(&self.server).stats()
    }
}

/// Consecutive datagrams of one received buffer that go to the same peer:
/// one GSO send.
struct Run {
    to: SocketAddr,
    ecn: braid_proto::Ecn,
    buffer: usize,
    start: usize,
    end: usize,
    stride: usize,
}

async fn serve(io: Arc<UdpIo>, server: Arc<Mutex<Server>>, tcp: Arc<TcpEnds>) {
    let mut storage = vec![0u8; RECV_BATCH * RECV_BUFFER];
    let mut meta = [RecvMeta::default(); RECV_BATCH];
    let mut replies = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    let mut expire = tokio::time::interval(EXPIRE_EVERY);
    loop {
        let received = tokio::select! {
            r = io.recv_into(&mut storage, &mut meta) => r,
            _ = expire.tick() => {
                lock(&server).expire(clock::now());
                tcp.expire(clock::now());
                continue;
            }
        };
        let Ok(n) = received else {
            // ICMP reports of earlier sends and the like.
            continue;
        };
        let now = clock::now();
        {
            let mut s = lock(&server);
            for (i, m) in meta.iter().enumerate().take(n) {
                if tcp.clashes(m.addr) {
                    continue;
                }
                let buf = &storage[i * RECV_BUFFER..i * RECV_BUFFER + m.len];
                let stride = if m.stride == 0 { m.len } else { m.stride }.max(1);
                let ecn = udp::from_codepoint(m.ecn);
                for (k, datagram) in buf.chunks(stride).enumerate() {
                    let Some(to) = s.handle(now, m.addr, datagram, &mut replies) else {
                        continue;
                    };
                    let start = k * stride;
                    let end = start + datagram.len();
                    match runs.last_mut() {
                        // The next datagram of the run's buffer, to the same peer.
                        Some(r) if r.to == to && r.buffer == i && r.end == start => r.end = end,
                        _ => runs.push(Run {
                            to,
                            ecn,
                            buffer: i,
                            start,
                            end,
                            stride,
                        }),
                    }
                }
            }
        }
        for (to, bytes) in replies.drain(..) {
            if !tcp.try_send(to, &bytes, None) {
                let _ = io.try_send_to(to, &bytes);
            }
        }
        for r in runs.drain(..) {
            let base = r.buffer * RECV_BUFFER;
            let contents = &storage[base + r.start..base + r.end];
            if tcp.try_send(r.to, contents, Some(r.stride)) {
                continue;
            }
            // A refused send is loss the peers' congestion control handles.
            let _ = io.send(r.to, r.ecn, contents, Some(r.stride)).await;
        }
    }
}
