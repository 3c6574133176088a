//! "Port unreachable" from the peer's host (ICMP, which anyone can forge).
//! Believed only as RFC 8085 §5.2 asks: for a connection that never heard
//! from the peer, about the address it sends to, and only if the quoted
//! datagram names this session, the
//! connection and a packet number we sent on it, none of which an
//! off-path forger knows. Even then a first report is only noted: one
//! that sniffed our datagram can forge it while the peer is up. It brings
//! the HELLO's retransmission forward, and only a report that recurs
//! about a datagram sent after the first closes the connection, without
//! a word to the peer; with none left during the handshake the session
//! fails then, a fraction of a second after it began, instead of waiting
//! out the handshake timeout.

use super::{Session, State};
use crate::error::SessionError;
use crate::stats::PathState;
use crate::wire::Header;
use crate::Instant;
use std::net::SocketAddr;
use std::time::Duration;

/// How soon the HELLO goes again after a first report: long enough for a
/// peer that was restarting to be back, short enough that a port nobody
/// listens on is reported at once (Linux's least RTO, 200 ms).
const RETRY_AFTER_UNREACHABLE: Duration = Duration::from_millis(200);

impl Session {
    /// The peer's host reported that nothing listens at `to`, where
    /// `quoted` (the start of a datagram of ours, as the error quotes it)
    /// was sent, at `now`. Returns whether the report was believed (noted,
    /// or closing the connection): the session's timers or state may have
    /// changed.
    pub fn handle_unreachable(&mut self, now: Instant, to: SocketAddr, quoted: &[u8]) -> bool {
        let Ok((header, _)) = Header::decode(quoted) else {
            return false;
        };
        let path = header.path;
        // A short header went only where the peer had been heard.
        let believable = !header.short
            && header.session_id == self.session_id()
            && self.remote(path) == Some(to)
            && self.paths.get(&path).is_some_and(|p| {
                !p.was_heard()
                    && p.state() != PathState::Closed
                    && p.has_sent(header.packet_number, Header::packet_number_bytes(quoted))
            });
        if !believable || matches!(self.state, State::Closed | State::Failed) {
            return false;
        }
        let pn_bytes = Header::packet_number_bytes(quoted);
        let recurs = self
            .paths
            .get_mut(&path)
            .is_some_and(|p| p.on_unreachable(header.packet_number, pn_bytes));
        if !recurs {
            if let State::Handshaking { next_hello, .. } = &mut self.state {
                *next_hello = (*next_hello).min(now + RETRY_AFTER_UNREACHABLE);
            }
            return true;
        }
        let last = self
            .paths
            .iter()
            .all(|(&id, p)| id == path || p.state() == PathState::Closed);
        if last && self.is_handshaking() {
            self.fail(SessionError::NothingListening);
        }
        self.on_path_closed(now, path);
        true
    }
}
