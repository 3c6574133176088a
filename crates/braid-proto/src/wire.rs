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

use crate::varint;
use crate::PathId;
use thiserror::Error;

/// The only protocol version this code speaks (seven bits: the first
/// byte's high bit is [`KEY_PHASE_BIT`]).
pub const VERSION: u8 = 8;
/// The first header byte's key-phase bit. It is covered by the AEAD (the
/// header is its associated data), so it cannot be flipped unnoticed;
/// clear handshake datagrams and insecure sessions send it as 0.
pub const KEY_PHASE_BIT: u8 = 0x80;
const _: () = assert!(
    VERSION < KEY_PHASE_BIT,
    "the version must leave the key-phase bit free"
);
/// Bytes of the public header.
pub const HEADER_LEN: usize = 15;
/// Where the packet number's low bits sit in the header.
const PN_OFFSET: usize = 11;
/// Packet number bits on the wire. A path never has anywhere near 2^31
/// packets between the peer's largest received and what is in flight
/// (windows are bounded), so the low 32 bits always identify one.
const PN_BITS: u32 = 32;

/// Bytes a datagram carries besides its frames: the header and, when the
/// session is sealed, the AEAD tag. A data packet adds its STREAM frame's
/// own header ([`stream_frame_overhead`]), and IPv4 + UDP add 28 bytes on
/// a link. Benchmarks and reports take braid's overhead from here.
pub const fn datagram_overhead(sealed: bool) -> usize {
    if sealed {
        HEADER_LEN + crate::crypto::TAG_LEN
    } else {
        HEADER_LEN
    }
}
/// Where the MB-ECN congestion level sits in the header, for forwarders.
pub const MBECN_OFFSET: usize = 1;
/// Most single-packet receive times one ACK frame may carry
/// ([`AckFrame::rx_times`]); a peer sending more is malformed.
pub const MAX_RX_TIMES: usize = 32;
/// Most ACK ranges one frame may carry; a peer sending more is malformed.
/// Jitter of a few milliseconds at hundreds of Mbit/s leaves dozens of
/// holes in flight; each range costs about two bytes.
pub const MAX_ACK_RANGES: usize = 128;
/// Longest congestion-controller name in a handshake.
pub const MAX_CC_NAME: usize = 16;
/// Longest reason text in a CLOSE frame.
pub const MAX_REASON: usize = 256;
/// Smallest datagram that may open a session: the client pads its first
/// packets so that the server's answers (at most three times what it
/// received) cannot amplify an attack on a forged source address.
pub const MIN_INITIAL_DATAGRAM: usize = 1200;
/// Longest retry token accepted, bytes.
pub const MAX_TOKEN: usize = 64;
/// Longest SPAKE2 message accepted, bytes.
pub const MAX_PAKE_MESSAGE: usize = 64;
/// Longest Noise handshake message accepted or written, bytes (IK's first
/// is ~100 plus its payload).
pub const MAX_NOISE_MESSAGE: usize = 1024;

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
    Malformed(&'static str),
}

/// The public header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version of the sender (below [`KEY_PHASE_BIT`]).
    pub version: u8,
    /// Which key phase sealed the datagram: the low bit of the sender's
    /// phase count ([`KEY_PHASE_BIT`] on the wire).
    pub key_phase: bool,
    /// MB-ECN congestion level (seed 004): the sender writes 0 and every
    /// forwarder ORs in its queue depth / 16 (see [`mark_mbecn`]).
    pub mbecn: u8,
    /// Chosen by the client; tells sessions apart on one socket.
    pub session_id: u64,
    /// Which connection of the session this datagram travels on.
    pub path: PathId,
    /// Never reused within a path. Only its low 32 bits are encoded: a
    /// decoded header holds those until [`Header::expand`] places them.
    pub packet_number: u64,
}

/// The full packet number whose low 32 bits are `truncated`, closest to
/// the one after `largest` (the largest authenticated on the path; `None`
/// before the first): RFC 9000 §A.3's rule for a 32-bit window.
pub fn expand_packet_number(largest: Option<u64>, truncated: u64) -> u64 {
    let window = 1u64 << PN_BITS;
    let half = window / 2;
    let expected = largest.map_or(0, |l| l.saturating_add(1));
    let candidate = (expected & !(window - 1)) | (truncated & (window - 1));
    if candidate.saturating_add(half) <= expected {
        // The low bits wrapped past `expected`'s: the next window up,
        // unless that leaves the packet number space.
        candidate.checked_add(window).unwrap_or(candidate)
    } else if candidate > expected.saturating_add(half) && candidate >= window {
        candidate - window
    } else {
        candidate
    }
}

