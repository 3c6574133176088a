//! The session's side of its event log (see [`crate::trace`]): what it
//! records itself (datagrams, its own choices, its life), and the
//! connections' events and changed figures it gathers after every input.

use super::{Session, State};
use crate::error::SessionError;
use crate::trace::{EventKind, FrameSummary, Metrics, Parameters, TraceEvent, Tracer};
use crate::wire::{AckFrame, Frame};
use crate::{Instant, PathId};

/// The session's recorder and what it needs between calls.
#[derive(Debug, Default)]
pub(super) struct SessionTrace {
    pub tracer: Tracer,
    /// Where the datagram being written starts its frames.
    payload_at: usize,
    /// The frames of the datagram being written: noted as they are
    /// written for a data packet, else read back before sealing.
    frames: FrameSummary,
    /// `frames` was noted as the datagram was written.
    noted: bool,
    /// The connection the previous stream segment went on.
    last_data_path: Option<PathId>,
    /// The life stage last recorded.
    stage: &'static str,
    /// The settings last recorded.
    parameters: Option<Parameters>,
}

impl SessionTrace {
    pub fn new(on: bool) -> SessionTrace {
        SessionTrace {
            tracer: Tracer::new(on),
            ..SessionTrace::default()
        }
    }
}

impl Session {
    /// Moves the events recorded since the last call into `out`, oldest
    /// first; nothing unless [`SessionConfig::trace`](crate::SessionConfig::trace)
    /// is set. Call it after every input, as with samples: past
    /// [`TRACE_CAPACITY`](crate::trace::TRACE_CAPACITY) undrained events
    /// the rest are only counted.
    pub fn drain_trace(&mut self, out: &mut Vec<TraceEvent>) {
        if !self.trace.tracer.is_on() {
            return;
        }
        let now = self.liveness.latest();
        self.gather_trace(now);
        self.trace.tracer.drain(now, out);
    }

    /// Whether the session records its events.
    pub(super) fn is_tracing(&self) -> bool {
        self.trace.tracer.is_on()
    }

    /// The settings, as the log's `parameters_set`.
    pub(super) fn trace_parameters(&mut self, now: Instant) {
        if !self.is_tracing() {
            return;
        }
        let p = Parameters {
            role: self.role,
            session_id: self.session_id,
            cc: self.cfg.cc.name(),
            paths: self.cfg.paths,
            segment_size: self.cfg.segment_size,
            max_ack_delay: self.cfg.max_ack_delay,
            sealed: self.cfg.security.is_sealed(),
            recv_window: self.cfg.recv_window,
        };
        if self.trace.parameters.as_ref() != Some(&p) {
            self.trace.parameters = Some(p.clone());
            (self.trace.tracer).record(now, EventKind::Parameters(Box::new(p)));
        }
    }

    /// A datagram's frames start at `at` in the buffer being written.
    pub(super) fn trace_payload_starts(&mut self, at: usize) {
        self.trace.payload_at = at;
        if self.is_tracing() {
            self.trace.frames = FrameSummary::default();
            self.trace.noted = false;
        }
    }

    /// The datagram being written carries `ack` of connection `path`
    /// (and an MB-ECN level before it, if `ece`).
    pub(super) fn trace_ack_written(
        &mut self,
        path: PathId,
        ack: &AckFrame,
        ece: bool,
        ping: bool,
    ) {
        if self.is_tracing() {
            self.trace.frames.note_ack(path, ack);
            if ece {
                self.trace.frames.note(&Frame::Ece(0));
            }
            if ping {
                self.trace.frames.note(&Frame::Ping);
            }
        }
    }

    /// The datagram being written ends with stream data: its frames are
    /// all noted.
    pub(super) fn trace_stream_written(&mut self, offset: u64, len: u32, fin: bool) {
        if self.is_tracing() {
            let len = u64::from(len);
            self.trace.frames.stream = Some(crate::trace::StreamRange { offset, len, fin });
            self.trace.noted = true;
        }
    }

    /// Reads the frames of the datagram in `buf` before it is sealed,
    /// unless they were noted as it was written.
    pub(super) fn trace_frames(&mut self, path: PathId, buf: &[u8]) {
        if !self.is_tracing() {
            return;
        }
        let payload = buf.get(self.trace.payload_at..).unwrap_or_default();
        if !self.trace.noted {
            self.trace.frames = FrameSummary::of(payload);
            return;
        }
        debug_assert_eq!(
            self.trace.frames.clone().on_path(path),
            FrameSummary::of(payload).on_path(path),
            "the frames noted as written are the frames written"
        );
    }

    /// The datagram just written went out on `path`.
    pub(super) fn trace_sent(&mut self, path: PathId, size: usize, short: bool) {
        if !self.is_tracing() {
            return;
        }
        let now = self.liveness.latest();
        let frames = std::mem::take(&mut self.trace.frames).on_path(path);
        let pn = self.packets.number();
        if let Some(of) = frames.ack_copy_of(path) {
            let copy = EventKind::AckCopy { of, via: path };
            self.trace.tracer.record(now, copy);
        }
        if frames.stream.is_some() && self.trace.last_data_path != Some(path) {
            let previous = self.trace.last_data_path.replace(path);
            let pick = EventKind::SchedulerPick { path, previous };
            self.trace.tracer.record(now, pick);
        }
        let sent = EventKind::PacketSent {
            path,
            pn,
            size,
            short,
            frames,
        };
        self.trace.tracer.record(now, sent);
    }

