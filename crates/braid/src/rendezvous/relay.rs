//! A rendezvous relay on a real socket: the core's
//! [`braid_proto::rendezvous::Server`] decides, this task receives, answers
//! and forwards. A batch of datagrams from one peer (GRO) goes on to the
//! other as one batch (GSO), with its ECN mark. Ends whose UDP is blocked
//! reach it over TCP on the same port ([`super::relay_tcp`]).
//!
//! With several workers (Linux), each has a socket of its own on the same
//! port (SO_REUSEPORT) and a thread with its own runtime: the kernel
//! spreads the ends over the sockets by address, so a pair's two ends
//! usually land on different workers. They share the core behind one
//! lock, taken once per received batch, and each sends from its own
//! socket: all of them have the relay's address and port.

use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_proto::rendezvous::{Server, ServerConfig, ServerStats};
use quinn_udp::RecvMeta;
use tokio::sync::oneshot;

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
    /// One per worker thread beyond the caller's runtime: dropping it
    /// stops the worker, which closes its socket.
    _stops: Vec<oneshot::Sender<()>>,
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
        RendezvousRelay::start_workers(listen, cfg, tcp, 1)
    }

    /// As [`RendezvousRelay::start_with`], forwarding UDP on `workers`
    /// sockets and threads (see the module's doc; 1 where the system
    /// cannot spread flows over sockets): one task on the caller's
    /// runtime, the others on threads of their own.
    pub fn start_workers(
        listen: SocketAddr,
        cfg: ServerConfig,
        tcp: Option<TcpOptions>,
        workers: usize,
    ) -> Result<RendezvousRelay> {
        let workers = if cfg!(target_os = "linux") {
            workers.max(1)
        } else {
            1
        };
        let (io, listener) = bind(listen, tcp.as_ref(), workers > 1)?;
        let io = Arc::new(UdpIo::from_std(io).map_err(|e| cannot(listen, &e))?);
        let local = io.local_addr();
        let tcp_local = listener.as_ref().and_then(|l| l.local_addr().ok());
        let server = Arc::new(Mutex::new(Server::new(cfg, crate::endpoint::os_seed())));
        let ends = Arc::new(TcpEnds::new(tcp.unwrap_or_default()));
        let mut stops = Vec::new();
        for _ in 1..workers {
            let sock = udp::bind_std(local, udp::DEFAULT_SOCKET_BUFFER, true)
                .map_err(|e| cannot(local, &e))?;
            stops.push(spawn_worker(sock, server.clone(), ends.clone())?);
        }
        let mut tasks = vec![tokio::spawn(serve(
            io.clone(),
            server.clone(),
            ends.clone(),
            true,
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
            _stops: stops,
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

fn cannot(at: SocketAddr, e: &std::io::Error) -> Error {
    Error::io(format!("cannot listen on {at}"), e)
}

/// The first UDP socket, and the TCP listener at the same IP and port if
/// `tcp` asks for one.
fn bind(
    listen: SocketAddr,
    tcp: Option<&TcpOptions>,
    reuse_port: bool,
) -> Result<(std::net::UdpSocket, Option<tokio::net::TcpListener>)> {
    let mut tries = 0;
    loop {
        let io = udp::bind_std(listen, udp::DEFAULT_SOCKET_BUFFER, reuse_port)
            .map_err(|e| cannot(listen, &e))?;
        let Some(opts) = tcp else {
            return Ok((io, None));
        };
        let local = io.local_addr().map_err(|e| cannot(listen, &e))?;
        let at = opts.listen.unwrap_or(local);
        match relay_tcp::bind(at) {
            Ok(l) => return Ok((io, Some(l))),
            // Port 0 gave UDP a port whose TCP twin is taken: another.
            Err(_) if listen.port() == 0 && opts.listen.is_none() && tries < PORT_TRIES => {
                tries += 1;
            }
            Err(e) => return Err(Error::io(format!("cannot listen on TCP {at}"), &e)),
        }
    }
}

/// A worker on a thread of its own, with its own runtime, serving `sock`
/// until the returned sender is dropped.
fn spawn_worker(
    sock: std::net::UdpSocket,
    server: Arc<Mutex<Server>>,
    tcp: Arc<TcpEnds>,
) -> Result<oneshot::Sender<()>> {
    let (stop, stopped) = oneshot::channel();
    let (ready, started) = std::sync::mpsc::channel();
    let run = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let runtime = match runtime {
            Ok(r) => r,
            Err(e) => return drop(ready.send(Err(e))),
        };
        runtime.block_on(async move {
            let io = match UdpIo::from_std(sock) {
                Ok(io) => Arc::new(io),
                Err(e) => return drop(ready.send(Err(e))),
            };
            let _ = ready.send(Ok(()));
            tokio::select! {
                _ = serve(io, server, tcp, false) => {}
                _ = stopped => {}
            }
        });
    };
    let spawned = std::thread::Builder::new()
        .name("braid-relay".into())
        .spawn(run)
        .map_err(|e| Error::io("cannot start a relay worker", &e))?;
    match started.recv() {
        Ok(Ok(())) => Ok(stop),
        Ok(Err(e)) => Err(Error::io("cannot start a relay worker", &e)),
        Err(_) => {
            let _ = spawned.join();
            Err(Error::io(
                "cannot start a relay worker",
                &std::io::Error::other("it ended"),
            ))
        }
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

/// Receives batches on `io` and forwards them until dropped; `expire`:
/// this worker also drops lapsed registrations and idle pairs.
async fn serve(io: Arc<UdpIo>, server: Arc<Mutex<Server>>, tcp: Arc<TcpEnds>, expire: bool) {
    let mut storage = vec![0u8; RECV_BATCH * RECV_BUFFER];
    // Made once: the receive buffers outlive every batch.
    let mut bufs: Vec<IoSliceMut<'_>> = storage
        .chunks_mut(RECV_BUFFER)
        .map(IoSliceMut::new)
        .collect();
    let mut meta = [RecvMeta::default(); RECV_BATCH];
    let mut replies = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    let mut tick = tokio::time::interval(EXPIRE_EVERY);
    loop {
        let received = tokio::select! {
            r = io.recv_drained(&mut bufs, &mut meta) => r,
            _ = tick.tick(), if expire => {
                lock(&server).expire(clock::now());
                tcp.expire(clock::now());
                continue;
            }
        };
        let Ok(n) = received else {
            // ICMP reports of earlier sends and the like.
            continue;
        };
        let batch = Batch {
            bufs: &bufs,
            meta: &meta[..n],
        };
        route(&batch, &server, &tcp, &mut replies, &mut runs);
        for (to, bytes) in replies.drain(..) {
            if !tcp.try_send(to, &bytes, None) {
                let _ = io.try_send_to(to, &bytes);
            }
        }
        for r in runs.drain(..) {
            let contents = &batch.bufs[r.buffer][r.start..r.end];
            if tcp.try_send(r.to, contents, Some(r.stride)) {
                continue;
            }
            // A refused send is loss the peers' congestion control handles.
            let _ = io.send(r.to, r.ecn, contents, Some(r.stride)).await;
        }
    }
}

/// A received batch: `meta[i]` describes `bufs[i]`.
struct Batch<'a, 'b> {
    bufs: &'a [IoSliceMut<'b>],
    meta: &'a [RecvMeta],
}

/// Asks the core, under one lock for the whole batch, where each datagram
/// goes: answers to `replies`, forwards to `runs`.
fn route(
    batch: &Batch<'_, '_>,
    server: &Mutex<Server>,
    tcp: &TcpEnds,
    replies: &mut Vec<(SocketAddr, Vec<u8>)>,
    runs: &mut Vec<Run>,
) {
    let now = clock::now();
    let mut s = lock(server);
    for (i, m) in batch.meta.iter().enumerate() {
        if tcp.clashes(m.addr) {
            continue;
        }
        let buf = &batch.bufs[i][..m.len];
        let stride = if m.stride == 0 { m.len } else { m.stride }.max(1);
        let ecn = udp::from_codepoint(m.ecn);
        for (k, datagram) in buf.chunks(stride).enumerate() {
            let Some(to) = s.handle(now, m.addr, datagram, replies) else {
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