/// A forwarder's MB-ECN marking: ORs `level` (its queue depth >> 4) into
/// the datagram's congestion field, as Ouroboros routers do.
pub fn mark_mbecn(datagram: &mut [u8], level: u8) {
    if let Some(field) = datagram.get_mut(MBECN_OFFSET) {
        *field |= level;
    }
}

impl Header {
    /// Appends the header.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let phase = if self.key_phase { KEY_PHASE_BIT } else { 0 };
        buf.push((self.version & !KEY_PHASE_BIT) | phase);
        buf.push(self.mbecn);
        buf.extend_from_slice(&self.session_id.to_be_bytes());
        buf.push(self.path.0);
        buf.extend_from_slice(&(self.packet_number as u32).to_be_bytes());
    }

    /// Splits a datagram into its header and frame bytes. The header's
    /// packet number is the truncated one until [`Header::expand`].
    pub fn decode(datagram: &[u8]) -> Result<(Header, &[u8]), DecodeError> {
        if datagram.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        let header = Header {
            version: datagram[0] & !KEY_PHASE_BIT,
            key_phase: datagram[0] & KEY_PHASE_BIT != 0,
            mbecn: datagram[MBECN_OFFSET],
            session_id: u64::from_be_bytes(datagram[2..10].try_into().expect("8 bytes")),
            path: PathId(datagram[10]),
            packet_number: u64::from(u32::from_be_bytes(
                datagram[PN_OFFSET..HEADER_LEN].try_into().expect("4 bytes"),
            )),
        };
        Ok((header, &datagram[HEADER_LEN..]))
    }

    /// The decoded header with its full packet number, given the largest
    /// the path has authenticated ([`expand_packet_number`]).
    pub fn expand(self, largest: Option<u64>) -> Header {
        Header {
            packet_number: expand_packet_number(largest, self.packet_number),
            ..self
        }
    }
}

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
    /// Congestion controller name.
    pub cc: String,
}

/// Acknowledgement of one path's packets plus the session's stream state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckFrame {
    /// Inclusive packet-number ranges received on this path, highest first.
    pub ranges: Vec<(u64, u64)>,
    /// Time between receiving the largest packet and sending this ACK, µs.
    pub ack_delay_us: u64,
    /// Stream bytes received contiguously from offset 0 (the cumulative point).
    pub cumulative: u64,
    /// Whether the peer's FIN at `cumulative` has been received.
    pub fin: bool,
    /// Flow control: the sender may send stream bytes below this offset.
    pub max_data: u64,
    /// ECN CE marks seen on this path so far.
    pub ce_count: u64,
    /// The receiver's clock when it received the largest ack-eliciting
    /// packet (the largest packet before any), µs since
    /// its own epoch for this path (only differences are meaningful).
    pub rx_timestamp_us: u64,
    /// Receive times of single packets, as `(packet number, receiver's
    /// clock in µs)` on the clock of `rx_timestamp_us`, for packets this
    /// frame acknowledges. A receiver sends them for a path's first flight,
    /// whose spacing dates the bottleneck even when it reads the flight in
    /// one batch (see `cc::bbr`'s ACK train). At most [`MAX_RX_TIMES`].
    pub rx_times: Vec<(u64, u64)>,
}

