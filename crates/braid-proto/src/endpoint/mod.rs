//! The endpoint: the table of sessions one socket carries and the
//! admission of new server sessions, sans-IO like the session itself, so
//! the runtime, the simulator and the fuzzers all run the same code.
//!
//! Inputs are [`Endpoint::handle`] (every datagram), [`Endpoint::confirmed`]
//! and [`Endpoint::remove`] (what the caller saw its sessions do), and
//! [`Endpoint::bind_address`] (a connection told apart by its address,
//! for short headers); outputs
//! are the [`DatagramEvent`] `handle` returns and [`Endpoint::poll_evicted`].
//! The caller owns the sessions and gives the endpoint a handle `H` for
//! each (the runtime an `Arc` of its shared state, the simulator an index).
//!
//! What the network can make an endpoint do is bounded: a handshake gets
//! a half-open session only within the limits of [`EndpointConfig`], counted
//! per address prefix; past them an opening is answered with a state-free
//! retry token rather than dropped, and one that echoes a token pushes out
//! one that did not, so a client that proves its address is never locked
//! out by ones that do not. Established sessions are capped per address
//! prefix and per client key, and draw on a memory budget as their
//! receive windows grow; an opening with no room is told "busy" in clear
//! rather than met with silence. With a one-time code, every answer is a
//! guess and is counted when it is sent. A key-mode opening is dated by its
//! client, and one whose date was seen is a replay and opens nothing, as
//! is one dated before the listener started ([`Freshness`]).

mod addresses;
mod admission;
mod guesses;
mod memory;
mod occupancy;
mod openings;

pub use admission::Prefix;
pub(crate) use memory::{MemoryBudget, Reservation};
pub use openings::{Freshness, OPENING_DATE_TOLERANCE};

use crate::config::ConfigError;
use crate::crypto::{mode, RetryKey, SessionRng};
use crate::wire::{Frame, Frames, Header, VERSION};
use crate::{CloseCode, Instant, PathId, Role, Session, SessionConfig};
use addresses::AddressTable;
use admission::{Admit, HalfOpen, HalfOpenTable, Limits};
use guesses::CodeGuesses;
use occupancy::{Occupancy, Shares};
use openings::OpeningDates;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;

/// An endpoint's bounds. The defaults suit a public listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointConfig {
    /// Sessions at most, of every kind; openings beyond are told "busy".
    pub max_sessions: usize,
    /// Established server sessions from one address prefix ([`Prefix`])
    /// from which an opening is told "busy": one host cannot take every
    /// place. Half-open ones have their own bounds, so this many plus
    /// those may complete at once.
    pub max_sessions_per_prefix: usize,
    /// The same per client key (key mode).
    pub max_sessions_per_key: usize,
    /// Half-open server sessions (answered, client not yet confirmed) at most.
    pub max_half_open: usize,
    /// Half-open sessions at most from one address prefix ([`Prefix`]).
    pub max_half_open_per_prefix: usize,
    /// From this many half-open sessions on, an opening must echo a retry
    /// token (proving it receives at its source address) to be answered.
    pub retry_threshold: usize,
    /// With a one-time code: answers whose client never confirms (wrong
    /// guesses) that end the code.
    pub code_guess_limit: u32,
    /// Bytes that the receive windows of all established server sessions
    /// (the accept backlog included) may reach together. A session draws
    /// its initial window once established (one that finds no room closes,
    /// saying "busy") and more only as its window grows, so idle sessions
    /// cost what they hold; whatever it drew returns when it is dropped.
    /// An opening is told "busy" while an initial window would not fit.
    pub memory_budget: u64,
    /// Key-mode openings dated before this are refused in silence, so a
    /// copy captured before the listener (re)started opens nothing;
    /// `None` takes every date (the simulator's clock starts at zero).
    pub fresh_since: Option<Freshness>,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            max_sessions: 16_384,
            max_sessions_per_prefix: 64,
            max_sessions_per_key: 16,
            max_half_open: 512,
            max_half_open_per_prefix: 16,
            retry_threshold: 64,
            code_guess_limit: CODE_GUESS_LIMIT,
            memory_budget: 1 << 30,
            fresh_since: None,
        }
    }
}

