//! QUIC-style variable-length integers (RFC 9000 §16): 1, 2, 4 or 8 bytes,
//! the two high bits of the first byte giving the length.

/// Largest value a varint can carry.
pub const MAX: u64 = (1 << 62) - 1;

/// Bytes needed to encode `v`.
pub fn size(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `v` (at most [`MAX`]; larger values are clamped, callers never pass them).
/// Inlined: ACK frames write dozens, and the call cost more than the push.
#[inline]
pub fn write(buf: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    match size(v) {
        1 => buf.push(v as u8),
        2 => buf.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => buf.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => buf.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Reads one varint from the front of `input`, advancing it; `None` if truncated.
pub fn read(input: &mut &[u8]) -> Option<u64> {
    let first = *input.first()?;
    // One fixed-width big-endian load per length: ACK frames are mostly
    // one- and two-byte varints and decoding them is a hot path.
    let (v, len) = match first >> 6 {
        0 => (u64::from(first), 1),
        1 => {
            let b: [u8; 2] = input.get(..2)?.try_into().ok()?;
            (u64::from(u16::from_be_bytes(b) & 0x3fff), 2)
        }
        2 => {
            let b: [u8; 4] = input.get(..4)?.try_into().ok()?;
            (u64::from(u32::from_be_bytes(b) & 0x3fff_ffff), 4)
        }
        _ => {
            let b: [u8; 8] = input.get(..8)?.try_into().ok()?;
            (u64::from_be_bytes(b) & MAX, 8)
        }
    };
    *input = &input[len..];
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_every_boundary() {
        for v in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut buf = Vec::new();
            write(&mut buf, v);
            assert_eq!(buf.len(), size(v));
            let mut input = &buf[..];
            assert_eq!(read(&mut input), Some(v));
            assert!(input.is_empty());
            for cut in 0..buf.len() {
                assert_eq!(read(&mut &buf[..cut]), None);
            }
        }
    }
}
