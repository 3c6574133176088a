//! Frames: what follows the header, encoded one after another, and the
//! iterator that decodes them.

use super::ack::{decode_ack, encode_ack};
use super::{take, u8_, var, AckFrame, DecodeError, FrameKind};
use crate::varint;
use crate::PathId;

/// Longest congestion-controller name in a handshake.
pub const MAX_CC_NAME: usize = 16;
/// Longest reason text in a CLOSE frame.
pub const MAX_REASON: usize = 256;
/// Longest retry token accepted, bytes.
pub const MAX_TOKEN: usize = 64;
/// Longest SPAKE2 message accepted, bytes.
pub const MAX_PAKE_MESSAGE: usize = 64;
/// Longest Noise handshake message accepted or written, bytes (IK's first
/// is ~100 plus its payload).
pub const MAX_NOISE_MESSAGE: usize = 1024;

/// Handshake parameters, offered by the client and answered (negotiated) by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Highest protocol version the sender speaks.
    pub version: u8,
    /// Connections the sender wants (client) or accepts (server).
    pub paths: u8,
    /// Largest stream payload per packet, bytes.
    pub segment_size: u16,
    /// Send window, bytes.
    pub send_window: u64,
    /// Receive window, bytes.
    pub recv_window: u64,
    /// Longest the sender delays an ACK, µs: the peer subtracts at most
    /// this much of a reported ACK delay from an RTT sample.
    pub max_ack_delay_us: u64,
    /// Congestion controller name.
    pub cc: String,
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Elicits an ACK; probes a path.
    Ping,
    /// See [`AckFrame`].
    Ack(AckFrame),
    /// An [`AckFrame`] for connection `path`, carried on another one: a
    /// copy of a slow connection's ACK on a faster one (see
    /// `session::ack_copy`).
    PathAck {
        /// The connection whose packets `ack` acknowledges.
        path: PathId,
        /// The acknowledgement, as it would travel on `path`.
        ack: AckFrame,
    },
    /// Stream bytes at `offset`; `fin` marks the end of the stream after them.
    /// Its data runs to the end of the datagram: encode it last.
    Stream {
        /// Stream offset of the first byte of `data`.
        offset: u64,
        /// The stream ends after `data`.
        fin: bool,
        /// The stream bytes.
        data: &'a [u8],
    },
    /// Client's handshake offer.
    Hello(Hello),
    /// Server's negotiated answer.
    HelloAck(Hello),
    /// The session is aborted with `code` and a human-readable reason.
    Close {
        /// Error code: braid's own, or the one given to [`Session::abort`](crate::Session::abort).
        code: u64,
        /// Human-readable reason, UTF-8, at most [`MAX_REASON`] bytes.
        reason: &'a [u8],
    },
    /// The sender stops using `path`.
    PathClose {
        /// The connection closed.
        path: PathId,
    },
    /// MB-ECN feedback: the receiver's congestion level for the connection
    /// this frame travels on (seed 004's FLOW_UPDATE with its 16-bit ECE).
    Ece(u16),
    /// The sender has data it may not send because of the peer's
    /// flow-control limit `max_data` (QUIC's DATA_BLOCKED); the receiver
    /// may grow its window.
    Blocked(u64),
    /// Zero bytes that fill a datagram up to a size (all that follow).
    Padding,
    /// A sealed session's opening (sent in clear): the handshake mode, a
    /// retry token if the server asked for one, the SPAKE2 message (code
    /// mode) and Noise's first message, whose payload is the [`Hello`].
    ClientHello {
        /// Handshake pattern: 1 for a pinned server key, 2 for a code.
        mode: u8,
        /// The server's retry token; empty unless it sent a RETRY.
        token: &'a [u8],
        /// The client's SPAKE2 message; empty in pinned-key mode.
        pake: &'a [u8],
        /// Noise's first handshake message.
        noise: &'a [u8],
    },
    /// The server's answer (sent in clear; authenticated by Noise): its
    /// SPAKE2 message and Noise's second message, whose payload is the
    /// negotiated [`Hello`] or a CLOSE refusing the session.
    ServerHello {
        /// The server's SPAKE2 message; empty in pinned-key mode.
        pake: &'a [u8],
        /// Noise's second handshake message.
        noise: &'a [u8],
    },
    /// A server under load: open again with this token.
    Retry {
        /// Proof of the client's address, to echo in the next CLIENT_HELLO.
        token: &'a [u8],
    },
    /// Asks the peer to prove it receives on this connection's address.
    PathChallenge([u8; 8]),
    /// Echoes a challenge's data.
    PathResponse([u8; 8]),
}

