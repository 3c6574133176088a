//! A braid session: one reliable byte stream each way over N connections.
//!
//! The session is sans-IO. Its methods fall into four kinds:
//! - inputs: [`Session::handle_datagram`], [`Session::handle_timeout`],
//!   [`Session::handle_send_error`];
//! - outputs: [`Session::poll_transmit`], [`Session::poll_timeout`],
//!   [`Session::poll_event`], [`Session::drain_samples`];
//! - application commands: [`Session::write`] (or
//!   [`Session::write_generated`]), [`Session::finish`],
//!   [`Session::read`] (or [`Session::use_received_content`]),
//!   [`Session::abort`], [`Session::add_path`],
//!   [`Session::close_path`];
//! - getters: [`Session::stats`] and friends, which never change state.
//!
//! After any input or command the driver calls `poll_transmit` until it
//! returns `None`, drains `poll_event`, and sleeps until `poll_timeout`.
//!
//! The session is built of parts that own their state, and its `handle_*`
//! functions dispatch to them: each connection's [`Path`] (its packets,
//! recovery, replay window, address validation and timeout counts), the
//! [`Handshake`] until the peer confirms it, the [`Streams`] with their
//! flags, [`Liveness`] (when the peer was last heard, we last sent, the
//! transfer last moved), [`Packets`] (keys and the datagram being written),
//! the [`Sampler`]'s time series, the migration candidate and owed
//! responses (`validation::Challenges`), the second copies of ACKs and
//! tail segments (`ack_copy::Copies`), what the peer's handshake told
//! (`peer::PeerTerms`), our CLOSE and the periods after one
//! (`close::Ending`) and what the application hears (`events::Notices`).
//! Every deadline is in one table (`timers`).

mod ack_copy;
mod batch;
mod close;
mod events;
mod first_data;
mod handshake;
mod liveness;
mod migration;
mod packets;
mod path_map;
mod peer;
mod pmtu;
mod receive;
mod scheduler;
mod short_headers;
mod stats;
mod streams;
mod tail_copy;
mod timers;
mod trace;
mod transmit;
mod unreachable;
mod validation;
mod windows;

use crate::cc::{self, CcContext};
use crate::config::{ConfigError, SessionConfig};
use crate::crypto::{ClientHandshake, SessionRng};
use crate::error::{SessionError, Violation};
use crate::path::Path;
use crate::recv_stream::{ReceivedContent, RecvStream};
use crate::send_stream::{GeneratedContent, SendStream};
use crate::stats::PathState;
use crate::Instant;
use crate::{PathId, Role};
use close::Close;
use handshake::Handshake;
use liveness::Liveness;
use packets::Packets;
use path_map::PathMap;
use stats::Sampler;
use std::net::SocketAddr;
use streams::{Finished, Streams};

pub use close::CloseCode;
pub use handshake::{AcceptError, OfferError};
pub use migration::Handled;
pub use receive::Datagram;
pub use transmit::Transmit;

/// Keep-alive interval while the peer is in the middle of its stream.
const MID_STREAM_PROBE: std::time::Duration = std::time::Duration::from_secs(1);

/// Something the application should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// A connection carries data again after probing.
    PathUp(PathId),
    /// A connection stopped answering; it is probed until it does.
    PathDown(PathId),
    /// A connection was closed by either side.
    PathClosed(PathId),
    /// Everything written, and the end of the stream, was acknowledged.
    SendFinished,
    /// The peer's whole stream has been read.
    RecvFinished,
    /// Both directions finished and the session has drained.
    Closed,
    /// The session failed; nothing more will happen.
    Failed(SessionError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Handshaking {
        started: Instant,
        next_hello: Instant,
        attempts: u32,
    },
    Established,
    /// Both directions done; still acknowledging retransmissions until then.
    Draining {
        until: Instant,
    },
    Closed,
    Failed,
}

