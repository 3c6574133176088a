//! "Port unreachable" from the peer's host (ICMP, which anyone can forge).
//! Believed only as RFC 8085 §5.2 asks: for a connection that never heard
//! from the peer, and only if the quoted datagram names this session, the
//! connection and a packet number we sent on it, none of which an
//! off-path forger knows. Even then a first report is only noted: one
//! that sniffed our datagram can forge it while the peer is up. Only a
//! report that recurs about a datagram sent after the first (the HELLO's
//! retransmission) closes the connection, without a word to the peer;
//! with none left during the handshake the session fails then instead of
//! waiting out the handshake timeout.

use super::Session;
use crate::error::SessionError;
use crate::stats::PathState;
use crate::wire::Header;

impl Session {
    /// The peer's host reported that nothing listens where `quoted` (the
    /// start of a datagram of ours, as the error quotes it) was sent.
    /// Returns whether the report was believed: it closed the connection.
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
        let pn_bytes = Header::packet_number_bytes(quoted);
        let recurs = self
            .paths
            .get_mut(&path)
            .is_some_and(|p| p.on_unreachable(header.packet_number, pn_bytes));
        if !recurs {
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