/// What to do with a datagram.
#[derive(Debug)]
pub enum DatagramEvent<H> {
    /// It belongs to this session: hand it over.
    Known(H),
    /// It opened this half-open server session (the opening is already
    /// handled): drive it, and report [`Endpoint::confirmed`] or
    /// [`Endpoint::remove`].
    Accepted(H),
    /// Send this datagram back to where the opening came from; nothing
    /// was kept (a retry token, or a refusal).
    Respond(Vec<u8>),
}

/// What an endpoint did, for operators and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Server sessions opened (half-open at first).
    pub accepted: u64,
    /// Openings answered with a retry token instead of a session.
    pub retries_sent: u64,
    /// Openings refused (answered with a refusal, no session kept),
    /// counted once per session id: a client's retransmissions of one
    /// opening are one refused sender.
    pub refused: u64,
    /// Openings told "busy": no room for them (sessions, memory, or the
    /// share of their prefix or key).
    pub busy: u64,
    /// Openings dropped in silence (a replay, a spent code, an insecure
    /// opening under load, or not a handshake).
    pub dropped: u64,
    /// Half-open sessions pushed out to make room for validated openings.
    pub evicted: u64,
    /// Key-mode openings dropped as replays (a date seen before, or one
    /// from before the listener started).
    pub replayed: u64,
    /// One-time-code handshakes answered: guesses anyone got.
    pub code_answers: u32,
    /// Of those, answers no client confirmed: wrong guesses, or still in flight.
    pub code_unconfirmed: u32,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Endpoint<H> {
    cfg: EndpointConfig,
    /// Configuration of accepted sessions; `None`: accepts nothing.
    accepting: Option<SessionConfig>,
    rng: SessionRng,
    retry_key: RetryKey,
    sessions: HashMap<u64, H>,
    /// Connections told apart by address, which short headers rely on.
    addresses: AddressTable,
    half_open: HalfOpenTable,
    /// Established server sessions by prefix and key.
    occupancy: Occupancy,
    /// What established sessions' receive windows may draw.
    budget: MemoryBudget,
    /// Ended session ids, so a late copy of an opening opens nothing.
    closed: VecDeque<u64>,
    closed_set: HashSet<u64>,
    guesses: Option<CodeGuesses>,
    openings: OpeningDates,
    evicted: VecDeque<H>,
    /// The last session ids refused, so a retransmitted opening is not
    /// counted again (bounded: [`REFUSALS_REMEMBERED`]).
    refused_ids: VecDeque<u64>,
    stats: EndpointStats,
}

/// Refused session ids remembered for counting refusals.
const REFUSALS_REMEMBERED: usize = 16;

/// Answers to one-time-code handshakes never confirmed by their client
/// (each one guess at the code) that end the code, by default.
pub const CODE_GUESS_LIMIT: u32 = 8;

/// What a busy listener says, in clear.
const BUSY: &str = "busy: the listener has no room now";

/// An opening being admitted.
struct Opening<'a> {
    now: Instant,
    prefix: Prefix,
    header: Header,
    datagram: &'a [u8],
}

/// What the half-open table decided on an opening it admits.
struct Admitted {
    validated: bool,
    code: bool,
    evict: Option<u64>,
}

/// Ended session ids remembered.
const RECENTLY_CLOSED: usize = 4096;

