//! The public header: key phase, packet-number length, form and version,
//! MB-ECN level, session id and path (in the long form only) and the
//! packet number's low bits (1 to 4 bytes, as QUIC chooses them from what
//! the peer has acknowledged).
//!
//! The short form leaves out the session id and the path: 5 bytes a data
//! packet spends on payload instead. The receiver tells its session and
//! connection from the address the datagram came from, which it
//! offers only for an address no other connection on its socket uses
//! (see `Session::accept_short_headers`); everything else, a handshake,
//! a connection that has just timed out, travels in the long form.

use super::DecodeError;
use crate::PathId;

/// The only protocol version this code speaks (four bits: the first
/// byte's high bit is [`KEY_PHASE_BIT`], the next two the packet number's
/// length, the next the form). Version 9's five version bits read 10 or
/// 26 here: another version's. Version 11's code openings carry the
/// commitment their client gives up with, which 10 does not read.
pub const VERSION: u8 = 11;
/// The first header byte's key-phase bit. It is covered by the AEAD (the
/// header is its associated data), so it cannot be flipped unnoticed;
/// clear handshake datagrams and insecure sessions send it as 0.
pub const KEY_PHASE_BIT: u8 = 0x80;
/// The first byte's bits that hold the packet number's length less one.
const PN_LEN_BITS: u8 = 0x60;
const PN_LEN_SHIFT: u32 = 5;
/// The first byte's bit that marks the short form.
const SHORT_BIT: u8 = 0x10;
/// The first byte's bits that hold the version.
const VERSION_BITS: u8 = 0x0f;
const _: () = assert!(
    VERSION <= VERSION_BITS,
    "the version must leave the key-phase, length and form bits free"
);
/// Bytes of the public header at least (short, a 1-byte packet number).
pub const MIN_HEADER_LEN: usize = SHORT_PN_OFFSET + 1;
/// Bytes of the public header at most (long, a 4-byte packet number).
pub const HEADER_LEN: usize = PN_OFFSET + 4;
/// Bytes of the short header at most (a 4-byte packet number).
pub const SHORT_HEADER_LEN: usize = SHORT_PN_OFFSET + 4;
/// Where the short header's packet number sits.
const SHORT_PN_OFFSET: usize = 2;
/// Where the session id sits: 32 bits, chosen at random by the client.
const SESSION_ID_OFFSET: usize = 2;
/// Where the path sits in the long header (the AEAD nonce takes it too).
pub const PATH_OFFSET: usize = 6;
/// Where the packet number's low bits sit in the long header.
const PN_OFFSET: usize = 7;
/// The session ids the header carries: the low 32 bits of a `u64`.
pub const SESSION_ID_MASK: u64 = 0xffff_ffff;

/// Bytes a datagram carries besides its frames at most: the long header
/// with a 4-byte packet number and, when the session is sealed, the AEAD
/// tag. A data packet adds its STREAM frame's own header
/// ([`stream_frame_overhead`](super::stream_frame_overhead)), and IPv4 +
/// UDP add 28 bytes on a link. A connection whose peer acknowledges
/// promptly and takes short headers sends 7 less
/// ([`data_datagram_overhead`]).
pub const fn datagram_overhead(sealed: bool) -> usize {
    if sealed {
        HEADER_LEN + crate::crypto::TAG_LEN
    } else {
        HEADER_LEN
    }
}
/// [`datagram_overhead`] of a data packet while data flows: a short
/// header, whose packet number takes 2 bytes once the peer acknowledges
/// within 16,384 packets ([`packet_number_len`]), as it does on any path
/// whose window is smaller. What benchmarks count per data packet.
pub const fn data_datagram_overhead(sealed: bool) -> usize {
    datagram_overhead(sealed) - (HEADER_LEN - SHORT_HEADER_LEN) - 2
}
/// Where the MB-ECN congestion level sits in either form, for forwarders.
pub const MBECN_OFFSET: usize = 1;

/// The public header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version of the sender (at most 31).
    pub version: u8,
    /// Which key phase sealed the datagram: the low bit of the sender's
    /// phase count ([`KEY_PHASE_BIT`] on the wire).
    pub key_phase: bool,
    /// MB-ECN congestion level (seed 004): the sender writes 0 and every
    /// forwarder ORs in its queue depth / 16 (see [`mark_mbecn`]).
    pub mbecn: u8,
    /// The short form: no session id nor path on the wire. A decoded short
    /// header holds 0 for both; its receiver knows them from the address.
    pub short: bool,
    /// Chosen by the client; tells sessions apart on one socket. Only its
    /// low 32 bits ([`SESSION_ID_MASK`]) travel, in the long form.
    pub session_id: u64,
    /// Which connection of the session this datagram travels on (in the
    /// long form; the AEAD nonce takes it in both).
    pub path: PathId,
    /// Never reused within a path. Only its low bits are encoded: a
    /// decoded header holds those until [`Header::expand`] places them.
    pub packet_number: u64,
}