/// Counters the session keeps beyond those of its paths.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    segments_sent: u64,
    retransmitted: u64,
    malformed: u64,
    unexpected: u64,
    duplicate_packets: u64,
    /// Datagrams that did not open with the session's keys (or a clear
    /// handshake message that did not authenticate).
    forged: u64,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Session {
    role: Role,
    cfg: SessionConfig,
    session_id: u64,
    state: State,
    paths: PathMap,
    /// The two streams, and which of them finished.
    streams: Streams,
    /// The events not polled yet, and why the session failed.
    notices: events::Notices,
    /// Our CLOSE and the closing or draining period after a CLOSE.
    ending: close::Ending,
    /// Origin of every connection's ACK timestamps: one clock for all of
    /// them, so the peer's receive times compare across connections. It is
    /// also when the session was created.
    epoch: Instant,
    /// When the peer was last heard, we last sent, the transfer last moved.
    liveness: Liveness,
    /// The per-connection time series.
    sampler: Sampler,
    counters: Counters,
    /// The session's CSPRNG (handshake, challenges), seeded by the caller.
    rng: SessionRng,
    /// The packet keys and the datagram being written or opened.
    packets: Packets,
    /// The handshake until the peer confirms it.
    handshake: Handshake,
    /// The migration candidate and the PATH_RESPONSEs owed.
    challenges: validation::Challenges,
    /// Second copies: of slow connections' ACKs on the fastest one, and
    /// of overdue tail segments.
    copies: ack_copy::Copies,
    /// The event log, when the configuration asks for one.
    trace: trace::SessionTrace,
    /// The peer's ACK delay limit and what new connections offer it.
    peer: peer::PeerTerms,
}

impl Session {
    /// Opens a client session over `cfg.paths` connections (ids `0..paths`);
    /// `seed` seeds the session's CSPRNG (the OS's randomness on real
    /// networks, the scenario's seed in the simulator). The opening is
    /// dated by `now` since [`Instant::ZERO`]: right for a simulation;
    /// real clients use [`Session::connect_dated`] with the wall clock.
    pub fn connect(
        cfg: SessionConfig,
        session_id: u64,
        now: Instant,
        seed: [u8; 32],
    ) -> Result<Session, ConfigError> {
        let date = now.saturating_duration_since(Instant::ZERO);
        Session::connect_dated(cfg, session_id, now, seed, date)
    }

    /// As [`Session::connect`], the opening dated `unix_time` (the wall
    /// clock's time since the Unix epoch). A key-mode server refuses an
    /// opening whose date it has seen, or one older than the dates it
    /// remembers for the client's key: a replayed opening opens nothing,
    /// and a client's clock must not run backwards across its restarts.
    pub fn connect_dated(
        cfg: SessionConfig,
        session_id: u64,
        now: Instant,
        seed: [u8; 32],
        unix_time: std::time::Duration,
    ) -> Result<Session, ConfigError> {
        cfg.validate_for(Role::Client)?;
        // Only the low 32 bits travel in the header.
        let session_id = session_id & crate::wire::SESSION_ID_MASK;
        let mut s = Session::new(Role::Client, cfg, session_id, now, seed);
        if s.cfg.security.is_sealed() {
            // The date first (with a code, then the commitment to the
            // secret that gives up), then the parameters, all inside Noise.
            let date = u64::try_from(unix_time.as_nanos()).unwrap_or(u64::MAX);
            let mut offer = date.to_be_bytes().to_vec();
            let give_up = s.cfg.security.one_time_code().map(|_| {
                let g = handshake::GiveUp::from_seed(&seed);
                offer.extend_from_slice(&g.commitment());
                g
            });
            crate::wire::Frame::Hello(s.hello()).encode(&mut offer);
            let hs = ClientHandshake::new(&s.cfg.security, session_id, &offer, &mut s.rng);
            s.handshake = Handshake::Client(handshake::Client::sealed(hs, give_up));
        }
        s.state = State::Handshaking {
            started: now,
            next_hello: now,
            attempts: 0,
        };
        for id in 0..s.cfg.paths {
            s.insert_path(PathId(id), now);
        }
        s.trace_parameters(now);
        Ok(s)
    }

