//! Every deadline a session keeps, in one table.
//!
//! [`Timer`] names them and [`Session::deadline`] says when each is due;
//! `poll_timeout` is the earliest over [`Session::timers`], and
//! `handle_timeout` acts on the same timers, in the same order, asking the
//! same function whether each is due. A new timer is a variant, its
//! deadline and its arm in `Session::fire` (the match is exhaustive), so
//! the two cannot list different deadlines. A running session's
//! `poll_timeout` reads the deadlines written out (`earliest_running`),
//! which debug builds, the tests', check against the table on every call.

use super::{Session, State, MID_STREAM_PROBE};
use crate::error::SessionError;
use crate::path::Path;
use crate::stats::PathState;
use crate::Instant;
use crate::PathId;

/// Whether `handle_timeout` goes on to the next timer.
type Flow = std::ops::ControlFlow<()>;

/// What one `handle_timeout` call has done so far.
#[derive(Debug, Default)]
struct Round {
    /// Connections whose tail-loss probe or RTO fired in this call: one
    /// recovery action per connection and call.
    recovered: Vec<PathId>,
    /// Whether any RTO fired.
    any_rto: bool,
}

/// One deadline of a session or of one of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// The handshake gives up.
    Handshake,
    /// The client's HELLO is sent again.
    Hello,
    /// The closing or draining period after a CLOSE ends.
    Closing,
    /// A closed session stops answering.
    Drain,
    /// Nothing received for the idle timeout.
    Idle,
    /// A server session carried no stream data in its first seconds.
    FirstData,
    /// A server whose client never confirmed gives up on it.
    Unconfirmed,
    /// A path challenge is due or has gone unanswered too often.
    Validation,
    /// A keep-alive probe.
    KeepAlive,
    /// A probe while only the peer's flow-control window holds us back.
    Persist,
    /// A connection's pacer releases its next packet.
    Pacing(PathId),
    /// A connection's tail-loss probe.
    Tlp(PathId),
    /// A connection's retransmission timeout.
    Rto(PathId),
    /// Packets in flight on a connection become lost by the time threshold.
    Loss(PathId),
    /// A connection's delayed ACK is due (`poll_transmit` sends it).
    Ack(PathId),
    /// Copies of slow connections' ACKs are due on the fastest one
    /// (`poll_transmit` sends them).
    AckCopy,
    /// A segment at the end of the stream waited too long for its ACK
    /// (`poll_transmit` sends a second copy).
    TailCopy,
    /// Per-connection samples for the time series.
    Sample,
}

/// The session's own timers, before the connections' in [`Session::timers`].
const SESSION_TIMERS: [Timer; 10] = [
    Timer::Closing,
    Timer::Handshake,
    Timer::Hello,
    Timer::Drain,
    Timer::Idle,
    Timer::FirstData,
    Timer::Unconfirmed,
    Timer::Validation,
    Timer::KeepAlive,
    Timer::Persist,
];

/// The session's timers after the connections'.
const LAST_TIMERS: [Timer; 3] = [Timer::AckCopy, Timer::TailCopy, Timer::Sample];

/// Connection `id`'s timers, in order.
fn path_timers(id: PathId) -> [Timer; 5] {
    [
        Timer::Pacing(id),
        Timer::Tlp(id),
        Timer::Rto(id),
        Timer::Loss(id),
        Timer::Ack(id),
    ]
}

/// The earlier of two deadlines, either of which may be unset.
#[inline(always)]
fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// When connection `p`'s delayed ACK is due, if one is owed. An
/// unvalidated connection out of credit acknowledges when the peer's next
/// datagram brings some.
#[inline(always)]
fn ack_deadline(p: &Path) -> Option<Instant> {
    let can_send = p.amplification_allows(super::transmit::CONTROL_ESTIMATE);
    (p.is_ack_owed() && can_send)
        .then(|| p.ack_deadline())
        .flatten()
}

impl Session {
    /// Every timer the session could have, in the order `handle_timeout`
    /// acts on them.
    pub(super) fn timers(&self) -> Vec<Timer> {
        self.each_timer().collect()
    }