    /// When recording, where an authentic datagram's arrival goes in the
    /// log, and the summary its frames fill as they are handled (read once,
    /// not again for the log).
    pub(super) fn trace_arrival_slot(&self) -> Option<(usize, FrameSummary)> {
        self.is_tracing()
            .then(|| (self.trace.tracer.len(), FrameSummary::default()))
    }

    /// An authentic datagram `(path, number, size)` arrived; its event goes
    /// at `slot`, before what its frames did.
    pub(super) fn trace_received(
        &mut self,
        now: Instant,
        slot: usize,
        (path, pn, size, short): (PathId, u64, usize, bool),
        frames: FrameSummary,
    ) {
        let kind = EventKind::PacketReceived {
            path,
            pn,
            size,
            short,
            frames: frames.on_path(path),
        };
        self.trace.tracer.record_at(slot, now, kind);
    }

    /// Records `kind` now, if recording.
    pub(super) fn trace_event(&mut self, now: Instant, kind: EventKind) {
        self.trace.tracer.record(now, kind);
    }

    /// Gathers the connections' events, then reports what changed since
    /// the last time: connection states, controller states, figures, and
    /// the session's own stage.
    pub(super) fn gather_trace(&mut self, now: Instant) {
        if !self.is_tracing() {
            return;
        }
        let tracer = &mut self.trace.tracer;
        for p in self.paths.values_mut() {
            // Figures change with the connection's own events (ACKs,
            // losses, timers, normalisation) or where marked stale; a
            // receiver's connections have none per datagram.
            if !p.trace.stale && p.trace.tracer.is_empty() {
                continue;
            }
            p.trace.stale = false;
            let path = p.id();
            let mut t = std::mem::take(&mut p.trace);
            t.tracer.move_into(tracer);
            if p.state() != t.state {
                t.state = p.state();
                tracer.record(
                    now,
                    EventKind::PathState {
                        path,
                        state: t.state,
                    },
                );
            }
            let new = p.cc().state_name();
            if new != t.cc_state {
                let old = std::mem::replace(&mut t.cc_state, new);
                tracer.record(now, EventKind::CongestionState { path, old, new });
            }
            let m = p.trace_metrics();
            let metrics = Metrics::changed(&t.metrics, &m);
            if !metrics.is_empty() {
                t.metrics = m;
                let metrics = Box::new(metrics);
                tracer.record(now, EventKind::Metrics { path, metrics });
            }
            p.trace = t;
        }
        let stage = match self.state {
            State::Handshaking { .. } => "handshaking",
            State::Established => "established",
            State::Draining { .. } => "draining",
            State::Closed if self.notices.error().is_none() => "closed",
            State::Closed | State::Failed => "failed",
        };
        if stage != self.trace.stage {
            self.trace.stage = stage;
            self.trace_stage(now, stage);
        }
    }

    /// The session entered `stage`; an end says why.
    fn trace_stage(&mut self, now: Instant, stage: &'static str) {
        let tracer = &mut self.trace.tracer;
        tracer.record(now, EventKind::SessionState { new: stage });
        let closed = match (self.notices.error(), stage) {
            (None, "closed") => (0, "both directions finished".to_owned(), false),
            (Some(SessionError::PeerAborted { code, reason }), _) => (*code, reason.clone(), true),
            (Some(e), _) => (1, e.to_string(), false),
            _ => return,
        };
        let (code, reason, remote) = closed;
        let kind = EventKind::Closed {
            code,
            reason,
            remote,
        };
        tracer.record(now, kind);
    }
}

#[cfg(test)]
mod tests {
    use crate::trace::{EventKind, TraceEvent};
    use crate::wire::clear_datagram;
    use crate::{Datagram, Instant, Keypair, PathId, Security, Session, SessionConfig};

    /// A sealed client that records its events, its opening sent.
    fn client() -> Session {
        let cfg = SessionConfig {
            security: Security::pinned(Keypair::generate([7; 32]).public()),
            trace: true,
            ..SessionConfig::default()
        };
        let mut s = Session::connect(cfg, 42, Instant::ZERO, [1; 32]).unwrap();
        let mut buf = Vec::new();
        while s.poll_transmit(Instant::ZERO, 1, &mut buf).is_some() {
            buf.clear();
        }
        s
    }

    #[test]
    fn forged_datagrams_leave_nothing_in_the_log() {
        let mut s = client();
        let mut before = Vec::new();
        s.drain_trace(&mut before);
        assert!(before
            .iter()
            .any(|e| matches!(e.kind, EventKind::PacketSent { .. })));
        for i in 0..2000u64 {
            // Our session's id and a plausible number, then bytes that
            // open with no key: what an off-path attacker can send.
            let mut d = clear_datagram(42, PathId((i % 3) as u8), i, &[]);
            d.extend((0..100 + i % 1200).map(|b| (b * 31 + i) as u8));
            let at = Instant::from_nanos(i * 1000);
            s.handle_datagram(at, Datagram::new(at, PathId((i % 3) as u8), &mut d));
            s.handle_datagram(at, Datagram::new(at, PathId(0), &mut [0xff; 40]));
        }
        let mut after: Vec<TraceEvent> = Vec::new();
        s.drain_trace(&mut after);
        assert!(s.stats().forged_dropped + s.stats().malformed_dropped > 0);
        assert!(
            after
                .iter()
                .all(|e| !matches!(e.kind, EventKind::PacketReceived { .. })),
            "{after:?}"
        );
        assert!(
            after.len() < 10,
            "{} events from forgeries: {after:?}",
            after.len()
        );
    }
}
