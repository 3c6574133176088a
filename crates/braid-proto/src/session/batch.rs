//! GSO batches, as [`Session::poll_transmit`](super::Session::poll_transmit)
//! hands them out: consecutive datagrams for one connection with one ECN
//! codepoint, all of the first one's size except the last, which may be
//! shorter (what UDP segmentation offload sends with one system call).
//!
//! The scheduler decides each datagram's connection only as it builds it,
//! so a datagram for another connection can turn up in the middle of a
//! batch. It is [`Held`]: kept, already sealed and accounted as sent, to
//! start or join a later batch, so that each connection keeps its batches
//! long while connections take turns. A connection's datagrams leave in
//! the order they were built.

use super::Transmit;
use std::collections::VecDeque;

/// Spare buffers [`Held`] keeps for the next datagrams it holds.
const SPARE_BUFFERS: usize = 8;

/// The batch being gathered.
#[derive(Debug, Clone, Copy)]
pub(super) struct Batch {
    /// The first datagram: its connection, ECN codepoint and size (the
    /// segment size) are the batch's.
    first: Transmit,
    /// Bytes of all its datagrams.
    size: usize,
    count: usize,
    max: usize,
    /// More datagrams may join.
    open: bool,
}

impl Batch {
    /// A batch of at most `max` datagrams starting with `first`. A probe of
    /// another address (`to_candidate`) travels alone.
    pub fn new(first: Transmit, max: usize) -> Batch {
        Batch {
            first,
            size: first.size,
            count: 1,
            max,
            open: max > 1 && !first.to_candidate,
        }
    }

    /// More datagrams may join.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Adds `t` if it may follow; returns whether it did. One for another
    /// connection (or address) may not, and leaves the batch open; one for
    /// this connection that may not (another ECN codepoint, or larger)
    /// closes it, so that the connection's datagrams keep their order.
    pub fn offer(&mut self, t: Transmit) -> bool {
        debug_assert!(self.open);
        if t.path != self.first.path || t.to_candidate {
            return false;
        }
        if t.ecn != self.first.ecn || t.size > self.first.size {
            self.open = false;
            return false;
        }
        self.count += 1;
        self.size += t.size;
        self.open = t.size == self.first.size && self.count < self.max;
        true
    }

    /// What the caller sends.
    pub fn transmit(&self) -> Transmit {
        Transmit {
            size: self.size,
            segment_size: (self.count > 1).then_some(self.first.size),
            ..self.first
        }
    }
}

/// Datagrams built while a batch for another connection was gathered, in
/// the order they were built (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Held {
    datagrams: VecDeque<(Transmit, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
}

impl Held {
    /// How many are held.
    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    /// Keeps `t`, whose bytes are `bytes`, for a later batch.
    pub fn push(&mut self, t: Transmit, bytes: &[u8]) {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(bytes);
        self.datagrams.push_back((t, b));
    }

    /// Drops the spare buffers: nothing is left to send for now, and an
    /// idle session keeps none.
    pub fn release_spare(&mut self) {
        self.spare = Vec::new();
    }

    /// A batch of at most `max` from the datagrams held, written to `buf`:
    /// the oldest and those of its connection that may follow it.
    pub fn take_batch(&mut self, max: usize, buf: &mut Vec<u8>) -> Option<Batch> {
        let mut batch: Option<Batch> = None;
        let mut i = 0;
        while i < self.datagrams.len() {
            let t = self.datagrams[i].0;
            let joins = match &mut batch {
                None => {
                    batch = Some(Batch::new(t, max));
                    true
                }
                Some(b) if !b.is_open() => break,
                Some(b) => b.offer(t),
            };
            if !joins {
                i += 1;
                continue;
            }
            let (_, bytes) = self.datagrams.remove(i).expect("in range");
            buf.extend_from_slice(&bytes);
            if self.spare.len() < SPARE_BUFFERS {
                self.spare.push(bytes);
            }
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ecn, PathId};

    fn t(path: u8, size: usize) -> Transmit {
        Transmit {
            path: PathId(path),
            size,
            ecn: Ecn::Ect0,
            segment_size: None,
            to_candidate: false,
            to: None,
        }
    }

    #[test]
    fn equal_datagrams_join_until_a_shorter_one_or_the_limit() {
        let mut b = Batch::new(t(0, 100), 4);
        assert!(b.offer(t(0, 100)));
        assert!(b.offer(t(0, 60)));
        assert!(!b.is_open(), "a shorter datagram ends the batch");
        let sent = b.transmit();
        assert_eq!((sent.size, sent.segment_size), (260, Some(100)));

        let mut b = Batch::new(t(0, 100), 2);
        assert!(b.offer(t(0, 100)));
        assert!(!b.is_open(), "the limit ends it");
        assert_eq!(Batch::new(t(0, 100), 1).transmit(), t(0, 100));
        assert!(!Batch::new(t(0, 100), 1).is_open());
    }

    #[test]
    fn another_connection_waits_and_a_larger_datagram_closes() {
        let mut b = Batch::new(t(0, 100), 8);
        assert!(!b.offer(t(1, 100)));
        assert!(b.is_open(), "another connection's datagram leaves it open");
        let probe = Transmit {
            to_candidate: true,
            ..t(0, 100)
        };
        assert!(!b.offer(probe));
        assert!(b.is_open(), "so does a probe of another address");
        assert!(!Batch::new(probe, 8).is_open(), "which travels alone");
        assert!(!b.offer(t(0, 101)));
        assert!(!b.is_open(), "a larger one must not overtake");
        let ce = Transmit {
            ecn: Ecn::Ce,
            ..t(0, 100)
        };
        let mut b = Batch::new(t(0, 100), 8);
        assert!(!b.offer(ce));
        assert!(!b.is_open());
    }

    #[test]
    fn held_datagrams_leave_by_connection_in_order() {
        let mut held = Held::default();
        held.push(t(1, 3), &[1, 1, 1]);
        held.push(t(2, 2), &[2, 2]);
        held.push(t(1, 3), &[3, 3, 3]);
        held.push(t(1, 4), &[4; 4]);
        held.push(t(1, 3), &[5; 3]);
        let mut buf = Vec::new();
        let b = held.take_batch(8, &mut buf).unwrap();
        assert_eq!(buf, [1, 1, 1, 3, 3, 3]);
        assert!(!b.is_open(), "the larger one closed it");
        assert_eq!(b.transmit().segment_size, Some(3));
        buf.clear();
        let b = held.take_batch(8, &mut buf).unwrap();
        assert_eq!((buf.as_slice(), b.transmit()), (&[2u8, 2][..], t(2, 2)));
        buf.clear();
        let b = held.take_batch(8, &mut buf).unwrap();
        assert_eq!(buf, [4, 4, 4, 4, 5, 5, 5]);
        assert_eq!(b.transmit().segment_size, Some(4));
        assert_eq!(held.len(), 0);
        assert!(held.take_batch(8, &mut buf).is_none());
    }
}
