//! Endpoints: a UDP socket and the table that hands its datagrams to
//! sessions. Sessions are told apart by the session id in every datagram,
//! not by the sender's address, so a connection may change address (a
//! relay restarts, a NAT rebinds) and several connections of one session
//! may share a socket.

use crate::driver::drive;
use crate::session::{Route, Session, Shared};
use crate::udp::{self, UdpIo, DEFAULT_SOCKET_BUFFER, RECV_BATCH, RECV_BUFFER};
use crate::{clock, Error, Result};
use braid_proto::crypto::RetryKey;
use braid_proto::wire::{Frame, Frames, Header, VERSION};
use braid_proto::{Ecn, Instant, PathId, Role, SessionConfig};
use quinn_udp::RecvMeta;
use rand::RngCore;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Sessions one endpoint serves at most; HELLOs beyond are ignored.
const MAX_SESSIONS: usize = 16_384;
/// Accepted sessions waiting for `Listener::accept`.
const ACCEPT_BACKLOG: usize = 256;
/// Ended session ids remembered, so a late duplicate HELLO opens nothing.
const RECENTLY_CLOSED: usize = 4096;
/// Half-open server sessions (handshake answered, client not yet confirmed)
/// at most, in all and per source address: each costs memory that anyone
/// who can send a datagram could claim. They expire after ~5 s.
const MAX_HALF_OPEN: usize = 512;
const MAX_HALF_OPEN_PER_SOURCE: usize = 16;
/// From this many half-open sessions on, a handshake must first echo a
/// stateless retry token, proving it receives at its source address.
const RETRY_THRESHOLD: usize = 64;
/// A listener with a one-time code stops after this many handshakes that
/// never completed: each is one online guess at the code.
pub const CODE_GUESS_LIMIT: u32 = 8;

/// What a listening endpoint needs to open server sessions.
struct Accepting {
    cfg: SessionConfig,
    queue: mpsc::Sender<Session>,
    retry_key: RetryKey,
    /// Half-open sessions by id, with their source address.
    half_open: Arc<Mutex<HashMap<u64, IpAddr>>>,
    failed: Arc<FailedHandshakes>,
}

/// Handshakes that were answered but never confirmed by the client.
#[derive(Default)]
struct FailedHandshakes {
    count: std::sync::atomic::AtomicU32,
    changed: tokio::sync::Notify,
}

/// 32 bytes from the operating system's CSPRNG.
pub(crate) fn os_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed
}