impl<H: Clone> Endpoint<H> {
    /// An endpoint that accepts nothing yet; `seed` seeds its CSPRNG (the
    /// OS's randomness on real networks), from which every accepted
    /// session's seed and the retry-token key come.
    pub fn new(cfg: EndpointConfig, seed: [u8; 32]) -> Endpoint<H> {
        let mut rng = SessionRng::new(seed);
        let retry_key = RetryKey::new(rng.seed());
        let openings = OpeningDates::new(cfg.fresh_since);
        let budget = MemoryBudget::new(cfg.memory_budget);
        Endpoint {
            cfg,
            accepting: None,
            rng,
            retry_key,
            sessions: HashMap::new(),
            addresses: AddressTable::default(),
            half_open: HalfOpenTable::default(),
            occupancy: Occupancy::default(),
            budget,
            closed: VecDeque::new(),
            closed_set: HashSet::new(),
            guesses: None,
            openings,
            evicted: VecDeque::new(),
            refused_ids: VecDeque::new(),
            stats: EndpointStats::default(),
        }
    }

    /// Accepts sessions with `cfg` from now on (the client's parameters
    /// are capped by it). A code's guess tally starts afresh.
    pub fn listen(&mut self, cfg: SessionConfig) -> Result<(), ConfigError> {
        cfg.validate_for(Role::Server)?;
        self.guesses = cfg
            .security
            .one_time_code()
            .is_some()
            .then(|| CodeGuesses::new(self.cfg.code_guess_limit));
        self.accepting = Some(cfg);
        Ok(())
    }

    /// Accepts no more sessions; those open carry on.
    pub fn stop_listening(&mut self) {
        self.accepting = None;
    }

    /// Adds a session this side opened; `false` if its id is taken.
    pub fn insert(&mut self, session_id: u64, handle: H) -> bool {
        if self.sessions.contains_key(&session_id) || self.closed_set.contains(&session_id) {
            return false;
        }
        self.sessions.insert(session_id, handle);
        true
    }

