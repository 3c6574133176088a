//! One end's host behind its NAT: a socket's worth of what the runtime
//! does with one UDP socket, driven in virtual time. Rendezvous messages
//! go to the core's meeting [`Client`]; everything else to the core's
//! [`Endpoint`], which sorts it to a session (a receiver's opens there).
//! Every decision is the core's: where each datagram goes
//! ([`Transmit::to`](braid_proto::Transmit)), where a server's connection
//! follows its peer, which connections a sender opens after the meeting
//! ([`Event::connection`]), and when the relays are asked again.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use braid_proto::rendezvous::{self, Client, Event, Found, Opening, Role};
use braid_proto::wire::Header;
use braid_proto::{
    Datagram, DatagramEvent, Ecn, Endpoint, EndpointConfig, Instant, PathId, Security, Session,
    SessionConfig,
};

use crate::content::Transfer;

/// How often an end tells its meeting what only its sockets know, as the
/// runtime does: a sender whether each connection is answered, a
/// receiver which relays a session runs through.
const CHECK_PATHS: Duration = Duration::from_millis(250);

/// A datagram the host sends: to, its ECN codepoint, its bytes.
pub(super) type Outgoing = (SocketAddr, Ecn, Vec<u8>);

/// One end: its meeting, its endpoint and sessions, its application.
pub(super) struct Host {
    role: Role,
    client: Client,
    relays: Vec<SocketAddr>,
    endpoint: Endpoint<usize>,
    sessions: Vec<Session>,
    /// When each connection first heard its peer.
    pub first_heard: BTreeMap<(usize, PathId), Instant>,
    /// What the meeting found, with when.
    pub events: Vec<(Instant, Event)>,
    /// A sender's session configuration, until it opens.
    to_open: Option<SessionConfig>,
    /// When to look again whether to open it.
    open_at: Option<Instant>,
    session_seed: [u8; 32],
    /// The application's bytes: a sender writes them, a receiver reads.
    pub transfer: Transfer,
    /// When the sender's session was established, and when the receiver
    /// had read everything.
    pub established_at: Option<Instant>,
    pub received_at: Option<Instant>,
    next_check: Instant,
    /// Per session, whether the endpoint was told it is established (a
    /// server's, once its client confirmed; a client's from the start).
    confirmed: Vec<bool>,
}

impl Host {
    /// An end in `role` meeting under `code` at `relays`, from `start`;
    /// a sender sends `content`'s bytes, a receiver reads them.
    pub fn new(
        role: Role,
        start: Instant,
        relays: &[SocketAddr],
        code: &str,
        content: (u64, u64),
        seed: [u8; 32],
    ) -> Host {
        let client = Client::new(
            start,
            role,
            rendezvous::code_handle(code),
            relays,
            true,
            seed,
        );
        let cfg = SessionConfig {
            security: Security::code(code),
            ..SessionConfig::default()
        };
        let mut endpoint_seed = seed;
        endpoint_seed[31] ^= 0x5a;
        let mut endpoint = Endpoint::new(EndpointConfig::default(), endpoint_seed);
        let to_open = match role {
            Role::Register => {
                endpoint.listen(cfg).expect("a valid configuration");
                None
            }
            Role::Join => Some(cfg),
        };
        let mut session_seed = seed;
        session_seed[30] ^= 0xa5;
        Host {
            role,
            client,
            relays: relays.to_vec(),
            endpoint,
            sessions: Vec::new(),
            first_heard: BTreeMap::new(),
            events: Vec::new(),
            to_open,
            open_at: None,
            session_seed,
            transfer: Transfer::new(content.0, content.1),
            established_at: None,
            received_at: None,
            next_check: start,
            confirmed: Vec::new(),
        }
    }

    /// Offers the peer the host's local addresses.
    pub fn offer_candidates(&mut self, local: &[SocketAddr]) {
        self.client.set_candidates(local);
    }

