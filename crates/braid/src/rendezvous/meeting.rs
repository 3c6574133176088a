//! One side's rendezvous on a real socket: the core's
//! [`braid_proto::rendezvous::Client`] decides what to ask the relays,
//! whom to punch and what to believe; this task sends what it says from
//! the session's socket, feeds it what arrives, and tells the session of
//! every way that works (each relay that paired us is a connection, and so
//! is each address that answered a punch).
//!
//! All of it runs on the session's own socket: the address a relay sees
//! is the NAT mapping the direct connection will use. When the core moves
//! a relay to TCP ([`Event::Carrier`]), the socket carries everything to
//! that relay over a TCP stream until the core moves it back.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use braid_proto::rendezvous::{same_addr, Carrier, Client, Event, Refusal};
use braid_proto::Ecn;
use tokio::sync::{mpsc, Notify};

use crate::endpoint::{lock, Endpoint, Inbound};
use crate::session::Shared;
use crate::{clock, Session};

/// How often the task tells the core what only the runtime sees: for a
/// sender, whether a connection stopped being answered (our NAT may have
/// rebound, and the relays are asked at once to follow us); for a
/// receiver, which relays a session runs through (a pair whose session
/// ended is released).
const CHECK_PATHS: Duration = Duration::from_millis(250);
/// Rendezvous messages queued from the socket; more are dropped.
pub(crate) const INBOX: usize = 64;

/// Whether we wait for a peer ([`MeetRole::Register`], a receiver) or look
/// for one ([`MeetRole::Join`], a sender).
pub use braid_proto::rendezvous::Role as MeetRole;

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
    /// Whether it ever answered us: one that never did may be down, or
    /// UDP to it blocked.
    pub answered: bool,
    /// Whether our datagrams to it go over TCP now (its UDP did not
    /// answer, or TCP was asked for).
    pub tcp: bool,
    /// Since when it has said that wrong guesses spent the code (every
    /// refusal it sent since the first saying so), unless it ever said
    /// anything else: a refusal travels in clear, so it is believed only
    /// once it has stood for [`SPENT_GRACE`] uncontradicted.
    pub spent_since: Option<std::time::Instant>,
    /// It said something else after saying the code was spent: one of
    /// the two was forged, and the relay's word on it is no longer taken.
    pub(crate) spent_doubted: bool,
}

/// How long a relay's clear "the code is spent" must stand, with no other
/// answer from it, before a sender believes it. Its requests repeat at
/// least every 2 s ([`braid_proto::rendezvous::MAX_RETRY`]), so a relay
/// that really said otherwise has said so within that time, and whoever
/// forged the refusal (it takes seeing our request's nonce) could not
/// drop that answer; it can only end a meeting that would have failed.
pub const SPENT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

impl RelayView {
    /// When this relay's word that the code is spent will have stood
    /// [`SPENT_GRACE`], if it said so and nothing else since.
    pub fn spent_believed_at(&self) -> Option<std::time::Instant> {
        Some(self.spent_since? + SPENT_GRACE)
    }

