//! The receiving half of the session's byte stream: reassembly in order,
//! bounded by the receive window (flow control).
//!
//! Memory is bounded whatever the peer sends: bytes live in one buffer that
//! spans from the application's read point to the highest byte received,
//! which flow control keeps within the window, and out-of-order pieces are
//! only (start, end) ranges over it, merged as they touch. A peer that
//! scatters more separate pieces than an honest sender could (one per
//! [`MIN_PIECE`] bytes of window) is breaking the protocol.

use std::collections::{BTreeMap, VecDeque};

/// Out-of-order ranges allowed: one per this many bytes of window, plus
/// [`MIN_RANGES`]. An honest sender's pieces are packets (over a thousand
/// bytes), so even alternate losses stay far below.
const MIN_PIECE: u64 = 256;
const MIN_RANGES: usize = 1024;

/// Why incoming stream data was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    /// Bytes beyond the window we advertised.
    FlowControl,
    /// A FIN that contradicts an earlier one or data past it.
    FinalSize,
    /// More separate out-of-order pieces than the window allows.
    Fragmented,
}

#[derive(Debug)]
pub(crate) struct RecvStream {
    /// Bytes from `read_offset` up to the highest received: in order up to
    /// `cumulative`, then out-of-order pieces with holes (zeros) between.
    buf: VecDeque<u8>,
    /// Offset of the first byte of `buf` (what the application has read).
    read_offset: u64,
    /// Bytes received contiguously from offset 0.
    cumulative: u64,
    /// Out-of-order pieces above `cumulative`: start -> end (exclusive),
    /// neither overlapping nor touching.
    pending: BTreeMap<u64, u64>,
    final_size: Option<u64>,
    window: u64,
    /// Autotuning may grow `window` up to this.
    max_window: u64,
    /// BLOCKED reports below this predate the last growth.
    blocked_floor: u64,
    /// `max_data` last told to the peer.
    advertised: u64,
    /// Bytes that arrived more than once.
    pub duplicate_bytes: u64,
}

impl RecvStream {
    pub fn new(window: u64) -> Self {
        RecvStream {
            buf: VecDeque::new(),
            read_offset: 0,
            cumulative: 0,
            pending: BTreeMap::new(),
            final_size: None,
            window,
            max_window: window,
            blocked_floor: 0,
            advertised: window,
            duplicate_bytes: 0,
        }
    }

    pub fn set_window(&mut self, window: u64) {
        self.window = window;
        self.advertised = self.max_data();
    }

    /// Lets autotuning grow the window up to `max_window`.
    pub fn set_max_window(&mut self, max_window: u64) {
        self.max_window = max_window.max(self.window);
    }

    /// The current window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Receive-window autotuning: the peer reports it is blocked by our
    /// window. If the application keeps up (under half the window unread),
    /// the window is what limits the transfer, so it doubles (up to the
    /// cap). The sender is blocked about once per round trip while this
    /// holds, so the window doubles per RTT until it exceeds what the
    /// sender's congestion window needs. Returns whether it grew.
    pub fn on_peer_blocked(&mut self, limit: u64) -> bool {
        let unread = self.cumulative.saturating_sub(self.read_offset);
        // A report about a limit from before the last growth is stale.
        let stale = limit < self.blocked_floor;
        if stale || unread >= self.window / 2 || self.window >= self.max_window {
            return false;
        }
        self.window = (self.window * 2).min(self.max_window);
        self.blocked_floor = self.max_data();
        true
    }

    /// Stream data ending at `end` was accepted. While a hole holds the
    /// in-order point back, the limit we advertise stands still, and the
    /// hole takes at least a round trip to repair: a sender with more than
    /// half the window beyond it runs into the limit before then and stalls
    /// (with a lossy STARTUP at 400 ms RTT, for a third of a second). So
    /// data reaching past half the window above what the application has
    /// read counts as the peer being blocked, without waiting for its
    /// BLOCKED frame, which goes out at most once per round trip and is
    /// lost as easily as the data whose loss made the hole. The rules of
    /// [`Self::on_peer_blocked`] apply. Returns whether the window grew.
    pub fn on_data(&mut self, end: u64) -> bool {
        end >= self.read_offset + self.window / 2 && self.on_peer_blocked(self.max_data())
    }

