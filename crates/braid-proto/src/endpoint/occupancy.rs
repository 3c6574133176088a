//! Who holds a listener's established sessions: counted per client key
//! and per address prefix, so that one host (or one key) that opens
//! sessions and keeps them cannot take every place.

use super::Prefix;
use crate::counts::Counts;
use crate::PublicKey;
use std::collections::HashMap;

/// The most sessions one party may hold.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shares {
    pub per_prefix: usize,
    pub per_key: usize,
}

#[derive(Debug, Clone, Copy)]
struct Holder {
    prefix: Prefix,
    key: Option<PublicKey>,
}

/// The admitted sessions' holders, by session id.
#[derive(Debug, Default)]
pub(super) struct Occupancy {
    holders: HashMap<u64, Holder>,
    prefixes: Counts<Prefix>,
    keys: Counts<PublicKey>,
}

impl Occupancy {
    /// Whether `prefix` may hold one more session.
    pub fn prefix_has_room(&self, prefix: Prefix, shares: Shares) -> bool {
        self.prefixes.get(prefix) < shares.per_prefix
    }

    /// Whether `key` may hold one more session.
    pub fn key_has_room(&self, key: PublicKey, shares: Shares) -> bool {
        self.keys.get(key) < shares.per_key
    }

    pub fn insert(&mut self, id: u64, prefix: Prefix, key: Option<PublicKey>) {
        self.remove(id);
        self.holders.insert(id, Holder { prefix, key });
        self.prefixes.add(prefix);
        if let Some(k) = key {
            self.keys.add(k);
        }
    }

    pub fn remove(&mut self, id: u64) {
        let Some(h) = self.holders.remove(&id) else {
            return;
        };
        self.prefixes.remove(h.prefix);
        if let Some(k) = h.key {
            self.keys.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_prefix_and_key_holds_its_share_and_frees_it() {
        let shares = Shares {
            per_prefix: 2,
            per_key: 1,
        };
        let p = Prefix::of("192.0.2.1".parse().unwrap());
        let other = Prefix::of("198.51.100.1".parse().unwrap());
        let (k1, k2) = (PublicKey([1; 32]), PublicKey([2; 32]));
        let mut o = Occupancy::default();
        o.insert(1, p, Some(k1));
        assert!(!o.key_has_room(k1, shares));
        assert!(o.key_has_room(k2, shares));
        o.insert(2, p, None);
        assert!(!o.prefix_has_room(p, shares));
        assert!(o.prefix_has_room(other, shares));
        o.remove(1);
        o.remove(1);
        assert!(o.prefix_has_room(p, shares) && o.key_has_room(k1, shares));
    }
}