impl AckFrame {
    /// Highest packet number acknowledged.
    pub fn largest(&self) -> u64 {
        self.ranges.first().map_or(0, |r| r.1)
    }
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

mod ty {
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
}

/// Whether a payload's first frame is of a type that travels in clear (a
/// handshake message, a retry or a refusal), judged by the type alone: the
/// frames a session reads from a datagram that did not open with its keys
/// (`Session::handle_clear_handshake`; keep the two lists together).
pub fn starts_with_clear_frame(payload: &[u8]) -> bool {
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
    what: &'static str,
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
/// always a datagram's last.
pub fn encode_stream_header(buf: &mut Vec<u8>, offset: u64, fin: bool) {
    varint::write(buf, if fin { ty::STREAM_FIN } else { ty::STREAM });
    varint::write(buf, offset);
}

/// Bytes a STREAM frame header takes, for payload budgeting.
pub fn stream_frame_overhead(offset: u64) -> usize {
    1 + varint::size(offset)
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
            Frame::Stream { offset, fin, data } => {
                encode_stream_header(buf, *offset, *fin);
                buf.extend_from_slice(data);
            }
            Frame::Hello(h) | Frame::HelloAck(h) => {
                let t = if matches!(self, Frame::Hello(_)) {
                    ty::HELLO
                } else {
                    ty::HELLO_ACK
                };
                varint::write(buf, t);
                buf.push(h.version);
                buf.push(h.paths);
                buf.extend_from_slice(&h.segment_size.to_be_bytes());
                varint::write(buf, h.send_window);
                varint::write(buf, h.recv_window);
                let name = &h.cc.as_bytes()[..h.cc.len().min(MAX_CC_NAME)];
                buf.push(name.len() as u8);
                buf.extend_from_slice(name);
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
                let noise = &noise[..noise.len().min(MAX_NOISE_MESSAGE)];
                varint::write(buf, noise.len() as u64);
                buf.extend_from_slice(noise);
            }
            Frame::ServerHello { pake, noise } => {
                varint::write(buf, ty::SERVER_HELLO);
                put_short(buf, &pake[..pake.len().min(MAX_PAKE_MESSAGE)]);
                let noise = &noise[..noise.len().min(MAX_NOISE_MESSAGE)];
                varint::write(buf, noise.len() as u64);
                buf.extend_from_slice(noise);
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

/// An ACK frame's body, after its type (and a PATH_ACK's connection).
fn encode_ack(ack: &AckFrame, buf: &mut Vec<u8>) {
    let ranges = &ack.ranges[..ack.ranges.len().min(MAX_ACK_RANGES)];
    // No ranges is valid: a window update on a path that has received nothing.
    varint::write(buf, ranges.len() as u64);
    varint::write(buf, ack.ack_delay_us);
    if let Some((&(first_lo, largest), rest)) = ranges.split_first() {
        varint::write(buf, largest);
        varint::write(buf, largest - first_lo);
        let mut prev_lo = first_lo;
        for &(lo, hi) in rest {
            // gap: packets between this range and the previous one, minus one.
            varint::write(buf, prev_lo - hi - 2);
            varint::write(buf, hi - lo);
            prev_lo = lo;
        }
    }
    varint::write(buf, ack.cumulative);
    let rx_times = &ack.rx_times[..ack.rx_times.len().min(MAX_RX_TIMES)];
    let flags = if rx_times.is_empty() { 0 } else { ACK_RX_TIMES };
    buf.push(u8::from(ack.fin) | flags);
    varint::write(buf, ack.max_data);
    varint::write(buf, ack.ce_count);
    varint::write(buf, ack.rx_timestamp_us);
    if !rx_times.is_empty() {
        let largest = ack.largest();
        varint::write(buf, rx_times.len() as u64);
        for &(pn, us) in rx_times {
            // Each relative to the frame's largest packet and receive time;
            // a reordered packet may have arrived after the largest.
            varint::write(buf, largest.saturating_sub(pn));
            varint::write(buf, zigzag(ack.rx_timestamp_us as i64 - us as i64));
        }
    }
}

/// The flags byte of an ACK frame: bit 0 is the stream's FIN, bit 1 says
/// single-packet receive times follow.
const ACK_FIN: u8 = 1;
const ACK_RX_TIMES: u8 = 2;

/// A signed value as a varint's unsigned one: 0, -1, 1, -2, ... → 0, 1, 2, 3.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

/// Iterates over the frames of a datagram's payload.
pub struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Frames<'a> {
    /// Frames in `payload` (the bytes after the header).
    pub fn new(payload: &'a [u8]) -> Self {
        Frames { rest: payload }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let result = decode_frame(&mut self.rest);
        if result.is_err() {
            self.rest = &[];
        }
        Some(result)
    }
}

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

fn decode_frame<'a>(input: &mut &'a [u8]) -> Result<Frame<'a>, DecodeError> {
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
        ty::STREAM | ty::STREAM_FIN => {
            let offset = var(input)?;
            let data = std::mem::take(input);
            let len = data.len();
            if offset
                .checked_add(len as u64)
                .is_none_or(|end| end > varint::MAX)
            {
                return Err(DecodeError::Malformed("stream"));
            }
            Frame::Stream {
                offset,
                fin: t == ty::STREAM_FIN,
                data,
            }
        }
        ty::HELLO | ty::HELLO_ACK => {
            let version = u8_(input)?;
            let paths = u8_(input)?;
            let segment_size = u16::from_be_bytes(take(input, 2)?.try_into().expect("2 bytes"));
            let send_window = var(input)?;
            let recv_window = var(input)?;
            let name_len = usize::from(u8_(input)?);
            if name_len > MAX_CC_NAME {
                return Err(DecodeError::Malformed("hello"));
            }
            let cc = std::str::from_utf8(take(input, name_len)?)
                .map_err(|_| DecodeError::Malformed("hello"))?
                .to_owned();
            let hello = Hello {
                version,
                paths,
                segment_size,
                send_window,
                recv_window,
                cc,
            };
            if t == ty::HELLO {
                Frame::Hello(hello)
            } else {
                Frame::HelloAck(hello)
            }
        }
        ty::CLOSE => {
            let code = var(input)?;
            let len = var(input)?;
            if len > MAX_REASON as u64 {
                return Err(DecodeError::Malformed("close"));
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
        ty::CLIENT_HELLO => {
            let mode = u8_(input)?;
            let token = get_short(input, MAX_TOKEN, "client hello")?;
            let pake = get_short(input, MAX_PAKE_MESSAGE, "client hello")?;
            let len = var(input)?;
            if len > MAX_NOISE_MESSAGE as u64 {
                return Err(DecodeError::Malformed("client hello"));
            }
            Frame::ClientHello {
                mode,
                token,
                pake,
                noise: take(input, len as usize)?,
            }
        }
        ty::SERVER_HELLO => {
            let pake = get_short(input, MAX_PAKE_MESSAGE, "server hello")?;
            let len = var(input)?;
            if len > MAX_NOISE_MESSAGE as u64 {
                return Err(DecodeError::Malformed("server hello"));
            }
            Frame::ServerHello {
                pake,
                noise: take(input, len as usize)?,
            }
        }
        ty::RETRY => Frame::Retry {
            token: get_short(input, MAX_TOKEN, "retry")?,
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
        ty::ECE => {
            Frame::Ece(u16::try_from(var(input)?).map_err(|_| DecodeError::Malformed("ece"))?)
        }
        other => return Err(DecodeError::UnknownFrame(other)),
    })
}

fn decode_ack(input: &mut &[u8]) -> Result<AckFrame, DecodeError> {
    let bad = DecodeError::Malformed("ack");
    let count = var(input)?;
    if count > MAX_ACK_RANGES as u64 {
        return Err(bad);
    }
    let ack_delay_us = var(input)?;
    let mut ranges = Vec::with_capacity(count as usize);
    if count > 0 {
        let largest = var(input)?;
        let first_len = var(input)?;
        let mut lo = largest.checked_sub(first_len).ok_or(bad)?;
        ranges.push((lo, largest));
        for _ in 1..count {
            let gap = var(input)?;
            let len = var(input)?;
            let hi = lo
                .checked_sub(gap)
                .and_then(|v| v.checked_sub(2))
                .ok_or(bad)?;
            lo = hi.checked_sub(len).ok_or(bad)?;
            ranges.push((lo, hi));
        }
    }
    let cumulative = var(input)?;
    let flags = u8_(input)?;
    if flags & !(ACK_FIN | ACK_RX_TIMES) != 0 {
        return Err(bad);
    }
    let fin = flags & ACK_FIN != 0;
    let max_data = var(input)?;
    let ce_count = var(input)?;
    let rx_timestamp_us = var(input)?;
    let mut rx_times = Vec::new();
    if flags & ACK_RX_TIMES != 0 {
        let n = var(input)?;
        if n == 0 || n > MAX_RX_TIMES as u64 {
            return Err(bad);
        }
        let largest = ranges.first().map_or(0, |r: &(u64, u64)| r.1);
        for _ in 0..n {
            let pn = largest.checked_sub(var(input)?).ok_or(bad)?;
            let us = (rx_timestamp_us as i64).checked_sub(unzigzag(var(input)?));
            rx_times.push((pn, us.and_then(|us| u64::try_from(us).ok()).ok_or(bad)?));
        }
    }
    Ok(AckFrame {
        ranges,
        ack_delay_us,
        cumulative,
        fin,
        max_data,
        ce_count,
        rx_timestamp_us,
        rx_times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_what_a_data_datagram_carries_besides_its_payload() {
        let header = Header {
            version: VERSION,
            key_phase: false,
            mbecn: 0,
            session_id: 1,
            path: PathId(0),
            packet_number: 7,
        };
        let data = [0u8; 1386];
        let mut buf = Vec::new();
        header.encode(&mut buf);
        Frame::Stream {
            offset: 20_000,
            fin: false,
            data: &data,
        }
        .encode(&mut buf);
        let overhead = datagram_overhead(false) + stream_frame_overhead(20_000);
        assert_eq!(buf.len(), data.len() + overhead);
        assert_eq!(overhead, 15 + 1 + 4);
        assert_eq!(
            datagram_overhead(true),
            datagram_overhead(false) + crate::crypto::TAG_LEN
        );
    }

    #[test]
    fn the_key_phase_is_the_first_bytes_high_bit() {
        for key_phase in [false, true] {
            let header = Header {
                version: VERSION,
                key_phase,
                mbecn: 3,
                session_id: 0x0102_0304_0506_0708,
                path: PathId(4),
                packet_number: 99,
            };
            let mut buf = Vec::new();
            header.encode(&mut buf);
            assert_eq!(buf.len(), HEADER_LEN);
            assert_eq!(buf[0], VERSION | if key_phase { 0x80 } else { 0 });
            let (decoded, rest) = Header::decode(&buf).unwrap();
            assert_eq!((decoded, rest.len()), (header, 0));
        }
    }

    #[test]
    fn packet_numbers_expand_next_to_the_largest_received() {
        let w = 1u64 << 32;
        // Before the first packet the window is centred on 0.
        assert_eq!(expand_packet_number(None, 0), 0);
        assert_eq!(expand_packet_number(None, 5), 5);
        // Within a window, later and (reordered) earlier numbers.
        assert_eq!(expand_packet_number(Some(1000), 1001), 1001);
        assert_eq!(expand_packet_number(Some(1000), 900), 900);
        // Across a window boundary, both ways.
        assert_eq!(expand_packet_number(Some(w - 2), 3), w + 3);
        assert_eq!(expand_packet_number(Some(w + 3), w - 2), w - 2);
        // Far from the 2^32 boundary the high bits come from the largest.
        let largest = 7 * w + 0x1234_5678;
        assert_eq!(
            expand_packet_number(Some(largest), 0x1234_5679),
            largest + 1
        );
        assert_eq!(
            expand_packet_number(Some(largest), 0x1234_0000),
            7 * w + 0x1234_0000
        );
        // Half a window ahead is still ahead; further is behind.
        assert_eq!(expand_packet_number(Some(w - 1), w / 2 - 1), w + w / 2 - 1);
        // The top of the number space does not overflow.
        assert_eq!(expand_packet_number(Some(u64::MAX), 0), u64::MAX - (w - 1));
        // A header round-trips its full number through encode and expand.
        for (largest, pn) in [
            (None, 0),
            (Some(w - 10), w + 5),
            (Some(3 * w + 9), 3 * w + 2),
        ] {
            let mut buf = Vec::new();
            Header {
                version: VERSION,
                key_phase: false,
                mbecn: 0,
                session_id: 1,
                path: PathId(0),
                packet_number: pn,
            }
            .encode(&mut buf);
            let (header, _) = Header::decode(&buf).unwrap();
            assert_eq!(header.packet_number, pn % w);
            assert_eq!(header.expand(largest).packet_number, pn);
        }
    }

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
            }),
            Frame::Hello(Hello {
                version: VERSION,
                paths: 3,
                segment_size: 1380,
                send_window: 4 << 20,
                recv_window: 8 << 20,
                cc: "cubic".into(),
            }),
            Frame::HelloAck(Hello {
                version: VERSION,
                paths: 1,
                segment_size: 1024,
                send_window: 1,
                recv_window: 2,
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

    fn encode_all(frames: &[Frame<'_>]) -> Vec<u8> {
        let mut buf = Vec::new();
        Header {
            version: VERSION,
            key_phase: false,
            mbecn: 0,
            session_id: 0xdead_beef,
            path: PathId(2),
            packet_number: (1 << 50) + 77,
        }
        .encode(&mut buf);
        for f in frames {
            f.encode(&mut buf);
        }
        buf
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
            assert_eq!(header.expand(Some(1 << 50)).packet_number, (1 << 50) + 77);
            let decoded: Vec<_> = Frames::new(payload).collect::<Result<_, _>>().unwrap();
            assert_eq!(decoded, frames);
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for frame in sample_frames() {
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
        // A STREAM frame's data runs to the end: cut within its data, it is
        // a shorter frame (the AEAD tag, not the frame, guards the length).
        for frame in stream_frames() {
            let Frame::Stream { offset, fin, data } = frame else {
                unreachable!()
            };
            let buf = encode_all(std::slice::from_ref(&frame));
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
    fn unknown_frame_and_bad_ack_are_rejected() {
        assert_eq!(
            Frames::new(&[0x3f]).next(),
            Some(Err(DecodeError::UnknownFrame(0x3f)))
        );
        // one range, largest 5, first range length 9: would underflow.
        let bytes = [ty::ACK as u8, 1, 0, 5, 9, 0, 0, 0, 0, 0];
        assert_eq!(
            Frames::new(&bytes).next(),
            Some(Err(DecodeError::Malformed("ack")))
        );
    }

    /// An ACK of no packets (a window update on a path that has received
    /// nothing yet) once panicked in `encode_ack`.
    #[test]
    fn an_ack_without_ranges_round_trips() {
        let ack = Frame::Ack(AckFrame {
            ranges: Vec::new(),
            ack_delay_us: 0,
            cumulative: 4096,
            fin: false,
            max_data: 1 << 22,
            ce_count: 0,
            rx_timestamp_us: 0,
            rx_times: Vec::new(),
        });
        let buf = encode_all(std::slice::from_ref(&ack));
        let (_, payload) = Header::decode(&buf).unwrap();
        assert_eq!(Frames::new(payload).next(), Some(Ok(ack)));
        // More ranges than an ACK may carry are refused.
        let bytes = [ty::ACK as u8, 0x40, MAX_ACK_RANGES as u8 + 1, 0];
        assert_eq!(
            Frames::new(&bytes).next(),
            Some(Err(DecodeError::Malformed("ack")))
        );
    }

    #[test]
    fn receive_times_are_bounded_and_below_the_largest() {
        let ack = |rx_times: Vec<(u64, u64)>| {
            let mut buf = Vec::new();
            Frame::Ack(AckFrame {
                ranges: vec![(0, 40)],
                rx_timestamp_us: 5_000,
                rx_times,
                ..AckFrame::default()
            })
            .encode(&mut buf);
            buf
        };
        fn parse(bytes: &[u8]) -> Option<Result<Frame<'_>, DecodeError>> {
            Frames::new(bytes).next()
        }
        let bad = Some(Err(DecodeError::Malformed("ack")));
        // Without receive times the frame is as before: no count byte.
        assert_eq!(ack(vec![(40, 5_000)]).len(), ack(Vec::new()).len() + 3);
        // The count sits after the flags byte and three one-byte varints.
        let mut many = ack(vec![(40, 5_000)]);
        let count_at = many.len() - 3;
        assert_eq!(many[count_at], 1);
        many[count_at] = MAX_RX_TIMES as u8 + 1;
        assert_eq!(parse(&many), bad, "more than MAX_RX_TIMES");
        many[count_at] = 0;
        assert_eq!(parse(&many[..count_at + 1]), bad, "flagged but empty");
        // A packet number below 0 or a time before the epoch.
        let mut below = ack(vec![(40, 5_000)]);
        below[count_at + 1] = 41;
        assert_eq!(parse(&below), bad);
        let early = ack(vec![(40, 5_000)]);
        let mut early = early[..count_at + 2].to_vec();
        crate::varint::write(&mut early, zigzag(5_001));
        assert_eq!(parse(&early), bad);
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
