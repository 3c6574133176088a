//! The sending half of the session's byte stream: what the application wrote,
//! cut into segments, and which segments are in flight, lost or acknowledged.
//!
//! A segment keeps its byte range for life, so a retransmission carries the
//! same bytes in a new packet.

use crate::deque_map::DequeMap;
use crate::PathId;
use std::collections::{BTreeSet, VecDeque};
use std::fmt;

/// Stream bytes the application can produce again from their offset, such
/// as the simulator's generated content. A session given one keeps no copy
/// of what is written (see [`crate::Session::use_generated_content`]): each
/// packet reads its bytes straight from it, which spares copying every
/// byte into a send buffer and, long after, out of it again.
pub trait GeneratedContent: Send + fmt::Debug {
    /// Writes the stream's bytes from `offset` on into the whole of `out`.
    /// Asked only for bytes counted as written and not yet released, and
    /// again for the same bytes when they are sent again.
    fn read_at(&self, offset: u64, out: &mut [u8]);

    /// Appends `len` bytes from `offset` on to `out`, as [`Self::read_at`]
    /// reads them. Content that holds its bytes in memory can copy them
    /// in without first zeroing the room for them.
    fn extend_at(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + len, 0);
        self.read_at(offset, &mut out[at..]);
    }

    /// Every byte below `offset` is acknowledged and will never be read
    /// again: content held in memory may let it go.
    fn release(&self, _offset: u64) {}
}

/// Segments at the tail that [`SendStream::tail`] looks at: the oldest,
/// which hold up the stream, and a bound on the work per call (the session
/// reads it for every timer poll at the tail).
const TAIL_SCAN: usize = 512;

/// One segment of the stream.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    pub len: u32,
    pub fin: bool,
    /// Times it was sent again: after a loss, a tail-loss probe, or on a
    /// faster connection at the tail.
    pub retries: u32,
    /// Packets carrying it that are still in flight.
    pub in_flight: u32,
    /// Connection of its latest transmission, credited when it is acknowledged.
    pub path: PathId,
    /// When that transmission was expected to reach the peer, µs on the
    /// scale of the session's ACK timestamps (see `session::scheduler`);
    /// `None` from a connection not yet measured.
    pub due_us: Option<i64>,
}

/// What the scheduler may send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    pub offset: u64,
    pub len: u32,
    pub fin: bool,
    pub retransmission: bool,
}

#[derive(Debug)]
pub(crate) struct SendStream {
    /// Bytes from `base` up to `written` (none with `generated`).
    buf: VecDeque<u8>,
    /// Where the bytes come from instead of `buf`, if the application said so.
    generated: Option<Box<dyn GeneratedContent>>,
    base: u64,
    written: u64,
    /// Offset of the first byte never sent.
    next_new: u64,
    /// Sent, not yet acknowledged, keyed by offset.
    segments: DequeMap<Segment>,
    /// Offsets of segments declared lost and waiting for a new packet.
    lost: BTreeSet<u64>,
    /// Set by `finish`: the stream ends at `written`.
    finishing: bool,
    /// Where the application said the stream will end (`announce_len`).
    announced_end: Option<u64>,
    fin_sent: bool,
    /// Everything, FIN included, has been acknowledged.
    complete: bool,
    /// Peer's flow-control limit.
    max_data: u64,
    /// Most bytes buffered (unacked + unsent) at once.
    buffer_limit: u64,
    /// Most segments outstanding at once (NKP-0024's session window in packets).
    pub window_packets: u64,
    pub segment_size: u32,
    /// Bytes acknowledged, counted once per byte.
    pub acked_bytes: u64,
    /// Of those, per connection of the acknowledged segment's latest transmission.
    delivered_by_path: Vec<u64>,
}

impl SendStream {
    pub fn new(segment_size: u32, buffer_limit: u64, window_packets: u64, max_data: u64) -> Self {
        SendStream {
            buf: VecDeque::new(),
            generated: None,
            base: 0,
            written: 0,
            next_new: 0,
            segments: DequeMap::default(),
            lost: BTreeSet::new(),
            finishing: false,
            announced_end: None,
            fin_sent: false,
            complete: false,
            max_data,
            buffer_limit,
            window_packets: window_packets.max(1),
            segment_size: segment_size.max(1),
            acked_bytes: 0,
            delivered_by_path: vec![0; 256],
        }
    }

