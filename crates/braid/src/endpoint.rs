//! Endpoints: a UDP socket and the table that hands its datagrams to
//! sessions. Sessions are told apart by the session id in every datagram,
//! not by the sender's address, so a connection may change address (a
//! relay restarts, a NAT rebinds) and several connections of one session
//! may share a socket.

use crate::driver::drive;
use crate::route::{Route, SessionTable};
use crate::session::{Session, Shared};
use crate::tcp_carrier::Carriers;
use crate::udp::{UdpIo, DEFAULT_SOCKET_BUFFER};
use crate::udp_errors::Unreachable;
use crate::{clock, Error, Result};
use braid_proto::rendezvous::{self, Carrier};
use braid_proto::wire::Header;
use braid_proto::{
    Datagram, DatagramEvent, Ecn, EndpointConfig, EndpointStats, Instant, PathId, SessionConfig,
};
use rand::RngCore;
use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::Instrument as _;

/// Accepted sessions waiting for `Listener::accept`.
mod socket_tasks;

use socket_tasks::{error_loop, recv_loop};

const ACCEPT_BACKLOG: usize = 256;
pub use braid_proto::CODE_GUESS_LIMIT;

/// What a listening endpoint does with sessions its clients confirmed.
struct Accepting {
    queue: mpsc::Sender<Session>,
}

/// 32 bytes from the operating system's CSPRNG.
pub(crate) fn os_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed
}

/// A rendezvous datagram, where it came from, and over what.
pub(crate) type Inbound = (SocketAddr, Vec<u8>, Carrier);

pub(crate) struct EndpointInner {
    /// The socket; rendezvous meetings send on it too.
    pub(crate) io: Arc<UdpIo>,
    /// The session table and admission: the core's sans-IO endpoint.
    table: Mutex<braid_proto::Endpoint<Arc<Shared>>>,
    accepting: Mutex<Option<Accepting>>,
    /// Signals a session confirmed or gone (the code's guess tally moved).
    changed: tokio::sync::Notify,
    /// The socket's receive and error tasks.
    tasks: Mutex<Vec<AbortHandle>>,
    /// Where rendezvous messages go, while a meeting runs on this socket.
    rendezvous: Mutex<Option<mpsc::Sender<Inbound>>>,
    /// TCP streams that carry this socket's datagrams to relays whose UDP
    /// does not answer (the meeting opens and closes them).
    pub(crate) carriers: Arc<Carriers>,
}