/// The header's length, from its first byte (which says the form and how
/// long the packet number is).
pub fn header_len(first: u8) -> usize {
    pn_offset(first) + pn_len(first)
}

/// Whether the header that starts with `first` is the short form.
pub fn is_short(first: u8) -> bool {
    first & SHORT_BIT != 0
}

fn pn_offset(first: u8) -> usize {
    if is_short(first) {
        SHORT_PN_OFFSET
    } else {
        PN_OFFSET
    }
}

fn pn_len(first: u8) -> usize {
    usize::from((first & PN_LEN_BITS) >> PN_LEN_SHIFT) + 1
}

/// Bytes of packet number that let the peer place `pn` when the largest
/// it acknowledged is `largest_acked`. RFC 9000 §17.1 asks for twice the
/// distance; packets sent after `pn` may overtake it and raise the
/// receiver's largest by as much again (a flood into a full queue leaves
/// gaps of hundreds of numbers between the packets that get through), so
/// four times, and never one byte. 4 before any acknowledgement. An
/// insecure session would take a misplaced number as another packet;
/// a sealed one drops it (the nonce holds the full number).
pub fn packet_number_len(pn: u64, largest_acked: Option<u64>) -> usize {
    let Some(acked) = largest_acked else {
        return 4;
    };
    match pn.saturating_sub(acked).saturating_mul(4) {
        0..0x1_0000 => 2,
        0x1_0000..0x100_0000 => 3,
        _ => 4,
    }
}

