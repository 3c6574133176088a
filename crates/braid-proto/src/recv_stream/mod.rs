//! The receiving half of the session's byte stream: reassembly in order,
//! bounded by the receive window (flow control).
//!
//! Memory follows the bytes the peer actually sent, not the offsets it
//! names: in-order bytes wait for the application in one buffer, and each
//! out-of-order piece is stored on its own, merged with the pieces it
//! touches, so one byte near the window's end costs one byte. A peer that
//! scatters more separate pieces than an honest sender could (one per
//! [`MIN_PIECE`] bytes of window) is breaking the protocol.
//!
//! The window grows (autotuning) only as the peer's data is delivered and
//! read: it doubles once half of it was read since it last grew, at most
//! once per round trip. What a peer can make us hold is thus one window
//! plus data it really sent and we consumed, whatever it reports.
//!
//! An application may take in-order bytes into buffers of its own (see
//! [`ReceivedContent`]): each arriving in-order byte is then copied once,
//! from the packet into the application's buffer, instead of into `buf`
//! and out again. The window then advances only as the application
//! releases what it took, so its buffers count against the window too.

use crate::endpoint::Reservation;
use crate::Instant;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

/// Where the application takes the stream's in-order bytes, in place of
/// reading them (see [`crate::Session::use_received_content`]). The
/// session appends bytes straight from each packet while the sink has
/// room; what it cannot take yet, and bytes that arrive out of order,
/// wait in the session's buffers, within the receive window, as before.
/// The window advances only by what the application reports released, so
/// what the sink holds counts against it: a peer cannot make it grow.
pub trait ReceivedContent: Send + fmt::Debug {
    /// Takes as many of `data`, the bytes following the ones taken
    /// before, as there is room for; returns the count.
    fn append(&mut self, data: &[u8]) -> usize;

    /// Bytes the application is done with since the last call (the
    /// oldest taken first): the window may advance past them.
    fn take_released(&mut self) -> u64;
}

/// Out-of-order ranges allowed: one per this many bytes of window, plus
/// [`MIN_RANGES`]. An honest sender's pieces are packets (over a thousand
/// bytes), so even alternate losses stay far below.
const MIN_PIECE: u64 = 256;
const MIN_RANGES: usize = 1024;

/// Why incoming stream data, or a report about the window, was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    /// Bytes beyond the window we advertised, or a report of being
    /// blocked beyond it.
    FlowControl,
    /// A FIN that contradicts an earlier one or data past it.
    FinalSize,
    /// More separate out-of-order pieces than the window allows.
    Fragmented,
}

#[derive(Debug)]
pub(crate) struct RecvStream {
    /// The in-order bytes neither read nor taken by the sink:
    /// `read_offset..cumulative`.
    buf: VecDeque<u8>,
    /// Offset of the first byte of `buf` (what the application has read,
    /// or the sink taken).
    read_offset: u64,
    /// Where in-order bytes go instead of `buf`, if the application said so.
    sink: Option<Box<dyn ReceivedContent>>,
    /// What the application is done with, read or released by the sink;
    /// the window starts here. Equal to `read_offset` without a sink.
    released: u64,
    /// Bytes received contiguously from offset 0.
    cumulative: u64,
    /// Out-of-order pieces above `cumulative`, by offset: neither
    /// overlapping nor touching (touching pieces merge).
    pending: BTreeMap<u64, VecDeque<u8>>,
    final_size: Option<u64>,
    window: u64,
    /// Autotuning may grow `window` up to this.
    max_window: u64,
    /// BLOCKED reports below this predate the last growth.
    blocked_floor: u64,
    /// `max_data` last told to the peer.
    advertised: u64,
    /// When the window last grew, and `released` then.
    grown_at: Option<Instant>,
    grown_read: u64,
    /// Bytes that arrived more than once.
    pub duplicate_bytes: u64,
    /// A listener's session: the window grows only as far as the
    /// listener's memory budget lets it.
    memory: Option<Reservation>,
}

impl RecvStream {
    pub fn new(window: u64) -> Self {
        RecvStream {
            buf: VecDeque::new(),
            read_offset: 0,
            sink: None,
            released: 0,
            cumulative: 0,
            pending: BTreeMap::new(),
            final_size: None,
            window,
            max_window: window,
            blocked_floor: 0,
            advertised: window,
            grown_at: None,
            grown_read: 0,
            duplicate_bytes: 0,
            memory: None,
        }
    }

    /// Draws the window, and its growth, from `memory`.
    pub fn use_memory(&mut self, memory: Reservation) {
        self.memory = Some(memory);
    }