/// A lock whose holder panicked still guards usable state here.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl EndpointInner {
    /// Whether wrong guesses spent a code listener's code.
    pub(crate) fn is_code_spent(&self) -> bool {
        lock(&self.table).is_code_spent()
    }

    /// Ids are 64 random bits: a clash is not worth a code path, and a
    /// session registered on a socket twice (two connections) is one entry.
    pub(crate) fn register(&self, shared: &Arc<Shared>) {
        lock(&self.table).insert(shared.id, shared.clone());
    }

    /// Whether a session's connection is bound to `addr` (in either of
    /// its IPv4 forms).
    pub(crate) fn has_session_at(&self, addr: SocketAddr) -> bool {
        let table = lock(&self.table);
        let mapped = match addr.ip() {
            std::net::IpAddr::V4(v4) => SocketAddr::new(v4.to_ipv6_mapped().into(), addr.port()),
            std::net::IpAddr::V6(_) => SocketAddr::new(addr.ip().to_canonical(), addr.port()),
        };
        table.by_address(addr).is_some() || table.by_address(mapped).is_some()
    }

    /// Whether every connection of every session on this socket is
    /// answered ([`braid_proto::Session::is_answered`]).
    pub(crate) fn all_answered(&self, now: Instant) -> bool {
        let sessions: Vec<Arc<Shared>> = lock(&self.table).sessions().cloned().collect();
        sessions.iter().all(|s| s.lock().proto.is_answered(now))
    }

    /// Rendezvous messages that arrive on this socket from now on.
    pub(crate) fn take_rendezvous(&self) -> mpsc::Receiver<Inbound> {
        let (tx, rx) = mpsc::channel(crate::rendezvous::INBOX);
        *lock(&self.rendezvous) = Some(tx);
        rx
    }

    /// A route from this endpoint's socket.
    pub(crate) fn route(self: &Arc<Self>) -> Route {
        Route {
            socket: self.io.clone(),
            carriers: self.carriers.clone(),
            table: self.clone(),
        }
    }

    /// Sends one datagram to `to` now if the socket (or the stream that
    /// carries datagrams to `to`) has room; else it is dropped.
    pub(crate) fn try_send_to(&self, to: SocketAddr, bytes: &[u8]) {
        if !self.carriers.try_send(to, bytes, None) {
            let _ = self.io.try_send_to(to, bytes);
        }
    }

    /// From now on, datagrams to `relay` go over a TCP stream to it, and
    /// what it sends back is handled as datagrams from it.
    pub(crate) fn carry_over_tcp(self: &Arc<Self>, relay: SocketAddr) {
        // As this socket would see it over UDP: IPv4-mapped on IPv6.
        let from = match relay {
            SocketAddr::V4(v4) if self.io.local_addr().is_ipv6() => {
                SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port())
            }
            other => other,
        };
        let endpoint = Arc::downgrade(self);
        let deliver = move |datagram: &mut [u8]| {
            let Some(ep) = endpoint.upgrade() else {
                return;
            };
            let mut touched = Vec::new();
            let now = clock::now();
            ep.dispatch(
                now,
                now,
                from,
                Ecn::NotEct,
                datagram,
                Carrier::Tcp,
                &mut touched,
            );
            for s in touched {
                s.wake_driver.notify_one();
            }
        };
        self.carriers.open(relay, Arc::new(deliver));
    }

    /// Datagrams to `relay` go by UDP again.
    pub(crate) fn carry_over_udp(&self, relay: SocketAddr) {
        self.carriers.close(relay);
    }

    /// Hands one datagram to its session, opens a server session for a
    /// handshake the core admits, or sends the core's stateless answer. A
    /// server's route to a connection follows its packets, but only those
    /// that authenticate; a new address is validated by the core before
    /// it carries data.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        self: &Arc<Self>,
        now: Instant,
        received_at: Instant,
        from: SocketAddr,
        ecn: Ecn,
        datagram: &mut [u8],
        carrier: Carrier,
        touched: &mut Vec<Arc<Shared>>,
    ) {
        if rendezvous::is_rendezvous(datagram) {
            if let Some(tx) = lock(&self.rendezvous).as_ref() {
                // The meeting's core decodes it. A full inbox drops, as a
                // full socket buffer would.
                let _ = tx.try_send((from, datagram.to_vec(), carrier));
            }
            return;
        }
        let Ok((header, _)) = Header::decode(datagram) else {
            return;
        };
        let Some((event, path)) =
            self.route_datagram(now, from, header.short, header.path, datagram)
        else {
            return;
        };
        let shared = match event {
            DatagramEvent::Respond(answer) => {
                self.try_send_to(from, &answer);
                return;
            }
            DatagramEvent::Accepted(shared) => {
                self.on_accepted(&shared);
                shared
            }
            DatagramEvent::Known(shared) => {
                let datagram = Datagram {
                    path,
                    ecn,
                    received_at,
                    bytes: datagram,
                };
                self.hand_over(&shared, now, from, datagram);
                shared
            }
        };
        if !touched.iter().any(|s| Arc::ptr_eq(s, &shared)) {
            touched.push(shared);
        }
    }

    /// What the session table makes of a datagram, and the connection it
    /// came on; `None` when it belongs nowhere. A short header only finds
    /// its connection by address; a long one may open a session, and
    /// opening one may evict a half-open one, which is aborted here.
    fn route_datagram(
        self: &Arc<Self>,
        now: Instant,
        from: SocketAddr,
        short: bool,
        path: PathId,
        datagram: &mut [u8],
    ) -> Option<(DatagramEvent<Arc<Shared>>, PathId)> {
        let (event, path, evicted) = {
            let mut table = lock(&self.table);
            if short {
                // Its connection is the one bound to its address; it never
                // opens a session, so admission has nothing to say.
                let (shared, path) = table.by_address(from)?;
                (Some(DatagramEvent::Known(shared.clone())), path, Vec::new())
            } else {
                let event = table.handle(now, from, datagram, |mut proto| {
                    // Its answer goes where the opening came from.
                    proto.set_remote(path, from);
                    Shared::new(proto, BTreeMap::from([(path, self.route())]))
                });
                let evicted: Vec<_> = std::iter::from_fn(|| table.poll_evicted()).collect();
                (event, path, evicted)
            }
        };
        for shared in evicted {
            shared
                .lock()
                .proto
                .abort(0, "server busy: too many handshakes in progress");
            shared.wake_driver.notify_one();
        }
        Some((event?, path))
    }

    /// Gives a known session's datagram to its core, then follows the
    /// connection to `from` when the core moved it there or wants it bound.
    fn hand_over(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        now: Instant,
        from: SocketAddr,
        datagram: Datagram<'_>,
    ) {
        let path = datagram.path;
        let span = tracing::debug_span!(
            parent: &shared.span,
            "path",
            id = path.0,
            from = %from
        );
        let _in_path = span.enter();
        let mut g = shared.lock();
        let unheard = g.proto.largest_received(path).is_none();
        // The core decides where the connection sends; it sends
        // from the socket its peer was last heard on.
        let handled = g.proto.handle_datagram_from(now, from, datagram);
        let authentic = handled.authentic;
        if authentic && unheard {
            g.first_heard
                .entry(path)
                .or_insert_with(std::time::Instant::now);
        }
        if handled.moved_to.is_some() {
            g.routes.insert(path, self.route());
        }
        let rebind = authentic && self.needs_binding(&g, now, path, from);
        drop(g);
        if rebind {
            self.bind(shared, now, path, from);
        }
    }

    /// Whether connection `path`, whose datagram from `from` authenticated,
    /// sends to `from` from this socket, and the core wants it bound there.
    fn needs_binding(
        &self,
        g: &crate::session::Inner,
        now: braid_proto::Instant,
        path: PathId,
        from: SocketAddr,
    ) -> bool {
        let sends_here = g.proto.remote(path) == Some(from)
            && g.routes
                .get(&path)
                .is_some_and(|r| Arc::ptr_eq(&r.socket, &self.io));
        sends_here && g.proto.wants_binding(now, path, from)
    }

    /// Tells connection `path` apart by `from` on this socket if no other
    /// connection has that address, and tells the session whether it did.
    /// Called with no lock held.
    fn bind(
        &self,
        shared: &Arc<Shared>,
        now: braid_proto::Instant,
        path: PathId,
        from: SocketAddr,
    ) {
        let took = lock(&self.table).bind_address(from, shared.id, path);
        shared.lock().proto.on_binding(now, path, from, took);
    }

    /// A "port unreachable" for a datagram of ours: the session it names
    /// decides whether to believe it.
    fn on_unreachable(&self, u: &Unreachable) {
        let Ok((header, _)) = Header::decode(&u.quoted) else {
            return;
        };
        // A short header went on a connection the peer was heard on, which
        // the core never takes for unreachable.
        if header.short {
            return;
        }
        let Some(shared) = lock(&self.table).get(header.session_id).cloned() else {
            return;
        };
        let mut g = shared.lock();
        if g.proto.handle_unreachable(clock::now(), u.to, &u.quoted) {
            drop(g);
            shared.wake_driver.notify_one();
        }
    }

    /// Drives a new half-open session; once its client confirms, the
    /// session is established and handed to `Listener::accept` (a full
    /// backlog aborts it when the handle is dropped).
    fn on_accepted(self: &Arc<Self>, shared: &Arc<Shared>) {
        tokio::spawn(drive(shared.clone()).instrument(shared.span.clone()));
        let (endpoint, shared) = (Arc::downgrade(self), shared.clone());
        tokio::spawn(async move {
            let confirmed = shared.wait_for(|g| g.proto.is_peer_confirmed()).await;
            let Some(endpoint) = endpoint.upgrade() else {
                return;
            };
            if confirmed.is_ok() {
                lock(&endpoint.table).confirmed(shared.id);
                let queue = lock(&endpoint.accepting).as_ref().map(|a| a.queue.clone());
                if let Some(queue) = queue {
                    let _ = queue.try_send(Session::new(shared));
                }
            }
            endpoint.changed.notify_waiters();
        });
    }
}