    fn on_refusal(&mut self, why: Refusal) {
        self.refused = Some(why);
        if why == Refusal::Spent && !self.spent_doubted {
            self.spent_since.get_or_insert_with(std::time::Instant::now);
        } else if self.spent_since.take().is_some() {
            self.spent_doubted = true;
        }
    }
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

pub(crate) struct MeetingShared {
    reach: Mutex<Reach>,
    pub(crate) changed: Notify,
    /// The core's side of the meeting.
    client: Mutex<Client>,
    /// Wakes the task when the client was told something from outside.
    wake: Notify,
    /// The session to add connections to (a sender's, once open).
    session: Mutex<Option<Weak<Shared>>>,
    endpoint: Endpoint,
    role: MeetRole,
    /// How long to wait for a first answer from any relay.
    relay_timeout: Duration,
    /// Whether we punch (a direct path was not refused).
    punches: bool,
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
    /// Stops asking, and frees our handle and pairs at the relays at once
    /// (best effort: a lost goodbye lapses as before).
    fn drop(&mut self) {
        self.task.abort();
        let now = clock::now();
        // A code receiver that wrong guesses ended says so as it leaves.
        let spent = self.shared.endpoint.inner.is_code_spent();
        let mut client = lock(&self.shared.client);
        if spent {
            client.leave_spent(now);
        } else {
            client.leave(now);
        }
        let inner = &self.shared.endpoint.inner;
        while let Some((to, bytes, carrier)) = client.poll_transmit_on(now) {
            match carrier {
                Carrier::Tcp => inner.try_send_to(to, &bytes),
                Carrier::Udp => {
                    let _ = inner.io.try_send_to(to, &bytes);
                }
            }
        }
        drop(client);
        // The goodbyes queued on a stream are written before it closes.
        for r in lock(&self.shared.reach).relays.iter().filter(|r| r.tcp) {
            inner.carry_over_udp(r.relay);
        }
    }
}

impl Meeting {
    /// Starts meeting as `at` says, on `endpoint`'s socket.
    pub fn start(endpoint: &Endpoint, at: &super::Rendezvous, role: MeetRole) -> Meeting {
        let inbox = endpoint.inner.take_rendezvous();
        let views = at
            .relays
            .iter()
            .map(|&relay| RelayView {
                relay,
                reflexive: None,
                peer: None,
                paired_at: None,
                refused: None,
                answered: false,
                tcp: false,
                spent_since: None,
                spent_doubted: false,
            })
            .collect();
        let seed = crate::endpoint::os_seed();
        let mut client = Client::new(clock::now(), role, at.handle, &at.relays, at.direct, seed);
        if at.tcp_only {
            client.use_tcp_only();
        }
        let local = endpoint.local_addr();
        client.set_candidates(&super::candidates::local_addresses(local));
        let shared = Arc::new(MeetingShared {
            reach: Mutex::new(Reach {
                started: std::time::Instant::now(),
                relays: views,
                direct: Vec::new(),
            }),
            changed: Notify::new(),
            client: Mutex::new(client),
            wake: Notify::new(),
            session: Mutex::new(None),
            endpoint: endpoint.clone(),
            role,
            relay_timeout: at.relay_timeout,
            punches: at.direct,
        });
        let task = tokio::spawn(run(shared.clone(), inbox));
        Meeting { shared, task }
    }

    /// The socket the meeting runs on.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.shared.endpoint
    }

    /// How long to wait for a first answer from any relay
    /// ([`super::Rendezvous::relay_timeout`]).
    pub fn relay_timeout(&self) -> Duration {
        self.shared.relay_timeout
    }