    /// Buffers as much of `data` as the window allows; returns the count
    /// taken (none once the bytes come from generated content).
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.generated.is_some() {
            return 0;
        }
        let room = usize::try_from(self.writable()).unwrap_or(usize::MAX);
        let n = data.len().min(room);
        self.buf.extend(&data[..n]);
        self.written += n as u64;
        n
    }

    /// Serves the bytes from `content` from now on; only before any write.
    /// Whether it was taken.
    pub fn use_generated(&mut self, content: Box<dyn GeneratedContent>) -> bool {
        if self.written > 0 || self.finishing {
            return false;
        }
        self.generated = Some(content);
        true
    }

    /// Counts up to `len` more bytes of the generated content as written,
    /// as `write` would take them; returns the count taken.
    pub fn write_generated(&mut self, len: u64) -> u64 {
        if self.generated.is_none() {
            return 0;
        }
        let n = len.min(self.writable());
        self.written += n;
        n
    }

    /// Bytes the application may still write now.
    pub fn writable(&self) -> u64 {
        if self.finishing {
            0
        } else {
            self.buffer_limit.saturating_sub(self.buffered())
        }
    }

    /// Bytes written and not yet released: what `buf` holds, or would.
    fn buffered(&self) -> u64 {
        self.written - self.base
    }

    pub fn finish(&mut self) {
        self.finishing = true;
    }

    /// The application's word that the stream will be `total` bytes long
    /// (a file's size): the scheduler then knows what is still to come.
    pub fn announce_len(&mut self, total: u64) {
        self.announced_end = Some(total);
    }

    /// Whether the application said how long the stream will be.
    pub fn is_len_announced(&self) -> bool {
        self.announced_end.is_some()
    }

    /// What the faster connections would deliver before a packet sent
    /// now on a slower one is needed: the backlog waiting to be sent, as
    /// ECF has it (`None` while the application may write more than the
    /// buffer holds). Once the length is announced, also what is yet to
    /// be written, and at most the receiver's window, since nothing runs
    /// further ahead of a byte still on its way (multipath head-of-line
    /// blocking).
    pub fn ahead(&self) -> Option<u64> {
        let Some(end) = self.announced_end else {
            return (!self.is_buffer_limited()).then(|| self.backlog());
        };
        let to_write = end.saturating_sub(self.written);
        let known = match self.finishing {
            true => self.backlog(),
            false => self.backlog() + to_write,
        };
        Some(known.min(self.max_data.saturating_sub(self.base)))
    }

    /// Whether the application may have more to write than the buffer took:
    /// not finished and the buffer full, so `backlog` understates what is to come.
    pub fn is_buffer_limited(&self) -> bool {
        !self.finishing && self.writable() == 0
    }

    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether the application wrote anything or ended the stream.
    pub fn is_touched(&self) -> bool {
        self.written > 0 || self.finishing
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    /// Frees the buffer's spare capacity (a finished stream keeps none).
    pub fn shrink_to_fit(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// Bytes the buffer may hold.
    pub fn buffer_limit(&self) -> u64 {
        self.buffer_limit
    }

    pub fn set_limits(&mut self, segment_size: u32, buffer_limit: u64, window_packets: u64) {
        self.segment_size = segment_size.max(1);
        self.buffer_limit = buffer_limit;
        self.window_packets = window_packets.max(1);
    }

    pub fn update_max_data(&mut self, max_data: u64) {
        self.max_data = self.max_data.max(max_data);
    }

    /// Whether new data waits only for the peer's flow-control window.
    /// The peer's flow-control limit.
    pub fn max_data(&self) -> u64 {
        self.max_data
    }

    pub fn is_flow_blocked(&self) -> bool {
        self.has_unsent() && self.next_new >= self.max_data && self.lost.is_empty()
    }

    /// Whether written bytes (or the FIN) wait to be sent for the first time.
    /// Whether any sent segment awaits its acknowledgement.
    pub fn has_outstanding(&self) -> bool {
        !self.segments.is_empty()
    }

    pub fn has_unsent(&self) -> bool {
        self.next_new < self.written || (self.finishing && !self.fin_sent)
    }

    /// Length and FIN flag of the next new segment, if windows allow one.
    fn next_new_allowed(&self) -> Option<(u32, bool)> {
        if !self.has_unsent() || self.segments.len() as u64 >= self.window_packets {
            return None;
        }
        let limit = self.written.min(self.max_data);
        let len = limit
            .saturating_sub(self.next_new)
            .min(u64::from(self.segment_size)) as u32;
        let fin = self.finishing && self.next_new + u64::from(len) == self.written;
        (len > 0 || fin).then_some((len, fin))
    }

    /// The next segment to send: a lost one first, else new data.
    pub fn peek(&self) -> Option<Pending> {
        if let Some(&offset) = self.lost.first() {
            let seg = self
                .segments
                .get(offset)
                .expect("a lost segment is outstanding");
            return Some(Pending {
                offset,
                len: seg.len,
                fin: seg.fin,
                retransmission: true,
            });
        }
        let (len, fin) = self.next_new_allowed()?;
        Some(Pending {
            offset: self.next_new,
            len,
            fin,
            retransmission: false,
        })
    }

    /// Records that `p` (from `peek` or `tail_copy`) went out in a packet
    /// on `path`, due at the peer at `due_us`; returns the segment's retry
    /// count.
    pub fn on_sent(&mut self, p: Pending, path: PathId, due_us: Option<i64>) -> u32 {
        if p.retransmission {
            self.lost.remove(&p.offset);
            let seg = self
                .segments
                .get_mut(p.offset)
                .expect("resent segment is outstanding");
            seg.retries += 1;
            seg.in_flight += 1;
            seg.path = path;
            seg.due_us = due_us;
            seg.retries
        } else {
            self.segments.insert(
                p.offset,
                Segment {
                    len: p.len,
                    fin: p.fin,
                    retries: 0,
                    in_flight: 1,
                    path,
                    due_us,
                },
            );
            self.next_new += u64::from(p.len);
            self.fin_sent |= p.fin;
            0
        }
    }

    /// Copies the segment's bytes into `out`.
    pub fn read_segment(&self, offset: u64, len: u32, out: &mut Vec<u8>) {
        if let Some(content) = &self.generated {
            content.extend_at(offset, len as usize, out);
            return;
        }
        let start = (offset - self.base) as usize;
        let end = start + len as usize;
        let (a, b) = self.buf.as_slices();
        let split = a.len();
        if start < split {
            out.extend_from_slice(&a[start..end.min(split)]);
        }
        if end > split {
            out.extend_from_slice(&b[start.saturating_sub(split)..end - split]);
        }
    }

    /// A packet carrying the segment at `offset` was acknowledged. Returns the
    /// bytes newly acknowledged (zero if it was already).
    pub fn on_acked(&mut self, offset: u64) -> u64 {
        let Some(seg) = self.segments.remove(offset) else {
            return 0;
        };
        self.lost.remove(&offset);
        self.acked_bytes += u64::from(seg.len);
        self.delivered_by_path[seg.path.index()] += u64::from(seg.len);
        self.release();
        u64::from(seg.len)
    }

    /// Stream bytes acknowledged whose latest transmission went on `path`.
    pub fn delivered_on(&self, path: PathId) -> u64 {
        self.delivered_by_path[path.index()]
    }

    /// Cuts the outstanding segment at `offset` after `len` bytes, for a
    /// connection that carries no more (path MTU discovery fell back): the
    /// rest becomes a segment of its own, waiting as lost. Copies of the
    /// whole still in flight then count for the first part only.
    pub fn split(&mut self, offset: u64, len: u32) {
        let Some(seg) = self.segments.get_mut(offset) else {
            return;
        };
        if len == 0 || len >= seg.len {
            return;
        }
        let rest = Segment {
            len: seg.len - len,
            in_flight: 0,
            ..seg.clone()
        };
        seg.len = len;
        seg.fin = false;
        self.segments.insert(offset + u64::from(len), rest);
        self.lost.insert(offset + u64::from(len));
    }

    /// A packet carrying the segment at `offset` was declared lost.
    pub fn on_lost(&mut self, offset: u64) {
        if let Some(seg) = self.segments.get_mut(offset) {
            seg.in_flight = seg.in_flight.saturating_sub(1);
            if seg.in_flight == 0 {
                self.lost.insert(offset);
            }
        }
    }

    /// A packet carrying the segment at `offset`, declared lost by a
    /// timeout that proved spurious, is in flight again: unless already
    /// sent again, the segment no longer waits for a new packet.
    pub fn on_revived(&mut self, offset: u64) {
        if let Some(seg) = self.segments.get_mut(offset) {
            seg.in_flight += 1;
            self.lost.remove(&offset);
        }
    }

    /// Whether new (never sent) data could go out now.
    pub fn has_new_data(&self) -> bool {
        self.next_new_allowed().is_some()
    }

    /// Bytes waiting to be sent: lost segments and unsent data.
    pub fn backlog(&self) -> u64 {
        let lost = self.lost.len() as u64 * u64::from(self.segment_size); // segments are ≤ segment_size
        lost + self
            .written
            .min(self.max_data)
            .saturating_sub(self.next_new)
    }

    /// At the end of the stream (everything sent, nothing waiting as
    /// lost), the oldest [`TAIL_SCAN`] segments with one copy in flight,
    /// with the connection it went on and when it was due at the peer.
    /// Empty, at no cost, before the end.
    pub fn tail(&self) -> impl Iterator<Item = (u64, PathId, i64)> + '_ {
        let at_tail = self.finishing && !self.has_unsent() && self.lost.is_empty();
        at_tail
            .then(|| self.segments.iter())
            .into_iter()
            .flatten()
            .filter(|(_, s)| s.in_flight == 1)
            .take(TAIL_SCAN)
            .filter_map(|(offset, s)| Some((offset, s.path, s.due_us?)))
    }

    /// A second copy of the segment at `offset` (from [`Self::tail`]).
    pub fn copy_of(&self, offset: u64) -> Option<Pending> {
        let s = self.segments.get(offset)?;
        Some(Pending {
            offset,
            len: s.len,
            fin: s.fin,
            retransmission: true,
        })
    }

    /// Queues an outstanding segment for a tail-loss probe while its first
    /// copy is still in flight (RFC 8985 §7.3).
    pub fn probe(&mut self, offset: u64) {
        if self.segments.get(offset).is_some() {
            self.lost.insert(offset);
        }
    }

    /// Whether a peer's cumulative point (and FIN) could be true: it cannot
    /// pass what we sent, nor report a FIN we did not send.
    pub fn is_plausible_cumulative(&self, cumulative: u64, fin: bool) -> bool {
        cumulative <= self.next_new && (!fin || (self.fin_sent && cumulative == self.next_new))
    }

    pub fn on_cumulative(&mut self, cumulative: u64, fin: bool) {
        let mut covered = Vec::new();
        for (off, seg) in self.segments.iter() {
            let end = off + u64::from(seg.len);
            if end < cumulative || (end == cumulative && (!seg.fin || fin)) {
                covered.push(off);
            } else {
                break;
            }
        }
        for off in covered {
            self.on_acked(off);
        }
    }

    /// Frees acknowledged bytes at the front of the buffer and notes completion.
    fn release(&mut self) {
        let front = self.segments.first().map_or(self.next_new, |(o, _)| o);
        let free = front.saturating_sub(self.base) as usize;
        self.buf.drain(..free.min(self.buf.len()));
        // `base` also moves without `buf`, for generated content.
        self.base += free as u64;
        if let (Some(content), true) = (&self.generated, free > 0) {
            content.release(self.base);
        }
        self.complete = self.fin_sent && self.segments.is_empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_retransmit_lost_first_and_free_acked_bytes() {
        let mut s = SendStream::new(4, 100, 10, 1000);
        assert_eq!(s.write(b"abcdefghij"), 10);
        s.finish();
        let p0 = s.peek().unwrap();
        assert_eq!((p0.offset, p0.len, p0.fin), (0, 4, false));
        s.on_sent(p0, PathId(0), None);
        let p1 = s.peek().unwrap();
        s.on_sent(p1, PathId(0), None);
        let p2 = s.peek().unwrap();
        assert_eq!((p2.offset, p2.len, p2.fin), (8, 2, true));
        s.on_sent(p2, PathId(0), None);
        assert_eq!(s.peek(), None);
        s.on_lost(4);
        let r = s.peek().unwrap();
        assert!(r.retransmission);
        assert_eq!(s.on_sent(r, PathId(1), None), 1);
        let mut out = Vec::new();
        s.read_segment(4, 4, &mut out);
        assert_eq!(out, b"efgh");
        s.on_acked(0);
        assert_eq!(s.base, 4);
        s.on_cumulative(8, false);
        assert!(!s.is_complete());
        s.on_cumulative(10, true);
        assert!(s.is_complete());
        assert_eq!(s.acked_bytes, 10);
        assert_eq!(
            (s.delivered_on(PathId(0)), s.delivered_on(PathId(1))),
            (6, 4)
        );
    }

    #[test]
    fn the_tail_is_what_has_one_copy_in_flight_once_everything_is_sent() {
        let mut s = SendStream::new(4, 100, 10, 1000);
        s.write(b"abcdefghij");
        let p0 = s.peek().unwrap();
        s.on_sent(p0, PathId(1), Some(500));
        assert_eq!(s.tail().count(), 0, "not finished");
        s.finish();
        let p1 = s.peek().unwrap();
        s.on_sent(p1, PathId(0), None);
        assert_eq!(s.tail().count(), 0, "data left to send");
        let p2 = s.peek().unwrap();
        s.on_sent(p2, PathId(1), Some(700));
        // Segment 4 went on an unmeasured connection: no due time.
        let tail: Vec<_> = s.tail().collect();
        assert_eq!(tail, [(0, PathId(1), 500), (8, PathId(1), 700)]);
        // A second copy takes segment 0 out; a loss puts it back.
        s.on_sent(s.copy_of(0).unwrap(), PathId(0), Some(300));
        assert_eq!(s.tail().next(), Some((8, PathId(1), 700)));
        s.on_lost(0);
        assert_eq!(s.tail().next(), Some((0, PathId(0), 300)));
        // A segment waiting as lost goes first by itself: no tail then.
        s.on_lost(8);
        assert_eq!(s.tail().count(), 0);
    }

    #[test]
    fn windows_bound_segments_and_flow_control() {
        let mut s = SendStream::new(10, 1000, 2, 15);
        s.write(&[0; 100]);
        s.on_sent(s.peek().unwrap(), PathId(0), None);
        let p = s.peek().unwrap();
        assert_eq!(p.len, 5, "flow control cuts the segment at max_data");
        s.on_sent(p, PathId(0), None);
        assert!(s.is_flow_blocked());
        s.update_max_data(100);
        assert_eq!(s.peek(), None, "two segments outstanding fill the window");
        s.on_acked(0);
        assert_eq!(s.peek().unwrap().offset, 15);
    }

    #[test]
    fn what_is_ahead_counts_the_announced_rest_up_to_the_window() {
        let mut s = SendStream::new(10, 16, 10, 1000);
        s.write(&[1; 16]);
        assert_eq!(s.ahead(), None, "the buffer is full and more may come");
        s.announce_len(500);
        assert!(s.is_len_announced());
        assert_eq!(s.ahead(), Some(500), "16 buffered, 484 to write");
        s.update_max_data(1000);
        let mut small = SendStream::new(10, 16, 10, 100);
        small.announce_len(500);
        assert_eq!(small.ahead(), Some(100), "no further than the window");
        s.finish();
        assert_eq!(s.ahead(), Some(16), "finished early: only what was written");
    }

    #[test]
    fn write_respects_the_buffer_limit_and_finish() {
        let mut s = SendStream::new(10, 16, 10, 1000);
        assert_eq!(s.write(&[1; 40]), 16);
        assert_eq!(s.writable(), 0);
        s.finish();
        assert_eq!(s.write(&[1]), 0);
    }

    /// Byte `i` of the stream is `i % 251`.
    #[derive(Debug)]
    struct Counting;

    impl GeneratedContent for Counting {
        fn read_at(&self, offset: u64, out: &mut [u8]) {
            for (i, b) in out.iter_mut().enumerate() {
                *b = ((offset + i as u64) % 251) as u8;
            }
        }
    }

    #[test]
    fn generated_content_is_counted_like_writes_and_read_at_its_offset() {
        let mut copied = SendStream::new(4, 10, 10, 1000);
        let mut generated = SendStream::new(4, 10, 10, 1000);
        assert!(generated.use_generated(Box::new(Counting)));
        let bytes: Vec<u8> = (0..40).map(|i| (i % 251) as u8).collect();
        assert_eq!(copied.write(&bytes[..25]), 10);
        assert_eq!(generated.write_generated(25), 10);
        assert_eq!(
            generated.write(b"x"),
            0,
            "generated content takes no copies"
        );
        for s in [&mut copied, &mut generated] {
            s.on_sent(s.peek().unwrap(), PathId(0), None);
            s.on_sent(s.peek().unwrap(), PathId(0), None);
            s.on_acked(0);
        }
        assert_eq!(copied.writable(), generated.writable());
        assert_eq!(
            copied.write(&bytes[10..15]),
            generated.write_generated(5) as usize
        );
        let (mut a, mut b) = (Vec::new(), Vec::new());
        copied.read_segment(4, 4, &mut a);
        generated.read_segment(4, 4, &mut b);
        b.extend_from_slice(b"!");
        generated.read_segment(12, 3, &mut b);
        assert_eq!(a, [4, 5, 6, 7]);
        assert_eq!(b, [4, 5, 6, 7, b'!', 12, 13, 14]);
        // Only a stream nothing was written to takes generated content.
        assert!(!copied.use_generated(Box::new(Counting)));
    }

    /// [`Counting`] that notes where the stream released it.
    #[derive(Debug, Default)]
    struct Releasing(std::sync::Arc<std::sync::Mutex<Vec<u64>>>);

    impl GeneratedContent for Releasing {
        fn read_at(&self, offset: u64, out: &mut [u8]) {
            Counting.read_at(offset, out);
        }
        fn release(&self, offset: u64) {
            self.0.lock().unwrap().push(offset);
        }
    }

    #[test]
    fn generated_content_is_released_below_the_oldest_unacknowledged_byte() {
        let released = Releasing::default();
        let seen = released.0.clone();
        let mut s = SendStream::new(4, 100, 10, 1000);
        assert!(s.use_generated(Box::new(released)));
        assert_eq!(s.write_generated(12), 12);
        for _ in 0..3 {
            s.on_sent(s.peek().unwrap(), PathId(0), None);
        }
        // Acknowledged out of order: nothing below the hole at 0 goes.
        s.on_acked(4);
        assert!(seen.lock().unwrap().is_empty());
        // A retransmission reads the same bytes, from the same offset.
        s.on_lost(0);
        let r = s.peek().unwrap();
        assert!(r.retransmission);
        let mut out = Vec::new();
        s.read_segment(r.offset, r.len, &mut out);
        assert_eq!(out, [0, 1, 2, 3]);
        s.on_sent(r, PathId(0), None);
        s.on_acked(0);
        assert_eq!(*seen.lock().unwrap(), [8]);
        s.on_acked(8);
        assert_eq!(*seen.lock().unwrap(), [8, 12]);
    }

    #[test]
    fn empty_stream_sends_a_bare_fin() {
        let mut s = SendStream::new(10, 16, 10, 1000);
        s.finish();
        let p = s.peek().unwrap();
        assert_eq!((p.offset, p.len, p.fin), (0, 0, true));
        s.on_sent(p, PathId(0), None);
        s.on_acked(0);
        assert!(s.is_complete());
    }
}