pub(crate) struct EndpointInner {
    pub io: Arc<UdpIo>,
    sessions: Mutex<HashMap<u64, Arc<Shared>>>,
    closed: Mutex<VecDeque<u64>>,
    accepting: Mutex<Option<Accepting>>,
    recv_task: Mutex<Option<AbortHandle>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl EndpointInner {
    fn register(&self, shared: &Arc<Shared>) {
        lock(&self.sessions).insert(shared.id, shared.clone());
    }

    pub fn unregister(&self, id: u64) {
        if lock(&self.sessions).remove(&id).is_some() {
            let mut closed = lock(&self.closed);
            if closed.len() == RECENTLY_CLOSED {
                closed.pop_front();
            }
            closed.push_back(id);
        }
    }

    /// Hands one datagram to its session, or opens a server session for a
    /// handshake. A server's route to a connection follows its packets, but
    /// only those that authenticate; a new address is validated by the core
    /// before it carries data.
    fn dispatch(
        self: &Arc<Self>,
        now: Instant,
        received_at: Instant,
        from: SocketAddr,
        ecn: Ecn,
        datagram: &mut [u8],
        touched: &mut Vec<Arc<Shared>>,
    ) {
        let Ok((header, _)) = Header::decode(datagram) else {
            return;
        };
        let known = lock(&self.sessions).get(&header.session_id).cloned();
        let Some(shared) = known else {
            self.accept(now, from, header.path, datagram);
            return;
        };
        {
            let mut g = shared.lock();
            let authentic =
                g.proto
                    .handle_datagram_received_at(now, received_at, header.path, ecn, datagram);
            if authentic && g.proto.role() == Role::Server {
                let same = g
                    .routes
                    .get(&header.path)
                    .map(|r| r.remote == from && Arc::ptr_eq(&r.endpoint, self));
                if same != Some(true) {
                    g.routes.insert(
                        header.path,
                        Route {
                            endpoint: self.clone(),
                            remote: from,
                        },
                    );
                }
                if same == Some(false) {
                    g.proto
                        .handle_address_change(now, header.path, datagram.len());
                }
            }
        }
        if !touched.iter().any(|s| Arc::ptr_eq(s, &shared)) {
            touched.push(shared);
        }
    }

    fn accept(self: &Arc<Self>, now: Instant, from: SocketAddr, path: PathId, datagram: &[u8]) {
        let accepting = lock(&self.accepting);
        let Some(a) = accepting.as_ref() else {
            return;
        };
        let Ok((header, payload)) = Header::decode(datagram) else {
            return;
        };
        if lock(&self.sessions).len() >= MAX_SESSIONS
            || lock(&self.closed).contains(&header.session_id)
        {
            return;
        }
        let token = match Frames::new(payload).next() {
            Some(Ok(Frame::ClientHello { token, .. })) => Some(token),
            Some(Ok(Frame::Hello(_))) => None,
            _ => return,
        };
        {
            let half_open = lock(&a.half_open);
            let from_source = half_open.values().filter(|&&ip| ip == from.ip()).count();
            if half_open.len() >= MAX_HALF_OPEN || from_source >= MAX_HALF_OPEN_PER_SOURCE {
                return;
            }
            if half_open.len() >= RETRY_THRESHOLD {
                let now_s = now.as_nanos() / 1_000_000_000;
                let valid =
                    token.is_some_and(|t| a.retry_key.verify(t, from, header.session_id, now_s));
                if !valid {
                    if token.is_some() {
                        self.send_retry(from, &header, &a.retry_key, now_s);
                    }
                    return;
                }
            }
        }
        let Ok(mut proto) =
            braid_proto::Session::accept(a.cfg.clone(), now, path, datagram, os_seed())
        else {
            return;
        };
        if proto.error().is_some() {
            // A refusal (version, protection mode, parameters) is said once
            // and keeps no state; the core limits it to 3x the hello.
            let mut buf = Vec::new();
            while let Some(t) = proto.poll_transmit(now, &mut buf) {
                let _ = self.io.try_send_to(from, &buf[..t.size]);
            }
            return;
        }
        let routes = BTreeMap::from([(
            path,
            Route {
                endpoint: self.clone(),
                remote: from,
            },
        )]);
        let shared = Shared::new(proto, routes);
        self.register(&shared);
        tokio::spawn(drive(shared.clone()));
        // Handed out once the client proves it completed the handshake; a
        // full backlog aborts the session when the handle is dropped.
        lock(&a.half_open).insert(shared.id, from.ip());
        let (half_open, queue, failed) = (a.half_open.clone(), a.queue.clone(), a.failed.clone());
        tokio::spawn(async move {
            let confirmed = shared.wait_for(|g| g.proto.is_peer_confirmed()).await;
            lock(&half_open).remove(&shared.id);
            if confirmed.is_ok() {
                let _ = queue.try_send(Session::new(shared));
            } else {
                failed.count.fetch_add(1, Ordering::Relaxed);
                failed.changed.notify_waiters();
            }
        });
    }

    /// Answers a handshake with a retry token instead of a session.
    fn send_retry(&self, to: SocketAddr, hello: &Header, key: &RetryKey, now_s: u64) {
        let token = key.token(to, hello.session_id, now_s);
        let mut datagram = Vec::with_capacity(80);
        Header {
            version: VERSION,
            key_phase: false,
            mbecn: 0,
            session_id: hello.session_id,
            path: hello.path,
            packet_number: 0,
        }
        .encode(&mut datagram);
        Frame::Retry { token: &token }.encode(&mut datagram);
        let _ = self.io.try_send_to(to, &datagram);
    }
}

impl Drop for EndpointInner {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.recv_task).take() {
            task.abort();
        }
    }
}

