//! The real-time link emulator: forwards UDP datagrams both ways through the
//! simulator's link model ([`braid_link`]'s [`Link`]), on a real clock.
//!
//! Clients send to the emulator's listen address. Each client gets its own
//! upstream socket, NAT-style, so replies from the target find their way
//! back. Every datagram is offered to the link of its direction at the
//! moment it is received and, if the link delivers it, sent on at the
//! arrival time the link computed. Datagrams are opaque bytes: the only
//! change the emulator makes is OR-ing the link's MB-ECN level into the byte
//! at [`wire::MBECN_OFFSET`] of datagrams long enough to hold a braid header.
//! What the link delivers at once (an unimpaired link) leaves straight from
//! the receive buffers, consecutive GRO batches joined into one GSO send
//! (`udp_gather`); only delayed datagrams are copied into the queue.
//!
//! Link instants count from the emulator's start, so a trace's time 0 and
//! the events of [`LinkConfig::events`] are relative to [`Emulator::start`].

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{self, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use braid_link::{seeds, state_changes, Link, LinkConfig, LinkState, LinkStats};
use braid_proto::Instant;

use crate::udp::{self, UdpIo};
use crate::{Error, Result};

mod clients;
mod direction;

use clients::{serve_clients, Task};
use direction::{apply_changes, deliver, Dir, Direction};

/// Clients served at once; a new client beyond this replaces the one that
/// was quiet longest.
pub const MAX_CLIENTS: usize = 64;

/// Receive buffers of an upstream socket: replies are usually small, and
/// each client has its own socket, so fewer than the listen socket's.
const UPSTREAM_BATCH: usize = 4;

/// Datagrams sent per lock of a direction's scheduler.
const SEND_BATCH: usize = 64;

/// What an emulator listens on, where it forwards to, and the link of each
/// direction.
#[derive(Debug, Clone)]
pub struct EmulatorConfig {
    /// Where clients send to.
    pub listen: SocketAddr,
    /// Where their datagrams go.
    pub to: SocketAddr,
    /// Client → target. Its `events` apply to both directions, as a
    /// simulated path's do.
    pub forward: LinkConfig,
    /// Target → client. Its `events` are not used.
    pub reverse: LinkConfig,
    /// Seeds both links; the same seed and `path` give the links of the
    /// simulator's path `path` under that seed ([`seeds::links`]).
    pub seed: u64,
    /// Which scenario path's seeds the links take (0 by default).
    pub path: usize,
    /// Send and receive buffer size of every socket.
    pub socket_buffer: usize,
}

impl EmulatorConfig {
    /// The same link both ways, seed 1, default socket buffers.
    pub fn new(listen: SocketAddr, to: SocketAddr, link: LinkConfig) -> EmulatorConfig {
        EmulatorConfig {
            listen,
            to,
            forward: link.clone(),
            reverse: link,
            seed: 1,
            path: 0,
            socket_buffer: udp::DEFAULT_SOCKET_BUFFER,
        }
    }
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirectionStats {
    /// What the link did with the datagrams offered to it.
    pub link: LinkStats,
    /// Datagrams sent on at their arrival time, duplicates included.
    pub sent: u64,
    /// Datagrams the link delivered but that were still in flight when it
    /// went down; the simulator discards those too.
    pub dropped_in_flight: u64,
    /// Datagrams the link delivered but the emulator had no room to hold.
    pub dropped_overflow: u64,
    /// Datagrams the socket refused, or for which no upstream socket could
    /// be opened.
    pub send_errors: u64,
}

/// Counters of a running emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmulatorStats {
    /// Client → target.
    pub forward: DirectionStats,
    /// Target → client.
    pub reverse: DirectionStats,
    /// Clients with an upstream socket now.
    pub clients: usize,
}

/// A running emulator. Dropping it stops its tasks, which closes its sockets.
#[derive(Debug)]
pub struct Emulator {
    shared: Arc<Shared>,
    local: SocketAddr,
    _tasks: Vec<Task>,
}

/// Whether datagrams sent to `to` would arrive at a socket bound to `local`:
/// the same port, and an address of this host that the bind covers.
fn forwards_to_itself(local: SocketAddr, to: SocketAddr) -> bool {
    if to.port() != local.port() {
        return false;
    }
    // An IPv4 address in IPv6 clothes (::ffff:a.b.c.d) is that address.
    let (l, t) = (local.ip().to_canonical(), to.ip().to_canonical());
    // An unspecified destination means this host; a bind to the unspecified
    // address receives on all of this host's addresses.
    l == t || t.is_unspecified() || (l.is_unspecified() && is_own_address(t))
}

/// A host can bind only its own addresses.
fn is_own_address(ip: std::net::IpAddr) -> bool {
    ip.is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

impl Emulator {
    /// Binds the listen address and starts forwarding. Needs a tokio runtime.
    pub fn start(cfg: EmulatorConfig) -> Result<Emulator> {
        if tokio::runtime::Handle::try_current().is_err() {
            let e = io::Error::other("no tokio runtime is running");
            return Err(Error::io("cannot start the emulator", &e));
        }
        let listen = UdpIo::bind(cfg.listen, cfg.socket_buffer)
            .map_err(|e| Error::io(format!("cannot listen on {}", cfg.listen), &e))?;
        let listen = Arc::new(listen);
        let local = listen.local_addr();
        if forwards_to_itself(local, cfg.to) {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is the emulator's own address: it would forward to itself",
                    cfg.to
                ),
            );
            return Err(Error::io(format!("cannot forward to {}", cfg.to), &e));
        }
        let [forward_seed, reverse_seed] = seeds::links(cfg.seed, cfg.path);
        let shared = Arc::new(Shared {
            origin: std::time::Instant::now(),
            forward: Direction::new(Link::new(cfg.forward.clone(), forward_seed)),
            reverse: Direction::new(Link::new(cfg.reverse, reverse_seed)),
            clients: AtomicUsize::new(0),
        });

        let mut changes = state_changes(&cfg.forward.events);
        // Changes at time 0 hold before the first datagram can arrive.
        let later = changes.split_off(changes.partition_point(|c| c.0.is_zero()));
        for (_, state) in changes {
            shared.set_state(state);
        }
        let tasks = vec![
            Task::spawn(serve_clients(
                Arc::clone(&shared),
                listen,
                cfg.to,
                cfg.socket_buffer,
            )),
            Task::spawn(deliver(Arc::clone(&shared), Dir::Forward)),
            Task::spawn(deliver(Arc::clone(&shared), Dir::Reverse)),
            Task::spawn(apply_changes(Arc::clone(&shared), later)),
        ];
        Ok(Emulator {
            shared,
            local,
            _tasks: tasks,
        })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Counters so far.
    pub fn stats(&self) -> EmulatorStats {
        EmulatorStats {
            forward: self.shared.forward.stats(),
            reverse: self.shared.reverse.stats(),
            clients: self.shared.clients.load(atomic::Ordering::Relaxed),
        }
    }

    /// Takes both directions down or up now, like a link event; once
    /// closed, they stay closed.
    pub fn set_state(&self, state: LinkState) {
        self.shared.set_state(state);
    }
}

/// State shared by the emulator's tasks.
#[derive(Debug)]
struct Shared {
    /// Link instant zero.
    origin: std::time::Instant,
    forward: Direction,
    reverse: Direction,
    clients: AtomicUsize,
}

impl Shared {
    fn now(&self) -> Instant {
        let ns = self.origin.elapsed().as_nanos();
        Instant::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    fn deadline(&self, at: Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.origin + Duration::from_nanos(at.as_nanos()))
    }

    fn direction(&self, dir: Dir) -> &Direction {
        match dir {
            Dir::Forward => &self.forward,
            Dir::Reverse => &self.reverse,
        }
    }

    fn set_state(&self, state: LinkState) {
        for d in [&self.forward, &self.reverse] {
            let mut s = d.lock();
            let now = self.now();
            s.link.set_state(now, state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulator_forwarding_to_its_own_address_is_recognised() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(forwards_to_itself(a("127.0.0.1:7000"), a("127.0.0.1:7000")));
        assert!(forwards_to_itself(a("0.0.0.0:7000"), a("127.0.0.1:7000")));
        assert!(forwards_to_itself(a("127.0.0.1:7000"), a("0.0.0.0:7000")));
        assert!(forwards_to_itself(a("[::]:7000"), a("[::1]:7000")));
        assert!(forwards_to_itself(
            a("127.0.0.1:7000"),
            a("[::ffff:127.0.0.1]:7000")
        ));
        assert!(!forwards_to_itself(
            a("127.0.0.1:7000"),
            a("127.0.0.1:7001")
        ));
        assert!(!forwards_to_itself(
            a("127.0.0.1:7000"),
            a("127.0.0.2:7000")
        ));
        // 192.0.2.1 (TEST-NET-1) is nobody's own address.
        assert!(!forwards_to_itself(a("0.0.0.0:7000"), a("192.0.2.1:7000")));
    }
}
