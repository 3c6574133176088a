//! One side's rendezvous: asks every relay to pair it (a sender joins, a
//! receiver registers and keeps its registration fresh, which also keeps
//! its NAT's mapping open), punches the addresses the relays report, and
//! tells the session of every way that works: each relay that paired us
//! is a connection, and so is each address that answered a punch.
//!
//! All of it runs on the session's own socket: the address a relay sees
//! is the NAT mapping the direct connection will use.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use braid_proto::rendezvous::wire::{COOKIE_LEN, TOKEN_LEN};
use braid_proto::rendezvous::{Handle, Message, Puncher, Refusal};
use braid_proto::Ecn;
use tokio::sync::{mpsc, Notify};

use crate::endpoint::{lock, Endpoint};
use crate::session::Shared;
use crate::{clock, Session};

/// First wait for a relay's answer; doubled per attempt up to
/// [`MAX_RETRY`]. A relay answers within one round trip.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(2);
/// Between refreshes of a registration or a pair: well inside the relay's
/// 30 s and a NAT's shortest UDP timeouts (RFC 4787 asks for at least
/// 2 min, some give 30 s), and soon enough after a NAT rebinds that the
/// relay's connection comes back within a few of the session's timeouts.
/// A request a relay answers costs 160 bytes each way.
const REFRESH: Duration = Duration::from_secs(2);
/// How often a sender looks at its session's connections: one that
/// stopped being answered may mean our NAT rebound, and the relays are
/// asked at once (at most this often) to follow us.
const CHECK_PATHS: Duration = Duration::from_millis(250);
/// Rendezvous messages queued from the socket; more are dropped.
pub(crate) const INBOX: usize = 64;

/// Whether we wait for a peer or look for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeetRole {
    /// Wait under the handle (a receiver).
    Register,
    /// Pair with whoever waits under it (a sender).
    Join,
}

/// What one relay told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayView {
    /// The relay's address.
    pub relay: SocketAddr,
    /// Our address as the relay sees it.
    pub reflexive: Option<SocketAddr>,
    /// The peer's address as the relay sees it, once paired.
    pub peer: Option<SocketAddr>,
    /// When the relay paired us.
    pub paired_at: Option<std::time::Instant>,
    /// Its last refusal, if it refused.
    pub refused: Option<Refusal>,
}

/// What the relays and the punching found so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// When the meeting started.
    pub started: std::time::Instant,
    /// One per relay, in the order given.
    pub relays: Vec<RelayView>,
    /// Addresses of the peer that answered a punch, with when.
    pub direct: Vec<(SocketAddr, std::time::Instant)>,
}

impl Reach {
    /// When the first relay paired us.
    pub fn first_paired(&self) -> Option<std::time::Instant> {
        self.relays.iter().filter_map(|r| r.paired_at).min()
    }

    /// Whether `remote` is one of the relays.
    pub fn is_relay(&self, remote: SocketAddr) -> bool {
        self.relays.iter().any(|r| same_addr(r.relay, remote))
    }
}

/// Whether two addresses are the same, an IPv4 one and its IPv4-mapped
/// IPv6 form included.
fn same_addr(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && a.ip().to_canonical() == b.ip().to_canonical()
}

struct RelayState {
    /// The relay's last cookie (zeros until it gave one).
    cookie: [u8; COOKIE_LEN],
    /// The pair's token, once paired: refreshes carry it, so the relay
    /// follows us if our NAT rebinds.
    token: [u8; TOKEN_LEN],
    next: braid_proto::Instant,
    wait: Duration,
    /// Registered (refresh later) or paired (a joiner asks no more).
    settled: bool,
}

pub(crate) struct MeetingShared {
    reach: Mutex<Reach>,
    pub(crate) changed: Notify,
    /// The session to add connections to (a sender's, once open).
    session: Mutex<Option<Weak<Shared>>>,
    endpoint: Endpoint,
}

