//! A session's event log, for qlog files and other observers.
//!
//! Off unless [`SessionConfig::trace`](crate::SessionConfig::trace) asks for
//! it: the session then records what it decides (packets sent, received,
//! acknowledged and lost, its controllers' state, its own choices) as plain
//! values, and its driver drains them with
//! [`Session::drain_trace`](crate::Session::drain_trace) to write them
//! somewhere, typically as qlog (the `braid-qlog` crate writes the files:
//! the core has no file format). Recording costs a branch when off and a
//! copy when on; formatting happens in the driver, off the session's path.

mod frames;

pub use frames::{AckSummary, FrameSummary, StreamRange};

use crate::stats::PathState;
use crate::{Instant, PathId};
use std::time::Duration;

/// Events one session holds between two drains; past that the oldest are
/// kept and the rest counted as dropped (a driver that never drains must
/// not grow the session without bound).
pub const TRACE_CAPACITY: usize = 1 << 16;

/// One recorded event, dated on the session's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// When it happened.
    pub at: Instant,
    /// What happened.
    pub kind: EventKind,
}

/// What happened. Names follow qlog's QUIC events where braid does the same
/// thing; the rest are braid's own.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// The session's settings (qlog `parameters_set`), once at its start.
    Parameters(Box<Parameters>),
    /// A datagram went out (qlog `packet_sent`).
    PacketSent {
        /// The connection.
        path: PathId,
        /// Its packet number.
        pn: u64,
        /// Bytes on the wire (UDP payload).
        size: usize,
        /// A short header (no session id or connection; see
        /// docs/protocol.md), or the long one.
        short: bool,
        /// What it carried.
        frames: FrameSummary,
    },
    /// An authentic datagram arrived (qlog `packet_received`).
    PacketReceived {
        /// The connection.
        path: PathId,
        /// Its packet number.
        pn: u64,
        /// Bytes on the wire (UDP payload).
        size: usize,
        /// A short header, or the long one.
        short: bool,
        /// What it carried.
        frames: FrameSummary,
    },
    /// Packets `first..=last` of `path` were newly acknowledged (qlog
    /// `packets_acked`).
    PacketsAcked {
        /// The connection.
        path: PathId,
        /// Lowest packet number of the run.
        first: u64,
        /// Highest packet number of the run.
        last: u64,
    },
    /// A packet was declared lost (qlog `packet_lost`).
    PacketLost {
        /// The connection.
        path: PathId,
        /// Its packet number.
        pn: u64,
        /// Stream bytes it carried.
        bytes: u64,
        /// Why.
        trigger: LossTrigger,
    },
    /// A packet declared lost was acknowledged after all.
    SpuriousLoss {
        /// The connection.
        path: PathId,
    },
    /// Stream bytes newly acknowledged whose latest transmission went on `path`.
    StreamAcked {
        /// The connection.
        path: PathId,
        /// How many.
        bytes: u64,
    },
    /// A connection's congestion figures changed (qlog `metrics_updated`);
    /// only the changed fields are set.
    Metrics {
        /// The connection.
        path: PathId,
        /// What changed.
        metrics: Box<Metrics>,
    },
    /// A connection's controller changed state (qlog
    /// `congestion_state_updated`).
    CongestionState {
        /// The connection.
        path: PathId,
        /// The state left.
        old: &'static str,
        /// The state entered.
        new: &'static str,
    },
    /// A timer fired (qlog `loss_timer_updated`, `expired`).
    TimerExpired {
        /// The connection.
        path: PathId,
        /// Which.
        timer: LossTimer,
    },
    /// A connection changed state (active, probing, closed).
    PathState {
        /// The connection.
        path: PathId,
        /// The new state.
        state: PathState,
    },
    /// A connection's address was validated (it answered a challenge).
    PathValidated {
        /// The connection.
        path: PathId,
    },
    /// The session moved through its life (qlog `connection_state_updated`).
    SessionState {
        /// The state entered.
        new: &'static str,
    },
    /// The session ended (qlog `connection_closed`).
    Closed {
        /// Error code (0 for a clean end).
        code: u64,
        /// Why, in words.
        reason: String,
        /// Whether the peer ended it (`remote`) or we did (`local`).
        remote: bool,
    },
    /// Window normalisation set a connection's window to its share of the
    /// session window (NKP-0024).
    WindowNormalised {
        /// The connection.
        path: PathId,
        /// Window before, bytes.
        old: u64,
        /// Window after, bytes.
        new: u64,
    },
    /// The scheduler moved the stream to another connection.
    SchedulerPick {
        /// The connection chosen now.
        path: PathId,
        /// The one the previous segment went on.
        previous: Option<PathId>,
    },
    /// A copy of a slow connection's ACK went on a faster one.
    AckCopy {
        /// The connection whose packets it acknowledges.
        of: PathId,
        /// The connection it travelled on.
        via: PathId,
    },
    /// A segment near the stream's end was copied onto a second connection.
    TailCopy {
        /// The connection the copy went on.
        path: PathId,
        /// The segment's stream offset.
        offset: u64,
    },
    /// MB-ECN feedback from the receiver: its congestion level (ECE) for a
    /// connection.
    MbEcn {
        /// The connection.
        path: PathId,
        /// The level reported.
        level: u16,
    },
    /// Events dropped because the driver did not drain in time.
    Dropped {
        /// How many.
        count: u64,
    },
}

