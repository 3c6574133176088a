//! A rendezvous relay on a real socket: the core's
//! [`braid_proto::rendezvous::Server`] decides, this task receives, answers
//! and forwards. A batch of datagrams from one peer (GRO) goes on to the
//! other as one batch (GSO), with its ECN mark.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_proto::rendezvous::{Server, ServerConfig, ServerStats};
use quinn_udp::RecvMeta;

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
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RendezvousRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RendezvousRelay {
    /// Binds `listen` and serves with the bounds of `cfg`. Needs a tokio runtime.
    pub fn start(listen: SocketAddr, cfg: ServerConfig) -> Result<RendezvousRelay> {
        let io = UdpIo::bind(listen, udp::DEFAULT_SOCKET_BUFFER)
            .map_err(|e| Error::io(format!("cannot listen on {listen}"), &e))?;
        let local = io.local_addr();
        let server = Arc::new(Mutex::new(Server::new(cfg, crate::endpoint::os_seed())));
        let task = tokio::spawn(serve(Arc::new(io), server.clone()));
        Ok(RendezvousRelay {
            server,
            local,
            task,
        })
    }

    /// The address clients reach the relay at.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
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

async fn serve(io: Arc<UdpIo>, server: Arc<Mutex<Server>>) {
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
            let _ = io.try_send_to(to, &bytes);
        }
        for r in runs.drain(..) {
            let base = r.buffer * RECV_BUFFER;
            let contents = &storage[base + r.start..base + r.end];
            // A refused send is loss the peers' congestion control handles.
            let _ = io.send(r.to, r.ecn, contents, Some(r.stride)).await;
        }
    }
}