    /// The session of this end (a receiver's first), once open.
    pub fn session(&self) -> Option<&Session> {
        self.sessions.first()
    }

    /// When a relay first paired us, and every relay that did (each once).
    pub fn pairings(&self) -> (Option<Instant>, Vec<SocketAddr>) {
        let paired = self.events.iter().filter_map(|(t, e)| match e {
            Event::Paired { relay, .. } => Some((*t, *relay)),
            _ => None,
        });
        let first = paired.clone().next().map(|p| p.0);
        let mut relays: Vec<SocketAddr> = paired.map(|p| p.1).collect();
        relays.sort();
        relays.dedup();
        (first, relays)
    }

    /// Whether `addr` is one of the relays.
    pub fn is_relay(&self, addr: SocketAddr) -> bool {
        self.relays.contains(&addr)
    }

    /// A datagram from `from` reached the host's socket; a stateless
    /// answer goes into `out`.
    pub fn receive(
        &mut self,
        now: Instant,
        from: SocketAddr,
        ecn: Ecn,
        bytes: &mut [u8],
        out: &mut Vec<Outgoing>,
    ) {
        if rendezvous::is_rendezvous(bytes) {
            self.client.handle(now, from, bytes);
            return;
        }
        let Ok((header, _)) = Header::decode(bytes) else {
            return;
        };
        let Self {
            endpoint,
            sessions,
            confirmed,
            ..
        } = self;
        let path = if header.short {
            match endpoint.by_address(from) {
                Some((_, path)) => path,
                None => return,
            }
        } else {
            header.path
        };
        let event = endpoint.handle(now, from, bytes, |mut s| {
            // Its answer goes where the opening came from.
            s.set_remote(path, from);
            sessions.push(s);
            confirmed.push(false);
            sessions.len() - 1
        });
        let i = match event {
            Some(DatagramEvent::Known(i)) => i,
            Some(DatagramEvent::Accepted(_)) | None => return,
            Some(DatagramEvent::Respond(answer)) => {
                out.push((from, Ecn::NotEct, answer));
                return;
            }
        };
        let s = &mut self.sessions[i];
        let unheard = s.largest_received(path).is_none();
        let datagram = Datagram {
            path,
            ecn,
            received_at: now,
            bytes,
        };
        let handled = s.handle_datagram_from(now, from, datagram);
        if !handled.authentic {
            return;
        }
        if unheard {
            self.first_heard.entry((i, path)).or_insert(now);
        }
        if s.remote(path) == Some(from) && s.wants_binding(now, path, from) {
            let took = self.endpoint.bind_address(from, s.session_id(), path);
            s.on_binding(now, path, from, took);
        }
    }