/// A rendezvous in progress; dropping it stops asking and punching.
pub struct Meeting {
    shared: Arc<MeetingShared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Meeting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meeting")
            .field("reach", &self.reach())
            .finish()
    }
}

impl Drop for Meeting {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Meeting {
    /// Starts meeting as `at` says, on `endpoint`'s socket.
    pub fn start(endpoint: &Endpoint, at: &super::Rendezvous, role: MeetRole) -> Meeting {
        let relays = &at.relays;
        let inbox = endpoint.inner.take_rendezvous();
        let shared = Arc::new(MeetingShared {
            reach: Mutex::new(Reach {
                started: std::time::Instant::now(),
                relays: relays
                    .iter()
                    .map(|&relay| RelayView {
                        relay,
                        reflexive: None,
                        peer: None,
                        paired_at: None,
                        refused: None,
                    })
                    .collect(),
                direct: Vec::new(),
            }),
            changed: Notify::new(),
            session: Mutex::new(None),
            endpoint: endpoint.clone(),
        });
        let task = tokio::spawn(run(shared.clone(), inbox, at.handle, at.direct, role));
        Meeting { shared, task }
    }

    /// What was found so far.
    pub fn reach(&self) -> Reach {
        lock(&self.shared.reach).clone()
    }

    /// Resolves when something changed (a relay answered, a punch did).
    pub async fn changed(&self) {
        self.shared.changed.notified().await;
    }

    /// Waits until `done` holds of what was found.
    pub async fn wait_until(&self, done: impl Fn(&Reach) -> bool) {
        loop {
            // Created before the check, so no change in between is missed.
            let changed = self.shared.changed.notified();
            if done(&self.reach()) {
                return;
            }
            changed.await;
        }
    }