/// Why a packet was declared lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossTrigger {
    /// Enough later packets, or a later packet long enough ago, were
    /// acknowledged (RFC 9002 §6.1).
    Threshold,
    /// The retransmission timer fired.
    Timeout,
    /// Its connection closed.
    PathClosed,
}

/// Loss-recovery timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossTimer {
    /// The tail-loss probe (RFC 8985 §7).
    TailLossProbe,
    /// The retransmission timeout.
    Rto,
}

/// A connection's congestion figures; `None` where unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metrics {
    /// Congestion window, bytes.
    pub cwnd: Option<u64>,
    /// Bytes in flight.
    pub in_flight: Option<u64>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
    /// Latest RTT sample.
    pub latest_rtt: Option<Duration>,
    /// Smallest RTT sample.
    pub min_rtt: Option<Duration>,
    /// RTT variation.
    pub rttvar: Option<Duration>,
    /// Pacing rate, bytes per second.
    pub pacing_rate: Option<u64>,
    /// Slow-start threshold, bytes.
    pub ssthresh: Option<u64>,
    /// MB-ECN: bytes the controller allows per rate slot.
    pub slot_budget: Option<u64>,
    /// MB-ECN: the rate slot's width.
    pub slot_width: Option<Duration>,
}

impl Metrics {
    /// The fields of `now` that differ from `then`.
    pub fn changed(then: &Metrics, now: &Metrics) -> Metrics {
        fn diff<T: PartialEq + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            if a == b {
                None
            } else {
                b
            }
        }
        Metrics {
            cwnd: diff(then.cwnd, now.cwnd),
            in_flight: diff(then.in_flight, now.in_flight),
            srtt: diff(then.srtt, now.srtt),
            latest_rtt: diff(then.latest_rtt, now.latest_rtt),
            min_rtt: diff(then.min_rtt, now.min_rtt),
            rttvar: diff(then.rttvar, now.rttvar),
            pacing_rate: diff(then.pacing_rate, now.pacing_rate),
            ssthresh: diff(then.ssthresh, now.ssthresh),
            slot_budget: diff(then.slot_budget, now.slot_budget),
            slot_width: diff(then.slot_width, now.slot_width),
        }
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Metrics::default()
    }
}

/// The session's settings, as qlog's `parameters_set` reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameters {
    /// Client or server.
    pub role: crate::Role,
    /// The session's id.
    pub session_id: u64,
    /// Congestion controller's name.
    pub cc: &'static str,
    /// Connections opened at the start.
    pub paths: u8,
    /// Stream bytes per datagram.
    pub segment_size: u16,
    /// Longest the session delays an ACK.
    pub max_ack_delay: Duration,
    /// Whether datagrams are sealed (authenticated and encrypted).
    pub sealed: bool,
    /// Initial receive window, bytes.
    pub recv_window: u64,
}

