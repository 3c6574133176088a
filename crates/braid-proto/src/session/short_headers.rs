//! What the caller tells the session about telling its packets apart by
//! address, which decides whether the peer may send short headers (see
//! `path::short_headers` and `wire::header`).

use super::Session;
use crate::PathId;

impl Session {
    /// Says whether datagrams from connection `path`'s address reach this
    /// session without their session id: the caller maps that address to
    /// this session and path, and to nothing else. From the next ACK on,
    /// the peer may send short headers there (or, `false`, no longer).
    /// A runtime says so once the connection's address is known and
    /// unique on its socket, and again whenever it moves.
    pub fn accept_short_headers(&mut self, path: PathId, accept: bool) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.offer_short_headers(accept);
        }
    }

    /// Offers short headers on every connection, present and future: for
    /// a caller whose every connection has a link of its own, such as the
    /// simulator.
    pub fn accept_short_headers_everywhere(&mut self) {
        self.peer.offer_short_on_new_paths();
        for p in self.paths.values_mut() {
            p.offer_short_headers(true);
        }
    }
}