async fn recv_loop(io: Arc<UdpIo>, endpoint: Weak<EndpointInner>) {
    let mut storage = vec![0u8; RECV_BATCH * RECV_BUFFER];
    let mut meta = [RecvMeta::default(); RECV_BATCH];
    let mut touched = Vec::new();
    loop {
        let received = {
            let mut bufs: Vec<IoSliceMut<'_>> = storage
                .chunks_mut(RECV_BUFFER)
                .map(IoSliceMut::new)
                .collect();
            io.recv(&mut bufs, &mut meta).await
        };
        let n = match received {
            Ok(n) => n,
            // ICMP errors of earlier sends and the like: not fatal to a socket.
            Err(e) if is_transient(&e) => continue,
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                continue;
            }
        };
        let Some(ep) = endpoint.upgrade() else {
            return;
        };
        let (now, wall) = (clock::now(), clock::wall());
        for (m, buf) in meta.iter().zip(storage.chunks_mut(RECV_BUFFER)).take(n) {
            let stride = if m.stride == 0 { m.len } else { m.stride };
            // The kernel's stamp: a batch read late still shows its spacing.
            let received_at = clock::received_at(m.timestamp, now, wall);
            for datagram in buf[..m.len].chunks_mut(stride.max(1)) {
                ep.dispatch(
                    now,
                    received_at,
                    m.addr,
                    udp::from_codepoint(m.ecn),
                    datagram,
                    &mut touched,
                );
            }
        }
        for s in touched.drain(..) {
            s.wake_driver.notify_one();
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// A UDP socket that carries braid sessions, as a client, a server or both.
/// Clones share the socket.
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<EndpointInner>,
}

impl Endpoint {
    /// Binds a socket at `addr` (port 0: any free port). Needs a tokio runtime.
    pub fn bind(addr: SocketAddr) -> Result<Endpoint> {
        let io = UdpIo::bind(addr, DEFAULT_SOCKET_BUFFER)
            .map_err(|e| Error::io(format!("cannot bind {addr}"), &e))?;
        let inner = Arc::new(EndpointInner {
            io: Arc::new(io),
            sessions: Mutex::new(HashMap::new()),
            closed: Mutex::new(VecDeque::new()),
            accepting: Mutex::new(None),
            recv_task: Mutex::new(None),
        });
        let task = tokio::spawn(recv_loop(inner.io.clone(), Arc::downgrade(&inner)));
        *lock(&inner.recv_task) = Some(task.abort_handle());
        Ok(Endpoint { inner })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.io.local_addr()
    }

    /// Opens a session to `remotes`, one connection per address, all from
    /// this socket. Returns once the handshake completed.
    pub async fn connect(&self, remotes: &[SocketAddr], cfg: SessionConfig) -> Result<Session> {
        let paths: Vec<(Endpoint, SocketAddr)> =
            remotes.iter().map(|&r| (self.clone(), r)).collect();
        open(&paths, cfg).await
    }
}

/// One connection of a session to open: a remote address, and the local
/// address to send from (`None`: any, on a socket shared with the other
/// connections of the same address family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    pub local: Option<SocketAddr>,
    pub remote: SocketAddr,
}

impl PathSpec {
    /// A connection to `remote` from any local address.
    pub fn to(remote: SocketAddr) -> PathSpec {
        PathSpec {
            local: None,
            remote,
        }
    }
}

/// Opens a session over `paths` (each a connection; connection `i` is
/// `paths[i]`), binding one socket per distinct local address. Returns
/// once the handshake completed; fails with the core's
/// [`SessionError::HandshakeTimeout`](braid_proto::SessionError::HandshakeTimeout)
/// after `cfg.handshake_timeout` without an answer.
pub async fn connect(paths: &[PathSpec], cfg: SessionConfig) -> Result<Session> {
    let mut sockets: Vec<(SocketAddr, Endpoint)> = Vec::new();
    let mut routes = Vec::with_capacity(paths.len());
    for p in paths {
        let local = p.local.unwrap_or(if p.remote.is_ipv4() {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
        });
        let endpoint = match sockets.iter().find(|(a, _)| *a == local) {
            Some((_, e)) => e.clone(),
            None => {
                let e = Endpoint::bind(local)?;
                sockets.push((local, e.clone()));
                e
            }
        };
        routes.push((endpoint, p.remote));
    }
    open(&routes, cfg).await
}

