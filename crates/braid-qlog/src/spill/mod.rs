//! Events in a compact binary form, for a writer that keeps up with the
//! session by storing them as they come and writing the qlog's JSON once
//! the session is over: storing costs a few varints per event, formatting
//! several times that, and on a busy machine the formatting would compete
//! with the session it records.
//!
//! The form is private to one process run (written and read by the same
//! build); it is not a file format anyone else reads. A record is the
//! event's time, its kind's tag, then the kind's fields in the order the
//! table below lists them, each in its type's form (`wire`).

mod wire;

use braid_proto::trace::{EventKind, TraceEvent};
use braid_proto::Instant;
use wire::Wire;

/// An event kind's fields, as a pattern, an expression reading them back,
/// or the statements writing them; `Kind(field)` for a tuple variant.
macro_rules! fields {
    (pattern $kind:ident { $($f:ident),* }) => { EventKind::$kind { $($f),* } };
    (pattern $kind:ident ( $f:ident )) => { EventKind::$kind($f) };
    (put $out:ident { $($f:ident),* }) => { $($f.put($out);)* };
    (put $out:ident ( $f:ident )) => { $f.put($out); };
    // A struct literal's fields are evaluated in the order written.
    (take $in:ident $kind:ident { $($f:ident),* }) => {
        EventKind::$kind { $($f: Wire::take(&mut $in)?),* }
    };
    (take $in:ident $kind:ident ( $f:ident )) => { EventKind::$kind(Wire::take(&mut $in)?) };
}

/// [`encode`] and [`decode`], from one table of the event kinds: each
/// kind's tag and its fields. A field left out of the table does not
/// compile (the patterns and literals name them all).
macro_rules! event_kinds {
    ($($tag:literal => $kind:ident $fields:tt,)*) => {
        /// Appends `event` to `out`; nothing for a kind newer than this
        /// table.
        pub fn encode(event: &TraceEvent, out: &mut Vec<u8>) {
            match &event.kind {
                $(fields!(pattern $kind $fields) => {
                    let tag: u64 = $tag;
                    event.at.put(out);
                    tag.put(out);
                    fields!(put out $fields);
                })*
            }
        }

        /// Reads one event from the front of `input`; `None`, leaving
        /// `input` as it was, at its end or if what is there was not
        /// written by [`encode`] (cut short or damaged).
        pub fn decode(input: &mut &[u8]) -> Option<TraceEvent> {
            let mut rest = *input;
            let at = Instant::take(&mut rest)?;
            let kind = match u64::take(&mut rest)? {
                $($tag => fields!(take rest $kind $fields),)*
                _ => return None,
            };
            *input = rest;
            Some(TraceEvent { at, kind })
        }
    };
}

event_kinds! {
    0 => Parameters(params),
    1 => PacketSent { path, pn, size, short, frames },
    2 => PacketReceived { path, pn, size, short, frames },
    3 => PacketsAcked { path, first, last },
    4 => PacketLost { path, pn, bytes, trigger },
    5 => SpuriousLoss { path },
    6 => StreamAcked { path, bytes },
    7 => Metrics { path, metrics },
    8 => CongestionState { path, old, new },
    9 => TimerExpired { path, timer },
    10 => PathState { path, state },
    11 => PathValidated { path },
    12 => SessionState { new },
    13 => Closed { code, reason, remote },
    14 => WindowNormalised { path, old, new },
    15 => SchedulerPick { path, previous },
    16 => AckCopy { of, via },
    17 => TailCopy { path, offset },
    18 => MbEcn { path, level },
    19 => Dropped { count },
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_proto::trace::{
        AckSummary, FrameSummary, LossTimer, LossTrigger, Metrics, Parameters, StreamRange,
    };
    use braid_proto::{PathId, PathState, Role};
    use std::time::Duration;

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

    /// One event of each kind (two where an option is on or off).
    fn every_kind() -> Vec<EventKind> {
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
        vec![
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
        ]
    }

    #[test]
    fn every_kind_of_event_comes_back_as_it_went() {
        for kind in every_kind() {
            round_trip(kind);
        }
    }

    /// The extremes of each integer field: the varints' longest forms.
    #[test]
    fn the_largest_values_come_back() {
        round_trip(EventKind::PacketsAcked {
            path: PathId(u8::MAX),
            first: u64::MAX,
            last: u64::MAX - 1,
        });
        round_trip(EventKind::Metrics {
            path: PathId(0),
            metrics: Box::new(Metrics {
                cwnd: Some(u64::MAX),
                srtt: Some(Duration::from_nanos(u64::MAX)),
                ..Metrics::default()
            }),
        });
    }

    #[test]
    fn every_cut_of_every_record_is_refused() {
        for kind in every_kind() {
            let mut buf = Vec::new();
            encode(
                &TraceEvent {
                    at: Instant::from_nanos(1 << 40),
                    kind,
                },
                &mut buf,
            );
            for end in 0..buf.len() {
                let mut input = &buf[..end];
                assert_eq!(decode(&mut input), None, "{:?}", &buf[..end]);
                assert_eq!(input.len(), end, "a refused record is not consumed");
            }
        }
    }

    /// What `encode` never writes: an unknown tag, a bool that is neither
    /// 0 nor 1, a path id past 255, an unknown enum value or option flag,
    /// a varint longer than a u64, text that is not UTF-8.
    #[test]
    fn damaged_records_are_refused() {
        let long_varint = [0xff; 10];
        for bytes in [
            &[0, 20][..],
            &[0, 0xff, 0x7f],
            &[0, 3, 0x80, 0x02, 0, 0],
            &[0, 4, 0, 0, 0, 3],
            &[0, 9, 0, 2],
            &[0, 7, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &[0, 2, 0, 0, 0, 2, 0, 0, 0],
            &long_varint,
            &[0, 13, 0, 2, 0xc3, 0x28, 0],
        ] {
            let mut input = bytes;
            assert_eq!(decode(&mut input), None, "{bytes:?}");
        }
    }

    /// Bytes from anywhere: decoding stops (or reads events) and never
    /// panics, and every event read took some of the input.
    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            // Small bytes mostly, so that tags and flags are often valid.
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => next() as u8,
                    _ => (next() % 24) as u8,
                })
                .collect();
            let mut input = &bytes[..];
            while decode(&mut input).is_some() {}
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
