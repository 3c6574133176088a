//! Events in a compact binary form, for a writer that keeps up with the
//! session by storing them as they come and writing the qlog's JSON once
//! the session is over: storing costs a few varints per event, formatting
//! several times that, and on a busy machine the formatting would compete
//! with the session it records.
//!
//! The form is private to one process run (written and read by the same
//! build); it is not a file format anyone else reads.

use super::{
    AckSummary, EventKind, FrameSummary, LossTimer, LossTrigger, Metrics, Parameters, StreamRange,
    TraceEvent,
};
use crate::cc::Algorithm;
use crate::stats::PathState;
use crate::varint;
use crate::{Instant, PathId, Role};
use std::time::Duration;

/// Appends `event` to `out`.
pub fn encode(event: &TraceEvent, out: &mut Vec<u8>) {
    let mut w = Writer(out);
    w.u(event.at.as_nanos());
    use EventKind::*;
    match &event.kind {
        Parameters(p) => {
            w.tag(0);
            w.u(u64::from(p.role == Role::Server));
            w.u(p.session_id >> 32);
            w.u(p.session_id & 0xffff_ffff);
            w.name(p.cc);
            w.u(p.paths.into());
            w.u(p.segment_size.into());
            w.dur(p.max_ack_delay);
            w.u(p.sealed.into());
            w.u(p.recv_window);
        }
        PacketSent {
            path,
            pn,
            size,
            short,
            frames,
        } => {
            w.tag(1);
            w.packet(*path, *pn, *size, *short, frames);
        }
        PacketReceived {
            path,
            pn,
            size,
            short,
            frames,
        } => {
            w.tag(2);
            w.packet(*path, *pn, *size, *short, frames);
        }
        PacketsAcked { path, first, last } => {
            w.tag(3);
            w.path(*path);
            w.u(*first);
            w.u(*last);
        }
        PacketLost {
            path,
            pn,
            bytes,
            trigger,
        } => {
            w.tag(4);
            w.path(*path);
            w.u(*pn);
            w.u(*bytes);
            w.u(match trigger {
                LossTrigger::Threshold => 0,
                LossTrigger::Timeout => 1,
                LossTrigger::PathClosed => 2,
            });
        }
        SpuriousLoss { path } => {
            w.tag(5);
            w.path(*path);
        }
        StreamAcked { path, bytes } => {
            w.tag(6);
            w.path(*path);
            w.u(*bytes);
        }
        Metrics { path, metrics } => {
            w.tag(7);
            w.path(*path);
            w.metrics(metrics);
        }
        CongestionState { path, old, new } => {
            w.tag(8);
            w.path(*path);
            w.name(old);
            w.name(new);
        }
        TimerExpired { path, timer } => {
            w.tag(9);
            w.path(*path);
            w.u(u64::from(*timer == LossTimer::Rto));
        }
        PathState { path, state } => {
            w.tag(10);
            w.path(*path);
            w.u(match state {
                crate::PathState::Active => 0,
                crate::PathState::Probing => 1,
                crate::PathState::Closed => 2,
            });
        }
        PathValidated { path } => {
            w.tag(11);
            w.path(*path);
        }
        SessionState { new } => {
            w.tag(12);
            w.name(new);
        }
        Closed {
            code,
            reason,
            remote,
        } => {
            w.tag(13);
            w.u(*code);
            w.bytes(reason.as_bytes());
            w.u(u64::from(*remote));
        }
        WindowNormalised { path, old, new } => {
            w.tag(14);
            w.path(*path);
            w.u(*old);
            w.u(*new);
        }
        SchedulerPick { path, previous } => {
            w.tag(15);
            w.path(*path);
            w.u(previous.map_or(0, |p| u64::from(p.0) + 1));
        }
        AckCopy { of, via } => {
            w.tag(16);
            w.path(*of);
            w.path(*via);
        }
        TailCopy { path, offset } => {
            w.tag(17);
            w.path(*path);
            w.u(*offset);
        }
        MbEcn { path, level } => {
            w.tag(18);
            w.path(*path);
            w.u((*level).into());
        }
        Dropped { count } => {
            w.tag(19);
            w.u(*count);
        }
    }
}

