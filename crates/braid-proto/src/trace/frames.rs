//! What a datagram carried, in a few words: enough for a sequence diagram
//! and for reading a loss, without copying the frames themselves.

use crate::wire::{AckFrame, Frame, Frames};
use crate::PathId;

/// A STREAM frame's place in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRange {
    /// Offset of its first byte.
    pub offset: u64,
    /// Bytes carried.
    pub len: u64,
    /// The stream ends after them.
    pub fin: bool,
}

/// An ACK frame's ranges and figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckSummary {
    /// The connection it acknowledges (its own, unless a copy).
    pub path: PathId,
    /// Inclusive packet-number ranges, highest first.
    pub ranges: Vec<(u64, u64)>,
    /// ACK delay, µs.
    pub ack_delay_us: u64,
    /// The peer's cumulative stream point.
    pub cumulative: u64,
}

impl AckSummary {
    fn of(path: PathId, ack: &AckFrame) -> AckSummary {
        AckSummary {
            path,
            ranges: ack.ranges.clone(),
            ack_delay_us: ack.ack_delay_us,
            cumulative: ack.cumulative,
        }
    }
}

/// The frames of one datagram.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameSummary {
    /// The STREAM frame, if any (at most one per datagram).
    pub stream: Option<StreamRange>,
    /// The ACK (or copied ACK) frame, if any; the first if several.
    pub ack: Option<Box<AckSummary>>,
    /// Other frames present, as bits of [`FrameSummary::KINDS`].
    pub others: u16,
}

impl FrameSummary {
    /// Frame kinds besides STREAM and ACK, in bit order; names as qlog's
    /// `frame_type` where QUIC has the frame.
    pub const KINDS: [&'static str; 13] = [
        "ping",
        "padding",
        "connection_close",
        "path_challenge",
        "path_response",
        "braid_hello",
        "braid_hello_ack",
        "braid_client_hello",
        "braid_server_hello",
        "braid_retry",
        "braid_path_close",
        "braid_ece",
        "data_blocked",
    ];

    /// The frames of a datagram's plaintext payload (after its header).
    pub fn of(payload: &[u8]) -> FrameSummary {
        let mut s = FrameSummary::default();
        for frame in Frames::new(payload).flatten() {
            s.note(&frame);
        }
        s
    }

    /// Adds one frame of the datagram (an own-connection ACK is
    /// attributed by [`FrameSummary::on_path`]).
    pub fn note(&mut self, frame: &Frame<'_>) {
        let bit = match frame {
            Frame::Stream { offset, fin, data } => {
                self.stream = Some(StreamRange {
                    offset: *offset,
                    len: data.len() as u64,
                    fin: *fin,
                });
                return;
            }
            Frame::Ack(ack) => return self.note_ack(PathId(u8::MAX), ack),
            Frame::PathAck { path, ack } => return self.note_ack(*path, ack),
            Frame::Ping => 0,
            Frame::Padding => 1,
            Frame::Close { .. } => 2,
            Frame::PathChallenge(_) => 3,
            Frame::PathResponse(_) => 4,
            Frame::Hello(_) => 5,
            Frame::HelloAck(_) => 6,
            Frame::ClientHello { .. } => 7,
            Frame::ServerHello { .. } => 8,
            Frame::Retry { .. } => 9,
            Frame::PathClose { .. } => 10,
            Frame::Ece(_) => 11,
            Frame::Blocked(_) => 12,
        };
        self.others |= 1 << bit;
    }

    /// Adds an ACK of connection `path`'s packets (`PathId(u8::MAX)`: the
    /// connection the datagram travels on); only the first ACK is kept.
    pub fn note_ack(&mut self, path: PathId, ack: &AckFrame) {
        if self.ack.is_none() {
            self.ack = Some(Box::new(AckSummary::of(path, ack)));
        }
    }

    /// The same summary with an own-connection ACK attributed to `path`.
    pub fn on_path(mut self, path: PathId) -> FrameSummary {
        if let Some(a) = &mut self.ack {
            if a.path == PathId(u8::MAX) {
                a.path = path;
            }
        }
        self
    }

    /// Whether the ACK is a copy of another connection's.
    pub fn ack_copy_of(&self, path: PathId) -> Option<PathId> {
        self.ack.as_ref().map(|a| a.path).filter(|&p| p != path)
    }

    /// Names of the other frames present.
    pub fn other_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        Self::KINDS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.others & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_with_an_ack_a_ping_and_data_reads_as_such() {
        let mut buf = Vec::new();
        Frame::Ping.encode(&mut buf);
        Frame::Ack(AckFrame {
            ranges: vec![(20, 30), (5, 10)],
            ack_delay_us: 1500,
            cumulative: 4000,
            ..AckFrame::default()
        })
        .encode(&mut buf);
        Frame::Stream {
            offset: 1380,
            fin: true,
            data: &[7u8; 100],
        }
        .encode(&mut buf);
        let s = FrameSummary::of(&buf).on_path(PathId(1));
        assert_eq!(
            s.stream,
            Some(StreamRange {
                offset: 1380,
                len: 100,
                fin: true
            })
        );
        let ack = s.ack.clone().unwrap();
        assert_eq!((ack.path, ack.ranges), (PathId(1), vec![(20, 30), (5, 10)]));
        assert_eq!(s.other_names().collect::<Vec<_>>(), ["ping"]);
        assert_eq!(s.ack_copy_of(PathId(1)), None);
    }

    #[test]
    fn a_copied_ack_names_its_connection() {
        let mut buf = Vec::new();
        Frame::PathAck {
            path: PathId(2),
            ack: AckFrame {
                ranges: vec![(1, 1)],
                ..AckFrame::default()
            },
        }
        .encode(&mut buf);
        let s = FrameSummary::of(&buf).on_path(PathId(0));
        assert_eq!(s.ack_copy_of(PathId(0)), Some(PathId(2)));
    }
}
