//! A rendezvous relay's TCP side, for ends whose UDP is blocked: each
//! frame of a stream ([`crate::tcp_carrier`]'s framing) goes to the core's
//! `Server::handle` as a datagram from the stream's peer address; what the
//! core sends to that address is written to the stream as frames, and what
//! it sends elsewhere goes by UDP. The core decides everything; this moves
//! bytes, and bounds what it holds: streams in all and per host, a queue
//! per stream (full: dropped, as datagrams), frames of at most
//! [`MAX_FRAME`] bytes (a larger length closes the stream), and streams
//! idle for [`READ_IDLE`] or whose peer stops reading are closed.
//!
//! An end on TCP is known by its stream's peer address. A UDP end of the
//! same host whose port happens to have the same number is not served
//! while that stream is open (its datagrams are dropped and counted): TCP
//! and UDP ports are drawn apart, so it takes one host drawing the same
//! number for both. Once a stream closes, what the core still sends to its
//! address is dropped for [`CLOSED_FOR`] rather than sent there by UDP.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_proto::rendezvous::Server;
use braid_proto::Ecn;
use tokio::sync::mpsc;

use super::relay_worker::UdpOut;
use crate::clock;
use crate::endpoint::lock;
use crate::tcp_carrier::{frame, read_frame, write_frames, MAX_FRAME, QUEUE_FRAMES, READ_IDLE};

/// After a stream closed, how long datagrams to its address are dropped
/// rather than sent by UDP: a pair's default idle time.
pub const CLOSED_FOR: Duration = Duration::from_secs(30);

/// A relay's TCP listener and its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpOptions {
    /// Where to accept streams; `None`: the UDP address's IP and port.
    pub listen: Option<SocketAddr>,
    /// Streams open at once; more are closed as they come. Each holds at
    /// most [`QUEUE_FRAMES`] frames of [`MAX_FRAME`] bytes queued (about
    /// 256 KiB), besides the kernel's buffers.
    pub max_connections: usize,
    /// Streams one host (an IPv4 address or an IPv6 /64) holds at once.
    pub max_per_host: usize,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            listen: None,
            max_connections: 1024,
            max_per_host: 32,
        }
    }
}

/// What a relay's TCP side did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpStats {
    /// Streams open now.
    pub open: usize,
    /// Streams accepted in all.
    pub accepted: u64,
    /// Streams closed at once: at `max_connections`, or `max_per_host`.
    pub refused: u64,
    /// Datagrams read from streams.
    pub datagrams_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Datagrams queued to streams.
    pub datagrams_out: u64,
    /// Their bytes.
    pub bytes_out: u64,
    /// Datagrams for a stream whose queue was full (or that closed), dropped.
    pub dropped: u64,
    /// UDP datagrams from the address of an open stream, dropped.
    pub dropped_clash: u64,
}

#[derive(Default)]
struct State {
    streams: HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>,
    closed: HashMap<SocketAddr, braid_proto::Instant>,
    hosts: HashMap<u128, usize>,
    stats: TcpStats,
}

/// The relay's streams, by peer address; shared by its UDP task and its
/// stream tasks.
pub(crate) struct TcpEnds {
    opts: TcpOptions,
    /// Streams open plus closed ones remembered: the UDP task skips the
    /// lock while there are none.
    known: AtomicUsize,
    state: Mutex<State>,
}

impl std::fmt::Debug for TcpEnds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpEnds")
            .field("stats", &self.stats())
            .finish()
    }
}

/// An IPv4 address, or an IPv6 /64.
fn host(addr: SocketAddr) -> u128 {
    match addr.ip().to_canonical() {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => (u128::from(v6) & !((1u128 << 64) - 1)) | 1,
    }
}

impl TcpEnds {
    pub(super) fn new(opts: TcpOptions) -> TcpEnds {
        TcpEnds {
            opts,
            known: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        }
    }

    fn note(&self, st: &State) {
        self.known
            .store(st.streams.len() + st.closed.len(), Ordering::Release);
    }

    pub(super) fn stats(&self) -> TcpStats {
        let st = lock(&self.state);
        TcpStats {
            open: st.streams.len(),
            ..st.stats
        }
    }

    /// A stream from `peer`, if within the bounds: its queue's far end.
    fn admit(&self, peer: SocketAddr) -> Option<mpsc::Receiver<Vec<u8>>> {
        let mut st = lock(&self.state);
        let per_host = st.hosts.get(&host(peer)).copied().unwrap_or(0);
        if st.streams.len() >= self.opts.max_connections
            || per_host >= self.opts.max_per_host
            || st.streams.contains_key(&peer)
        {
            st.stats.refused += 1;
            return None;
        }
        let (tx, rx) = mpsc::channel(QUEUE_FRAMES);
        st.streams.insert(peer, tx);
        *st.hosts.entry(host(peer)).or_default() += 1;
        st.closed.remove(&peer);
        st.stats.accepted += 1;
        self.note(&st);
        Some(rx)
    }

