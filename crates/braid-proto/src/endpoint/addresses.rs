//! Connections told apart by the address their datagrams come from, for
//! short headers, which name neither session nor connection. An address
//! maps to one connection at most; a connection to one address, the
//! latest it was bound to. Only the caller binds, after the session
//! authenticated a datagram from there (or, for a client, to the address
//! it chose to send to): nothing unauthenticated adds an entry, and the
//! table holds at most one entry per connection of the sessions it has.

use crate::PathId;
use std::collections::HashMap;
use std::net::SocketAddr;

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct AddressTable {
    by_addr: HashMap<SocketAddr, (u64, PathId)>,
    by_path: HashMap<(u64, PathId), SocketAddr>,
}

impl AddressTable {
    /// Maps `addr` to connection `path` of session `id`, unless it maps to
    /// another connection; the connection's former address is let go.
    /// Whether `addr` now maps to it.
    pub fn bind(&mut self, addr: SocketAddr, id: u64, path: PathId) -> bool {
        match self.by_addr.get(&addr) {
            Some(&owner) if owner == (id, path) => return true,
            Some(_) => {
                self.unbind(id, path);
                return false;
            }
            None => {}
        }
        self.unbind(id, path);
        self.by_addr.insert(addr, (id, path));
        self.by_path.insert((id, path), addr);
        true
    }

    /// Forgets connection `path` of session `id`'s address.
    pub fn unbind(&mut self, id: u64, path: PathId) {
        if let Some(old) = self.by_path.remove(&(id, path)) {
            self.by_addr.remove(&old);
        }
    }

    /// Forgets every address of session `id`.
    pub fn remove_session(&mut self, id: u64) {
        let by_addr = &mut self.by_addr;
        self.by_path.retain(|&(owner, _), addr| {
            let keep = owner != id;
            if !keep {
                by_addr.remove(addr);
            }
            keep
        });
    }

    /// The connection datagrams from `addr` belong to.
    pub fn get(&self, addr: SocketAddr) -> Option<(u64, PathId)> {
        self.by_addr.get(&addr).copied()
    }

    /// Addresses bound.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    #[test]
    fn an_address_belongs_to_one_connection_and_a_connection_to_one_address() {
        let mut t = AddressTable::default();
        assert!(t.bind(addr(1), 7, PathId(0)));
        assert!(t.bind(addr(1), 7, PathId(0)), "again: still ours");
        // Another connection, of this session or another, cannot take it.
        assert!(!t.bind(addr(1), 7, PathId(1)));
        assert!(!t.bind(addr(1), 8, PathId(0)));
        assert_eq!(t.get(addr(1)), Some((7, PathId(0))));
        // A connection that moves lets its old address go.
        assert!(t.bind(addr(2), 7, PathId(0)));
        assert_eq!((t.get(addr(1)), t.len()), (None, 1));
        // A move to an address another connection has leaves it unbound.
        assert!(t.bind(addr(3), 8, PathId(0)));
        assert!(!t.bind(addr(3), 7, PathId(0)));
        assert_eq!(
            (t.get(addr(2)), t.get(addr(3))),
            (None, Some((8, PathId(0))))
        );
        assert!(t.bind(addr(4), 7, PathId(1)));
        t.remove_session(7);
        assert_eq!((t.get(addr(4)), t.len()), (None, 1));
        t.unbind(8, PathId(0));
        assert_eq!(t.len(), 0);
    }
}