    /// [`Session::timers`], without collecting them.
    fn each_timer(&self) -> impl Iterator<Item = Timer> + '_ {
        let paths = self.paths.keys().flat_map(|&id| path_timers(id));
        SESSION_TIMERS.into_iter().chain(paths).chain(LAST_TIMERS)
    }

    /// When `timer` is due, if it is set. Inlined into `poll_timeout`,
    /// which runs after every datagram: out of line, the call itself cost
    /// a fifth of it.
    #[inline(always)]
    pub(super) fn deadline(&self, timer: Timer) -> Option<Instant> {
        match self.state {
            State::Closed | State::Failed => {
                return match timer {
                    Timer::Closing => self.ending_deadline(),
                    _ => None,
                }
            }
            State::Handshaking {
                started,
                next_hello,
                ..
            } => {
                return match timer {
                    Timer::Handshake => {
                        let full = started + self.cfg.handshake_timeout;
                        Some(self.handshake.client().map_or(full, |c| c.deadline(full)))
                    }
                    Timer::Hello => Some(next_hello),
                    // Nothing else runs before the handshake completes.
                    _ => None,
                };
            }
            State::Established | State::Draining { .. } => {}
        }
        let path = |id: PathId| self.paths.get(&id);
        match timer {
            Timer::Handshake | Timer::Hello | Timer::Closing => None,
            Timer::Drain => match self.state {
                State::Draining { until } => Some(until),
                _ => None,
            },
            // A server still waiting for its client's confirmation keeps to
            // the unconfirmed deadline: repeats of the opening, which it
            // answers, are not authentic traffic, but show the client trying.
            Timer::Idle => self
                .unconfirmed_deadline()
                .is_none()
                .then(|| self.liveness.idle_deadline(self.cfg.idle_timeout)),
            Timer::FirstData => self.first_data_deadline(),
            Timer::Unconfirmed => self.unconfirmed_deadline(),
            Timer::Validation => self.validation_deadline(),
            // Both probe the first active connection. Without one they wait:
            // connections that seem down probe on their own timer, and a
            // deadline nothing can serve would fire again at once, forever.
            Timer::KeepAlive => self
                .keep_alive_deadline()
                .filter(|_| self.has_active_path()),
            Timer::Persist => self.persist_deadline().filter(|_| self.has_active_path()),
            Timer::Pacing(id)
            | Timer::Tlp(id)
            | Timer::Rto(id)
            | Timer::Loss(id)
            | Timer::Ack(id) => self.path_deadline(timer, path(id)?),
            Timer::AckCopy => self.ack_copy_due().map(|(_, at)| at),
            Timer::TailCopy => self.tail_copy_deadline(),
            Timer::Sample => self.sampler.deadline(),
        }
    }

    /// When `timer`, one of connection `p`'s, is due (see
    /// [`Session::deadline`]; `None` for a session timer).
    #[inline(always)]
    fn path_deadline(&self, timer: Timer, p: &Path) -> Option<Instant> {
        match timer {
            Timer::Pacing(_) => p.pacing_wakeup(),
            Timer::Tlp(_) => p.tlp_deadline(self.peer.max_ack_delay()),
            Timer::Rto(_) => p.rto_deadline(&self.cfg.rto, self.cfg.max_probe_interval),
            Timer::Loss(_) => p.loss_deadline(),
            Timer::Ack(_) => ack_deadline(p),
            _ => None,
        }
    }

    /// The earliest instant at which `handle_timeout` has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let earliest = match self.state {
            State::Established | State::Draining { .. } => self.earliest_running(),
            _ => self.earliest_of_all(),
        };
        debug_assert_eq!(earliest, self.earliest_of_all(), "as the table has it");
        earliest
    }

    /// The earliest deadline over [`Session::timers`]: what `poll_timeout`
    /// answers, by definition.
    fn earliest_of_all(&self) -> Option<Instant> {
        self.each_timer().filter_map(|t| self.deadline(t)).min()
    }

    /// [`Session::earliest_of_all`] of an established or draining session,
    /// written out: each arm of [`Session::deadline`] once, without a
    /// dispatch per timer, and each connection's read from the connection
    /// at hand. This runs after every datagram, and the table's walk was
    /// most of its cost; `poll_timeout` checks the two agree.
    fn earliest_running(&self) -> Option<Instant> {
        let unconfirmed = self.unconfirmed_deadline();
        let drain = match self.state {
            State::Draining { until } => Some(until),
            _ => None,
        };
        let idle = unconfirmed
            .is_none()
            .then(|| self.liveness.idle_deadline(self.cfg.idle_timeout));
        // Keep-alive and persist probes share their condition.
        let probes = earlier(self.keep_alive_deadline(), self.persist_deadline())
            .filter(|_| self.has_active_path());
        let session = [
            drain,
            idle,
            self.first_data_deadline(),
            unconfirmed,
            self.validation_deadline(),
            probes,
            self.ack_copy_due().map(|(_, at)| at),
            self.tail_copy_deadline(),
            self.sampler.deadline(),
        ];
        let mut earliest = session.into_iter().fold(None, earlier);
        for p in self.paths.values() {
            let rto = p.rto_deadline(&self.cfg.rto, self.cfg.max_probe_interval);
            let tlp = p.tlp_deadline(self.peer.max_ack_delay());
            let timers = [
                p.pacing_wakeup(),
                tlp,
                rto,
                p.loss_deadline(),
                ack_deadline(p),
            ];
            earliest = timers.into_iter().fold(earliest, earlier);
        }
        earliest
    }

    /// Runs every timer that has expired by `now`; an early call does nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.fire_due(now);
        self.gather_trace(now);
    }

    /// Fires the timers due at `now`, in order.
    fn fire_due(&mut self, now: Instant) {
        let mut round = Round::default();
        for timer in self.timers() {
            if matches!(timer, Timer::Sample) && round.any_rto && self.after_timeouts(now) {
                return;
            }
            // Each deadline is read when its turn comes: earlier arms may
            // have moved it.
            let Some(at) = self.deadline(timer).filter(|&at| now >= at) else {
                continue;
            };
            if self.fire(timer, at, now, &mut round).is_break() {
                return;
            }
        }
    }

    /// Acts on `timer`, due `at`; breaks when the session ended.
    fn fire(&mut self, timer: Timer, at: Instant, now: Instant, round: &mut Round) -> Flow {
        match timer {
            Timer::Handshake => {
                let after = match self.state {
                    State::Handshaking { started, .. } => at - started,
                    _ => self.cfg.handshake_timeout,
                };
                let err = match self.handshake.client_mut() {
                    Some(client) => client.timeout_error(after),
                    None => SessionError::HandshakeTimeout(after),
                };
                return self.end(err);
            }
            Timer::Hello => self.resend_hello(now),
            Timer::Closing => {
                self.end_closing();
                return Flow::Break(());
            }
            Timer::Drain => {
                self.state = State::Closed;
                self.notices.push(super::Event::Closed);
                return Flow::Break(());
            }
            Timer::Idle => return self.end(SessionError::IdleTimeout(self.cfg.idle_timeout)),
            Timer::FirstData => {
                self.on_first_data_timeout();
                return Flow::Break(());
            }
            Timer::Unconfirmed => return self.end(SessionError::HandshakeTimeout(at - self.epoch)),
            Timer::Validation => self.expire_validations(now),
            // Both probe the first live connection.
            Timer::KeepAlive | Timer::Persist => self.probe_first_active(),
            Timer::Pacing(id) => {
                if let Some(p) = self.paths.get_mut(&id) {
                    p.on_pacing_timeout(now);
                }
            }
            // The RTO takes precedence when it is not later.
            Timer::Tlp(id) if self.deadline(Timer::Rto(id)).is_some_and(|rto| at >= rto) => {}
            Timer::Tlp(id) => {
                round.recovered.push(id);
                self.on_tlp_timeout(now, id);
            }
            Timer::Rto(id) if round.recovered.contains(&id) => {}
            Timer::Rto(id) => {
                round.recovered.push(id);
                round.any_rto = true;
                self.on_rto_timeout(now, id);
            }
            Timer::Loss(id) if round.recovered.contains(&id) => {}
            Timer::Loss(id) => {
                let p = self.paths.get_mut(&id).expect("a timer's path exists");
                p.detect_losses(now, &mut self.streams.send);
            }
            Timer::Ack(_) | Timer::AckCopy => {}
            Timer::TailCopy => self.on_tail_copy_timeout(now),
            Timer::Sample => {
                if let Some(interval) = self.cfg.sample_interval {
                    self.take_samples(now);
                    self.sampler.schedule(at, now, interval);
                }
            }
        }
        Flow::Continue(())
    }

    /// The session fails with `err`; nothing more is due.
    fn end(&mut self, err: SessionError) -> Flow {
        self.fail(err);
        Flow::Break(())
    }

    /// A keep-alive or persist probe goes on the first live connection.
    fn probe_first_active(&mut self) {
        if let Some(p) = self
            .paths
            .values_mut()
            .find(|p| p.state() == PathState::Active)
        {
            p.pending.probe = true;
        }
    }

    /// Connection `id`'s tail-loss probe fired.
    fn on_tlp_timeout(&mut self, now: Instant, id: PathId) {
        let p = self.paths.get_mut(&id).expect("a timer's path exists");
        if let Some(segment) = p.on_tlp(now) {
            if !self.streams.send.has_new_data() {
                self.streams.send.probe(segment);
            }
        }
    }

    /// Connection `id`'s retransmission timer fired: counted for the
    /// give-up rules, then the path backs off and probes.
    fn on_rto_timeout(&mut self, now: Instant, id: PathId) {
        let p = self.paths.get_mut(&id).expect("a timer's path exists");
        tracing::debug!(
            session = %crate::ids::Hex(self.session_id),
            path = id.0,
            rto_ms = p.rtt().rto(&self.cfg.rto, 0).as_millis() as u64,
            in_flight = p.in_flight(),
            "retransmission timeout"
        );
        p.count_rto(self.cfg.silent_limit.unwrap_or(u32::MAX));
        if p.on_rto(now, &mut self.streams.send) {
            self.notices.push(super::Event::PathDown(id));
        }
        if p.state() == PathState::Probing {
            p.pending.probe = true;
        }
    }

    /// The client's HELLO goes out again, after a doubling wait.
    fn resend_hello(&mut self, now: Instant) {
        let State::Handshaking {
            started, attempts, ..
        } = self.state
        else {
            return;
        };
        tracing::debug!(session = %crate::ids::Hex(self.session_id), attempt = attempts + 1, "no answer yet: hello again");
        for p in self.paths.values_mut() {
            p.pending.hello = true;
        }
        let wait = self
            .cfg
            .rto
            .initial_rto
            .mul_f64(self.cfg.rto.backoff.powi(attempts.min(30) as i32));
        // Probes of a path that seems down are at most max_probe_interval
        // apart, and so are HELLOs: on a lossy path the handshake gets a
        // try every second, not 4 in its 10 s (TCP's SYNs: 7 in 127 s).
        let wait = wait
            .min(self.cfg.rto.max_rto)
            .min(self.cfg.max_probe_interval);
        self.state = State::Handshaking {
            started,
            next_hello: now + wait,
            attempts: attempts + 1,
        };
    }

    /// After RTOs: the windows are shared out again, and a peer silent or a
    /// transfer without progress for too long ends the session. Whether it
    /// did.
    fn after_timeouts(&mut self, now: Instant) -> bool {
        self.normalize_windows();
        if let Some(floor) = self.cfg.silent_limit {
            let silence = self.liveness.silence(now);
            // Data of ours outstanding, or the peer's still to come (a
            // receiver's keep-alive probes go unanswered then).
            let waiting = self.streams.send.has_outstanding() || !self.streams.is_recv_finished();
            // Every usable connection at its limit; the largest, for the report.
            let limits: Option<Vec<u32>> = self
                .paths
                .values()
                .filter(|p| p.is_usable())
                .map(|p| p.rto_count().silent_limit_reached())
                .collect();
            let silent = limits.map(|l| l.into_iter().max().unwrap_or(floor));
            if let Some(rtos) = silent.filter(|_| silence >= crate::config::MIN_SILENCE && waiting)
            {
                self.fail(SessionError::PeerSilent {
                    after: silence,
                    rtos,
                });
                return true;
            }
        }
        // Losses that ACKs reveal do not count, only timeouts: a path
        // that still delivers, however lossy, makes progress.
        if let Some(limit) = self.cfg.retry_limit {
            // More than `limit` on every usable connection, and for as long
            // as that many doubling timeouts would take (TCP's patience).
            let expiries = limit.saturating_add(1);
            let exhausted = self
                .paths
                .values()
                .filter(|p| p.is_usable())
                .all(|p| p.rto_count().without_progress() >= expiries)
                && self.liveness.without_progress(now) >= self.cfg.rto.backoff_total(expiries);
            if exhausted && self.streams.send.has_outstanding() {
                self.fail(SessionError::NoProgress {
                    after: self.liveness.without_progress(now),
                    rtos: limit,
                });
                return true;
            }
        }
        false
    }

    /// A server that the client has not confirmed gives up on it then.
    fn unconfirmed_deadline(&self) -> Option<Instant> {
        let server = self.handshake.server()?;
        (self.state == State::Established).then(|| server.deadline(self.epoch))
    }

    fn keep_alive_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Established => self.cfg.keep_alive.map(|ka| {
                // A peer silent in the middle of its stream is news sooner:
                // probes start the timeouts that tell a dead peer (see
                // `SessionConfig::silent_limit`). So is one whose answer
                // we await with all of ours acknowledged (a sender waiting
                // for the receiver's verdict), and the probes tell the peer
                // we are there: a peer whose answers are being lost must
                // not take our quiet for silence and give up on a transfer
                // that arrived. Sessions idle from the start keep the long
                // interval.
                let awaiting_peer = (self.streams.recv.cumulative() > 0
                    || self.streams.is_send_finished())
                    && !self.streams.is_recv_finished();
                let ka = if awaiting_peer {
                    ka.min(MID_STREAM_PROBE)
                } else {
                    ka
                };
                self.liveness.keep_alive_deadline(ka)
            }),
            _ => None,
        }
    }

    fn has_active_path(&self) -> bool {
        self.paths.values().any(|p| p.state() == PathState::Active)
    }

    /// When blocked only by the peer's flow-control window with nothing in
    /// flight, probe after an RTO in case the window update was lost.
    fn persist_deadline(&self) -> Option<Instant> {
        if self.state != State::Established || !self.streams.send.is_flow_blocked() {
            return None;
        }
        if self.paths.values().any(|p| p.has_in_flight()) {
            return None;
        }
        let rto = self
            .paths
            .values()
            .map(|p| p.rtt().rto(&self.cfg.rto, 0))
            .min()?;
        Some(self.liveness.after_last_send(rto))
    }
}
