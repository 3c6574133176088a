//! The wire format.
//!
//! A datagram is a small public header followed by frames:
//!
//! ```text
//! key phase + version (1) | MB-ECN (1) | session id (8) | path (1) | packet number (4) | frames ...
//! ```
//!
//! The first byte's high bit is the key phase of a sealed datagram (which
//! of two consecutive AEAD keys sealed it, as QUIC's short header's K bit);
//! the low seven bits are the version.
//!
//! Everything after the header is the part an authenticated-encryption layer
//! will seal (the header becomes its associated data and the full packet
//! number its nonce), so nothing a middlebox needs lives in the frames.
//! Only a packet number's low 32 bits travel; the receiver places them next
//! to the largest it has authenticated on the path ([`expand_packet_number`]),
//! as QUIC does. Decoding never panics and never allocates more than the
//! datagram's own size.
//!
//! `header.rs` holds the public header and packet-number expansion,
//! `frame.rs` the frames and their iterator, `ack.rs` the ACK frame's body
//! (shared by ACK and PATH_ACK); the tests here run whole datagrams.

use crate::varint;
use thiserror::Error;

mod ack;
mod frame;
mod header;

pub use ack::{AckFrame, MAX_ACK_RANGES, MAX_RX_TIMES};
pub(crate) use frame::{encode_stream_header, starts_with_clear_frame};
pub use frame::{
    pad_to, stream_frame_overhead, stream_frame_overhead_within, stream_offset_len, Frame, Frames,
    Hello, MAX_CC_NAME, MAX_NOISE_MESSAGE, MAX_PAKE_MESSAGE, MAX_REASON, MAX_TOKEN,
    STREAM_SPAN_SLACK,
};
pub use header::{
    data_datagram_overhead, datagram_overhead, expand_packet_number, header_len, is_short,
    mark_mbecn, packet_number_len, Header, HEADER_LEN, KEY_PHASE_BIT, MBECN_OFFSET, MIN_HEADER_LEN,
    PATH_OFFSET, SESSION_ID_MASK, SHORT_HEADER_LEN, VERSION,
};

/// Smallest datagram that may open a session: the client pads its first
/// packets so that the server's answers (at most three times what it
/// received) cannot amplify an attack on a forged source address.
pub const MIN_INITIAL_DATAGRAM: usize = 1200;

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Shorter than the header, or a frame ran past the end.
    #[error("truncated datagram")]
    Truncated,
    /// A frame type this version does not know.
    #[error("unknown frame type {0:#x}")]
    UnknownFrame(u64),
    /// A field out of its allowed range.
    #[error("malformed {0} frame")]
    Malformed(FrameKind),
}

/// The frame a [`DecodeError::Malformed`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameKind {
    /// STREAM.
    Stream,
    /// HELLO or HELLO_ACK.
    Hello,
    /// CLOSE.
    Close,
    /// CLIENT_HELLO.
    ClientHello,
    /// SERVER_HELLO.
    ServerHello,
    /// RETRY.
    Retry,
    /// ECE.
    Ece,
    /// ACK or PATH_ACK.
    Ack,
}

impl FrameKind {
    /// The frame's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Stream => "stream",
            FrameKind::Hello => "hello",
            FrameKind::Close => "close",
            FrameKind::ClientHello => "client hello",
            FrameKind::ServerHello => "server hello",
            FrameKind::Retry => "retry",
            FrameKind::Ece => "ece",
            FrameKind::Ack => "ack",
        }
    }
}

impl std::fmt::Display for FrameKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An unprotected datagram in the long form: session `session_id`'s
/// header on `path` with `packet_number`, then `frames`. Test support: how
/// tests speak for a peer without keys, or for an attacker.
#[doc(hidden)]
pub fn clear_datagram(
    session_id: u64,
    path: crate::PathId,
    packet_number: u64,
    frames: &[Frame<'_>],
) -> Vec<u8> {
    let mut d = Vec::new();
    Header {
        version: VERSION,
        key_phase: false,
        mbecn: 0,
        short: false,
        session_id,
        path,
        packet_number,
    }
    .encode(&mut d);
    for f in frames {
        f.encode(&mut d);
    }
    d
}

// Decoding primitives shared by the frame and ACK decoders.

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if input.len() < n {
        return Err(DecodeError::Truncated);
    }
    let (head, tail) = input.split_at(n);
    *input = tail;
    Ok(head)
}

