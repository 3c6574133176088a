//! The public header: version and key phase, MB-ECN level, session id,
//! path and the low 32 bits of the packet number.

use super::DecodeError;
use crate::PathId;

/// The only protocol version this code speaks (seven bits: the first
/// byte's high bit is [`KEY_PHASE_BIT`]).
pub const VERSION: u8 = 9;
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
/// own header ([`stream_frame_overhead`](super::stream_frame_overhead)), and IPv4 + UDP add 28 bytes on
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::stream_frame_overhead;

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
        super::super::encode_stream_header(&mut buf, 20_000, false);
        buf.extend_from_slice(&data);
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
}
