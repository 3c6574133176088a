//! "Port unreachable" from the peer's host (ICMP, which anyone can forge).
//! Believed only as RFC 8085 §5.2 asks: for a connection that never heard
//! from the peer, and only if the quoted datagram names this session, the
//! connection and a packet number we sent on it, none of which an
//! off-path forger knows. The connection then closes without a word to
//! the peer; with none left during the handshake the session fails at
//! once instead of waiting out the handshake timeout.

use super::Session;
use crate::error::SessionError;
use crate::stats::PathState;
use crate::wire::Header;

impl Session {
    /// The peer's host reported that nothing listens where `quoted` (the
    /// start of a datagram of ours, as the error quotes it) was sent.
    /// Returns whether the report was believed.
    pub fn handle_unreachable(&mut self, quoted: &[u8]) -> bool {
        let Ok((header, _)) = Header::decode(quoted) else {
            return false;
        };
        let path = header.path;
        // A short header went only where the peer had been heard.
        let believable = !header.short
            && header.session_id == self.session_id()
            && self.paths.get(&path).is_some_and(|p| {
                !p.was_heard()
                    && p.state() != PathState::Closed
                    && p.has_sent(header.packet_number, Header::packet_number_bytes(quoted))
            });
        if !believable || matches!(self.state, super::State::Closed | super::State::Failed) {
            return false;
        }
        let last = self
            .paths
            .iter()
            .all(|(&id, p)| id == path || p.state() == PathState::Closed);
        if last && self.is_handshaking() {
            self.fail(SessionError::NothingListening);
        }
        self.on_path_closed(self.liveness.latest(), path);
        true
    }
}