/// Reads one event from the front of `input`; `None` at its end (or if
/// what is there was not written by [`encode`]).
pub fn decode(input: &mut &[u8]) -> Option<TraceEvent> {
    let mut r = Reader(input);
    let at = Instant::from_nanos(r.u()?);
    let kind = match r.u()? {
        0 => EventKind::Parameters(Box::new(Parameters {
            role: if r.u()? == 1 {
                Role::Server
            } else {
                Role::Client
            },
            session_id: (r.u()? << 32) | r.u()?,
            cc: r.name()?,
            paths: r.u()? as u8,
            segment_size: r.u()? as u16,
            max_ack_delay: r.dur()?,
            sealed: r.u()? == 1,
            recv_window: r.u()?,
        })),
        1 => {
            let (path, pn, size, short, frames) = r.packet()?;
            EventKind::PacketSent {
                path,
                pn,
                size,
                short,
                frames,
            }
        }
        2 => {
            let (path, pn, size, short, frames) = r.packet()?;
            EventKind::PacketReceived {
                path,
                pn,
                size,
                short,
                frames,
            }
        }
        3 => EventKind::PacketsAcked {
            path: r.path()?,
            first: r.u()?,
            last: r.u()?,
        },
        4 => EventKind::PacketLost {
            path: r.path()?,
            pn: r.u()?,
            bytes: r.u()?,
            trigger: match r.u()? {
                0 => LossTrigger::Threshold,
                1 => LossTrigger::Timeout,
                _ => LossTrigger::PathClosed,
            },
        },
        5 => EventKind::SpuriousLoss { path: r.path()? },
        6 => EventKind::StreamAcked {
            path: r.path()?,
            bytes: r.u()?,
        },
        7 => EventKind::Metrics {
            path: r.path()?,
            metrics: Box::new(r.metrics()?),
        },
        8 => EventKind::CongestionState {
            path: r.path()?,
            old: r.name()?,
            new: r.name()?,
        },
        9 => EventKind::TimerExpired {
            path: r.path()?,
            timer: if r.u()? == 1 {
                LossTimer::Rto
            } else {
                LossTimer::TailLossProbe
            },
        },
        10 => EventKind::PathState {
            path: r.path()?,
            state: match r.u()? {
                0 => PathState::Active,
                1 => PathState::Probing,
                _ => PathState::Closed,
            },
        },
        11 => EventKind::PathValidated { path: r.path()? },
        12 => EventKind::SessionState { new: r.name()? },
        13 => EventKind::Closed {
            code: r.u()?,
            reason: String::from_utf8_lossy(r.bytes()?).into_owned(),
            remote: r.u()? == 1,
        },
        14 => EventKind::WindowNormalised {
            path: r.path()?,
            old: r.u()?,
            new: r.u()?,
        },
        15 => EventKind::SchedulerPick {
            path: r.path()?,
            previous: match r.u()? {
                0 => None,
                p => Some(PathId((p - 1) as u8)),
            },
        },
        16 => EventKind::AckCopy {
            of: r.path()?,
            via: r.path()?,
        },
        17 => EventKind::TailCopy {
            path: r.path()?,
            offset: r.u()?,
        },
        18 => EventKind::MbEcn {
            path: r.path()?,
            level: r.u()? as u16,
        },
        19 => EventKind::Dropped { count: r.u()? },
        _ => return None,
    };
    Some(TraceEvent { at, kind })
}