    /// Lets the meeting add connections to `session` (a client's): one per
    /// relay that pairs us later, one per address that answers a punch
    /// (those found already are added now).
    pub fn attach(&self, session: &Session) {
        *lock(&self.shared.session) = Some(Arc::downgrade(session.shared()));
        let reach = self.reach();
        for (addr, _) in &reach.direct {
            add(&self.shared, *addr);
        }
        for r in reach.relays.iter().filter(|r| r.paired_at.is_some()) {
            add(&self.shared, r.relay);
        }
    }
}

/// Whether the attached session has a connection that stopped being
/// answered (it carries only probes).
fn in_trouble(m: &MeetingShared) -> bool {
    let Some(shared) = lock(&m.session).as_ref().and_then(Weak::upgrade) else {
        return false;
    };
    let paths = shared.paths();
    paths
        .iter()
        .any(|p| p.state == braid_proto::PathState::Probing)
}

/// Adds a connection to `remote` to the attached session, if it has none there yet.
fn add(m: &MeetingShared, remote: SocketAddr) {
    let Some(shared) = lock(&m.session).as_ref().and_then(Weak::upgrade) else {
        return;
    };
    if !shared.paths().iter().any(|p| p.remote == Some(remote)) {
        crate::endpoint::add_path(&shared, &m.endpoint, remote);
    }
}

async fn run(
    m: Arc<MeetingShared>,
    mut inbox: mpsc::Receiver<(SocketAddr, Message)>,
    handle: Handle,
    direct: bool,
    role: MeetRole,
) {
    let io = m.endpoint.inner.io.clone();
    let relays: Vec<SocketAddr> = lock(&m.reach).relays.iter().map(|r| r.relay).collect();
    let now = clock::now();
    let mut states: Vec<RelayState> = relays
        .iter()
        .map(|_| RelayState {
            cookie: [0; COOKIE_LEN],
            token: [0; TOKEN_LEN],
            next: now,
            wait: FIRST_RETRY,
            settled: false,
        })
        .collect();
    let mut puncher = Puncher::default();
    let mut next_check = now;
    loop {
        let now = clock::now();
        for (relay, s) in relays.iter().zip(&mut states) {
            if s.next > now {
                continue;
            }
            let (cookie, token) = (s.cookie, s.token);
            let request = match role {
                MeetRole::Register => Message::Register {
                    handle,
                    cookie,
                    token,
                },
                MeetRole::Join => Message::Join {
                    handle,
                    cookie,
                    token,
                },
            };
            // Awaited: a fresh socket is not yet known to be writable, and
            // a `try_` send would drop the first request.
            let _ = io.send(*relay, Ecn::NotEct, &request.encode(), None).await;
            s.next = now + if s.settled { REFRESH } else { s.wait };
            s.wait = (s.wait * 2).min(MAX_RETRY);
        }
        while let Some((to, bytes)) = puncher.poll_transmit(now) {
            let _ = io.send(to, Ecn::NotEct, &bytes, None).await;
        }
        let mut found = Vec::new();
        while let Some(addr) = puncher.poll_reachable() {
            found.push(addr);
        }
        if !found.is_empty() {
            let at = std::time::Instant::now();
            lock(&m.reach).direct.extend(found.iter().map(|&a| (a, at)));
            if role == MeetRole::Join {
                for a in found {
                    add(&m, a);
                }
            }
            m.changed.notify_waiters();
        }
        let next_request = states.iter().map(|s| s.next).min();
        if now >= next_check {
            next_check = now + CHECK_PATHS;
            if in_trouble(&m) {
                // Ask the relays now; one that sees us at a new address
                // moves our end of the pair and tells the peer.
                for s in states.iter_mut().filter(|s| s.settled) {
                    s.next = s.next.min(now);
                }
                continue;
            }
        }
        let check = lock(&m.session).is_some().then_some(next_check);
        let deadline = [next_request, puncher.poll_timeout(), check]
            .into_iter()
            .flatten()
            .min();
        let message = match deadline {
            Some(at) => tokio::select! {
                m = inbox.recv() => m,
                _ = tokio::time::sleep_until(clock::deadline(at)) => continue,
            },
            None => inbox.recv().await,
        };
        let Some((from, message)) = message else {
            return;
        };
        let now = clock::now();
        if let Message::Punch { token, answer } = message {
            if direct {
                puncher.handle(now, from, token, answer);
            }
            continue;
        }
        // A dual-stack socket sees an IPv4 relay as ::ffff:a.b.c.d.
        let Some(i) = relays.iter().position(|&r| same_addr(r, from)) else {
            continue;
        };
        let s = &mut states[i];
        match message {
            Message::Cookie(c) => {
                s.cookie = c;
                s.next = now;
            }
            Message::Registered { reflexive, .. } => {
                s.settled = true;
                s.wait = FIRST_RETRY;
                s.next = now + REFRESH;
                lock(&m.reach).relays[i].reflexive = Some(reflexive);
                m.changed.notify_waiters();
            }
            Message::Paired {
                reflexive,
                peer,
                token,
            } => {
                if !s.settled || s.token != token {
                    s.settled = true;
                    s.token = token;
                    s.wait = FIRST_RETRY;
                    s.next = now + REFRESH;
                }
                {
                    let mut reach = lock(&m.reach);
                    let view = &mut reach.relays[i];
                    // New, or moved (its NAT rebound): punch it there.
                    if direct && view.peer != Some(peer) {
                        puncher.add_peer(now, peer, token);
                    }
                    view.reflexive = Some(reflexive);
                    view.peer = Some(peer);
                    view.paired_at.get_or_insert_with(std::time::Instant::now);
                    view.refused = None;
                }
                if role == MeetRole::Join {
                    add(&m, from);
                }
                m.changed.notify_waiters();
            }
            Message::Refused(why) => {
                // Nobody there yet: the receiver may start later.
                lock(&m.reach).relays[i].refused = Some(why);
                m.changed.notify_waiters();
            }
            _ => {}
        }
    }
}