/// The full packet number whose low `bytes` × 8 bits are `truncated`,
/// closest to the one after `largest` (the largest authenticated on the
/// path; `None` before the first): RFC 9000 §A.3.
pub fn expand_packet_number(largest: Option<u64>, truncated: u64, bytes: usize) -> u64 {
    let window = 1u64 << (8 * bytes.clamp(1, 4));
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
    /// Appends the header with a 4-byte packet number.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        self.encode_for(buf, None);
    }

    /// Appends the header with as few packet-number bytes as the peer,
    /// having acknowledged `largest_acked` on this path, needs
    /// ([`packet_number_len`]).
    pub fn encode_for(&self, buf: &mut Vec<u8>, largest_acked: Option<u64>) {
        let len = packet_number_len(self.packet_number, largest_acked);
        let phase = if self.key_phase { KEY_PHASE_BIT } else { 0 };
        let form = if self.short { SHORT_BIT } else { 0 };
        let len_bits = ((len - 1) as u8) << PN_LEN_SHIFT;
        buf.push((self.version & VERSION_BITS) | len_bits | form | phase);
        buf.push(self.mbecn);
        if !self.short {
            buf.extend_from_slice(&((self.session_id & SESSION_ID_MASK) as u32).to_be_bytes());
            buf.push(self.path.0);
        }
        buf.extend_from_slice(&self.packet_number.to_be_bytes()[8 - len..]);
    }

    /// Splits a datagram into its header and frame bytes. The header's
    /// packet number is the truncated one until [`Header::expand`].
    pub fn decode(datagram: &[u8]) -> Result<(Header, &[u8]), DecodeError> {
        let first = *datagram.first().ok_or(DecodeError::Truncated)?;
        let len = header_len(first);
        if datagram.len() < len {
            return Err(DecodeError::Truncated);
        }
        let offset = pn_offset(first);
        let mut pn = [0u8; 8];
        pn[8 - (len - offset)..].copy_from_slice(&datagram[offset..len]);
        let short = is_short(first);
        let (session_id, path) = if short {
            (0, PathId(0))
        } else {
            let id = &datagram[SESSION_ID_OFFSET..SESSION_ID_OFFSET + 4];
            let id = u32::from_be_bytes(id.try_into().expect("4 bytes"));
            (u64::from(id), PathId(datagram[PATH_OFFSET]))
        };
        let header = Header {
            version: first & VERSION_BITS,
            key_phase: first & KEY_PHASE_BIT != 0,
            mbecn: datagram[MBECN_OFFSET],
            short,
            session_id,
            path,
            packet_number: u64::from_be_bytes(pn),
        };
        Ok((header, &datagram[len..]))
    }

    /// Decodes the header and places its packet number next to `largest`,
    /// the largest the path has authenticated ([`expand_packet_number`]).
    pub fn decode_expanded(
        datagram: &[u8],
        largest: Option<u64>,
    ) -> Result<(Header, &[u8]), DecodeError> {
        let (header, rest) = Header::decode(datagram)?;
        let bytes = Header::packet_number_bytes(datagram);
        let packet_number = expand_packet_number(largest, header.packet_number, bytes);
        Ok((
            Header {
                packet_number,
                ..header
            },
            rest,
        ))
    }

    /// Bytes of packet number in the header that starts `datagram`.
    pub fn packet_number_bytes(datagram: &[u8]) -> usize {
        datagram.first().map_or(4, |&b| pn_len(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::stream_frame_overhead;

    fn header(pn: u64) -> Header {
        Header {
            version: VERSION,
            key_phase: false,
            mbecn: 0,
            short: false,
            session_id: 1,
            path: PathId(0),
            packet_number: pn,
        }
    }

    #[test]
    fn overhead_is_what_a_data_datagram_carries_besides_its_payload() {
        let data = [0u8; 1386];
        let mut buf = Vec::new();
        header(7).encode(&mut buf);
        super::super::encode_stream_header(&mut buf, 20_000, false, u64::MAX);
        buf.extend_from_slice(&data);
        let overhead = datagram_overhead(false) + stream_frame_overhead(20_000);
        assert_eq!(buf.len(), data.len() + overhead);
        // Version byte, MB-ECN byte, a 4-byte session id, the path, a
        // 4-byte packet number; the STREAM frame's type and 4-byte offset.
        assert_eq!(overhead, 11 + 1 + 4);
        assert_eq!(
            datagram_overhead(true),
            datagram_overhead(false) + crate::crypto::TAG_LEN
        );
        // With the peer's ACKs close behind, the packet number takes 2.
        let mut short = Vec::new();
        header(20_000).encode_for(&mut short, Some(19_000));
        assert_eq!(short.len(), HEADER_LEN - 2);
    }

    #[test]
    fn the_first_byte_holds_key_phase_length_and_version_and_mbecn_stays_second() {
        for key_phase in [false, true] {
            for (largest_acked, len) in [(None, 4), (Some(90), 2), (Some(0), 2)] {
                let h = Header {
                    version: VERSION,
                    key_phase,
                    mbecn: 3,
                    short: false,
                    session_id: 0x0506_0708,
                    path: PathId(4),
                    packet_number: 99,
                };
                let mut buf = Vec::new();
                h.encode_for(&mut buf, largest_acked);
                assert_eq!(buf.len(), PN_OFFSET + len);
                assert_eq!(header_len(buf[0]), buf.len());
                assert_eq!(buf[0] & VERSION_BITS, VERSION);
                assert_eq!(buf[0] & KEY_PHASE_BIT != 0, key_phase);
                assert_eq!(buf[MBECN_OFFSET], 3);
                assert_eq!(buf[PATH_OFFSET], 4);
                let (decoded, rest) = Header::decode(&buf).unwrap();
                assert_eq!((decoded, rest.len()), (h, 0));
            }
        }
        // Only the low 32 bits of a session id travel.
        let mut buf = Vec::new();
        Header {
            session_id: 0x1234_5678_9abc_def0,
            ..header(1)
        }
        .encode(&mut buf);
        assert_eq!(Header::decode(&buf).unwrap().0.session_id, 0x9abc_def0);
    }

    #[test]
    fn a_short_or_empty_datagram_is_truncated_never_a_panic() {
        let mut buf = Vec::new();
        header(5).encode(&mut buf);
        for cut in 0..buf.len() {
            assert_eq!(Header::decode(&buf[..cut]), Err(DecodeError::Truncated));
        }
        // A first byte claiming a 1-byte number needs 8 bytes only.
        let one = [VERSION, 0, 0, 0, 0, 1, 0, 9];
        assert_eq!(Header::decode(&one).unwrap().0.packet_number, 9);
        // A short one, 3.
        let short = [VERSION | SHORT_BIT, 0, 9];
        assert_eq!(Header::decode(&short).unwrap().0.packet_number, 9);
        assert_eq!(Header::decode(&short[..2]), Err(DecodeError::Truncated));
    }

    #[test]
    fn the_short_form_leaves_out_the_session_id_and_path() {
        for (largest_acked, len) in [(None, 4), (Some(19_000), 2)] {
            let h = Header {
                short: true,
                mbecn: 7,
                key_phase: true,
                path: PathId(3),
                session_id: 0x0506_0708,
                ..header(20_000)
            };
            let mut buf = Vec::new();
            h.encode_for(&mut buf, largest_acked);
            assert_eq!(buf.len(), SHORT_PN_OFFSET + len);
            assert_eq!(header_len(buf[0]), buf.len());
            assert!(is_short(buf[0]));
            assert_eq!(buf[MBECN_OFFSET], 7, "where forwarders mark either form");
            let (decoded, rest) = Header::decode_expanded(&buf, Some(19_990)).unwrap();
            assert!(rest.is_empty());
            // The receiver knows the session and path from the address.
            assert_eq!(
                decoded,
                Header {
                    session_id: 0,
                    path: PathId(0),
                    ..h
                }
            );
        }
        // A long header is 5 bytes longer with the same packet number.
        let (mut long, mut short) = (Vec::new(), Vec::new());
        header(9).encode_for(&mut long, Some(8));
        Header {
            short: true,
            ..header(9)
        }
        .encode_for(&mut short, Some(8));
        assert_eq!(long.len() - short.len(), 5);
        assert!(!is_short(long[0]));
        assert_eq!(data_datagram_overhead(false), short.len());
    }

    #[test]
    fn packet_number_lengths_cover_four_times_the_unacknowledged_range() {
        assert_eq!(packet_number_len(5, None), 4);
        assert_eq!(packet_number_len(1, Some(0)), 2);
        assert_eq!(packet_number_len(0x3fff, Some(0)), 2);
        assert_eq!(packet_number_len(0x4000, Some(0)), 3);
        assert_eq!(packet_number_len(0x3f_ffff, Some(0)), 3);
        assert_eq!(packet_number_len(0x40_0000, Some(0)), 4);
        assert_eq!(packet_number_len(u64::MAX, Some(0)), 4);
        // Acknowledged ahead of an old number: the smallest.
        assert_eq!(packet_number_len(3, Some(10)), 2);
    }

    #[test]
    fn packet_numbers_expand_next_to_the_largest_received() {
        let w = 1u64 << 32;
        // Before the first packet the window is centred on 0.
        assert_eq!(expand_packet_number(None, 0, 4), 0);
        assert_eq!(expand_packet_number(None, 5, 4), 5);
        // Within a window, later and (reordered) earlier numbers.
        assert_eq!(expand_packet_number(Some(1000), 1001, 4), 1001);
        assert_eq!(expand_packet_number(Some(1000), 900, 4), 900);
        // Across a window boundary, both ways.
        assert_eq!(expand_packet_number(Some(w - 2), 3, 4), w + 3);
        assert_eq!(expand_packet_number(Some(w + 3), w - 2, 4), w - 2);
        // RFC 9000 §A.3's example: 2 bytes 0x9b32 after 0xa82f30ea.
        assert_eq!(
            expand_packet_number(Some(0xa82f_30ea), 0x9b32, 2),
            0xa82f_9b32
        );
        // One byte, across its boundary both ways.
        assert_eq!(expand_packet_number(Some(0x1fe), 0x03, 1), 0x203);
        assert_eq!(expand_packet_number(Some(0x203), 0xfe, 1), 0x1fe);
        // Half a window ahead is still ahead; further is behind.
        assert_eq!(
            expand_packet_number(Some(w - 1), w / 2 - 1, 4),
            w + w / 2 - 1
        );
        // The top of the number space does not overflow.
        assert_eq!(
            expand_packet_number(Some(u64::MAX), 0, 4),
            u64::MAX - (w - 1)
        );
        assert_eq!(expand_packet_number(Some(u64::MAX), 0, 1), u64::MAX - 255);
    }

    #[test]
    fn every_length_round_trips_at_its_boundaries() {
        // The sender picks the length from its largest acknowledged; the
        // receiver has at least that, at most everything sent before.
        for acked in [0u64, 255, 1 << 16, (1 << 24) - 3, (1 << 32) + 7, 1 << 50] {
            for ahead in [1u64, 0x3fff, 0x4000, 0x3f_ffff, 0x40_0000, 1 << 30] {
                let pn = acked + ahead;
                let mut buf = Vec::new();
                header(pn).encode_for(&mut buf, Some(acked));
                let len = packet_number_len(pn, Some(acked));
                assert_eq!(buf.len(), PN_OFFSET + len, "{acked} + {ahead}");
                // The receiver has at least the acknowledged, at most what
                // was sent up to twice as far ahead.
                for received in [acked, pn - 1, pn + ahead] {
                    let (h, _) = Header::decode_expanded(&buf, Some(received)).unwrap();
                    assert_eq!(
                        h.packet_number, pn,
                        "{acked} + {ahead}, received {received}"
                    );
                }
            }
        }
        // Before anything was received, 4 bytes from 0.
        let mut buf = Vec::new();
        header(1 << 20).encode_for(&mut buf, None);
        let (h, _) = Header::decode_expanded(&buf, None).unwrap();
        assert_eq!(h.packet_number, 1 << 20);
    }
}