    /// The stream from `peer` closed.
    fn remove(&self, peer: SocketAddr) {
        let mut st = lock(&self.state);
        if st.streams.remove(&peer).is_none() {
            return;
        }
        if let Some(n) = st.hosts.get_mut(&host(peer)) {
            *n -= 1;
            if *n == 0 {
                st.hosts.remove(&host(peer));
            }
        }
        // Bounded: by the streams that can close within CLOSED_FOR.
        if st.closed.len() < 4 * self.opts.max_connections {
            st.closed.insert(peer, clock::now());
        }
        self.note(&st);
    }

    /// Forgets streams that closed more than [`CLOSED_FOR`] ago.
    pub(super) fn expire(&self, now: braid_proto::Instant) {
        if self.known.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut st = lock(&self.state);
        st.closed
            .retain(|_, at| now.saturating_duration_since(*at) < CLOSED_FOR);
        self.note(&st);
    }

    /// Whether a UDP datagram from `from` is to be dropped: an open
    /// stream has that address (counted).
    pub(super) fn clashes(&self, from: SocketAddr) -> bool {
        if self.known.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut st = lock(&self.state);
        let clash = st.streams.contains_key(&from);
        st.stats.dropped_clash += u64::from(clash);
        clash
    }

    /// If `to` is a stream's address (open, or closed lately), queues
    /// `contents` there (datagrams of `segment` bytes each, or one) or
    /// drops it, and returns `true`; `false`: send it by UDP.
    pub(super) fn try_send(&self, to: SocketAddr, contents: &[u8], segment: Option<usize>) -> bool {
        if self.known.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut st = lock(&self.state);
        let segment = segment.filter(|&s| s > 0).unwrap_or(contents.len()).max(1);
        let Some(queue) = st.streams.get(&to).cloned() else {
            let closed = st.closed.contains_key(&to);
            if closed {
                st.stats.dropped += contents.chunks(segment).count() as u64;
            }
            return closed;
        };
        for datagram in contents.chunks(segment) {
            let queued = frame(datagram).is_some_and(|f| queue.try_send(f).is_ok());
            if queued {
                st.stats.datagrams_out += 1;
                st.stats.bytes_out += datagram.len() as u64;
            } else {
                st.stats.dropped += 1;
            }
        }
        true
    }

    fn count_in(&self, len: usize) {
        let mut st = lock(&self.state);
        st.stats.datagrams_in += 1;
        st.stats.bytes_in += len as u64;
    }
}

/// Binds a TCP listener at `at`, dual-stack on IPv6's any address as the
/// UDP socket is.
pub(crate) fn bind(at: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
    if at.is_ipv6() {
        let _ = sock.set_only_v6(false);
    }
    sock.set_reuse_address(true)?;
    sock.bind(&at.into())?;
    sock.listen(1024)?;
    sock.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(sock.into())
}

/// Accepts streams for as long as the relay runs.
pub(crate) async fn accept(
    listener: tokio::net::TcpListener,
    ends: Arc<TcpEnds>,
    server: Arc<Mutex<Server>>,
    udp: Arc<UdpOut>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of descriptors and the like: try again shortly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(queue) = ends.admit(peer) else {
            continue;
        };
        let (ends, server, udp) = (ends.clone(), server.clone(), udp.clone());
        tokio::spawn(serve_stream(stream, peer, queue, ends, server, udp));
    }
}

/// One end's stream: its frames to the core, the core's answers back.
async fn serve_stream(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    mut queue: mpsc::Receiver<Vec<u8>>,
    ends: Arc<TcpEnds>,
    server: Arc<Mutex<Server>>,
    udp: Arc<UdpOut>,
) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move { write_frames(&mut wr, &mut queue).await });
    let mut buf = vec![0u8; MAX_FRAME];
    let mut replies = Vec::new();
    loop {
        let read = tokio::time::timeout(READ_IDLE, read_frame(&mut rd, &mut buf)).await;
        let Ok(Ok(Some(n))) = read else {
            break;
        };
        ends.count_in(n);
        let datagram = &buf[..n];
        let to = lock(&server).handle(clock::now(), peer, datagram, &mut replies);
        for (to, bytes) in replies.drain(..) {
            if !ends.try_send(to, &bytes, None) {
                let _ = udp.try_send_to(to, &bytes);
            }
        }
        if let Some(to) = to {
            if !ends.try_send(to, datagram, None) {
                // A refused send is loss the peers' congestion control handles.
                let _ = udp.send(to, Ecn::NotEct, datagram, None);
            }
        }
        if writer.is_finished() {
            // Its peer stopped reading.
            break;
        }
    }
    // The queue's last sender goes: the writer writes what is queued, then
    // shuts the stream down (or gives up after its timeout).
    ends.remove(peer);
}