impl SessionTable for EndpointInner {
    fn unregister(&self, id: u64) {
        lock(&self.table).remove(id);
        self.changed.notify_waiters();
    }
}

impl Drop for EndpointInner {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

/// A UDP socket that carries braid sessions, as a client, a server or both.
/// Clones share the socket.
#[derive(Clone)]
pub struct Endpoint {
    pub(crate) inner: Arc<EndpointInner>,
}

impl Endpoint {
    /// Binds a socket at `addr` (port 0: any free port). Needs a tokio runtime.
    pub fn bind(addr: SocketAddr) -> Result<Endpoint> {
        Endpoint::bind_spread(addr, 1)
    }

    /// As [`Endpoint::bind`], with `receivers` sockets on the address, each
    /// read by a task of its own, so that a runtime with several worker
    /// threads opens and reads different peers' datagrams on different
    /// cores (the kernel gives each peer address to one socket). Sessions
    /// are still found by id in one table, and every send leaves from the
    /// first socket. With 1 this is [`Endpoint::bind`]; with more, the
    /// address is shared (`SO_REUSEPORT`): only other sockets of this user
    /// bound the same way could share it too. Only Linux spreads flows
    /// over such sockets; elsewhere this binds one.
    pub fn bind_spread(addr: SocketAddr, receivers: usize) -> Result<Endpoint> {
        let receivers = if cfg!(target_os = "linux") {
            receivers
        } else {
            1
        };
        let cannot = |e: &io::Error| Error::io(format!("cannot bind {addr}"), e);
        let io = if receivers > 1 {
            UdpIo::bind_shared(addr, DEFAULT_SOCKET_BUFFER)
        } else {
            UdpIo::bind(addr, DEFAULT_SOCKET_BUFFER)
        }
        .map_err(|e| cannot(&e))?;
        // Port 0 resolved: the others join the first one's port.
        let bound = io.local_addr();
        let mut readers = Vec::new();
        for _ in 1..receivers {
            let other = UdpIo::bind_shared(bound, DEFAULT_SOCKET_BUFFER).map_err(|e| cannot(&e))?;
            readers.push(Arc::new(other));
        }
        // Drained by the error task spawned below.
        io.report_unreachable();
        let inner = Arc::new(EndpointInner {
            io: Arc::new(io),
            table: Mutex::new(braid_proto::Endpoint::new(
                EndpointConfig::default(),
                os_seed(),
            )),
            accepting: Mutex::new(None),
            changed: tokio::sync::Notify::new(),
            tasks: Mutex::new(Vec::new()),
            rendezvous: Mutex::new(None),
            carriers: Arc::new(Carriers::default()),
        });
        let recv = tokio::spawn(recv_loop(inner.io.clone(), Arc::downgrade(&inner)));
        let errors = tokio::spawn(error_loop(inner.io.clone(), Arc::downgrade(&inner)));
        let mut tasks = vec![recv.abort_handle(), errors.abort_handle()];
        // They never send, so no error of theirs is ours to read.
        for other in readers {
            tasks.push(tokio::spawn(recv_loop(other, Arc::downgrade(&inner))).abort_handle());
        }
        *lock(&inner.tasks) = tasks;
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

impl Session {
    /// Opens another connection of this session (a client's), from
    /// `endpoint`'s socket to `remote`: a relay, or a peer's address that
    /// hole punching found. The server takes it from its first packet and
    /// challenges the address before sending data there. Returns its id;
    /// `None` if the session has as many connections as it may, or ended.
    pub fn add_path(&self, endpoint: &Endpoint, remote: SocketAddr) -> Option<PathId> {
        add_path(self.shared(), endpoint, remote)
    }
}

/// As [`add_path`], unless the session already has a connection to
/// `remote` (checked under the same lock, so two callers add one).
pub(crate) fn add_path_if_new(
    shared: &Arc<Shared>,
    endpoint: &Endpoint,
    remote: SocketAddr,
) -> Option<PathId> {
    open_route(shared, endpoint, remote, true)
}

/// See [`Session::add_path`].
pub(crate) fn add_path(
    shared: &Arc<Shared>,
    endpoint: &Endpoint,
    remote: SocketAddr,
) -> Option<PathId> {
    open_route(shared, endpoint, remote, false)
}

fn open_route(
    shared: &Arc<Shared>,
    endpoint: &Endpoint,
    remote: SocketAddr,
    only_new: bool,
) -> Option<PathId> {
    let mut g = shared.lock();
    if g.done || (only_new && g.proto.path_to(remote).is_some()) {
        return None;
    }
    let id = g.proto.open_path(clock::now(), remote)?;
    g.routes.insert(id, endpoint.inner.route());
    drop(g);
    endpoint.inner.register(shared);
    shared.wake_driver.notify_one();
    Some(id)
}

/// One connection of a session to open: a remote address, and the local
/// address to send from (`None`: any, on a socket shared with the other
/// connections of the same address family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    /// The local address to send from; `None`: any.
    pub local: Option<SocketAddr>,
    /// The peer's address, or a relay's.
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
    // Path MTU discovery probes up to what every route's interface carries.
    if cfg.max_datagram.is_none() {
        cfg.max_datagram = paths
            .iter()
            .map(|&(_, remote)| crate::mtu::route_max_datagram(remote))
            .min();
    }
    // Dated by the wall clock, so a listener can tell a replayed opening.
    let date = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut proto =
        braid_proto::Session::connect_dated(cfg, rand::random(), clock::now(), os_seed(), date)?;
    let mut routes = BTreeMap::new();
    for (i, (e, remote)) in paths.iter().enumerate() {
        proto.set_remote(PathId(i as u8), *remote);
        routes.insert(PathId(i as u8), e.inner.route());
    }
    let shared = Shared::new(proto, routes);
    for (e, _) in paths {
        e.inner.register(&shared);
    }
    tokio::spawn(drive(shared.clone()).instrument(shared.span.clone()));
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
}

impl Listener {
    /// Listens at `addr`; accepted sessions use `cfg` (the client's
    /// parameters are capped by it). Needs a tokio runtime.
    pub fn bind(addr: SocketAddr, cfg: SessionConfig) -> Result<Listener> {
        Listener::bind_with(addr, cfg, EndpointConfig::default())
    }

