//! The simulator's pending events: earliest first, and events due at the
//! same instant in the order they were scheduled, so a run is a pure
//! function of its scenario and seed.

use braid_proto::Instant;
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

/// A queue of events of type `T`, each due at an [`Instant`].
///
/// Most events are a link's deliveries, which it schedules in time order:
/// those wait in the link's lane, a FIFO, and only each lane's first event
/// is in the heap. The heap then holds a few entries rather than every
/// datagram in flight, and orders small keys (when, then a sequence
/// number) while the events wait beside it. An event scheduled earlier
/// than the last of its lane (a reordered or duplicated datagram) waits
/// on its own in a slab instead, so the order is exactly (when, sequence).
#[derive(Debug)]
pub(crate) struct EventQueue<T> {
    heap: BinaryHeap<Reverse<(Instant, u64, Entry)>>,
    /// Events waiting on their own, by [`Entry::Slot`].
    slots: Vec<Option<T>>,
    /// Slots whose event was taken, for the next ones.
    free: Vec<u32>,
    /// Events in time order, by [`Entry::Lane`]; each lane's first is in the heap.
    lanes: Vec<VecDeque<(Instant, u64, T)>>,
    /// Events scheduled so far: the tie-break among events due together.
    seq: u64,
}

/// Where the event of a heap entry waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    Slot(u32),
    Lane(u32),
}

impl<T> EventQueue<T> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            lanes: Vec::new(),
            seq: 0,
        }
    }

    /// Schedules `event` at `at`, after every event already due then.
    pub fn push(&mut self, at: Instant, event: T) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len()).expect("fewer than 2^32 pending events");
                self.slots.push(Some(event));
                slot
            }
        };
        self.heap.push(Reverse((at, self.seq, Entry::Slot(slot))));
    }

    /// As [`EventQueue::push`], for an event of `lane`, whose events
    /// mostly come in time order (one link's deliveries).
    pub fn push_in_lane(&mut self, lane: usize, at: Instant, event: T) {
        if lane >= self.lanes.len() {
            self.lanes.resize_with(lane + 1, VecDeque::new);
        }
        let queue = &mut self.lanes[lane];
        match queue.back() {
            Some(&(last, _, _)) if last > at => return self.push(at, event),
            Some(_) => {}
            None => {
                let id = u32::try_from(lane).expect("fewer than 2^32 lanes");
                self.heap.push(Reverse((at, self.seq + 1, Entry::Lane(id))));
            }
        }
        self.seq += 1;
        queue.push_back((at, self.seq, event));
    }

    /// The earliest event and when it is due.
    /// When the next event is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, ..))| *at)
    }

    pub fn pop(&mut self) -> Option<(Instant, T)> {
        let mut top = self.heap.peek_mut()?;
        let Reverse((at, _, entry)) = *top;
        let event = match entry {
            Entry::Slot(slot) => {
                PeekMut::pop(top);
                self.free.push(slot);
                self.slots[slot as usize]
                    .take()
                    .expect("a queued slot holds its event")
            }
            Entry::Lane(id) => {
                let queue = &mut self.lanes[id as usize];
                let (_, _, event) = queue.pop_front().expect("a queued lane has an event");
                // The lane's next event takes its place at the top: one
                // sift down instead of a pop and a push.
                match queue.front() {
                    Some(&(next, seq, _)) => *top = Reverse((next, seq, entry)),
                    None => drop(PeekMut::pop(top)),
                }
                event
            }
        };
        Some((at, event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_ties_in_scheduling_order() {
        let mut q = EventQueue::new();
        let at = Instant::from_nanos;
        q.push(at(5), "b");
        q.push(at(3), "a");
        q.push(at(5), "c");
        assert_eq!(q.pop(), Some((at(3), "a")));
        // A freed slot is reused; the new event still queues behind its ties.
        q.push(at(5), "d");
        q.push(at(4), "x");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [(at(4), "x"), (at(5), "b"), (at(5), "c"), (at(5), "d")]
        );
        assert_eq!(q.slots.len(), 4, "slot 1 was reused");
    }

    #[test]
    fn lanes_keep_the_order_of_a_single_heap() {
        // Events pushed in a pseudo-random mix of lanes (some out of their
        // lane's time order) and on their own come out exactly as sorted
        // by (time, scheduling order).
        let mut q = EventQueue::new();
        let mut want = Vec::new();
        let mut x: u64 = 1;
        for i in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = Instant::from_nanos(i / 3 + (x >> 60));
            match (x >> 40) % 4 {
                0 => q.push(at, i),
                lane => q.push_in_lane(lane as usize, at, i),
            }
            want.push((at, i));
            // Pop some along the way, as the simulator does.
            if x >> 62 == 0 {
                want.sort();
                let first = want.remove(0);
                assert_eq!(q.pop(), Some(first));
            }
        }
        want.sort();
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, want);
        assert!(q.lanes.iter().all(VecDeque::is_empty));
    }
}