fn var(input: &mut &[u8]) -> Result<u64, DecodeError> {
    varint::read(input).ok_or(DecodeError::Truncated)
}

fn u8_(input: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(take(input, 1)?[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_frame_is_named_as_before() {
        let e = DecodeError::Malformed(FrameKind::ClientHello);
        assert_eq!(e.to_string(), "malformed client hello frame");
    }
    use crate::PathId;

    fn sample_frames() -> Vec<Frame<'static>> {
        vec![
            Frame::Ping,
            Frame::Ack(AckFrame {
                ranges: vec![(90, 100), (50, 80), (0, 10)],
                ack_delay_us: 1234,
                cumulative: 1 << 40,
                fin: true,
                max_data: (1 << 40) + 4096,
                ce_count: 7,
                rx_timestamp_us: 987_654_321,
                rx_times: vec![(100, 987_654_321), (99, 987_654_300), (95, 987_660_000)],
                short_headers: true,
            }),
            Frame::Hello(Hello {
                version: VERSION,
                paths: 3,
                segment_size: 1380,
                send_window: 4 << 20,
                recv_window: 8 << 20,
                max_ack_delay_us: 10_000,
                cc: "cubic".into(),
            }),
            Frame::HelloAck(Hello {
                version: VERSION,
                paths: 1,
                segment_size: 1024,
                send_window: 1,
                recv_window: 2,
                max_ack_delay_us: 0,
                cc: String::new(),
            }),
            Frame::Close {
                code: 3,
                reason: b"disk full",
            },
            Frame::PathClose { path: PathId(2) },
            Frame::PathAck {
                path: PathId(3),
                ack: AckFrame {
                    ranges: vec![(7, 9)],
                    ack_delay_us: 25_000,
                    cumulative: 4096,
                    fin: false,
                    max_data: 1 << 22,
                    ce_count: 0,
                    rx_timestamp_us: 1_000_000,
                    rx_times: vec![(9, 1_000_000), (8, 999_000)],
                    short_headers: false,
                },
            },
            Frame::Ece(8191),
            Frame::Blocked(1 << 40),
            Frame::ClientHello {
                mode: 2,
                token: b"token",
                pake: &[7; 33],
                noise: &[9; 300],
            },
            Frame::ServerHello {
                pake: &[1; 33],
                noise: &[2; 48],
            },
            Frame::Retry { token: &[5; 40] },
            Frame::PathChallenge([1, 2, 3, 4, 5, 6, 7, 8]),
            Frame::PathResponse([8, 7, 6, 5, 4, 3, 2, 1]),
            Frame::Padding,
        ]
    }

    /// STREAM frames, each of which must end its datagram.
    fn stream_frames() -> Vec<Frame<'static>> {
        vec![
            Frame::Stream {
                offset: 1 << 33,
                fin: false,
                data: b"hello world",
            },
            Frame::Stream {
                offset: 0,
                fin: true,
                data: b"",
            },
        ]
    }

    pub(super) fn encode_all(frames: &[Frame<'_>]) -> Vec<u8> {
        clear_datagram(0xdead_beef, PathId(2), (1 << 50) + 77, frames)
    }

    #[test]
    fn every_frame_round_trips() {
        for stream in stream_frames() {
            let mut frames = sample_frames();
            frames.push(stream);
            let buf = encode_all(&frames);
            let (header, payload) = Header::decode(&buf).unwrap();
            assert_eq!(header.session_id, 0xdead_beef);
            assert_eq!(header.path, PathId(2));
            assert_eq!(header.packet_number, 77);
            let (full, _) = Header::decode_expanded(&buf, Some(1 << 50)).unwrap();
            assert_eq!(full.packet_number, (1 << 50) + 77);
            let decoded: Vec<_> = Frames::new(payload).collect::<Result<_, _>>().unwrap();
            assert_eq!(decoded, frames);
        }
    }

    /// Written with [`Frame::encode`], a STREAM frame carries its length,
    /// so frames after it are read as frames, not as its data.
    #[test]
    fn frames_after_a_stream_frame_round_trip() {
        let mut frames = stream_frames();
        frames.extend(sample_frames());
        frames.extend(stream_frames());
        let buf = encode_all(&frames);
        let (_, payload) = Header::decode(&buf).unwrap();
        let decoded: Vec<_> = Frames::new(payload).collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded, frames);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for frame in sample_frames().into_iter().chain(stream_frames()) {
            let buf = encode_all(std::slice::from_ref(&frame));
            for cut in 0..buf.len() {
                let Ok((_, payload)) = Header::decode(&buf[..cut]) else {
                    assert!(cut < HEADER_LEN);
                    continue;
                };
                if payload.is_empty() {
                    continue;
                }
                let decoded: Result<Vec<_>, _> = Frames::new(payload).collect();
                assert!(decoded.is_err(), "{frame:?} cut at {cut} decoded");
            }
        }
        // A data packet's STREAM frame runs to the end: cut within its
        // data, it is a shorter frame (the AEAD tag, not the frame, guards
        // the length).
        for frame in stream_frames() {
            let Frame::Stream { offset, fin, data } = frame else {
                unreachable!()
            };
            let mut buf = encode_all(&[]);
            encode_stream_header(&mut buf, offset, fin, u64::MAX);
            buf.extend_from_slice(data);
            let data_at = buf.len() - data.len();
            for cut in HEADER_LEN + 1..buf.len() {
                let decoded: Result<Vec<_>, _> = Frames::new(&buf[HEADER_LEN..cut]).collect();
                if cut < data_at {
                    assert!(decoded.is_err(), "{frame:?} cut at {cut} decoded");
                } else {
                    let short = Frame::Stream {
                        offset,
                        fin,
                        data: &data[..cut - data_at],
                    };
                    assert_eq!(decoded, Ok(vec![short]));
                }
            }
        }
    }

    #[test]
    fn truncated_stream_offsets_land_next_to_the_receivers_point() {
        // A window of 6 MiB leaves 3 bytes, 1 GiB 4, more the full varint.
        assert_eq!(stream_offset_len(5, 6 << 20), 3);
        assert_eq!(stream_offset_len(5, 1 << 30), 4);
        assert_eq!(stream_offset_len(5 << 40, 3 << 30), 8);
        assert_eq!(stream_frame_overhead_within(5 << 40, 6 << 20), 4);
        assert_eq!(stream_frame_overhead(5 << 40), 9);
        for span in [6u64 << 20, 1 << 30] {
            let reach = span + STREAM_SPAN_SLACK;
            for base in [0u64, 1, 0xff_fff0, 1 << 24, (5 << 40) + 3, 1 << 61] {
                // Anything from a segment below the point the receiver
                // reported to the end of the window the sender was given.
                let lowest = base.saturating_sub(STREAM_SPAN_SLACK - 1);
                for offset in [lowest, base, base + 1, base + reach / 2, base + reach - 1] {
                    let mut buf = Vec::new();
                    encode_stream_header(&mut buf, offset, offset % 2 == 0, span);
                    buf.extend_from_slice(b"data");
                    let frame = Frames::with_stream_base(&buf, base).next();
                    let expected = Frame::Stream {
                        offset,
                        fin: offset % 2 == 0,
                        data: b"data",
                    };
                    assert_eq!(
                        frame,
                        Some(Ok(expected)),
                        "span {span} base {base} offset {offset}"
                    );
                    assert_eq!(buf.len(), stream_frame_overhead_within(offset, span) + 4);
                }
            }
        }
    }

    proptest::proptest! {
        // Seeded like the simulator's property tests: CI checks the same
        // cases every run (the fuzz targets explore further).
        #![proptest_config(proptest::test_runner::Config {
            rng_seed: proptest::test_runner::RngSeed::Fixed(13),
            ..proptest::test_runner::Config::default()
        })]
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            if let Ok((_, payload)) = Header::decode(&bytes) {
                for frame in Frames::new(payload) {
                    let _ = frame;
                }
            }
        }
    }
}