    /// As [`Listener::bind`], with the endpoint's bounds (half-open
    /// sessions, memory budget, code guesses) set by `limits`. Openings
    /// dated before now are refused unless `limits.fresh_since` says
    /// otherwise.
    pub fn bind_with(
        addr: SocketAddr,
        cfg: SessionConfig,
        limits: EndpointConfig,
    ) -> Result<Listener> {
        Listener::bind_spread(addr, cfg, limits, 1)
    }

    /// As [`Listener::bind_with`], reading with `receivers` sockets
    /// ([`Endpoint::bind_spread`]): on a runtime with that many worker
    /// threads, sessions from different peers are opened on different cores.
    pub fn bind_spread(
        addr: SocketAddr,
        mut cfg: SessionConfig,
        mut limits: EndpointConfig,
        receivers: usize,
    ) -> Result<Listener> {
        limits
            .fresh_since
            .get_or_insert(braid_proto::Freshness::since(clock::wall()));
        // The listening address's interface bounds what discovery probes
        // for (Ethernet's when it listens on every interface).
        if cfg.max_datagram.is_none() {
            cfg.max_datagram = Some(crate::mtu::route_max_datagram(addr));
        }
        let endpoint = Endpoint::bind_spread(addr, receivers)
            .map_err(|e| rename(e, format!("cannot listen on {addr}")))?;
        let (tx, rx) = mpsc::channel(ACCEPT_BACKLOG);
        {
            let mut table = lock(&endpoint.inner.table);
            *table = braid_proto::Endpoint::new(limits, os_seed());
            table.listen(cfg)?;
        }
        *lock(&endpoint.inner.accepting) = Some(Accepting { queue: tx });
        Ok(Listener {
            endpoint,
            queue: tokio::sync::Mutex::new(rx),
        })
    }

