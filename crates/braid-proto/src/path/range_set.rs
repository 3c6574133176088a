//! A bounded set of inclusive `u64` ranges, used to remember which packet
//! numbers a path has received. When it would exceed its capacity the
//! lowest ranges are forgotten: old ACK ranges matter less than new ones,
//! and the stream's cumulative point covers their data anyway.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent inclusive ranges, keyed by start.
#[derive(Debug, Clone)]
pub struct RangeSet {
    ranges: BTreeMap<u64, u64>,
    capacity: usize,
}

impl RangeSet {
    /// An empty set keeping at most `capacity` ranges.
    pub fn new(capacity: usize) -> Self {
        RangeSet {
            ranges: BTreeMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Whether `v` is in the set.
    pub fn contains(&self, v: u64) -> bool {
        self.ranges
            .range(..=v)
            .next_back()
            .is_some_and(|(_, &hi)| hi >= v)
    }

    /// Adds `v`; returns false if it was already present.
    pub fn insert(&mut self, v: u64) -> bool {
        // Most packets arrive in order: the highest range grows by one.
        if let Some(mut last) = self.ranges.last_entry() {
            if last.get().checked_add(1) == Some(v) {
                *last.get_mut() = v;
                return true;
            }
        }
        if self.contains(v) {
            return false;
        }
        let mut lo = v;
        let mut hi = v;
        if let Some((&plo, &phi)) = self.ranges.range(..v).next_back() {
            if phi.checked_add(1) == Some(v) {
                lo = plo;
                self.ranges.remove(&plo);
            }
        }
        if let Some(next) = v.checked_add(1) {
            if let Some(nhi) = self.ranges.remove(&next) {
                hi = nhi;
            }
        }
        self.ranges.insert(lo, hi);
        while self.ranges.len() > self.capacity {
            self.ranges.pop_first();
        }
        true
    }

    /// The highest value, if any.
    pub fn max(&self) -> Option<u64> {
        self.ranges.last_key_value().map(|(_, &hi)| hi)
    }

    /// Ranges from highest to lowest, at most `n` of them.
    pub fn iter_desc(&self, n: usize) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().rev().take(n).map(|(&lo, &hi)| (lo, hi))
    }

    /// Forgets the ranges wholly below `floor`, except the highest.
    pub fn forget_below(&mut self, floor: u64) {
        while self.ranges.len() > 1
            && self
                .ranges
                .first_key_value()
                .is_some_and(|(_, &hi)| hi < floor)
        {
            self.ranges.pop_first();
        }
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_neighbours_and_forgets_the_oldest() {
        let mut s = RangeSet::new(2);
        assert!(s.insert(5));
        assert!(!s.insert(5));
        s.insert(7);
        s.insert(6);
        assert_eq!(s.iter_desc(10).collect::<Vec<_>>(), vec![(5, 7)]);
        s.insert(10);
        s.insert(1);
        assert_eq!(s.iter_desc(10).collect::<Vec<_>>(), vec![(10, 10), (5, 7)]);
        assert!(!s.contains(1));
        assert_eq!(s.max(), Some(10));
        s.insert(u64::MAX);
        assert!(s.contains(u64::MAX));
    }

    #[test]
    fn numbers_in_order_grow_the_highest_range() {
        let mut s = RangeSet::new(2);
        s.insert(1);
        for v in 3..=100 {
            assert!(s.insert(v));
        }
        assert!(!s.insert(100));
        assert!(!s.insert(50));
        assert_eq!(s.iter_desc(10).collect::<Vec<_>>(), vec![(3, 100), (1, 1)]);
        assert_eq!(s.max(), Some(100));
    }

    #[test]
    fn forgets_whole_ranges_below_a_floor_but_never_the_highest() {
        let mut s = RangeSet::new(10);
        for v in [1, 2, 5, 6, 9] {
            s.insert(v);
        }
        s.forget_below(6);
        assert_eq!(s.iter_desc(10).collect::<Vec<_>>(), vec![(9, 9), (5, 6)]);
        s.forget_below(100);
        assert_eq!(s.iter_desc(10).collect::<Vec<_>>(), vec![(9, 9)]);
    }
}