    /// Runs the host's timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        for s in &mut self.sessions {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
        if now >= self.next_check {
            self.next_check = now + CHECK_PATHS;
            self.check_paths(now);
        }
    }

    /// Tells the meeting what only the sockets know.
    fn check_paths(&mut self, now: Instant) {
        if self.role == Role::Register {
            for &relay in &self.relays {
                let alive = self.endpoint.by_address(relay).is_some();
                self.client.session_via(now, relay, alive);
            }
        }
        let answered = self.sessions.iter().all(|s| s.is_answered(now));
        if !self.sessions.is_empty() {
            self.client.connections_answered(now, answered);
        }
    }

    /// Lets the application write and read, then collects what the host
    /// sends now into `out`.
    pub fn service(&mut self, now: Instant, out: &mut Vec<Outgoing>) {
        while let Some((to, bytes)) = self.client.poll_transmit(now) {
            out.push((to, Ecn::NotEct, bytes));
        }
        while let Some(e) = self.client.poll_event() {
            self.events.push((now, e));
        }
        self.open_when_paired(now);
        self.open_found(now);
        for i in 0..self.sessions.len() {
            self.run_application(now, i);
            let s = &mut self.sessions[i];
            let mut buf = Vec::new();
            while let Some(t) = s.poll_transmit(now, 1, &mut buf) {
                if let Some(to) = t.to {
                    buf.truncate(t.size);
                    out.push((to, t.ecn, std::mem::take(&mut buf)));
                }
            }
            while s.poll_event().is_some() {}
            if !self.confirmed[i] && s.is_peer_confirmed() {
                self.confirmed[i] = true;
                self.endpoint.confirmed(s.session_id());
            }
        }
    }

    /// A sender opens its session when the core says
    /// ([`rendezvous::Found::opening`]): once the relays paired it and a
    /// punch was answered, or their graces passed. The other relays and
    /// direct addresses join it as the meeting finds them.
    fn open_when_paired(&mut self, now: Instant) {
        let Some(cfg) = self.to_open.as_ref() else {
            return;
        };
        let to = match self.opening(now) {
            Opening::Open(to) => to,
            Opening::Wait(at) => {
                self.open_at = at;
                return;
            }
        };
        let cfg = SessionConfig {
            paths: to.len() as u8,
            ..cfg.clone()
        };
        let id = u64::from_be_bytes(self.session_seed[..8].try_into().unwrap());
        let mut s = Session::connect(cfg, id, now, self.session_seed).expect("a valid config");
        for (i, &remote) in to.iter().enumerate() {
            s.set_remote(PathId(i as u8), remote);
        }
        let taken = s.use_generated_content(self.transfer.content());
        debug_assert!(taken);
        // As the file-transfer CLI does: it knows the file's size.
        s.announce_len(self.transfer.total);
        self.endpoint.insert(s.session_id(), 0);
        self.sessions.push(s);
        self.confirmed.push(true);
        self.to_open = None;
    }

    /// What the meeting found, as the core's opening rule reads it.
    fn opening(&self, now: Instant) -> Opening {
        let (first_paired, paired) = self.pairings();
        let direct: Vec<SocketAddr> = self
            .events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::Reachable(addr) => Some(*addr),
                _ => None,
            })
            .collect();
        let peer_known = self
            .events
            .iter()
            .any(|(_, e)| matches!(e, Event::Paired { peer: Some(_), .. }));
        Found {
            first_paired,
            paired: &paired,
            relays: self.relays.len(),
            direct: &direct,
            punching: peer_known,
        }
        .opening(now)
    }

    /// Once a sender's session is open, it gets the connections the
    /// meeting found (as the runtime's meeting adds them once `connect`
    /// returns).
    fn open_found(&mut self, now: Instant) {
        let Some(s) = self.sessions.first_mut() else {
            return;
        };
        if !s.is_established() || s.is_handshaking() {
            return;
        }
        for (_, e) in &self.events {
            if let Some(to) = e.connection(self.role) {
                if s.path_to(to).is_none() {
                    s.open_path(now, to);
                }
            }
        }
    }

    fn run_application(&mut self, now: Instant, i: usize) {
        let s = &mut self.sessions[i];
        if s.is_closed() {
            return;
        }
        match self.role {
            Role::Join => {
                if s.is_established() && self.established_at.is_none() {
                    self.established_at = Some(now);
                }
                let t = &mut self.transfer;
                t.pump(s.writable(), |n| s.write_generated(n));
                if t.is_written() {
                    s.finish();
                }
            }
            Role::Register => {
                let t = &mut self.transfer;
                s.read_with(now, |d| t.on_read(d));
                if s.is_recv_finished() && self.received_at.is_none() {
                    self.received_at = Some(now);
                    s.finish();
                }
            }
        }
    }

    /// When the host next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let grace = self.to_open.as_ref().and(self.open_at);
        let check =
            (self.role == Role::Register || !self.sessions.is_empty()).then_some(self.next_check);
        self.sessions
            .iter()
            .filter_map(Session::poll_timeout)
            .chain(self.client.poll_timeout())
            .chain(grace)
            .chain(check)
            .min()
    }
}
