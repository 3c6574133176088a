//! What a path measures without acknowledged packets: the round trip of
//! the handshake or of a path challenge, and how much later than on the
//! first connection the client's opening arrived here. A receiver sends
//! nothing acknowledged, so these are its only measures of a connection.

use crate::rtt::Exchange;
use crate::Instant;
use std::time::Duration;

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ExchangeRtt {
    /// Round trip of the handshake or of a path challenge whose repeats
    /// went close enough together to tell; the least if several did.
    least: Option<Duration>,
    /// A server's: see [`Path::opening_lag`](super::Path::opening_lag).
    opening_lag: Option<Duration>,
    /// A server's: when its first and latest answers went on this path.
    answers_sent: Option<Exchange>,
}

impl ExchangeRtt {
    /// The least round trip an exchange measured.
    pub fn least(&self) -> Option<Duration> {
        self.least
    }

    /// An exchange took `rtt`.
    pub fn on_rtt(&mut self, rtt: Duration) {
        self.least = Some(self.least.map_or(rtt, |r| r.min(rtt)));
    }

    pub fn opening_lag(&self) -> Option<Duration> {
        self.opening_lag
    }

    /// Only the first arrival counts.
    pub fn on_opening(&mut self, lag: Duration) {
        self.opening_lag.get_or_insert(lag);
    }

    pub fn forget_opening_lag(&mut self) {
        self.opening_lag = None;
    }

    /// The connection moved: nothing measured so far holds.
    pub fn forget(&mut self) {
        self.least = None;
        self.opening_lag = None;
    }

    /// A server's answer to the handshake went out at `now`.
    pub fn on_answer_sent(&mut self, now: Instant) {
        self.answers_sent = Some(Exchange::sent(self.answers_sent, now));
    }

    /// The handshake's round trip, if the client's confirmation arrived
    /// at `at` and our answers went close enough together to tell.
    pub fn answer_rtt(&self, at: Instant) -> Option<Duration> {
        self.answers_sent.and_then(|e| e.rtt(at))
    }
}