    fn new(
        role: Role,
        cfg: SessionConfig,
        session_id: u64,
        now: Instant,
        seed: [u8; 32],
    ) -> Session {
        let send = SendStream::new(
            u32::from(cfg.segment_size),
            cfg.send_window,
            cfg.send_window_packets(),
            0, // nothing may be sent before the peer states its window
        );
        let mut recv = RecvStream::new(cfg.recv_window);
        recv.set_max_window(cfg.max_window);
        Session {
            role,
            session_id,
            state: State::Established,
            paths: PathMap::default(),
            streams: Streams::new(send, recv),
            notices: events::Notices::default(),
            ending: close::Ending::default(),
            epoch: now,
            liveness: Liveness::new(now),
            sampler: Sampler::new(now, cfg.sample_interval),
            counters: Counters::default(),
            rng: SessionRng::new(seed),
            packets: Packets::default(),
            handshake: match role {
                Role::Client => Handshake::Client(handshake::Client::default()),
                Role::Server => Handshake::Server(handshake::Server::new(now)),
            },
            challenges: validation::Challenges::default(),
            copies: ack_copy::Copies::default(),
            trace: trace::SessionTrace::new(cfg.trace),
            peer: peer::PeerTerms::new(cfg.max_ack_delay),
            cfg,
        }
    }

    fn cc_context(&self) -> CcContext {
        CcContext {
            segment_size: u64::from(self.cfg.segment_size),
            session_window_packets: self.cfg.send_window_packets(),
            max_window_packets: self.cfg.max_window / u64::from(self.cfg.segment_size),
            paths: self
                .paths
                .values()
                .filter(|p| p.is_usable())
                .count()
                .max(usize::from(self.cfg.paths)),
        }
    }

    /// A controller for connection `id`, at its configured initial window if any.
    fn new_controller(&self, id: PathId, ctx: CcContext) -> Box<dyn cc::Controller> {
        let mut cc = self.cfg.cc.build(ctx);
        if let Some(&w) = self.cfg.initial_windows.get(id.index()) {
            cc.set_initial_window(u64::from(w) * u64::from(self.cfg.segment_size));
        }
        cc
    }

    /// `now` on the scale of our ACK timestamps: µs since `epoch`.
    fn clock_us(&self, now: Instant) -> i64 {
        crate::time::micros_i64(now.saturating_duration_since(self.epoch))
    }

    fn insert_path(&mut self, id: PathId, now: Instant) {
        let cc = self.new_controller(id, self.cc_context());
        let mut path = Path::new(
            id,
            cc,
            self.cfg.packet_threshold,
            self.cfg.segment_size,
            now,
            self.epoch,
        );
        path.pending.hello = self.role == Role::Client && self.is_handshaking();
        path.trace.tracer = crate::trace::Tracer::new(self.is_tracing());
        path.trace.stale = true;
        path.offer_short_headers(self.peer.short_on_new_paths());
        path.set_rto_var_factor(self.cfg.rto.k);
        // A connection's first event: qvis opens the first group it meets.
        let state = path.state();
        (self.trace.tracer).record(now, crate::trace::EventKind::PathState { path: id, state });
        self.paths.insert(id, path);
        self.reset_pmtu(now, id);
    }

