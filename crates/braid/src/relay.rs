//! The real-time link emulator: forwards UDP datagrams both ways through the
//! simulator's link model ([`braid_link`]'s [`Link`]), on a real clock.
//!
//! Clients send to the relay's listen address. Each client gets its own
//! upstream socket, NAT-style, so replies from the target find their way
//! back. Every datagram is offered to the link of its direction at the
//! moment it is received and, if the link delivers it, sent on at the
//! arrival time the link computed. Datagrams are opaque bytes: the only
//! change the relay makes is OR-ing the link's MB-ECN level into the byte
//! at [`wire::MBECN_OFFSET`] of datagrams long enough to hold a braid header.
//! What the link delivers at once (an unimpaired link) leaves straight from
//! the receive buffers, consecutive GRO batches joined into one GSO send
//! (`udp_gather`); only delayed datagrams are copied into the queue.
//!
//! Link instants count from the relay's start, so a trace's time 0 and
//! the events of [`LinkConfig::events`] are relative to [`Relay::start`].

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{self, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use braid_link::{
    seeds, state_changes, InFlight, Link, LinkConfig, LinkState, LinkStats, Offer, IP_UDP_OVERHEAD,
};
use braid_proto::{wire, Ecn, Instant};
use quinn_udp::RecvMeta;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::udp::{self, UdpIo, MAX_GSO_BYTES};
use crate::udp_gather;
use crate::{Error, Result};

/// Clients served at once; a new client beyond this replaces the one that
/// was quiet longest.
pub const MAX_CLIENTS: usize = 64;

/// Receive buffers of an upstream socket: replies are usually small, and
/// each client has its own socket, so fewer than the listen socket's.
const UPSTREAM_BATCH: usize = 4;

/// Datagrams sent per lock of a direction's scheduler.
const SEND_BATCH: usize = 64;

/// What a relay listens on, where it forwards to, and the link of each
/// direction.
#[derive(Debug, Clone)]
pub struct RelayConfig {
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

impl RelayConfig {
    /// The same link both ways, seed 1, default socket buffers.
    pub fn new(listen: SocketAddr, to: SocketAddr, link: LinkConfig) -> RelayConfig {
        RelayConfig {
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
    /// Datagrams the link delivered but the relay had no room to hold.
    pub dropped_overflow: u64,
    /// Datagrams the socket refused, or for which no upstream socket could
    /// be opened.
    pub send_errors: u64,
}

/// Counters of a running relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelayStats {
    /// Client → target.
    pub forward: DirectionStats,
    /// Target → client.
    pub reverse: DirectionStats,
    /// Clients with an upstream socket now.
    pub clients: usize,
}

/// A running relay. Dropping it stops its tasks, which closes its sockets.
#[derive(Debug)]
pub struct Relay {
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

impl Relay {
    /// Binds the listen address and starts forwarding. Needs a tokio runtime.
    pub fn start(cfg: RelayConfig) -> Result<Relay> {
        if tokio::runtime::Handle::try_current().is_err() {
            let e = io::Error::other("no tokio runtime is running");
            return Err(Error::io("cannot start the relay", &e));
        }
        let listen = UdpIo::bind(cfg.listen, cfg.socket_buffer)
            .map_err(|e| Error::io(format!("cannot listen on {}", cfg.listen), &e))?;
        let listen = Arc::new(listen);
        let local = listen.local_addr();
        if forwards_to_itself(local, cfg.to) {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is the relay's own address: it would forward to itself",
                    cfg.to
                ),
            );
            return Err(Error::io(format!("cannot relay to {}", cfg.to), &e));
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
        Ok(Relay {
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
    pub fn stats(&self) -> RelayStats {
        RelayStats {
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

/// State shared by the relay's tasks.
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

#[derive(Debug, Clone, Copy)]
enum Dir {
    Forward,
    Reverse,
}

/// One direction: its link and the datagrams it has yet to deliver.
#[derive(Debug)]
struct Direction {
    state: Mutex<DirectionState>,
    /// Wakes the delivery task when a datagram becomes the earliest.
    wake: Notify,
}

#[derive(Debug)]
struct DirectionState {
    link: Link,
    pending: InFlight<Pending>,
    sent: u64,
    dropped_in_flight: u64,
    dropped_overflow: u64,
    send_errors: u64,
}

impl Direction {
    fn new(link: Link) -> Direction {
        Direction {
            state: Mutex::new(DirectionState {
                link,
                pending: InFlight::default(),
                sent: 0,
                dropped_in_flight: 0,
                dropped_overflow: 0,
                send_errors: 0,
            }),
            wake: Notify::new(),
        }
    }

    /// A panic elsewhere leaves the state consistent (every update is a
    /// few plain assignments), so a poisoned lock is still usable.
    fn lock(&self) -> MutexGuard<'_, DirectionState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stats(&self) -> DirectionStats {
        let s = self.lock();
        DirectionStats {
            link: s.link.stats(),
            sent: s.sent,
            dropped_in_flight: s.dropped_in_flight,
            dropped_overflow: s.dropped_overflow,
            send_errors: s.send_errors,
        }
    }

    /// Offers the datagrams of one receive buffer (`stride` bytes each, the
    /// last may be shorter), received now from one sender, to the link,
    /// under one lock. Those the link delivers at once, with nothing held
    /// before them, are marked in place and added to `runs`, to go out
    /// straight from the receive buffers ([`send_runs`]): an unimpaired
    /// link costs no copy, allocation or queue. The rest wait in the queue
    /// for [`deliver`]. Sends from `via` to `to`.
    fn offer_buffer(
        &self,
        shared: &Shared,
        received: Received<'_>,
        to: SocketAddr,
        via: &Arc<UdpIo>,
        runs: &mut Vec<Run>,
    ) {
        let Received {
            buf,
            offset,
            stride,
            ecn,
        } = received;
        let stride = if stride == 0 { buf.len() } else { stride };
        let mut earliest = false;
        let mut s = self.lock();
        // Read under the lock so that offers reach the link in time order.
        let now = shared.now();
        let mut start = offset;
        for datagram in split_batch_mut(buf, stride) {
            let (begin, end) = (start, start + datagram.len());
            start = end;
            let has_header = datagram.len() >= wire::HEADER_LEN;
            let level = match datagram.get(wire::MBECN_OFFSET) {
                Some(&b) if has_header => b,
                _ => 0,
            };
            let size = u32::try_from(datagram.len())
                .unwrap_or(u32::MAX)
                .saturating_add(IP_UDP_OVERHEAD);
            let Offer::Deliver {
                at,
                ecn,
                mbecn,
                duplicate_at,
                ..
            } = s.link.offer(now, size, ecn, level)
            else {
                continue;
            };
            if has_header {
                wire::mark_mbecn(datagram, mbecn);
            }
            let direct = at <= now && duplicate_at.is_none() && s.pending.next_at().is_none();
            if direct {
                s.sent += 1;
                match runs.last_mut() {
                    // Contiguous and the same codepoint: one GSO call
                    // (only a buffer's last datagram is short).
                    Some(r) if r.end == begin && r.ecn == ecn => r.end = end,
                    _ => runs.push(Run {
                        via: Arc::clone(via),
                        to,
                        ecn,
                        start: begin,
                        end,
                        stride,
                    }),
                }
                continue;
            }
            let datagram: Box<[u8]> = (&*datagram).into();
            if let Some(dup) = duplicate_at {
                earliest |= s.push(dup, to, via, ecn, datagram.clone());
            }
            earliest |= s.push(at, to, via, ecn, datagram);
        }
        drop(s);
        if earliest {
            self.wake.notify_one();
        }
    }
}

/// One receive buffer's datagrams, all from one sender.
struct Received<'a> {
    /// One datagram, or several of `stride` bytes (the last may be shorter).
    buf: &'a mut [u8],
    /// Where `buf` starts in the receiver's storage.
    offset: usize,
    stride: usize,
    ecn: Ecn,
}

/// Datagrams sent on together, straight from the receiver's storage:
/// `start..end` of it.
#[derive(Debug)]
struct Run {
    via: Arc<UdpIo>,
    to: SocketAddr,
    ecn: Ecn,
    start: usize,
    end: usize,
    stride: usize,
}

impl Run {
    /// Whether `next` may follow this run in one GSO call: same socket,
    /// destination, codepoint and stride, and this run whole segments.
    fn joins(&self, next: &Run) -> bool {
        Arc::ptr_eq(&self.via, &next.via)
            && self.to == next.to
            && self.ecn == next.ecn
            && self.stride == next.stride
            && (self.end - self.start).is_multiple_of(self.stride.max(1))
    }
}

/// Sends `runs` (taken from `storage`), several in one call where they
/// join; counts what the socket refused against `dir`.
async fn send_runs(dir: &Direction, storage: &[u8], runs: &mut Vec<Run>) {
    let mut failed = 0u64;
    let mut rest = &runs[..];
    while let Some(first) = rest.first() {
        let stride = first.stride.max(1);
        let max_segments = first.via.max_gso_segments().min(MAX_GSO_BYTES / stride);
        let (mut n, mut bytes) = (1, first.end - first.start);
        while n < rest.len().min(udp_gather::MAX_PARTS) {
            let next = &rest[n];
            let len = next.end - next.start;
            if !rest[n - 1].joins(next) || (bytes + len).div_ceil(stride) > max_segments {
                break;
            }
            bytes += len;
            n += 1;
        }
        let group = &rest[..n];
        let part = |r: &Run| &storage[r.start..r.end];
        let gathered = if n > 1 {
            let parts: Vec<&[u8]> = group.iter().map(part).collect();
            udp_gather::send_gathered(&first.via, first.to, first.ecn, &parts, stride)
                .await
                .is_ok()
        } else {
            false
        };
        if !gathered {
            // One run, or a system without gathered sends: part by part.
            for r in group {
                let contents = part(r);
                let segment = (contents.len() > stride).then_some(stride);
                if r.via.send(r.to, r.ecn, contents, segment).await.is_err() {
                    failed += contents.len().div_ceil(stride).max(1) as u64;
                }
            }
        }
        rest = &rest[n..];
    }
    runs.clear();
    if failed > 0 {
        let mut s = dir.lock();
        s.sent = s.sent.saturating_sub(failed);
        s.send_errors += failed;
    }
}

impl DirectionState {
    /// Queues a datagram for `at`; true if it is now the earliest.
    fn push(
        &mut self,
        at: Instant,
        to: SocketAddr,
        via: &Arc<UdpIo>,
        ecn: Ecn,
        datagram: Box<[u8]>,
    ) -> bool {
        let len = datagram.len();
        let pending = Pending {
            to,
            via: Arc::clone(via),
            ecn,
            datagram,
        };
        self.pending.push(at, len, pending).unwrap_or_else(|_| {
            self.dropped_overflow += 1;
            false
        })
    }
}

/// A datagram waiting for its arrival time.
#[derive(Debug)]
struct Pending {
    to: SocketAddr,
    /// The socket it leaves from: the client's upstream socket forward,
    /// the listen socket in reverse.
    via: Arc<UdpIo>,
    ecn: Ecn,
    datagram: Box<[u8]>,
}

/// A spawned task that is aborted when this handle is dropped.
#[derive(Debug)]
struct Task(JoinHandle<()>);

impl Task {
    fn spawn(f: impl std::future::Future<Output = ()> + Send + 'static) -> Task {
        Task(tokio::spawn(f))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A client and its own socket towards the target.
struct Client {
    upstream: Arc<UdpIo>,
    /// Receives the target's replies; stops when the client is forgotten.
    _replies: Task,
    /// Value of the client counter when it last sent, for eviction.
    last_active: u64,
}

/// Receives from clients and offers their datagrams to the forward link.
async fn serve_clients(
    shared: Arc<Shared>,
    listen: Arc<UdpIo>,
    to: SocketAddr,
    socket_buffer: usize,
) {
    let mut clients: HashMap<SocketAddr, Client> = HashMap::new();
    let mut activity = 0u64;
    let mut receiver = Receiver::new(udp::RECV_BATCH);
    let mut runs = Vec::new();
    loop {
        let n = receiver.recv(&listen).await;
        for (from, received) in receiver.buffers(n) {
            activity += 1;
            if !clients.contains_key(&from) {
                if clients.len() >= MAX_CLIENTS {
                    evict_quietest(&mut clients);
                }
                match UdpIo::bind(unspecified(to), socket_buffer) {
                    Ok(upstream) => {
                        let upstream = Arc::new(upstream);
                        let replies = Task::spawn(serve_replies(
                            Arc::clone(&shared),
                            Arc::clone(&upstream),
                            Arc::clone(&listen),
                            from,
                            to,
                        ));
                        let client = Client {
                            upstream,
                            _replies: replies,
                            last_active: activity,
                        };
                        clients.insert(from, client);
                        shared
                            .clients
                            .store(clients.len(), atomic::Ordering::Relaxed);
                    }
                    Err(_) => {
                        // Out of sockets, most likely: the datagram is lost.
                        shared.forward.lock().send_errors += 1;
                        continue;
                    }
                }
            }
            let Some(client) = clients.get_mut(&from) else {
                continue;
            };
            client.last_active = activity;
            shared
                .forward
                .offer_buffer(&shared, received, to, &client.upstream, &mut runs);
        }
        send_runs(&shared.forward, &receiver.storage, &mut runs).await;
    }
}

fn evict_quietest(clients: &mut HashMap<SocketAddr, Client>) {
    let quietest = clients
        .iter()
        .min_by_key(|(_, c)| c.last_active)
        .map(|(&addr, _)| addr);
    if let Some(addr) = quietest {
        clients.remove(&addr);
    }
}

/// The wildcard address of `to`'s family, any port.
fn unspecified(to: SocketAddr) -> SocketAddr {
    match to {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

/// Receives the target's replies to one client and offers them to the
/// reverse link.
async fn serve_replies(
    shared: Arc<Shared>,
    upstream: Arc<UdpIo>,
    listen: Arc<UdpIo>,
    client: SocketAddr,
    to: SocketAddr,
) {
    let mut receiver = Receiver::new(UPSTREAM_BATCH);
    let mut runs = Vec::new();
    loop {
        let n = receiver.recv(&upstream).await;
        for (from, received) in receiver.buffers(n) {
            // Only the target may answer: the relay is not an open proxy.
            if from == to {
                shared
                    .reverse
                    .offer_buffer(&shared, received, client, &listen, &mut runs);
            }
        }
        send_runs(&shared.reverse, &receiver.storage, &mut runs).await;
    }
}

/// Receive buffers for one socket, in one allocation.
struct Receiver {
    storage: Vec<u8>,
    meta: Vec<RecvMeta>,
}

impl Receiver {
    fn new(batch: usize) -> Receiver {
        Receiver {
            storage: vec![0; batch * udp::RECV_BUFFER],
            meta: vec![RecvMeta::default(); batch],
        }
    }

    /// Waits for a batch; returns how many buffers it filled.
    async fn recv(&mut self, socket: &UdpIo) -> usize {
        loop {
            match socket.recv_into(&mut self.storage, &mut self.meta).await {
                Ok(n) => return n,
                // Errors such as ICMP reports of an earlier send concern
                // one datagram; pause briefly in case one keeps recurring.
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }

    /// The first `n` buffers, with their sender.
    fn buffers(&mut self, n: usize) -> impl Iterator<Item = (SocketAddr, Received<'_>)> + '_ {
        self.storage
            .chunks_mut(udp::RECV_BUFFER)
            .zip(&self.meta)
            .take(n)
            .enumerate()
            .map(|(i, (buf, meta))| {
                let len = meta.len.min(buf.len());
                let received = Received {
                    buf: &mut buf[..len],
                    offset: i * udp::RECV_BUFFER,
                    stride: meta.stride,
                    ecn: udp::from_codepoint(meta.ecn),
                };
                (meta.addr, received)
            })
    }
}

/// The datagrams of a receive buffer that holds `stride`-byte datagrams
/// (the last may be shorter), including a single empty one.
fn split_batch_mut(buf: &mut [u8], stride: usize) -> impl Iterator<Item = &mut [u8]> {
    let stride = if stride == 0 { buf.len() } else { stride };
    let empty = buf.is_empty();
    let (chunks, tail): (_, &mut [u8]) = if empty {
        (None, buf)
    } else {
        (Some(buf.chunks_mut(stride.max(1))), &mut [])
    };
    chunks.into_iter().flatten().chain(empty.then_some(tail))
}

/// Waits shorter than this finish in a thread's `nanosleep`: tokio's timer
/// has 1 ms resolution, which would send a 50 Mbit/s link's packets in 1 ms
/// bursts instead of 0.23 ms apart, and the first flight's ACK spacing
/// (BBR's startup estimate) would measure the timer, not the link.
const FINE_WAIT: Duration = Duration::from_millis(2);

async fn wait_until(deadline: tokio::time::Instant) {
    let now = tokio::time::Instant::now();
    if deadline >= now + FINE_WAIT {
        tokio::time::sleep_until(deadline - Duration::from_millis(1)).await;
    }
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    if !left.is_zero() {
        // Cancelled by a wake-up, the thread just finishes its sleep.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}

/// Sends the datagrams of one direction at their arrival times.
async fn deliver(shared: Arc<Shared>, dir: Dir) {
    let d = shared.direction(dir);
    let mut due = Vec::with_capacity(SEND_BATCH);
    let mut batch = Vec::new();
    loop {
        let next = {
            let mut s = d.lock();
            let now = shared.now();
            while due.len() < SEND_BATCH {
                let Some((_, p)) = s.pending.pop_due(now) else {
                    break;
                };
                // As in the simulator, a link that is down at the arrival
                // time loses what was in flight.
                if s.link.is_up() {
                    due.push(p);
                } else {
                    s.dropped_in_flight += 1;
                }
            }
            s.pending.next_at()
        };
        if !due.is_empty() {
            let (mut sent, mut failed) = (0, 0);
            let mut rest = &due[..];
            while !rest.is_empty() {
                // Datagrams due together for one destination leave in one
                // GSO call; a link with a rate makes them due one by one.
                let n = gso_run(rest, &mut batch);
                let first = &rest[0];
                let segment = (n > 1).then_some(first.datagram.len());
                let contents: &[u8] = if n > 1 { &batch } else { &first.datagram };
                match first.via.send(first.to, first.ecn, contents, segment).await {
                    Ok(()) => sent += n as u64,
                    Err(_) => failed += n as u64,
                }
                rest = &rest[n..];
            }
            due.clear();
            let mut s = d.lock();
            s.sent += sent;
            s.send_errors += failed;
            continue;
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = wait_until(shared.deadline(at)) => {}
                    _ = d.wake.notified() => {}
                }
            }
            None => d.wake.notified().await,
        }
    }
}

/// How many datagrams from the start of `due` can leave in one GSO call
/// (same socket, destination and ECN; all as long as the first but the
/// last, which may be shorter); with more than one, `batch` holds them.
fn gso_run(due: &[Pending], batch: &mut Vec<u8>) -> usize {
    let first = &due[0];
    let segment = first.datagram.len();
    let max = first.via.max_gso_segments().min(due.len());
    let mut n = 1;
    while n < max {
        let p = &due[n];
        let fits = Arc::ptr_eq(&p.via, &first.via)
            && p.to == first.to
            && p.ecn == first.ecn
            && p.datagram.len() <= segment
            && (n + 1) * segment <= MAX_GSO_BYTES;
        if !fits {
            break;
        }
        n += 1;
        if p.datagram.len() < segment {
            break; // Only the last may be shorter.
        }
    }
    if n > 1 {
        batch.clear();
        for p in &due[..n] {
            batch.extend_from_slice(&p.datagram);
        }
    }
    n
}

/// Applies scheduled state changes to both directions at their times.
async fn apply_changes(shared: Arc<Shared>, changes: Vec<(Duration, LinkState)>) {
    for (at, state) in changes {
        tokio::time::sleep_until(shared.deadline(Instant::ZERO + at)).await;
        shared.set_state(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_to_its_own_address_is_recognised() {
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

    #[tokio::test]
    async fn datagrams_due_together_leave_in_gso_runs() {
        let via = Arc::new(UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap());
        let other = Arc::new(UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap());
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let p = |via: &Arc<UdpIo>, to, len: usize, fill: u8| Pending {
            to,
            via: via.clone(),
            ecn: Ecn::NotEct,
            datagram: vec![fill; len].into(),
        };
        let due = [
            p(&via, to, 100, 1),
            p(&via, to, 100, 2),
            p(&via, to, 60, 3), // shorter: ends the run
            p(&via, to, 100, 4),
            p(&other, to, 100, 5), // another socket
        ];
        let mut batch = Vec::new();
        if via.max_gso_segments() < 3 {
            assert_eq!(gso_run(&due, &mut batch), 1, "without GSO, one by one");
            return;
        }
        assert_eq!(gso_run(&due, &mut batch), 3);
        assert_eq!(batch.len(), 260);
        assert_eq!((batch[0], batch[100], batch[200]), (1, 2, 3));
        assert_eq!(gso_run(&due[3..], &mut batch), 1);
        assert_eq!(gso_run(&due[4..], &mut batch), 1);
    }

    #[test]
    fn batches_split_by_stride() {
        let mut buf: Vec<u8> = (0..10).collect();
        let whole = buf.clone();
        let parts: Vec<Vec<u8>> = split_batch_mut(&mut buf, 4).map(|d| d.to_vec()).collect();
        assert_eq!(parts, [&whole[..4], &whole[4..8], &whole[8..]]);
        assert_eq!(split_batch_mut(&mut buf, 0).count(), 1);
        let none: Vec<Vec<u8>> = split_batch_mut(&mut [], 0).map(|d| d.to_vec()).collect();
        assert_eq!(none, [Vec::<u8>::new()]);
    }
}