pub(super) mod ty {
    pub const PING: u64 = 0x01;
    pub const ACK: u64 = 0x02;
    pub const STREAM: u64 = 0x03;
    pub const STREAM_FIN: u64 = 0x04;
    pub const HELLO: u64 = 0x05;
    pub const HELLO_ACK: u64 = 0x06;
    pub const CLOSE: u64 = 0x07;
    pub const PATH_CLOSE: u64 = 0x08;
    pub const ECE: u64 = 0x09;
    pub const BLOCKED: u64 = 0x0a;
    pub const PADDING: u64 = 0x00;
    pub const CLIENT_HELLO: u64 = 0x0b;
    pub const SERVER_HELLO: u64 = 0x0c;
    pub const RETRY: u64 = 0x0d;
    pub const PATH_CHALLENGE: u64 = 0x0e;
    pub const PATH_RESPONSE: u64 = 0x0f;
    pub const PATH_ACK: u64 = 0x10;
    /// STREAM frames with a length, which other frames may follow.
    pub const STREAM_LEN: u64 = 0x11;
    pub const STREAM_FIN_LEN: u64 = 0x12;
    /// STREAM frames to the datagram's end whose offset is truncated to
    /// its low 3 or 4 bytes (see `stream_offset_len`).
    pub const STREAM_OFF3: u64 = 0x13;
    pub const STREAM_OFF3_FIN: u64 = 0x14;
    pub const STREAM_OFF4: u64 = 0x15;
    pub const STREAM_OFF4_FIN: u64 = 0x16;
}

/// Whether a payload's first frame is of a type that travels in clear (a
/// handshake message, a retry or a refusal), judged by the type alone: the
/// frames a session reads from a datagram that did not open with its keys
/// (`Session::handle_clear_handshake`; keep the two lists together).
pub(crate) fn starts_with_clear_frame(payload: &[u8]) -> bool {
    let mut input = payload;
    matches!(
        varint::read(&mut input),
        Some(ty::CLIENT_HELLO | ty::SERVER_HELLO | ty::RETRY | ty::CLOSE)
    )
}

/// Appends a length-prefixed byte string (u8 length).
fn put_short(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.push(bytes.len() as u8);
    buf.extend_from_slice(bytes);
}

fn get_short<'a>(
    input: &mut &'a [u8],
    max: usize,
    what: FrameKind,
) -> Result<&'a [u8], DecodeError> {
    let len = usize::from(u8_(input)?);
    if len > max {
        return Err(DecodeError::Malformed(what));
    }
    take(input, len)
}

/// Appends padding so that `buf` is at least `size` bytes long.
pub fn pad_to(buf: &mut Vec<u8>, size: usize) {
    if buf.len() < size {
        buf.resize(size, ty::PADDING as u8);
    }
}

/// A STREAM frame up to its data, which the caller appends: the sender
/// copies data from its buffer into the datagram only once. The data runs
/// to the end of the datagram (no length field), so a STREAM frame is
/// always a datagram's last. `span` bounds how far the receiver's
/// in-order point may be from `offset` (see [`stream_offset_len`]).
pub(crate) fn encode_stream_header(buf: &mut Vec<u8>, offset: u64, fin: bool, span: u64) {
    let len = stream_offset_len(offset, span);
    let t = match (len, fin) {
        (3, false) => ty::STREAM_OFF3,
        (3, true) => ty::STREAM_OFF3_FIN,
        (4, false) => ty::STREAM_OFF4,
        (4, true) => ty::STREAM_OFF4_FIN,
        (_, false) => ty::STREAM,
        (_, true) => ty::STREAM_FIN,
    };
    varint::write(buf, t);
    match len {
        3 | 4 => buf.extend_from_slice(&offset.to_be_bytes()[8 - len..]),
        _ => varint::write(buf, offset),
    }
}

/// Slack beyond the flow-control window a sender counts in a STREAM
/// offset's `span`: a retransmitted segment may start below the point the
/// peer acknowledged, by less than a segment.
pub const STREAM_SPAN_SLACK: u64 = 1 << 20;

