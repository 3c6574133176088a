//! How many of something each party holds: a prefix's half-open
//! sessions, a key's sessions, a host's registrations at a relay. An entry
//! whose count falls to zero is forgotten, so the map holds only parties
//! that hold something now.

use std::collections::HashMap;
use std::hash::Hash;

/// A count per key.
#[derive(Debug, Clone)]
pub(crate) struct Counts<K>(HashMap<K, usize>);

impl<K> Default for Counts<K> {
    fn default() -> Self {
        Counts(HashMap::new())
    }
}

impl<K: Hash + Eq + Copy> Counts<K> {
    /// What `k` holds.
    pub fn get(&self, k: K) -> usize {
        self.0.get(&k).copied().unwrap_or(0)
    }

    pub fn add(&mut self, k: K) {
        *self.0.entry(k).or_default() += 1;
    }

    /// One fewer for `k` (none if it holds none).
    pub fn remove(&mut self, k: K) {
        if let Some(n) = self.0.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(&k);
            }
        }
    }

    /// Every party holding something, with its count.
    pub fn iter(&self) -> impl Iterator<Item = (K, usize)> + '_ {
        self.0.iter().map(|(&k, &n)| (k, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fall_to_nothing_and_never_below() {
        let mut c = Counts::default();
        c.add(1);
        c.add(1);
        c.remove(1);
        assert_eq!(c.get(1), 1);
        c.remove(1);
        c.remove(1);
        assert_eq!((c.get(1), c.iter().count()), (0, 0));
    }
}
