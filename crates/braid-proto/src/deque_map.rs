//! An ordered map from `u64` keys that mostly grow and mostly leave
//! oldest first: a path's packets in flight by packet number, the send
//! stream's segments by offset.
//!
//! Both are read in order and change mostly at the ends, which a deque
//! sorted by key does without a tree's pointer chasing and node
//! allocations (the trees cost the simulator about 7 % of its
//! instructions). An entry removed ahead of older ones stays behind as an
//! empty slot until they have left too, so the deque spans at most the
//! entries added while the oldest one was held.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

#[derive(Debug, Clone)]
pub(crate) struct DequeMap<T> {
    /// By ascending key; the first and last hold a value.
    slots: VecDeque<(u64, Option<T>)>,
    /// Slots that hold a value.
    len: usize,
}

impl<T> Default for DequeMap<T> {
    fn default() -> Self {
        DequeMap {
            slots: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> DequeMap<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `value` under `key`, replacing any held there.
    pub fn insert(&mut self, key: u64, value: T) {
        // Keys mostly grow: the entry goes last.
        if self.slots.back().is_none_or(|&(last, _)| last < key) {
            self.slots.push_back((key, Some(value)));
            self.len += 1;
            return;
        }
        match self.position(key) {
            Ok(i) => {
                if self.slots[i].1.replace(value).is_none() {
                    self.len += 1;
                }
            }
            Err(i) => {
                self.slots.insert(i, (key, Some(value)));
                self.len += 1;
            }
        }
    }

    pub fn get(&self, key: u64) -> Option<&T> {
        let i = self.position(key).ok()?;
        self.slots[i].1.as_ref()
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        let i = self.position(key).ok()?;
        self.slots[i].1.as_mut()
    }

    /// Takes the entry under `key` out.
    pub fn remove(&mut self, key: u64) -> Option<T> {
        let i = self.position(key).ok()?;
        let value = self.slots[i].1.take()?;
        self.len -= 1;
        while self.slots.front().is_some_and(|(_, p)| p.is_none()) {
            self.slots.pop_front();
        }
        while self.slots.back().is_some_and(|(_, p)| p.is_none()) {
            self.slots.pop_back();
        }
        Some(value)
    }

    /// The entry with the lowest key.
    pub fn first(&self) -> Option<(u64, &T)> {
        let (key, p) = self.slots.front()?;
        Some((*key, p.as_ref().expect("the first slot holds a value")))
    }

    /// The entry with the highest key.
    pub fn last(&self) -> Option<(u64, &T)> {
        let (key, p) = self.slots.back()?;
        Some((*key, p.as_ref().expect("the last slot holds a value")))
    }

    /// The entries with keys within `range`, in ascending order.
    pub fn range(
        &self,
        range: impl RangeBounds<u64>,
    ) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        let start = match range.start_bound() {
            Bound::Included(&lo) => self.slots.partition_point(|&(n, _)| n < lo),
            Bound::Excluded(&lo) => self.slots.partition_point(|&(n, _)| n <= lo),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&hi) => self.slots.partition_point(|&(n, _)| n <= hi),
            Bound::Excluded(&hi) => self.slots.partition_point(|&(n, _)| n < hi),
            Bound::Unbounded => self.slots.len(),
        };
        self.slots
            .range(start..end.max(start))
            .filter_map(|(key, p)| Some((*key, p.as_ref()?)))
    }

    /// Every value, by ascending key.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.slots.iter().filter_map(|(_, p)| p.as_ref())
    }

    /// Every entry, by ascending key.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        self.slots
            .iter()
            .filter_map(|(k, v)| Some((*k, v.as_ref()?)))
    }

    fn position(&self, key: u64) -> Result<usize, usize> {
        // Packet numbers are mostly consecutive, and removals mostly take
        // the first: try where `key` would be if keys were consecutive.
        if let Some(&(first, _)) = self.slots.front() {
            let guess = usize::try_from(key.wrapping_sub(first)).unwrap_or(usize::MAX);
            if self.slots.get(guess).is_some_and(|&(n, _)| n == key) {
                return Ok(guess);
            }
        }
        self.slots.binary_search_by_key(&key, |&(n, _)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_as_an_ordered_map() {
        // Random inserts (mostly growing numbers), removals, lookups and
        // ranges, against a BTreeMap.
        let mut map = DequeMap::default();
        let mut tree = BTreeMap::new();
        let mut x: u64 = 7;
        let mut next = 0u64;
        for i in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = x >> 33;
            match r % 8 {
                0..=3 => {
                    // Mostly the next number, now and then one skipped or an old one.
                    let pn = match r % 32 {
                        0 => next.saturating_sub(r % 7),
                        _ => {
                            next += 1 + u64::from(r % 16 == 1);
                            next
                        }
                    };
                    map.insert(pn, i);
                    tree.insert(pn, i);
                }
                4..=6 => {
                    // Oldest first mostly, else anywhere.
                    let pn = match (r % 3, tree.keys().next()) {
                        (0, _) | (_, None) => next.saturating_sub(r % 50),
                        (_, Some(&first)) => first,
                    };
                    assert_eq!(map.remove(pn), tree.remove(&pn));
                }
                _ => {
                    let pn = next.saturating_sub(r % 40);
                    if let (Some(a), Some(b)) = (map.get_mut(pn), tree.get_mut(&pn)) {
                        *a += 1;
                        *b += 1;
                    }
                }
            }
            assert_eq!(map.len(), tree.len());
            assert_eq!(map.is_empty(), tree.is_empty());
            assert_eq!(map.first(), tree.first_key_value().map(|(&k, v)| (k, v)));
            assert_eq!(map.last(), tree.last_key_value().map(|(&k, v)| (k, v)));
            let (lo, hi) = (next.saturating_sub(r % 60), next.saturating_sub(r % 20));
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            assert!(map
                .range(lo..=hi)
                .eq(tree.range(lo..=hi).map(|(&k, v)| (k, v))));
            assert!(map.range(..hi).eq(tree.range(..hi).map(|(&k, v)| (k, v))));
            assert!(map.values().rev().eq(tree.values().rev()));
            assert!(map.iter().eq(tree.iter().map(|(&k, v)| (k, v))));
            assert_eq!(map.get(lo), tree.get(&lo));
        }
        // Emptied from the newest down, the deque holds no empty slot.
        while let Some((pn, _)) = map.last() {
            map.remove(pn);
            let holds = |slot: Option<&(u64, Option<u64>)>| slot.is_none_or(|(_, p)| p.is_some());
            assert!(holds(map.slots.front()) && holds(map.slots.back()));
        }
        assert!(map.slots.is_empty() && map.is_empty());
    }
}