/// Bytes a data packet's STREAM offset takes: its low 3 bytes while the
/// receiver's in-order point is within 8 MiB of it either way (`span`,
/// the sender's flow-control window past what the receiver acknowledged,
/// plus [`STREAM_SPAN_SLACK`], bounds that), 4 within 2 GiB, else the full
/// varint. The receiver places the low bytes next to its in-order point,
/// as packet numbers are placed next to the largest received; a 4-byte
/// varint offset reaches only 1 GiB, and 8 bytes after.
pub fn stream_offset_len(offset: u64, span: u64) -> usize {
    match span.saturating_add(STREAM_SPAN_SLACK) {
        0..0x80_0000 => 3,
        0x80_0000..0x8000_0000 => 4,
        _ => varint::size(offset),
    }
}

/// Bytes a STREAM frame header takes at most, for payload budgeting: a
/// full varint offset.
pub fn stream_frame_overhead(offset: u64) -> usize {
    1 + varint::size(offset)
}

/// Bytes a data packet's STREAM frame header takes with `span`
/// ([`stream_offset_len`]).
pub fn stream_frame_overhead_within(offset: u64, span: u64) -> usize {
    1 + stream_offset_len(offset, span)
}

impl Frame<'_> {
    /// Appends the frame.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        match self {
            Frame::Ping => varint::write(buf, ty::PING),
            Frame::Ack(ack) => {
                varint::write(buf, ty::ACK);
                encode_ack(ack, buf);
            }
            Frame::PathAck { path, ack } => {
                varint::write(buf, ty::PATH_ACK);
                buf.push(path.0);
                encode_ack(ack, buf);
            }
            // With its length: a frame written after it would otherwise
            // be read as its data. Data packets use the shorter form that
            // runs to the end of the datagram (`encode_stream_header`).
            Frame::Stream { offset, fin, data } => encode_stream_with_len(*offset, *fin, data, buf),
            Frame::Hello(h) => {
                varint::write(buf, ty::HELLO);
                encode_hello(h, buf);
            }
            Frame::HelloAck(h) => {
                varint::write(buf, ty::HELLO_ACK);
                encode_hello(h, buf);
            }
            Frame::Close { code, reason } => {
                varint::write(buf, ty::CLOSE);
                varint::write(buf, *code);
                let reason = &reason[..reason.len().min(MAX_REASON)];
                varint::write(buf, reason.len() as u64);
                buf.extend_from_slice(reason);
            }
            Frame::PathClose { path } => {
                varint::write(buf, ty::PATH_CLOSE);
                buf.push(path.0);
            }
            Frame::Ece(level) => {
                varint::write(buf, ty::ECE);
                varint::write(buf, u64::from(*level));
            }
            Frame::Blocked(limit) => {
                varint::write(buf, ty::BLOCKED);
                varint::write(buf, *limit);
            }
            Frame::Padding => varint::write(buf, ty::PADDING),
            Frame::ClientHello {
                mode,
                token,
                pake,
                noise,
            } => {
                varint::write(buf, ty::CLIENT_HELLO);
                buf.push(*mode);
                put_short(buf, &token[..token.len().min(MAX_TOKEN)]);
                put_short(buf, &pake[..pake.len().min(MAX_PAKE_MESSAGE)]);
                put_noise(buf, noise);
            }
            Frame::ServerHello { pake, noise } => {
                varint::write(buf, ty::SERVER_HELLO);
                put_short(buf, &pake[..pake.len().min(MAX_PAKE_MESSAGE)]);
                put_noise(buf, noise);
            }
            Frame::Retry { token } => {
                varint::write(buf, ty::RETRY);
                put_short(buf, &token[..token.len().min(MAX_TOKEN)]);
            }
            Frame::PathChallenge(data) | Frame::PathResponse(data) => {
                let t = if matches!(self, Frame::PathChallenge(_)) {
                    ty::PATH_CHALLENGE
                } else {
                    ty::PATH_RESPONSE
                };
                varint::write(buf, t);
                buf.extend_from_slice(data);
            }
        }
    }
}

/// A STREAM frame with its length, so that a frame after it is not read
/// as its data.
fn encode_stream_with_len(offset: u64, fin: bool, data: &[u8], buf: &mut Vec<u8>) {
    let t = if fin {
        ty::STREAM_FIN_LEN
    } else {
        ty::STREAM_LEN
    };
    varint::write(buf, t);
    varint::write(buf, offset);
    varint::write(buf, data.len() as u64);
    buf.extend_from_slice(data);
}