async fn open(paths: &[(Endpoint, SocketAddr)], mut cfg: SessionConfig) -> Result<Session> {
    cfg.paths = u8::try_from(paths.len())
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Error::Config(braid_proto::ConfigError::OutOfRange {
                field: "paths",
                value: paths.len().to_string(),
                allowed: "1..=255 connections".into(),
            })
        })?;
    cfg.max_paths = cfg.max_paths.max(cfg.paths);
    let proto = braid_proto::Session::connect(cfg, rand::random(), clock::now(), os_seed())?;
    let routes = paths
        .iter()
        .enumerate()
        .map(|(i, (e, remote))| {
            (
                PathId(i as u8),
                Route {
                    endpoint: e.inner.clone(),
                    remote: *remote,
                },
            )
        })
        .collect();
    let shared = Shared::new(proto, routes);
    for (e, _) in paths {
        e.inner.register(&shared);
    }
    tokio::spawn(drive(shared.clone()));
    let session = Session::new(shared.clone());
    shared
        .wait_for(|g| g.proto.is_established() && !g.proto.is_handshaking())
        .await?;
    Ok(session)
}

/// An endpoint that accepts sessions.
pub struct Listener {
    endpoint: Endpoint,
    queue: tokio::sync::Mutex<mpsc::Receiver<Session>>,
    failed: Arc<FailedHandshakes>,
    /// With a one-time code: how many failed handshakes end the listener.
    guess_limit: Option<u32>,
}

impl Listener {
    /// Listens at `addr`; accepted sessions use `cfg` (the client's
    /// parameters are capped by it). Needs a tokio runtime.
    pub fn bind(addr: SocketAddr, cfg: SessionConfig) -> Result<Listener> {
        cfg.validate_for(Role::Server)?;
        let endpoint =
            Endpoint::bind(addr).map_err(|e| rename(e, format!("cannot listen on {addr}")))?;
        let (tx, rx) = mpsc::channel(ACCEPT_BACKLOG);
        let failed = Arc::<FailedHandshakes>::default();
        let guess_limit = cfg.security.code.is_some().then_some(CODE_GUESS_LIMIT);
        *lock(&endpoint.inner.accepting) = Some(Accepting {
            cfg,
            queue: tx,
            retry_key: RetryKey::new(os_seed()),
            half_open: Arc::default(),
            failed: failed.clone(),
        });
        Ok(Listener {
            endpoint,
            queue: tokio::sync::Mutex::new(rx),
            failed,
            guess_limit,
        })
    }

    /// The next session whose client completed the handshake. Handshakes
    /// that fail (a wrong key or code, a forged or lost hello) are not
    /// sessions; with a one-time code, [`CODE_GUESS_LIMIT`] of them end
    /// the listener, since each may be an attacker's guess.
    pub async fn accept(&self) -> Result<Session> {
        let mut queue = self.queue.lock().await;
        loop {
            let changed = self.failed.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let failed = self.failed_handshakes();
            if self.guess_limit.is_some_and(|limit| failed >= limit) {
                *lock(&self.endpoint.inner.accepting) = None;
                return Err(Error::CodeGuessLimit(failed));
            }
            tokio::select! {
                s = queue.recv() => return s.ok_or(Error::EndpointClosed),
                _ = changed => {}
            }
        }
    }

    /// Handshakes answered but never completed by the client.
    pub fn failed_handshakes(&self) -> u32 {
        self.failed.count.load(Ordering::Relaxed)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }

    /// The endpoint, to open client sessions from the same socket.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("local_addr", &self.local_addr())
            .finish()
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.local_addr())
            .finish()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        *lock(&self.endpoint.inner.accepting) = None;
    }
}

fn rename(e: Error, context: String) -> Error {
    match e {
        Error::Io { kind, message, .. } => Error::Io {
            context,
            kind,
            message,
        },
        e => e,
    }
}
