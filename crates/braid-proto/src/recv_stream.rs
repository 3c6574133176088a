//! The receiving half of the session's byte stream: reassembly in order,
//! bounded by the receive window (flow control).

use std::collections::{BTreeMap, VecDeque};

/// Why incoming stream data was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    /// Bytes beyond the window we advertised.
    FlowControl,
    /// A FIN that contradicts an earlier one or data past it.
    FinalSize,
}

#[derive(Debug)]
pub(crate) struct RecvStream {
    /// In-order bytes not yet read by the application.
    readable: VecDeque<u8>,
    /// Offset of the first byte of `readable`.
    read_offset: u64,
    /// Bytes received contiguously from offset 0.
    cumulative: u64,
    /// Out-of-order pieces, keyed by offset.
    pending: BTreeMap<u64, Vec<u8>>,
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
            readable: VecDeque::new(),
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
            if end < self.cumulative
                || self
                    .pending
                    .last_key_value()
                    .is_some_and(|(&o, d)| o + d.len() as u64 > end)
            {
                return Err(RecvError::FinalSize);
            }
            self.final_size = Some(end);
        }
        if end <= self.cumulative {
            self.duplicate_bytes += data.len() as u64;
            return Ok(());
        }
        let skip = self.cumulative.saturating_sub(offset) as usize;
        let (offset, data) = (offset + skip as u64, &data[skip..]);
        if offset == self.cumulative {
            self.append(data);
            self.drain_pending();
        } else if data.is_empty() {
            // A bare FIN beyond a gap: its offset is recorded in final_size.
        } else {
            match self.pending.get(&offset) {
                Some(existing) if existing.len() >= data.len() => {
                    self.duplicate_bytes += data.len() as u64
                }
                _ => {
                    self.pending.insert(offset, data.to_vec());
                }
            }
        }
        Ok(())
    }

    fn append(&mut self, data: &[u8]) {
        self.readable.extend(data);
        self.cumulative += data.len() as u64;
    }

    fn drain_pending(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            let offset = *entry.key();
            if offset > self.cumulative {
                break;
            }
            let data = entry.remove();
            let skip = (self.cumulative - offset) as usize;
            if skip < data.len() {
                self.duplicate_bytes += skip as u64;
                self.append(&data[skip..]);
            } else {
                self.duplicate_bytes += data.len() as u64;
            }
        }
    }

    /// Bytes waiting to be read.
    pub fn readable(&self) -> usize {
        self.readable.len()
    }

    /// Moves up to `out.len()` in-order bytes to `out`.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.readable.len());
        for (dst, src) in out.iter_mut().zip(self.readable.drain(..n)) {
            *dst = src;
        }
        self.read_offset += n as u64;
        n
    }

    /// Calls `f` with every readable in-order chunk, then drops them; returns the count.
    pub fn read_with(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let (a, b) = self.readable.as_slices();
        f(a);
        f(b);
        let n = self.readable.len();
        self.readable.clear();
        self.read_offset += n as u64;
        n
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