/// The names events carry, which decode back to the same `&'static str`.
const NAMES: [&str; 12] = [
    "",
    "slow_start",
    "congestion_avoidance",
    "startup",
    "drain",
    "probe_bw",
    "probe_rtt",
    "handshaking",
    "established",
    "draining",
    "closed",
    "failed",
];

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u(&mut self, v: u64) {
        varint::write(self.0, v);
    }

    fn tag(&mut self, t: u64) {
        self.u(t);
    }

    fn path(&mut self, p: PathId) {
        self.u(p.0.into());
    }

    fn dur(&mut self, d: Duration) {
        self.u(d.as_nanos().min(u128::from(varint::MAX)) as u64);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn name(&mut self, n: &str) {
        self.bytes(n.as_bytes());
    }

    fn opt(&mut self, v: Option<u64>) {
        // 0 for none, value + 1 otherwise.
        self.u(v.map_or(0, |v| v.saturating_add(1)));
    }

    fn packet(&mut self, path: PathId, pn: u64, size: usize, short: bool, f: &FrameSummary) {
        self.path(path);
        self.u(pn);
        self.u(size as u64);
        self.u(short.into());
        self.u(f.others.into());
        match &f.stream {
            Some(s) => {
                self.u(1 + u64::from(s.fin));
                self.u(s.offset);
                self.u(s.len);
            }
            None => self.u(0),
        }
        match &f.ack {
            Some(a) => {
                self.u(1);
                self.path(a.path);
                self.u(a.ack_delay_us);
                self.u(a.cumulative);
                self.u(a.ranges.len() as u64);
                for &(lo, hi) in &a.ranges {
                    self.u(lo);
                    self.u(hi);
                }
            }
            None => self.u(0),
        }
    }

    fn metrics(&mut self, m: &Metrics) {
        let d = |d: Option<Duration>| d.map(|d| d.as_nanos().min(u128::from(varint::MAX)) as u64);
        for v in [
            m.cwnd,
            m.in_flight,
            d(m.srtt),
            d(m.latest_rtt),
            d(m.min_rtt),
            d(m.rttvar),
            m.pacing_rate,
            m.ssthresh,
            m.slot_budget,
            d(m.slot_width),
        ] {
            self.opt(v);
        }
    }
}

struct Reader<'a, 'b>(&'a mut &'b [u8]);