    /// Whether we punch the peer's addresses (a direct path was not
    /// refused).
    pub fn punches(&self) -> bool {
        self.shared.punches
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

    /// Ends our pairs at the relays: the session through them is over, or
    /// the peer they paired us with never began one. A receiver stays
    /// registered, for the next sender.
    pub fn release(&self) {
        lock(&self.shared.client).release(clock::now());
        self.shared.wake.notify_one();
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

/// Whether every connection of the attached session is answered
/// ([`braid_proto::Session::is_answered`]).
fn all_answered(m: &MeetingShared, now: braid_proto::Instant) -> bool {
    let Some(shared) = lock(&m.session).as_ref().and_then(Weak::upgrade) else {
        return true;
    };
    let answered = shared.lock().proto.is_answered(now);
    answered
}

/// Tells the core which relays a session of this listener runs through.
fn report_sessions(m: &MeetingShared, now: braid_proto::Instant) {
    let relays: Vec<SocketAddr> = lock(&m.reach).relays.iter().map(|r| r.relay).collect();
    for relay in relays {
        let alive = m.endpoint.inner.has_session_at(relay);
        lock(&m.client).session_via(now, relay, alive);
    }
}

/// Adds a connection to `remote` to the attached session, if it has none there yet.
fn add(m: &MeetingShared, remote: SocketAddr) {
    let Some(shared) = lock(&m.session).as_ref().and_then(Weak::upgrade) else {
        return;
    };
    crate::endpoint::add_path_if_new(&shared, &m.endpoint, remote);
}

/// Records what the core found, and opens the connections it says:
/// recorded first, so that [`Meeting::attach`], which reads the record
/// after setting the session, misses none.
fn apply(m: &MeetingShared, event: Event) {
    record(m, event);
    if let Some(to) = event.connection(m.role) {
        add(m, to);
    }
}

fn record(m: &MeetingShared, event: Event) {
    let mut reach = lock(&m.reach);
    let view = |reach: &mut Reach, relay| {
        reach
            .relays
            .iter()
            .position(|r| same_addr(r.relay, relay))
            .expect("the core names only our relays")
    };
    match event {
        Event::Registered { relay, reflexive } => {
            let i = view(&mut reach, relay);
            reach.relays[i].reflexive = Some(reflexive);
            reach.relays[i].refused = None;
        }
        Event::Paired {
            relay,
            reflexive,
            peer,
        } => {
            let i = view(&mut reach, relay);
            let v = &mut reach.relays[i];
            v.reflexive = Some(reflexive);
            v.peer = peer;
            v.paired_at.get_or_insert_with(std::time::Instant::now);
            v.refused = None;
            v.spent_doubted |= v.spent_since.take().is_some();
        }
        Event::Refused { relay, why } => {
            let i = view(&mut reach, relay);
            reach.relays[i].on_refusal(why);
        }
        Event::Reachable(addr) => {
            reach.direct.push((addr, std::time::Instant::now()));
        }
        Event::Carrier { relay, tcp } => {
            let i = view(&mut reach, relay);
            reach.relays[i].tcp = tcp;
            drop(reach);
            if tcp {
                m.endpoint.inner.carry_over_tcp(relay);
            } else {
                m.endpoint.inner.carry_over_udp(relay);
            }
        }
    }
}

/// Sends one of the meeting's datagrams over the carrier the core says.
async fn send(m: &MeetingShared, to: SocketAddr, bytes: &[u8], carrier: Carrier) {
    match carrier {
        Carrier::Tcp => m.endpoint.inner.try_send_to(to, bytes),
        // Awaited: a fresh socket is not yet known to be writable, and a
        // `try_` send would drop the first request. From the socket even
        // while a stream carries the rest: this is how UDP is probed.
        Carrier::Udp => {
            let _ = m.endpoint.inner.io.send(to, Ecn::NotEct, bytes, None).await;
        }
    }
}

/// Marks relay `from`, which the core says answered us, as having
/// answered; returns whether that is news.
fn note_answer(m: &MeetingShared, from: SocketAddr) -> bool {
    let mut reach = lock(&m.reach);
    let Some(v) = reach.relays.iter_mut().find(|v| same_addr(v.relay, from)) else {
        return false;
    };
    !std::mem::replace(&mut v.answered, true)
}

async fn run(m: Arc<MeetingShared>, mut inbox: mpsc::Receiver<Inbound>) {
    let mut next_check = clock::now();
    loop {
        let now = clock::now();
        let (sends, events, wake_at) = {
            let mut c = lock(&m.client);
            let sends: Vec<_> = std::iter::from_fn(|| c.poll_transmit_on(now)).collect();
            let events: Vec<_> = std::iter::from_fn(|| c.poll_event()).collect();
            (sends, events, c.poll_timeout())
        };
        // Events first: a stream the core just asked for carries the
        // requests that follow.
        if !events.is_empty() {
            for e in events {
                apply(&m, e);
            }
            m.changed.notify_waiters();
        }
        for (to, bytes, carrier) in sends {
            send(&m, to, &bytes, carrier).await;
        }
        if now >= next_check {
            next_check = now + CHECK_PATHS;
            let answered = match m.role {
                MeetRole::Register => {
                    report_sessions(&m, now);
                    m.endpoint.inner.all_answered(now)
                }
                MeetRole::Join => all_answered(&m, now),
            };
            lock(&m.client).connections_answered(now, answered);
            continue;
        }
        let check =
            (m.role == MeetRole::Register || lock(&m.session).is_some()).then_some(next_check);
        let deadline = [wake_at, check].into_iter().flatten().min();
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(clock::deadline(at)).await,
                None => std::future::pending().await,
            }
        };
        let received = tokio::select! {
            r = inbox.recv() => r,
            _ = m.wake.notified() => continue,
            _ = sleep => continue,
        };
        let Some((from, bytes, carrier)) = received else {
            return;
        };
        let answered = {
            let mut c = lock(&m.client);
            c.handle_via(clock::now(), from, &bytes, carrier) && c.has_answered(from)
        };
        if answered && note_answer(&m, from) {
            m.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> RelayView {
        RelayView {
            relay: "127.0.0.1:7000".parse().unwrap(),
            reflexive: None,
            peer: None,
            paired_at: None,
            refused: None,
            answered: true,
            tcp: false,
            spent_since: None,
            spent_doubted: false,
        }
    }

    /// The relay's own "nobody waits" after a "spent" that an observer
    /// forged (or the other way round) makes its word on it untrusted for
    /// good, however often "spent" comes again; a relay that says only
    /// "spent" is believed after the grace.
    #[test]
    fn a_contradicted_spent_refusal_is_never_believed() {
        let mut v = view();
        v.on_refusal(Refusal::Spent);
        let at = v.spent_believed_at().expect("said once");
        assert!(at >= std::time::Instant::now() + SPENT_GRACE - Duration::from_millis(100));
        v.on_refusal(Refusal::Spent);
        assert_eq!(v.spent_believed_at(), Some(at), "dated from the first");
        v.on_refusal(Refusal::Unknown);
        assert_eq!(v.spent_believed_at(), None);
        for _ in 0..10 {
            v.on_refusal(Refusal::Spent);
            assert_eq!(v.spent_believed_at(), None, "doubted for good");
        }
        assert_eq!(v.refused, Some(Refusal::Spent), "still shown as said");
    }
}
