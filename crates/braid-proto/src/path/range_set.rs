//! A bounded set of inclusive `u64` ranges, used to remember which packet
//! numbers a path has received. When it would exceed its capacity the
//! lowest ranges are forgotten: old ACK ranges matter less than new ones,
//! and the stream's cumulative point covers their data anyway.

use std::collections::VecDeque;

/// Disjoint, non-adjacent inclusive ranges, ascending. A deque rather than
/// a tree: numbers arrive mostly in order, so the changes are at the ends,
/// and each ACK walks the ranges from the top.
#[derive(Debug, Clone)]
pub struct RangeSet {
    ranges: VecDeque<(u64, u64)>,
    capacity: usize,
}

impl RangeSet {
    /// An empty set keeping at most `capacity` ranges.
    pub fn new(capacity: usize) -> Self {
        RangeSet {
            ranges: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Index of the first range starting above `v`.
    fn above(&self, v: u64) -> usize {
        self.ranges.partition_point(|&(lo, _)| lo <= v)
    }

    /// Whether `v` is in the set.
    pub fn contains(&self, v: u64) -> bool {
        let i = self.above(v);
        i > 0 && self.ranges[i - 1].1 >= v
    }

    /// Adds `v`; returns false if it was already present.
    pub fn insert(&mut self, v: u64) -> bool {
        // Most packets arrive in order: the highest range grows by one.
        if let Some(last) = self.ranges.back_mut() {
            if last.1.checked_add(1) == Some(v) {
                last.1 = v;
                return true;
            }
        }
        if self.contains(v) {
            return false;
        }
        let i = self.above(v);
        let joins_below = i > 0 && self.ranges[i - 1].1.checked_add(1) == Some(v);
        let joins_above = i < self.ranges.len() && v.checked_add(1) == Some(self.ranges[i].0);
        match (joins_below, joins_above) {
            (true, true) => {
                self.ranges[i - 1].1 = self.ranges[i].1;
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1].1 = v,
            (false, true) => self.ranges[i].0 = v,
            (false, false) => self.ranges.insert(i, (v, v)),
        }
        while self.ranges.len() > self.capacity {
            self.ranges.pop_front();
        }
        true
    }

    /// The highest value, if any.
    pub fn max(&self) -> Option<u64> {
        self.ranges.back().map(|&(_, hi)| hi)
    }

    /// Ranges from highest to lowest, at most `n` of them.
    pub fn iter_desc(&self, n: usize) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().rev().take(n).copied()
    }

    /// Forgets the ranges wholly below `floor`, except the highest.
    pub fn forget_below(&mut self, floor: u64) {
        while self.ranges.len() > 1 && self.ranges.front().is_some_and(|&(_, hi)| hi < floor) {
            self.ranges.pop_front();
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
    fn agrees_with_a_set_of_numbers() {
        // Mostly rising numbers with holes, late ones and repeats, against
        // the plain set of what was inserted (no capacity reached).
        let mut s = RangeSet::new(1 << 20);
        let mut model = std::collections::BTreeSet::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut top = 0u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match x % 8 {
                0 => top.saturating_sub(x % 64),
                1 => top + 2,
                _ => top + 1,
            };
            top = top.max(v);
            assert_eq!(s.insert(v), model.insert(v), "{v}");
            assert!(s.contains(v) && !s.contains(top + 1));
        }
        let mut want: Vec<(u64, u64)> = Vec::new();
        for &v in &model {
            match want.last_mut() {
                Some(r) if r.1 + 1 == v => r.1 = v,
                _ => want.push((v, v)),
            }
        }
        want.reverse();
        assert_eq!(s.iter_desc(usize::MAX).collect::<Vec<_>>(), want);
        assert_eq!(s.max(), model.last().copied());
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