/// A connection's recorder, and what the log last said of it (qlog
/// reports figures and states when they change).
#[derive(Debug, Default)]
pub(crate) struct PathTrace {
    pub tracer: Tracer,
    pub metrics: Metrics,
    pub cc_state: &'static str,
    pub state: PathState,
    /// Its figures may have changed without an event of its own.
    pub stale: bool,
}

/// The recorder each session and connection holds.
#[derive(Debug, Default)]
pub(crate) struct Tracer {
    on: bool,
    events: Vec<TraceEvent>,
    dropped: u64,
}

impl Tracer {
    pub fn new(on: bool) -> Tracer {
        Tracer {
            on,
            events: Vec::new(),
            dropped: 0,
        }
    }

    /// Whether events are recorded; callers skip building them otherwise.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Whether nothing waits to be moved.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.dropped == 0
    }

    /// Events waiting to be moved or drained.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Records `kind` at `at` as the `index`th event waiting (before
    /// those recorded since), if recording.
    pub fn record_at(&mut self, index: usize, at: Instant, kind: EventKind) {
        if !self.on {
            return;
        }
        if self.events.len() >= TRACE_CAPACITY {
            self.dropped += 1;
            return;
        }
        let index = index.min(self.events.len());
        self.events.insert(index, TraceEvent { at, kind });
    }

    /// Records `kind` at `at`, if recording.
    #[inline]
    pub fn record(&mut self, at: Instant, kind: EventKind) {
        if !self.on {
            return;
        }
        if self.events.len() >= TRACE_CAPACITY {
            self.dropped += 1;
            return;
        }
        self.events.push(TraceEvent { at, kind });
    }

    /// Moves this recorder's events to the end of `into`.
    pub fn move_into(&mut self, into: &mut Tracer) {
        if self.events.is_empty() && self.dropped == 0 {
            return;
        }
        into.dropped += self.dropped;
        self.dropped = 0;
        let room = TRACE_CAPACITY.saturating_sub(into.events.len());
        if self.events.len() > room {
            into.dropped += (self.events.len() - room) as u64;
            self.events.truncate(room);
        }
        into.events.append(&mut self.events);
    }

    /// Hands the events over, with a note of any dropped.
    pub fn drain(&mut self, now: Instant, out: &mut Vec<TraceEvent>) {
        out.append(&mut self.events);
        if self.dropped > 0 {
            out.push(TraceEvent {
                at: now,
                kind: EventKind::Dropped {
                    count: self.dropped,
                },
            });
            self.dropped = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undrained_tracer_stops_at_its_capacity_and_counts_the_rest() {
        let mut t = Tracer::new(true);
        for i in 0..TRACE_CAPACITY as u64 + 10 {
            t.record(
                Instant::ZERO,
                EventKind::SpuriousLoss {
                    path: PathId(i as u8),
                },
            );
        }
        let mut out = Vec::new();
        t.drain(Instant::ZERO, &mut out);
        assert_eq!(out.len(), TRACE_CAPACITY + 1);
        assert_eq!(out.last().unwrap().kind, EventKind::Dropped { count: 10 });
    }

    #[test]
    fn an_off_tracer_records_nothing() {
        let mut t = Tracer::new(false);
        t.record(Instant::ZERO, EventKind::SpuriousLoss { path: PathId(0) });
        let mut out = Vec::new();
        t.drain(Instant::ZERO, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn only_changed_metrics_are_reported() {
        let a = Metrics {
            cwnd: Some(10),
            in_flight: Some(5),
            ..Metrics::default()
        };
        let b = Metrics {
            cwnd: Some(12),
            in_flight: Some(5),
            ..Metrics::default()
        };
        let d = Metrics::changed(&a, &b);
        assert_eq!(d.cwnd, Some(12));
        assert_eq!(d.in_flight, None);
        assert!(Metrics::changed(&a, &a).is_empty());
    }
}
