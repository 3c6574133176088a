//! A rendezvous relay on a real socket: the core's
//! [`braid_proto::rendezvous::Server`] decides, a worker thread
//! ([`super::relay_worker`]) receives, answers and forwards. A batch of
//! datagrams from one peer (GRO) goes on to the other as one batch (GSO),
//! with its ECN mark. Ends whose UDP is blocked reach it over TCP on the
//! same port ([`super::relay_tcp`]), served on the caller's runtime.
//!
//! With several workers (Linux), each has a socket of its own on the same
//! port (SO_REUSEPORT): the kernel spreads the ends over the sockets by
//! address, so a pair's two ends usually land on different workers. They
//! share the core behind one lock, taken once per received batch, and
//! each sends from its own socket: all of them have the relay's address
//! and port.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use braid_proto::rendezvous::{Server, ServerConfig, ServerStats};

use super::relay_tcp::{self, TcpEnds, TcpOptions, TcpStats};
use super::relay_worker::{self, UdpOut, Worker};
use crate::endpoint::lock;
use crate::udp;
use crate::{Error, Result};

/// A running rendezvous relay. Dropping it stops its threads and tasks
/// and closes its sockets.
#[derive(Debug)]
pub struct RendezvousRelay {
    server: Arc<Mutex<Server>>,
    local: SocketAddr,
    tcp_local: Option<SocketAddr>,
    tcp: Arc<TcpEnds>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Dropped, they stop and close their sockets.
    _workers: Vec<Worker>,
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
    /// cannot spread flows over sockets).
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
        let (first, listener) = bind(listen, tcp.as_ref(), workers > 1)?;
        let local = first.local_addr().map_err(|e| cannot(listen, &e))?;
        let first = UdpOut::new(first).map_err(|e| cannot(listen, &e))?;
        let tcp_local = listener.as_ref().and_then(|l| l.local_addr().ok());
        let server = Arc::new(Mutex::new(Server::new(cfg, crate::endpoint::os_seed())));
        let ends = Arc::new(TcpEnds::new(tcp.unwrap_or_default()));
        let mut tasks = Vec::new();
        if let Some(listener) = listener {
            // Its datagrams to UDP ends leave from the first socket.
            let out = Arc::new(first.try_clone_unwaiting().map_err(|e| cannot(local, &e))?);
            let accept = relay_tcp::accept(listener, ends.clone(), server.clone(), out);
            tasks.push(tokio::spawn(accept));
        }
        let mut started = vec![relay_worker::spawn(
            first,
            server.clone(),
            ends.clone(),
            true,
        )?];
        for _ in 1..workers {
            let out = udp::bind_std(local, udp::DEFAULT_SOCKET_BUFFER, true)
                .and_then(UdpOut::new)
                .map_err(|e| cannot(local, &e))?;
            started.push(relay_worker::spawn(
                out,
                server.clone(),
                ends.clone(),
                false,
            )?);
        }
        Ok(RendezvousRelay {
            server,
            local,
            tcp_local,
            tcp: ends,
            tasks,
            _workers: started,
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
