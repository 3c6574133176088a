//! The body of an ACK frame (and of a PATH_ACK, which carries one for
//! another connection): ranges, ACK delay, the session's stream state and
//! optional single-packet receive times.

use super::{u8_, var, DecodeError, FrameKind};
use crate::varint;

/// Most single-packet receive times one ACK frame may carry
/// ([`AckFrame::rx_times`]); a peer sending more is malformed.
pub const MAX_RX_TIMES: usize = 32;
/// Most ACK ranges one frame may carry; a peer sending more is malformed.
/// Jitter of a few milliseconds at hundreds of Mbit/s leaves dozens of
/// holes in flight; each range costs about two bytes.
pub const MAX_ACK_RANGES: usize = 128;

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
    /// The sender of this ACK tells the acknowledged connection's packets
    /// by their address: they may leave out the session id and path.
    pub short_headers: bool,
}

impl AckFrame {
    /// Highest packet number acknowledged.
    pub(crate) fn largest(&self) -> u64 {
        self.ranges.first().map_or(0, |r| r.1)
    }
}

/// An ACK frame's body, after its type (and a PATH_ACK's connection).
pub(super) fn encode_ack(ack: &AckFrame, buf: &mut Vec<u8>) {
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
    let mut flags = if rx_times.is_empty() { 0 } else { ACK_RX_TIMES };
    if ack.short_headers {
        flags |= ACK_SHORT_HEADERS;
    }
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
/// single-packet receive times follow, bit 2 offers short headers.
const ACK_FIN: u8 = 1;
const ACK_RX_TIMES: u8 = 2;
const ACK_SHORT_HEADERS: u8 = 4;

/// A signed value as a varint's unsigned one: 0, -1, 1, -2, ... → 0, 1, 2, 3.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

pub(super) fn decode_ack(input: &mut &[u8]) -> Result<AckFrame, DecodeError> {
    let bad = DecodeError::Malformed(FrameKind::Ack);
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
    if flags & !(ACK_FIN | ACK_RX_TIMES | ACK_SHORT_HEADERS) != 0 {
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
        short_headers: flags & ACK_SHORT_HEADERS != 0,
        max_data,
        ce_count,
        rx_timestamp_us,
        rx_times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::ty;
    use crate::wire::tests::encode_all;
    use crate::wire::{Frame, Frames, Header};

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
            short_headers: false,
        });
        let buf = encode_all(std::slice::from_ref(&ack));
        let (_, payload) = Header::decode(&buf).unwrap();
        assert_eq!(Frames::new(payload).next(), Some(Ok(ack)));
        // More ranges than an ACK may carry are refused.
        let bytes = [ty::ACK as u8, 0x40, MAX_ACK_RANGES as u8 + 1, 0];
        assert_eq!(
            Frames::new(&bytes).next(),
            Some(Err(DecodeError::Malformed(FrameKind::Ack)))
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
        let bad = Some(Err(DecodeError::Malformed(FrameKind::Ack)));
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
}