    /// Sorts one datagram from `from`, which arrived on connection `path`
    /// of its session: for a known session, an accepted opening (`make`
    /// wraps the new session into its handle), or a stateless answer.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        make: impl FnOnce(Session) -> H,
    ) -> Option<DatagramEvent<H>> {
        let (header, payload) = Header::decode(datagram).ok()?;
        if header.short {
            // Never an opening: only a connection bound to its address.
            let (h, _) = self.by_address(from)?;
            return Some(DatagramEvent::Known(h.clone()));
        }
        if let Some(h) = self.sessions.get(&header.session_id) {
            return Some(DatagramEvent::Known(h.clone()));
        }
        let cfg = self.accepting.clone()?;
        let token = match Frames::new(payload).next() {
            Some(Ok(Frame::ClientHello { token, mode, .. })) => Some((token, mode)),
            Some(Ok(Frame::Hello(_))) => None,
            _ => return None,
        };
        if self.closed_set.contains(&header.session_id) {
            self.stats.dropped += 1;
            return None;
        }
        let opening = Opening {
            now,
            prefix: Prefix::of(from.ip()),
            header,
            datagram,
        };
        if self.sessions.len() >= self.cfg.max_sessions
            || !self
                .occupancy
                .prefix_has_room(opening.prefix, self.shares())
            || !self.budget.has_room(cfg.recv_window)
        {
            return self.busy(&opening);
        }
        let code =
            token.is_some_and(|(_, m)| m == mode::CODE) && cfg.security.one_time_code().is_some();
        if code && !self.guesses.is_some_and(|g| g.may_answer()) {
            self.stats.dropped += 1;
            return None;
        }
        let now_s = now.as_nanos() / 1_000_000_000;
        let validated = token.is_some_and(|(t, _)| {
            !t.is_empty() && self.retry_key.verify(t, from, header.session_id, now_s)
        });
        // A code handshake spends a guess, so it must come from an address
        // that receives: junk from forged sources cannot use the code up.
        let limits = Limits {
            total: self.cfg.max_half_open,
            per_prefix: self.cfg.max_half_open_per_prefix,
            retry_from: self.cfg.retry_threshold,
        };
        let evict = match self
            .half_open
            .admit(opening.prefix, validated, code, &limits)
        {
            // An insecure opening has no token to echo.
            Admit::Retry if token.is_none() => {
                self.stats.dropped += 1;
                return None;
            }
            Admit::Retry => {
                self.stats.retries_sent += 1;
                return Some(DatagramEvent::Respond(self.retry(from, &header, now_s)));
            }
            Admit::Drop => return self.busy(&opening),
            Admit::Open(evict) => evict,
        };
        let admitted = Admitted {
            validated,
            code,
            evict,
        };
        self.open(&opening, cfg, admitted, make)
    }

    /// Opens a session for an opening the limits admit, unless it is a
    /// replay or its key holds its share already.
    fn open(
        &mut self,
        o: &Opening<'_>,
        cfg: SessionConfig,
        admitted: Admitted,
        make: impl FnOnce(Session) -> H,
    ) -> Option<DatagramEvent<H>> {
        let seed = self.rng.seed();
        let mut session = Session::accept(cfg, o.now, o.header.path, o.datagram, seed).ok()?;
        let dated = session.opening_date();
        if dated.is_some_and(|(key, date)| !self.openings.admits(key, date)) {
            // Not even a refusal: a replay learns nothing.
            self.stats.replayed += 1;
            self.stats.dropped += 1;
            return None;
        }
        let key = dated.map(|(key, _)| key);
        if session.error().is_none() {
            if key.is_some_and(|k| !self.occupancy.key_has_room(k, self.shares())) {
                return self.busy(o);
            }
            // It draws its window once established, when data may come.
            session.use_memory(Reservation::empty(&self.budget));
        }
        if let Some((key, date)) = dated {
            self.openings.check(key, date);
        }
        let answered = admitted.code && session.has_answered();
        if answered {
            let g = self.guesses.as_mut().expect("code listener");
            g.on_answered();
            self.stats.code_answers = g.answered();
        }
        if session.error().is_some() {
            // A refusal is said once and keeps no state; the core limits
            // it to 3x the opening. A refused code answer still was a guess.
            let id = o.header.session_id;
            if !self.refused_ids.contains(&id) {
                if self.refused_ids.len() == REFUSALS_REMEMBERED {
                    self.refused_ids.pop_front();
                }
                self.refused_ids.push_back(id);
                self.stats.refused += 1;
            }
            let mut buf = Vec::new();
            session.poll_transmit(o.now, 1, &mut buf)?;
            return Some(DatagramEvent::Respond(buf));
        }
        if let Some(id) = admitted.evict {
            self.evict(id);
        }
        let id = o.header.session_id;
        let handle = make(session);
        self.sessions.insert(id, handle.clone());
        self.half_open.insert(
            id,
            HalfOpen {
                prefix: o.prefix,
                since: o.now,
                validated: admitted.validated,
                code: answered,
                key,
            },
        );
        self.stats.accepted += 1;
        Some(DatagramEvent::Accepted(handle))
    }

    fn shares(&self) -> Shares {
        Shares {
            per_prefix: self.cfg.max_sessions_per_prefix,
            per_key: self.cfg.max_sessions_per_key,
        }
    }

    /// No room for the opening: a CLOSE in clear says so (a hint the
    /// client keeps while it tries again), at most 3x the opening's size
    /// as to any address not yet validated, and nothing is kept.
    fn busy(&mut self, o: &Opening<'_>) -> Option<DatagramEvent<H>> {
        let mut datagram = Vec::with_capacity(64);
        answer_header(&o.header).encode(&mut datagram);
        Frame::Close {
            code: CloseCode::Busy.value(),
            reason: BUSY.as_bytes(),
        }
        .encode(&mut datagram);
        if datagram.len() > 3 * o.datagram.len() {
            self.stats.dropped += 1;
            return None;
        }
        self.stats.busy += 1;
        Some(DatagramEvent::Respond(datagram))
    }

    fn retry(&self, to: SocketAddr, opening: &Header, now_s: u64) -> Vec<u8> {
        let token = self.retry_key.token(to, opening.session_id, now_s);
        let mut datagram = Vec::with_capacity(80);
        answer_header(opening).encode(&mut datagram);
        Frame::Retry { token: &token }.encode(&mut datagram);
        datagram
    }

    fn evict(&mut self, id: u64) {
        self.stats.evicted += 1;
        if let Some(h) = self.sessions.get(&id).cloned() {
            self.evicted.push_back(h);
        }
        self.remove(id);
    }

    /// Tells connection `path` of session `session_id` apart by `addr`, the
    /// address its datagrams come from (for a server, once one from there
    /// authenticated; for a client, where it sends), unless another
    /// connection has that address; the connection's former address is
    /// let go. Whether the address is now the connection's: if so, the
    /// session may offer short headers there
    /// ([`Session::accept_short_headers`]).
    pub fn bind_address(&mut self, addr: SocketAddr, session_id: u64, path: PathId) -> bool {
        self.sessions.contains_key(&session_id) && self.addresses.bind(addr, session_id, path)
    }

    /// The session and connection datagrams from `addr` belong to, if
    /// one is bound there ([`Endpoint::bind_address`]).
    pub fn by_address(&self, addr: SocketAddr) -> Option<(&H, PathId)> {
        let (id, path) = self.addresses.get(addr)?;
        Some((self.sessions.get(&id)?, path))
    }

    /// Every session the table holds, in no particular order.
    pub fn sessions(&self) -> impl Iterator<Item = &H> {
        self.sessions.values()
    }

    /// The handle of session `session_id`, if the table holds it.
    pub fn get(&self, session_id: u64) -> Option<&H> {
        self.sessions.get(&session_id)
    }

    /// A half-open session's client confirmed the handshake: it is
    /// established (and, with a code, proved it knew the code).
    pub fn confirmed(&mut self, session_id: u64) {
        if let Some(h) = self.half_open.remove(session_id) {
            if h.code {
                if let Some(g) = self.guesses.as_mut() {
                    g.on_confirmed();
                }
            }
            self.occupancy.insert(session_id, h.prefix, h.key);
        }
    }

    /// A session ended (or its handle was dropped): its id is forgotten,
    /// but remembered as closed for a while.
    pub fn remove(&mut self, session_id: u64) {
        if self.sessions.remove(&session_id).is_none() {
            return;
        }
        self.addresses.remove_session(session_id);
        self.half_open.remove(session_id);
        self.occupancy.remove(session_id);
        if self.closed.len() == RECENTLY_CLOSED {
            if let Some(old) = self.closed.pop_front() {
                self.closed_set.remove(&old);
            }
        }
        self.closed.push_back(session_id);
        self.closed_set.insert(session_id);
    }

    /// A half-open session pushed out to make room: the caller ends it.
    pub fn poll_evicted(&mut self) -> Option<H> {
        self.evicted.pop_front()
    }

    /// With a one-time code: wrong guesses so far, counting only answers
    /// whose session has ended unconfirmed.
    pub fn failed_guesses(&self) -> u32 {
        self.guesses
            .map_or(0, |g| g.unconfirmed() - self.half_open.code_answers())
    }

    /// Whether the code is spent: its wrong guesses reached the limit.
    pub fn is_code_spent(&self) -> bool {
        self.guesses
            .is_some_and(|g| self.failed_guesses() >= g.limit())
    }

    /// Sessions the endpoint knows.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether it knows none.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Half-open server sessions.
    pub fn half_open(&self) -> usize {
        self.half_open.len()
    }

    /// What the endpoint did so far.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            code_unconfirmed: self.guesses.map_or(0, |g| g.unconfirmed()),
            ..self.stats
        }
    }
}

/// The header of a stateless answer to `opening`.
fn answer_header(opening: &Header) -> Header {
    Header {
        version: VERSION,
        key_phase: false,
        mbecn: 0,
        short: false,
        session_id: opening.session_id,
        path: opening.path,
        packet_number: 0,
    }
}