    /// Flow-control limit to advertise: what the application has read plus the window.
    pub fn max_data(&self) -> u64 {
        self.read_offset + self.window
    }

    /// Records `max_data` as advertised; returns whether it grew enough since
    /// the last advertisement to be worth an immediate update (a quarter window).
    pub fn needs_window_update(&self) -> bool {
        self.max_data() >= self.advertised + self.window / 4
    }

    pub fn on_advertised(&mut self) {
        self.advertised = self.max_data();
    }

    /// Frees the buffer's spare capacity; unread bytes stay.
    pub fn shrink_to_fit(&mut self) {
        self.buf.shrink_to_fit();
    }

    pub fn cumulative(&self) -> u64 {
        self.cumulative
    }

    /// Whether every byte up to the FIN has arrived.
    pub fn is_fin_received(&self) -> bool {
        self.final_size == Some(self.cumulative)
    }

    /// Whether the application has read everything up to the FIN.
    pub fn is_finished(&self) -> bool {
        self.final_size == Some(self.read_offset)
    }

    /// End of the highest byte received.
    fn highest(&self) -> u64 {
        self.pending
            .last_key_value()
            .map_or(self.cumulative, |(_, &end)| end)
    }

    /// Accepts a STREAM frame.
    pub fn insert(&mut self, offset: u64, data: &[u8], fin: bool) -> Result<(), RecvError> {
        let end = offset + data.len() as u64;
        if end > self.advertised.max(self.max_data()) {
            return Err(RecvError::FlowControl);
        }
        if let Some(size) = self.final_size {
            if end > size || (fin && end != size) {
                return Err(RecvError::FinalSize);
            }
        } else if fin {
            if end < self.highest() {
                return Err(RecvError::FinalSize);
            }
            self.final_size = Some(end);
        }
        if end <= self.cumulative {
            self.duplicate_bytes += data.len() as u64;
            return Ok(());
        }
        let skip = self.cumulative.saturating_sub(offset);
        let (offset, data) = (offset + skip, &data[skip as usize..]);
        if data.is_empty() {
            // A bare FIN beyond a gap: its offset is recorded in final_size.
            return Ok(());
        }
        let new = self.add_range(offset, end)?;
        self.duplicate_bytes += data.len() as u64 - new;
        // Within the window, so the buffer stays within it too.
        let from = (offset - self.read_offset) as usize;
        if from == self.buf.len() {
            self.buf.extend(data);
        } else {
            let to = from + data.len();
            if self.buf.len() < to {
                self.buf.resize(to, 0);
            }
            // Bytes already present are equal in an honest stream; writing
            // them again is simpler than skipping them.
            let (a, b) = self.buf.as_mut_slices();
            let a_len = a.len();
            if from < a_len {
                let n = (a_len - from).min(data.len());
                a[from..from + n].copy_from_slice(&data[..n]);
                b[..data.len() - n].copy_from_slice(&data[n..]);
            } else {
                b[from - a_len..][..data.len()].copy_from_slice(data);
            }
        }
        self.advance();
        Ok(())
    }

    /// Records [start, end) as received above `cumulative`, merged with the
    /// pieces it overlaps or touches; returns how many bytes were new.
    fn add_range(&mut self, mut start: u64, mut end: u64) -> Result<u64, RecvError> {
        let len = end - start;
        let mut present = 0;
        // The piece that starts at or before `start` may reach into it.
        if let Some((&s, &e)) = self.pending.range(..=start).next_back() {
            if e >= start {
                present += e.min(end) - start;
                self.pending.remove(&s);
                start = s;
                end = end.max(e);
            }
        }
        while let Some((&s, &e)) = self.pending.range(start..=end).next() {
            present += e.min(end) - s;
            self.pending.remove(&s);
            end = end.max(e);
        }
        let limit = (self.window / MIN_PIECE) as usize + MIN_RANGES;
        if self.pending.len() >= limit {
            return Err(RecvError::Fragmented);
        }
        self.pending.insert(start, end);
        Ok(len - present)
    }