    /// Rebuilds controllers once the negotiated parameters are known.
    fn reset_controllers(&mut self) {
        let ctx = self.cc_context();
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let cc = self.new_controller(id, ctx);
            self.paths.get_mut(&id).expect("path exists").set_cc(cc);
        }
    }

    /// Applies negotiated parameters to the streams and controllers.
    fn apply_negotiated(
        &mut self,
        segment_size: u16,
        send_window: u64,
        recv_window: u64,
        paths: u8,
        cc: cc::Algorithm,
    ) {
        self.cfg.segment_size = segment_size;
        self.cfg.send_window = send_window;
        self.cfg.recv_window = recv_window;
        self.cfg.paths = paths;
        self.cfg.cc = cc;
        self.streams.send.set_limits(
            u32::from(segment_size),
            send_window,
            self.cfg.send_window_packets(),
        );
        self.streams.send.update_max_data(recv_window);
        self.streams.recv.set_window(recv_window);
        self.streams.recv.set_max_window(self.cfg.max_window);
        self.reset_controllers();
        // Discovery starts over from the negotiated segment size; only
        // the raise timer reads the time, and it starts when a search ends.
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            self.reset_pmtu(self.epoch, id);
        }
        self.trace_parameters(self.liveness.latest());
    }

    // ---- getters -------------------------------------------------------

    /// When the session was created: the origin of its event log's times.
    pub fn created_at(&self) -> Instant {
        self.epoch
    }

    /// Which side this is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The session id shared by both sides.
    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// The configuration, with negotiated values once established.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// Whether the handshake is still running.
    pub fn is_handshaking(&self) -> bool {
        matches!(self.state, State::Handshaking { .. })
    }

    /// Whether the handshake completed and the session has not ended.
    pub fn is_established(&self) -> bool {
        matches!(self.state, State::Established | State::Draining { .. })
    }

    /// Whether nothing more will happen (closed or failed, and any closing
    /// or draining period over). The application hears of the end earlier,
    /// from [`Event::Failed`]; the driver runs until this.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed | State::Failed)
            && self.ending.is_over()
            && self.packets.held_is_empty()
    }

    /// Whether the session only drains: the peer closed, our answer is
    /// out, and nothing will ever be sent again. The draining period only
    /// absorbs the peer's late packets, which a runtime that forgets the
    /// session drops unread anyway, so a process need not wait for it.
    pub fn is_draining(&self) -> bool {
        self.state == State::Closed
            && self.ending.is_only_draining()
            && self.packets.held_is_empty()
    }

    /// Whether the peer proved it completed the handshake (a server's
    /// client sent something only our answer let it send). Until then a
    /// server session is half-open: cheap, short-lived and not handed out.
    pub fn is_peer_confirmed(&self) -> bool {
        self.handshake.is_done()
    }

    /// Whether datagrams are sealed.
    pub fn is_sealed(&self) -> bool {
        self.cfg.security.is_sealed()
    }

    /// Why the session failed, if it did.
    pub fn error(&self) -> Option<&SessionError> {
        self.notices.error()
    }

    /// Whether everything written, and the FIN, was acknowledged.
    pub fn is_send_finished(&self) -> bool {
        self.streams.is_send_finished()
    }

    /// Whether the peer's whole stream has been read.
    pub fn is_recv_finished(&self) -> bool {
        self.streams.is_recv_finished()
    }

    /// Connection ids and their states.
    pub fn path_states(&self) -> Vec<(PathId, PathState)> {
        self.paths.iter().map(|(&id, p)| (id, p.state())).collect()
    }

    // ---- application commands -------------------------------------------

    /// Buffers bytes to send; returns how many were taken (bounded by the send window).
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.notices.error().is_some() {
            return 0;
        }
        self.streams.send.write(data)
    }

    /// Makes `content` the source of the stream's bytes: from then on
    /// [`Session::write_generated`] only counts them and each packet reads
    /// its bytes from `content` (`write` takes nothing). For applications
    /// whose bytes are a function of their offset, such as the simulator's
    /// generated content. Only before the first write; whether it was taken.
    pub fn use_generated_content(&mut self, content: Box<dyn GeneratedContent>) -> bool {
        self.streams.send.use_generated(content)
    }

    /// Writes up to `len` bytes of the generated content, as `write` would
    /// take them; returns the count taken (none without generated content).
    pub fn write_generated(&mut self, len: u64) -> u64 {
        if self.notices.error().is_some() {
            return 0;
        }
        self.streams.send.write_generated(len)
    }

    /// Bytes `write` would accept now.
    pub fn writable(&self) -> u64 {
        if self.notices.error().is_some() {
            0
        } else {
            self.streams.send.writable()
        }
    }

    /// Says the stream we send will be `total` bytes long (a file's size,
    /// with what goes before it), so that near its end the scheduler
    /// leaves a slow connection idle when the faster ones would deliver
    /// the rest before a packet sent there arrived. Only a hint: writing
    /// more is allowed.
    pub fn announce_len(&mut self, total: u64) {
        self.streams.send.announce_len(total);
    }

    /// Ends our direction of the stream after what was written (graceful close).
    pub fn finish(&mut self) {
        self.streams.send.finish();
    }

    /// Bytes ready to read.
    pub fn readable(&self) -> usize {
        self.streams.recv.readable()
    }

    /// Reads in-order bytes into `out`; returns the count (0 = nothing now, or the end).
    pub fn read(&mut self, now: Instant, out: &mut [u8]) -> usize {
        let n = self.streams.recv.read(out);
        self.after_read(now);
        n
    }

    /// Makes `content` take the stream's in-order bytes from now on,
    /// straight from each packet while it has room (see
    /// [`ReceivedContent`]); `read` then gives nothing. The window
    /// advances as [`Session::on_received_released`] finds bytes
    /// released. Only one, ever; whether it was taken.
    pub fn use_received_content(
        &mut self,
        now: Instant,
        content: Box<dyn ReceivedContent>,
    ) -> bool {
        let taken = self.streams.recv.use_sink(content);
        self.after_read(now);
        taken
    }

    /// The application released bytes its [`ReceivedContent`] took (or
    /// made room for more): the window may advance and waiting bytes move in.
    pub fn on_received_released(&mut self, now: Instant) {
        self.streams.recv.on_sink_released();
        self.after_read(now);
    }

    /// Hands every readable chunk to `f`; returns the total.
    pub fn read_with(&mut self, now: Instant, f: impl FnMut(&[u8])) -> usize {
        let n = self.streams.recv.read_with(f);
        self.after_read(now);
        n
    }

    fn after_read(&mut self, now: Instant) {
        let owed = self.streams.recv.needs_window_update();
        self.streams.owe_window_update(owed);
        self.check_progress(now);
    }

    /// Aborts the session: the peer is told with `code` and `reason`.
    pub fn abort(&mut self, code: u64, reason: &str) {
        if matches!(self.state, State::Closed | State::Failed) {
            return;
        }
        self.ending.close = Some(Close::new(code, reason.to_owned()));
        self.fail(SessionError::LocallyAborted {
            code,
            reason: reason.to_owned(),
        });
    }

    /// Adds connection `id` (client side; the server learns of it from its first packet).
    pub fn add_path(&mut self, now: Instant, id: PathId) -> bool {
        if self.paths.contains_key(&id) || self.paths.len() >= usize::from(self.cfg.max_paths) {
            return false;
        }
        self.insert_path(id, now);
        self.normalize_windows();
        true
    }

    /// Adds a connection to `remote` (client side) under the lowest free
    /// id, which it returns; `None` at [`SessionConfig::max_paths`].
    pub fn open_path(&mut self, now: Instant, remote: SocketAddr) -> Option<PathId> {
        let id = (0..=u8::MAX)
            .map(PathId)
            .find(|id| !self.paths.contains_key(id))?;
        self.add_path(now, id).then(|| {
            self.set_remote(id, remote);
            id
        })
    }

    /// Whether every open connection is answered at `now`: none has had a
    /// retransmission timeout since the peer last acknowledged anything on
    /// it, and, while the peer's stream is still coming, none has been
    /// quiet for a few round trips. One that is not may be behind a NAT
    /// that rebound (see `rendezvous::Client::connections_answered`).
    pub fn is_answered(&self, now: Instant) -> bool {
        let expecting = self.is_established() && !self.is_recv_finished();
        !self.paths.values().any(|p| p.is_silent(now, expecting))
    }

    /// The connection that sends to `remote`, if one does.
    pub fn path_to(&self, remote: SocketAddr) -> Option<PathId> {
        self.paths
            .keys()
            .copied()
            .find(|&id| self.remote(id) == Some(remote))
    }

    /// Stops using connection `id`; the peer is told, and its data moves to other connections.
    pub fn close_path(&mut self, id: PathId) {
        if let Some(p) = self.paths.get_mut(&id) {
            if p.is_usable() {
                p.pending.close = true;
            }
        }
    }

    // ---- inputs ----------------------------------------------------------

    /// A datagram could not be sent on `path`: NKP-0024 halves its window.
    pub fn handle_send_error(&mut self, now: Instant, path: PathId) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.signal_congestion(now, cc::Cause::SendFailure, now, 1);
        }
        self.normalize_windows();
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        let event = self.notices.pop()?;
        self.log_event(&event);
        Some(event)
    }

    /// The application's events, as `tracing` events too.
    fn log_event(&self, event: &Event) {
        let session = crate::ids::Hex(self.session_id);
        let role = self.role.name();
        match event {
            Event::Connected => tracing::debug!(%session, role, "handshake complete"),
            Event::PathUp(p) => {
                tracing::info!(%session, role, path = p.0, "connection carries data")
            }
            Event::PathDown(p) => {
                tracing::info!(%session, role, path = p.0, "connection stopped answering; probing it")
            }
            Event::PathClosed(p) => tracing::info!(%session, role, path = p.0, "connection closed"),
            Event::SendFinished => {
                tracing::debug!(%session, role, "everything sent was acknowledged")
            }
            Event::RecvFinished => {
                tracing::debug!(%session, role, "the peer's stream was read to its end")
            }
            Event::Closed => tracing::debug!(%session, role, "session closed"),
            Event::Failed(e) => tracing::info!(%session, role, error = %e, "session ended"),
        }
    }

    // ---- internals -------------------------------------------------------

    fn fail(&mut self, err: SessionError) {
        if matches!(self.state, State::Failed) {
            return;
        }
        self.state = State::Failed;
        self.notices.fail(err);
    }

    /// Fails with a protocol violation, telling the peer.
    fn violation(&mut self, what: Violation) {
        self.ending.close = Some(Close::new(CloseCode::Protocol.into(), what.to_string()));
        self.fail(SessionError::Protocol(what));
    }

    /// Reports finished directions and starts draining when both are.
    fn check_progress(&mut self, now: Instant) {
        for finished in self.streams.poll_finished() {
            self.notices.push(match finished {
                Finished::Send => Event::SendFinished,
                Finished::Recv => Event::RecvFinished,
            });
        }
        if self.streams.are_finished() && self.state == State::Established {
            // Draining can last seconds: it keeps no window-sized buffers.
            self.streams.send.shrink_to_fit();
            self.streams.recv.shrink_to_fit();
            self.state = State::Draining {
                until: now + self.drain_linger(),
            };
        }
    }

    /// How long the previous key phase's opening key is kept once the peer
    /// has shown the new phase: three of the largest retransmission
    /// timeouts (RFC 9001 §6.5's three PTOs), time for the old phase's
    /// reordered or retransmitted datagrams to arrive.
    fn key_grace(&self) -> std::time::Duration {
        self.largest_rto() * 3
    }

    /// The largest connection's retransmission timeout, without backoff.
    fn largest_rto(&self) -> std::time::Duration {
        self.paths
            .values()
            .map(|p| p.rtt().rto(&self.cfg.rto, 0))
            .max()
            .unwrap_or(self.cfg.rto.initial_rto)
    }

    /// How long a session that has finished both ways stays after the last
    /// ack-eliciting packet it received, to acknowledge the peer's
    /// retransmissions of its end (TCP's TIME_WAIT, RFC 9293 §3.6.1): our
    /// ACK of it may have been lost, and only a later one releases the
    /// peer. As long as the peer itself waits before it calls us gone
    /// ([`crate::config::MIN_SILENCE`]): on a lossy path a shorter stay
    /// left a peer whose few retransmissions were all lost failing a
    /// transfer that had in fact completed.
    fn drain_linger(&self) -> std::time::Duration {
        (self.largest_rto() * 3).max(crate::config::MIN_SILENCE)
    }
}