impl<'b> Reader<'_, 'b> {
    fn u(&mut self) -> Option<u64> {
        varint::read(self.0)
    }

    fn path(&mut self) -> Option<PathId> {
        Some(PathId(self.u()? as u8))
    }

    fn dur(&mut self) -> Option<Duration> {
        Some(Duration::from_nanos(self.u()?))
    }

    fn bytes(&mut self) -> Option<&'b [u8]> {
        let n = usize::try_from(self.u()?).ok()?;
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        *self.0 = rest;
        Some(head)
    }

    fn name(&mut self) -> Option<&'static str> {
        let b = self.bytes()?;
        let known = NAMES.iter().find(|n| n.as_bytes() == b).copied();
        let cc = std::str::from_utf8(b).ok()?.parse::<Algorithm>().ok();
        Some(known.or(cc.map(Algorithm::name)).unwrap_or("other"))
    }

    fn opt(&mut self) -> Option<Option<u64>> {
        Some(self.u()?.checked_sub(1))
    }

    fn packet(&mut self) -> Option<(PathId, u64, usize, bool, FrameSummary)> {
        let path = self.path()?;
        let pn = self.u()?;
        let size = self.u()? as usize;
        let short = self.u()? == 1;
        let others = self.u()? as u16;
        let stream = match self.u()? {
            0 => None,
            kind => Some(StreamRange {
                fin: kind == 2,
                offset: self.u()?,
                len: self.u()?,
            }),
        };
        let ack = match self.u()? {
            0 => None,
            _ => {
                let path = self.path()?;
                let ack_delay_us = self.u()?;
                let cumulative = self.u()?;
                let n = self.u()? as usize;
                let mut ranges = Vec::with_capacity(n.min(256));
                for _ in 0..n {
                    ranges.push((self.u()?, self.u()?));
                }
                Some(Box::new(AckSummary {
                    path,
                    ranges,
                    ack_delay_us,
                    cumulative,
                }))
            }
        };
        let frames = FrameSummary {
            stream,
            ack,
            others,
        };
        Some((path, pn, size, short, frames))
    }

    fn metrics(&mut self) -> Option<Metrics> {
        let d = |v: Option<u64>| v.map(Duration::from_nanos);
        Some(Metrics {
            cwnd: self.opt()?,
            in_flight: self.opt()?,
            srtt: d(self.opt()?),
            latest_rtt: d(self.opt()?),
            min_rtt: d(self.opt()?),
            rttvar: d(self.opt()?),
            pacing_rate: self.opt()?,
            ssthresh: self.opt()?,
            slot_budget: self.opt()?,
            slot_width: d(self.opt()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(kind: EventKind) {
        let event = TraceEvent {
            at: Instant::from_nanos(123_456_789),
            kind,
        };
        let mut buf = Vec::new();
        encode(&event, &mut buf);
        encode(&event, &mut buf);
        let mut input = &buf[..];
        assert_eq!(decode(&mut input).as_ref(), Some(&event));
        assert_eq!(decode(&mut input).as_ref(), Some(&event));
        assert!(input.is_empty());
    }

    #[test]
    fn every_kind_of_event_comes_back_as_it_went() {
        let frames = FrameSummary {
            stream: Some(StreamRange {
                offset: 1 << 40,
                len: 1380,
                fin: true,
            }),
            ack: Some(Box::new(AckSummary {
                path: PathId(2),
                ranges: vec![(50, 60), (3, 9)],
                ack_delay_us: 2500,
                cumulative: 77,
            })),
            others: 0b1010,
        };
        let p = PathId(1);
        for kind in [
            EventKind::Parameters(Box::new(Parameters {
                role: Role::Server,
                session_id: u64::MAX - 5,
                cc: "cubic",
                paths: 3,
                segment_size: 1380,
                max_ack_delay: Duration::from_millis(10),
                sealed: true,
                recv_window: 1 << 22,
            })),
            EventKind::PacketSent {
                path: p,
                pn: 9,
                size: 1444,
                short: true,
                frames: frames.clone(),
            },
            EventKind::PacketReceived {
                path: p,
                pn: 10,
                size: 60,
                short: false,
                frames: FrameSummary::default(),
            },
            EventKind::PacketsAcked {
                path: p,
                first: 3,
                last: 8,
            },
            EventKind::PacketLost {
                path: p,
                pn: 4,
                bytes: 1380,
                trigger: LossTrigger::PathClosed,
            },
            EventKind::SpuriousLoss { path: p },
            EventKind::StreamAcked { path: p, bytes: 5 },
            EventKind::Metrics {
                path: p,
                metrics: Box::new(Metrics {
                    cwnd: Some(0),
                    srtt: Some(Duration::from_micros(20_500)),
                    pacing_rate: Some(u64::from(u32::MAX) * 4),
                    slot_width: Some(Duration::from_nanos(1 << 24)),
                    ..Metrics::default()
                }),
            },
            EventKind::CongestionState {
                path: p,
                old: "",
                new: "probe_bw",
            },
            EventKind::TimerExpired {
                path: p,
                timer: LossTimer::Rto,
            },
            EventKind::PathState {
                path: p,
                state: PathState::Probing,
            },
            EventKind::PathValidated { path: p },
            EventKind::SessionState { new: "draining" },
            EventKind::Closed {
                code: 18,
                reason: "verdict \"received\"".into(),
                remote: true,
            },
            EventKind::WindowNormalised {
                path: p,
                old: 10,
                new: 20,
            },
            EventKind::SchedulerPick {
                path: p,
                previous: Some(PathId(0)),
            },
            EventKind::SchedulerPick {
                path: p,
                previous: None,
            },
            EventKind::AckCopy {
                of: PathId(3),
                via: p,
            },
            EventKind::TailCopy {
                path: p,
                offset: 99,
            },
            EventKind::MbEcn { path: p, level: 7 },
            EventKind::Dropped { count: 12 },
        ] {
            round_trip(kind);
        }
    }

    #[test]
    fn a_cut_record_reads_as_the_end() {
        let mut buf = Vec::new();
        let event = TraceEvent {
            at: Instant::ZERO,
            kind: EventKind::PacketsAcked {
                path: PathId(0),
                first: 1 << 30,
                last: 1 << 31,
            },
        };
        encode(&event, &mut buf);
        let mut input = &buf[..buf.len() - 1];
        assert_eq!(decode(&mut input), None);
    }
}
