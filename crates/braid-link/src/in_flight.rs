//! Packets a link has accepted, waiting for the arrival times it computed:
//! what the real-time emulators (`braid relay`, `braid link`) hold between
//! [`Link::offer`](crate::Link::offer) and sending. The simulator keeps
//! them in its event queue instead.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use braid_proto::Instant;

/// Most packets held per direction. The link's queue limit bounds only the
/// packets being serialised; those in propagation are bounded by rate ×
/// delay, which has no limit when the rate has none.
pub const MAX_PACKETS: usize = 100_000;
/// Most bytes held per direction.
pub const MAX_BYTES: usize = 256 << 20;

/// Items by arrival time, equal times in the order they were pushed, within
/// [`MAX_PACKETS`] and [`MAX_BYTES`].
#[derive(Debug)]
pub struct InFlight<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    bytes: usize,
    next_seq: u64,
}

#[derive(Debug)]
struct Entry<T> {
    at: Instant,
    seq: u64,
    len: usize,
    item: T,
}

impl<T> Entry<T> {
    fn key(&self) -> (Instant, u64) {
        (self.at, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            heap: BinaryHeap::new(),
            bytes: 0,
            next_seq: 0,
        }
    }
}

impl<T> InFlight<T> {
    /// Holds `item`, `len` bytes, until `at`: `Ok(true)` if it is now the
    /// earliest, `Err(item)` when the bounds leave no room for it.
    pub fn push(&mut self, at: Instant, len: usize, item: T) -> Result<bool, T> {
        if self.heap.len() >= MAX_PACKETS || self.bytes + len > MAX_BYTES {
            return Err(item);
        }
        let earliest = self.next_at().is_none_or(|next| at < next);
        self.bytes += len;
        self.next_seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.next_seq,
            len,
            item,
        }));
        Ok(earliest)
    }

    /// The earliest arrival time held.
    pub fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// The earliest item due by `now`, with its arrival time.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        if self.next_at()? > now {
            return None;
        }
        let Reverse(e) = self.heap.pop()?;
        self.bytes -= e.len;
        Some((e.at, e.item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_by_arrival_time_ties_in_order_within_bounds() {
        let t = Instant::from_nanos;
        let mut q = InFlight::default();
        assert_eq!(q.push(t(20), 1, "c"), Ok(true));
        assert_eq!(q.push(t(10), 1, "a"), Ok(true));
        assert_eq!(q.push(t(10), 1, "b"), Ok(false));
        assert_eq!(q.next_at(), Some(t(10)));
        assert_eq!(q.pop_due(t(9)), None);
        assert_eq!(q.pop_due(t(10)), Some((t(10), "a")));
        assert_eq!(q.pop_due(t(30)), Some((t(10), "b")));
        assert_eq!(q.pop_due(t(30)), Some((t(20), "c")));
        assert_eq!(q.pop_due(t(30)), None);
        assert_eq!(q.push(t(0), MAX_BYTES + 1, "big"), Err("big"));
        assert_eq!(q.push(t(0), MAX_BYTES, "fits"), Ok(true));
        assert_eq!(q.push(t(0), 1, "full"), Err("full"));
    }
}