    /// The next session whose client completed the handshake. Handshakes
    /// that fail (a wrong key or code, a forged or lost hello) are not
    /// sessions; with a one-time code, once [`CODE_GUESS_LIMIT`] answers
    /// were never confirmed by their client the code is spent and the
    /// listener ends, since each may have been an attacker's guess.
    pub async fn accept(&self) -> Result<Session> {
        let mut queue = self.queue.lock().await;
        let inner = &self.endpoint.inner;
        loop {
            let changed = inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut table = lock(&inner.table);
                if table.is_code_spent() {
                    table.stop_listening();
                    return Err(Error::CodeGuessLimit(table.failed_guesses()));
                }
            }
            tokio::select! {
                s = queue.recv() => return s.ok_or(Error::EndpointClosed),
                _ = changed => {}
            }
        }
    }

    /// With a one-time code: answered handshakes whose session ended
    /// without the client proving it knew the code (wrong guesses).
    pub fn failed_handshakes(&self) -> u32 {
        lock(&self.endpoint.inner.table).failed_guesses()
    }

    /// What admission did so far (sessions accepted, retries, guesses).
    pub fn stats(&self) -> EndpointStats {
        lock(&self.endpoint.inner.table).stats()
    }

    /// The address the listener's socket is bound to.
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
        lock(&self.endpoint.inner.table).stop_listening();
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