    /// Moves `cumulative` over the pieces that now continue it.
    fn advance(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > self.cumulative {
                break;
            }
            self.cumulative = self.cumulative.max(entry.remove());
        }
    }

    /// Bytes waiting to be read.
    pub fn readable(&self) -> usize {
        (self.cumulative - self.read_offset) as usize
    }

    /// Bytes held for the application: read-ready and out of order, with
    /// the holes between them (for tests of the memory bound).
    #[cfg(test)]
    fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Moves up to `out.len()` in-order bytes to `out`.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.readable());
        let (a, b) = self.buf.as_slices();
        let from_a = n.min(a.len());
        out[..from_a].copy_from_slice(&a[..from_a]);
        out[from_a..n].copy_from_slice(&b[..n - from_a]);
        self.consume(n);
        n
    }

    /// Calls `f` with every readable in-order chunk, then drops them; returns the count.
    pub fn read_with(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let n = self.readable();
        let (a, b) = self.buf.as_slices();
        let from_a = n.min(a.len());
        f(&a[..from_a]);
        f(&b[..n - from_a]);
        self.consume(n);
        n
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        self.read_offset += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(r: &mut RecvStream) -> Vec<u8> {
        let mut v = Vec::new();
        r.read_with(|c| v.extend_from_slice(c));
        v
    }

    #[test]
    fn reassembles_out_of_order_and_duplicates() {
        let mut r = RecvStream::new(100);
        r.insert(4, b"efgh", false).unwrap();
        r.insert(8, b"ij", true).unwrap();
        assert_eq!(r.readable(), 0);
        assert_eq!(r.insert(6, b"gh", true), Err(RecvError::FinalSize));
        r.insert(0, b"abcd", false).unwrap();
        r.insert(4, b"efgh", false).unwrap();
        assert_eq!(read_all(&mut r), b"abcdefghij");
        assert!(r.is_fin_received() && r.is_finished());
        assert_eq!(r.duplicate_bytes, 4);
    }

    #[test]
    fn overlapping_pieces_are_trimmed() {
        let mut r = RecvStream::new(100);
        r.insert(2, b"cdef", false).unwrap();
        r.insert(0, b"abcd", false).unwrap();
        assert_eq!(read_all(&mut r), b"abcdef");
    }

    #[test]
    fn enforces_the_window_and_final_size() {
        let mut r = RecvStream::new(10);
        assert_eq!(r.insert(8, b"xyz", false), Err(RecvError::FlowControl));
        r.insert(0, b"0123456789", false).unwrap();
        assert_eq!(r.max_data(), 10);
        let mut buf = [0; 6];
        assert_eq!(r.read(&mut buf), 6);
        assert_eq!(r.max_data(), 16);
        assert!(r.needs_window_update());
        r.on_advertised();
        r.insert(10, b"ab", true).unwrap();
        assert_eq!(r.insert(12, b"c", false), Err(RecvError::FinalSize));
        assert_eq!(r.insert(10, b"a", true), Err(RecvError::FinalSize));
    }

    #[test]
    fn overlapping_and_nested_pieces_merge() {
        let mut r = RecvStream::new(100);
        r.insert(10, b"klmn", false).unwrap();
        r.insert(20, b"uv", false).unwrap();
        r.insert(8, b"ijklmnopqrstu", false).unwrap();
        assert_eq!(r.pending.len(), 1, "{:?}", r.pending);
        assert_eq!(r.duplicate_bytes, 5);
        r.insert(12, b"mn", false).unwrap();
        assert_eq!(r.duplicate_bytes, 7);
        r.insert(0, b"abcdefgh", true).unwrap_err();
        r.insert(0, b"abcdefgh", false).unwrap();
        assert_eq!(read_all(&mut r), b"abcdefghijklmnopqrstuv");
        assert!(r.pending.is_empty());
    }

    /// Pieces of random sizes, overlapping, in random order within the
    /// window, read in random amounts: the stream comes out exact, through
    /// every wrap of the ring buffer.
    #[test]
    fn random_pieces_reassemble_exactly() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let content: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let window = 8192u64;
        let mut r = RecvStream::new(window);
        let mut out = Vec::new();
        let mut buf = [0u8; 700];
        while out.len() < content.len() {
            let base = r.cumulative();
            let limit = r.max_data().min(content.len() as u64);
            for _ in 0..20 {
                let start = rng.gen_range(base..limit.max(base + 1)).min(limit);
                let end = (start + rng.gen_range(1..400)).min(limit);
                let fin = end == content.len() as u64;
                let piece = &content[start as usize..end as usize];
                r.insert(start, piece, fin).unwrap();
            }
            // Fill the hole at the in-order point, so it always advances.
            let end = (base + 300).min(limit);
            let fin = end == content.len() as u64;
            r.insert(base, &content[base as usize..end as usize], fin)
                .unwrap();
            let want = rng.gen_range(0..buf.len());
            let n = r.read(&mut buf[..want]);
            out.extend_from_slice(&buf[..n]);
            assert!(r.buffered() as u64 <= window);
        }
        assert!(out == content);
        assert!(r.is_finished());
    }

    /// A peer scattering one-byte pieces over the window: the buffer never
    /// exceeds the window, the ranges stay bounded, and past an honest
    /// sender's worst case it is a protocol violation.
    #[test]
    fn a_flood_of_tiny_pieces_is_bounded() {
        let window = 1 << 20;
        let mut r = RecvStream::new(window);
        let mut refused = None;
        for i in 0..window / 2 {
            match r.insert(1 + 2 * i, b"x", false) {
                Ok(()) => {}
                Err(e) => {
                    refused = Some((i, e));
                    break;
                }
            }
            assert!(r.buffered() as u64 <= window);
        }
        let (at, e) = refused.expect("the flood is refused");
        assert_eq!(e, RecvError::Fragmented);
        assert_eq!(at as usize, (window / MIN_PIECE) as usize + MIN_RANGES);
        // The same bytes again, or overlapping them, add nothing.
        let before = r.pending.len();
        for i in 0..1000 {
            r.insert(1 + 2 * i, b"x", false).unwrap();
        }
        assert_eq!(r.pending.len(), before);
    }

    #[test]
    fn data_held_behind_a_hole_grows_the_window() {
        let mut r = RecvStream::new(100);
        r.set_max_window(1000);
        r.insert(0, &[0; 10], false).unwrap();
        assert!(!r.on_data(10), "in order and read: nothing held back");
        assert_eq!(read_all(&mut r).len(), 10);
        // Bytes 10..20 are lost; what follows waits behind the hole.
        r.insert(20, &[0; 39], false).unwrap();
        assert!(!r.on_data(59), "under half the window above the read point");
        r.insert(59, &[0; 1], false).unwrap();
        assert!(r.on_data(60));
        assert_eq!((r.window(), r.max_data()), (200, 210));
        assert!(!r.on_data(60), "once per half window");
        r.insert(60, &[0; 49], false).unwrap();
        assert!(!r.on_data(109), "half of the new window is 100");
        r.insert(109, &[0; 1], false).unwrap();
        assert!(r.on_data(110));
        assert_eq!(r.window(), 400);
        // An application that does not read keeps the window as it is.
        let mut slow = RecvStream::new(100);
        slow.set_max_window(1000);
        slow.insert(0, &[0; 60], false).unwrap();
        assert!(!slow.on_data(60));
        assert_eq!(slow.window(), 100);
    }
}