/// The body of HELLO and HELLO_ACK; a controller name too long to decode
/// is cut.
fn encode_hello(h: &Hello, buf: &mut Vec<u8>) {
    buf.push(h.version);
    buf.push(h.paths);
    buf.extend_from_slice(&h.segment_size.to_be_bytes());
    varint::write(buf, h.send_window);
    varint::write(buf, h.recv_window);
    varint::write(buf, h.max_ack_delay_us);
    let name = &h.cc.as_bytes()[..h.cc.len().min(MAX_CC_NAME)];
    buf.push(name.len() as u8);
    buf.extend_from_slice(name);
}

/// A Noise handshake message with its length, cut to what the peer accepts.
fn put_noise(buf: &mut Vec<u8>, noise: &[u8]) {
    let noise = &noise[..noise.len().min(MAX_NOISE_MESSAGE)];
    varint::write(buf, noise.len() as u64);
    buf.extend_from_slice(noise);
}

/// Iterates over the frames of a datagram's payload.
pub struct Frames<'a> {
    rest: &'a [u8],
    /// Where truncated STREAM offsets are placed next to.
    stream_base: u64,
}

impl<'a> Frames<'a> {
    /// Frames in `payload` (the bytes after the header).
    pub fn new(payload: &'a [u8]) -> Self {
        Frames::with_stream_base(payload, 0)
    }

    /// Frames in `payload`, whose truncated STREAM offsets are placed next
    /// to `base`, the receiver's in-order point.
    pub fn with_stream_base(payload: &'a [u8], base: u64) -> Self {
        Frames {
            rest: payload,
            stream_base: base,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let result = decode_frame(&mut self.rest, self.stream_base);
        if result.is_err() {
            self.rest = &[];
        }
        Some(result)
    }
}

/// A STREAM offset's low `bytes` bytes, placed closest to `base`.
fn truncated_offset(input: &mut &[u8], bytes: usize, base: u64) -> Result<u64, DecodeError> {
    let low = take(input, bytes)?;
    let mut full = [0u8; 8];
    full[8 - bytes..].copy_from_slice(low);
    let truncated = u64::from_be_bytes(full);
    // Packet numbers are placed next to the one after the largest; an
    // offset next to `base` itself.
    Ok(super::expand_packet_number(
        base.checked_sub(1),
        truncated,
        bytes,
    ))
}

fn decode_frame<'a>(input: &mut &'a [u8], stream_base: u64) -> Result<Frame<'a>, DecodeError> {
    let t = var(input)?;
    Ok(match t {
        ty::PING => Frame::Ping,
        ty::ACK => Frame::Ack(decode_ack(input)?),
        ty::PATH_ACK => {
            let path = PathId(u8_(input)?);
            Frame::PathAck {
                path,
                ack: decode_ack(input)?,
            }
        }
        ty::STREAM
        | ty::STREAM_FIN
        | ty::STREAM_LEN
        | ty::STREAM_FIN_LEN
        | ty::STREAM_OFF3
        | ty::STREAM_OFF3_FIN
        | ty::STREAM_OFF4
        | ty::STREAM_OFF4_FIN => decode_stream(t, input, stream_base)?,
        ty::HELLO => Frame::Hello(decode_hello(input)?),
        ty::HELLO_ACK => Frame::HelloAck(decode_hello(input)?),
        ty::CLOSE => {
            let code = var(input)?;
            let len = var(input)?;
            if len > MAX_REASON as u64 {
                return Err(DecodeError::Malformed(FrameKind::Close));
            }
            Frame::Close {
                code,
                reason: take(input, len as usize)?,
            }
        }
        ty::PATH_CLOSE => Frame::PathClose {
            path: PathId(u8_(input)?),
        },
        ty::PADDING => {
            let zeros = input.iter().take_while(|&&b| b == 0).count();
            take(input, zeros)?;
            Frame::Padding
        }
        ty::CLIENT_HELLO => decode_client_hello(input)?,
        ty::SERVER_HELLO => decode_server_hello(input)?,
        ty::RETRY => Frame::Retry {
            token: get_short(input, MAX_TOKEN, FrameKind::Retry)?,
        },
        ty::PATH_CHALLENGE | ty::PATH_RESPONSE => {
            let data: [u8; 8] = take(input, 8)?.try_into().expect("8 bytes");
            if t == ty::PATH_CHALLENGE {
                Frame::PathChallenge(data)
            } else {
                Frame::PathResponse(data)
            }
        }
        ty::BLOCKED => Frame::Blocked(var(input)?),
        ty::ECE => Frame::Ece(
            u16::try_from(var(input)?).map_err(|_| DecodeError::Malformed(FrameKind::Ece))?,
        ),
        other => return Err(DecodeError::UnknownFrame(other)),
    })
}