    /// Draws the current window from the memory given; whether it has it.
    pub fn hold_window(&mut self) -> bool {
        let window = self.window;
        self.memory.as_mut().is_none_or(|m| m.grow_to(window))
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

    /// The peer reports it is blocked by our limit `limit`: the window is
    /// what holds the transfer back, so it may grow (see [`Self::grow`]).
    /// A limit we never advertised is a lie; one from before the last
    /// growth is stale and ignored. Returns whether the window grew.
    pub fn on_peer_blocked(
        &mut self,
        limit: u64,
        now: Instant,
        rtt: Duration,
    ) -> Result<bool, RecvError> {
        // max_data never shrinks, and covers what ACK copies told.
        if limit > self.advertised.max(self.max_data()) {
            return Err(RecvError::FlowControl);
        }
        Ok(limit >= self.blocked_floor && self.grow(now, rtt))
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
    /// [`Self::grow`] apply. Returns whether the window grew.
    pub fn on_data(&mut self, end: u64, now: Instant, rtt: Duration) -> bool {
        end >= self.released + self.window / 2 && self.grow(now, rtt)
    }

    /// Doubles the window (up to the cap) when the peer is limited by it:
    /// if the application keeps up (under half the window unread) and has
    /// read at least half the window since the last growth, at most once
    /// per `rtt`. A sender that is blocked about once per round trip while
    /// this holds sees the window double per RTT until it exceeds what its
    /// congestion window needs; reports alone, however many, grow nothing.
    fn grow(&mut self, now: Instant, rtt: Duration) -> bool {
        let unread = self.cumulative - self.released;
        let consumed = self.released - self.grown_read;
        let due = self.grown_at.is_none_or(|t| now >= t + rtt);
        let half = self.window / 2;
        if unread >= half || consumed < half || !due || self.window >= self.max_window {
            return false;
        }
        let window = (self.window * 2).min(self.max_window);
        if !self.memory.as_mut().is_none_or(|m| m.grow_to(window)) {
            return false;
        }
        self.window = window;
        self.blocked_floor = self.max_data();
        self.grown_at = Some(now);
        self.grown_read = self.released;
        true
    }

    /// Flow-control limit to advertise: what the application has read
    /// (or released) plus the window.
    pub fn max_data(&self) -> u64 {
        self.released + self.window
    }

    /// Records `max_data` as advertised; returns whether it grew enough since
    /// the last advertisement to be worth an immediate update (a quarter window).
    pub fn needs_window_update(&self) -> bool {
        self.max_data() >= self.advertised + self.window / 4
    }

    pub fn on_advertised(&mut self) {
        self.advertised = self.max_data();
    }

    /// Frees the buffers' spare capacity; unread bytes stay.
    pub fn shrink_to_fit(&mut self) {
        self.buf.shrink_to_fit();
        for piece in self.pending.values_mut() {
            piece.shrink_to_fit();
        }
    }

    pub fn cumulative(&self) -> u64 {
        self.cumulative
    }

    /// Whether any stream data (or its end) has arrived.
    pub fn has_any(&self) -> bool {
        self.cumulative > 0 || !self.pending.is_empty() || self.final_size.is_some()
    }

    /// Whether every byte up to the FIN has arrived.
    pub fn is_fin_received(&self) -> bool {
        self.final_size == Some(self.cumulative)
    }

    /// Whether the application has read (or its sink taken) everything up
    /// to the FIN.
    pub fn is_finished(&self) -> bool {
        self.final_size == Some(self.read_offset)
    }

    /// End of the highest byte received.
    fn highest(&self) -> u64 {
        self.pending
            .last_key_value()
            .map_or(self.cumulative, |(&start, piece)| {
                start + piece.len() as u64
            })
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
        let touches_piece = self
            .pending
            .first_key_value()
            .is_some_and(|(&start, _)| start <= end);
        if offset == self.cumulative && !touches_piece {
            let taken = match &mut self.sink {
                Some(sink) if self.buf.is_empty() => sink.append(data).min(data.len()),
                _ => 0,
            };
            self.read_offset += taken as u64;
            self.buf.extend(&data[taken..]);
            self.cumulative = end;
            return Ok(());
        }
        let new = self.store(offset, data)?;
        self.duplicate_bytes += data.len() as u64 - new;
        self.advance();
        Ok(())
    }

    /// Stores `data` at `start` (at or above `cumulative`) in one piece
    /// with every piece it overlaps or touches; returns how many bytes were
    /// new. Bytes already held are kept (an honest stream's copies are
    /// equal). The largest piece absorbs the others, so however pieces
    /// arrive a byte is copied into a piece at least twice as large each
    /// time: a few times at most, never once per piece.
    fn store(&mut self, start: u64, data: &[u8]) -> Result<u64, RecvError> {
        let end = start + data.len() as u64;
        // The piece that starts below `start` may reach it.
        let below = self
            .pending
            .range(..start)
            .next_back()
            .filter(|(&s, piece)| s + piece.len() as u64 >= start)
            .map(|(&s, _)| s);
        let count = usize::from(below.is_some()) + self.pending.range(start..=end).count();
        let limit = (self.window / MIN_PIECE) as usize + MIN_RANGES;
        if self.pending.len() - count >= limit {
            return Err(RecvError::Fragmented);
        }
        let mut parts = Vec::with_capacity(count);
        if let Some(s) = below {
            parts.push((s, self.pending.remove(&s).expect("found")));
        }
        while let Some(entry) = self.pending.range(start..=end).next() {
            let s = *entry.0;
            parts.push((s, self.pending.remove(&s).expect("found")));
        }
        let Some(big) = (0..parts.len()).max_by_key(|&i| parts[i].1.len()) else {
            self.pending.insert(start, VecDeque::from(data.to_vec()));
            return Ok(data.len() as u64);
        };
        // The new bytes fill every gap between the parts: their union is
        // one range.
        let held: u64 = parts.iter().map(|(_, p)| p.len() as u64).sum();
        let union_start = parts[0].0.min(start);
        let (last, last_piece) = &parts[parts.len() - 1];
        let union_end = end.max(last + last_piece.len() as u64);
        let big_start = parts[big].0;
        let mut base = std::mem::take(&mut parts[big].1);
        let big_end = big_start + base.len() as u64;
        // What comes before the largest piece is appended, then rotated to
        // the front (in time proportional to it).
        append_union(&mut base, &parts, start, data, union_start, big_start);
        base.rotate_right((big_start - union_start) as usize);
        append_union(&mut base, &parts, start, data, big_end, union_end);
        self.pending.insert(union_start, base);
        Ok(union_end - union_start - held)
    }

    /// Moves the pieces that now continue the in-order bytes to `buf`.
    fn advance(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > self.cumulative {
                break;
            }
            debug_assert_eq!(*entry.key(), self.cumulative);
            let piece = entry.remove();
            self.cumulative += piece.len() as u64;
            if self.buf.is_empty() && self.buf.capacity() < piece.len() {
                // Nothing waits: the piece becomes the buffer, uncopied.
                self.buf = piece;
            } else {
                let (a, b) = piece.as_slices();
                self.buf.extend(a);
                self.buf.extend(b);
            }
        }
        self.feed_sink();
    }

    /// Serves in-order bytes to `sink` from now on, those waiting in the
    /// buffer first. Only one sink, ever; whether it was taken.
    pub fn use_sink(&mut self, sink: Box<dyn ReceivedContent>) -> bool {
        if self.sink.is_some() {
            return false;
        }
        self.sink = Some(sink);
        self.feed_sink();
        true
    }

    /// Counts what the sink's application released, then moves waiting
    /// in-order bytes into the room that made. Returns whether the window
    /// advanced.
    pub fn on_sink_released(&mut self) -> bool {
        let Some(sink) = &mut self.sink else {
            return false;
        };
        // Never past what the sink took, whatever it reports.
        let released = sink.take_released().min(self.read_offset - self.released);
        self.released += released;
        self.feed_sink();
        released > 0
    }

    /// Moves the buffer's bytes into the sink while it takes them.
    fn feed_sink(&mut self) {
        let Some(sink) = &mut self.sink else {
            return;
        };
        while !self.buf.is_empty() {
            let (a, _) = self.buf.as_slices();
            let taken = sink.append(a).min(a.len());
            if taken == 0 {
                break;
            }
            self.buf.drain(..taken);
            self.read_offset += taken as u64;
        }
    }

    /// Bytes waiting to be read.
    pub fn readable(&self) -> usize {
        self.buf.len()
    }

    /// Bytes of memory that hold stream data, in order or not (capacity,
    /// not just contents). Each out-of-order piece also costs a few dozen
    /// bytes of bookkeeping, and their number is capped (`Fragmented`).
    pub fn buffered(&self) -> u64 {
        let pieces: usize = self.pending.values().map(VecDeque::capacity).sum();
        (self.buf.capacity() + pieces) as u64
    }

    /// Moves up to `out.len()` in-order bytes to `out` (none with a sink:
    /// they are its).
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        if self.sink.is_some() {
            return 0;
        }
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
        if self.sink.is_some() {
            return 0;
        }
        let n = self.readable();
        let (a, b) = self.buf.as_slices();
        f(a);
        f(b);
        self.consume(n);
        n
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        self.read_offset += n as u64;
        self.released = self.read_offset;
    }
}

/// Appends to `out` the bytes `from..to` of the union of `parts` (pieces
/// by offset, in order) and `data` (at `start`), which covers them: from a
/// piece where one holds them, else from `data`.
fn append_union(
    out: &mut VecDeque<u8>,
    parts: &[(u64, VecDeque<u8>)],
    start: u64,
    data: &[u8],
    mut from: u64,
    to: u64,
) {
    let new = |from: u64, to: u64| &data[(from - start) as usize..(to - start) as usize];
    for (s, piece) in parts {
        let e = s + piece.len() as u64;
        if piece.is_empty() || e <= from {
            continue;
        }
        if *s >= to {
            break;
        }
        if from < *s {
            out.extend(new(from, *s));
            from = *s;
        }
        let (lo, hi) = ((from - s) as usize, (e.min(to) - s) as usize);
        let (a, b) = piece.as_slices();
        if lo < a.len() {
            out.extend(&a[lo..hi.min(a.len())]);
        }
        if hi > a.len() {
            out.extend(&b[lo.saturating_sub(a.len())..hi - a.len()]);
        }
        from = e.min(to);
    }
    if from < to {
        out.extend(new(from, to));
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod sink_tests;