/// A STREAM frame; its type says whether it has a length, a FIN and an
/// offset truncated against `stream_base`.
fn decode_stream<'a>(
    t: u64,
    input: &mut &'a [u8],
    stream_base: u64,
) -> Result<Frame<'a>, DecodeError> {
    let offset = match t {
        ty::STREAM_OFF3 | ty::STREAM_OFF3_FIN => truncated_offset(input, 3, stream_base)?,
        ty::STREAM_OFF4 | ty::STREAM_OFF4_FIN => truncated_offset(input, 4, stream_base)?,
        _ => var(input)?,
    };
    let data = if matches!(t, ty::STREAM_LEN | ty::STREAM_FIN_LEN) {
        let len =
            usize::try_from(var(input)?).map_err(|_| DecodeError::Malformed(FrameKind::Stream))?;
        take(input, len)?
    } else {
        std::mem::take(input)
    };
    let len = data.len();
    if offset
        .checked_add(len as u64)
        .is_none_or(|end| end > varint::MAX)
    {
        return Err(DecodeError::Malformed(FrameKind::Stream));
    }
    Ok(Frame::Stream {
        offset,
        fin: matches!(
            t,
            ty::STREAM_FIN | ty::STREAM_FIN_LEN | ty::STREAM_OFF3_FIN | ty::STREAM_OFF4_FIN
        ),
        data,
    })
}

/// The body of HELLO and HELLO_ACK, which carry the same fields.
fn decode_hello(input: &mut &[u8]) -> Result<Hello, DecodeError> {
    let version = u8_(input)?;
    let paths = u8_(input)?;
    let segment_size = u16::from_be_bytes(take(input, 2)?.try_into().expect("2 bytes"));
    let send_window = var(input)?;
    let recv_window = var(input)?;
    let max_ack_delay_us = var(input)?;
    let name_len = usize::from(u8_(input)?);
    if name_len > MAX_CC_NAME {
        return Err(DecodeError::Malformed(FrameKind::Hello));
    }
    let cc = std::str::from_utf8(take(input, name_len)?)
        .map_err(|_| DecodeError::Malformed(FrameKind::Hello))?
        .to_owned();
    Ok(Hello {
        version,
        paths,
        segment_size,
        send_window,
        recv_window,
        max_ack_delay_us,
        cc,
    })
}

/// The client's handshake opening: its mode, token, PAKE and Noise messages.
fn decode_client_hello<'a>(input: &mut &'a [u8]) -> Result<Frame<'a>, DecodeError> {
    let mode = u8_(input)?;
    let token = get_short(input, MAX_TOKEN, FrameKind::ClientHello)?;
    let pake = get_short(input, MAX_PAKE_MESSAGE, FrameKind::ClientHello)?;
    let len = var(input)?;
    if len > MAX_NOISE_MESSAGE as u64 {
        return Err(DecodeError::Malformed(FrameKind::ClientHello));
    }
    Ok(Frame::ClientHello {
        mode,
        token,
        pake,
        noise: take(input, len as usize)?,
    })
}

/// The server's handshake answer: its PAKE and Noise messages.
fn decode_server_hello<'a>(input: &mut &'a [u8]) -> Result<Frame<'a>, DecodeError> {
    let pake = get_short(input, MAX_PAKE_MESSAGE, FrameKind::ServerHello)?;
    let len = var(input)?;
    if len > MAX_NOISE_MESSAGE as u64 {
        return Err(DecodeError::Malformed(FrameKind::ServerHello));
    }
    Ok(Frame::ServerHello {
        pake,
        noise: take(input, len as usize)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_frame_and_bad_ack_are_rejected() {
        assert_eq!(
            Frames::new(&[0x3f]).next(),
            Some(Err(DecodeError::UnknownFrame(0x3f)))
        );
        // one range, largest 5, first range length 9: would underflow.
        let bytes = [ty::ACK as u8, 1, 0, 5, 9, 0, 0, 0, 0, 0];
        assert_eq!(
            Frames::new(&bytes).next(),
            Some(Err(DecodeError::Malformed(FrameKind::Ack)))
        );
    }
}
