//! What the session was told about how to treat the peer and the
//! connections it opens: the ACK delay limit the peer's handshake stated,
//! and whether new connections offer the peer short headers.

use std::time::Duration;

/// The most ACK delay a peer may declare (RFC 9000 §18.2 allows up to
/// 2^14 ms; a claim above a second would let its reports shrink our RTT
/// samples by that much).
const MAX_PEER_ACK_DELAY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct PeerTerms {
    /// The longest the peer says it delays an ACK: what an RTT sample may
    /// lose to a reported ACK delay, and what the probe timeout and the
    /// tail copies wait for beyond a round trip. Ours until the handshake
    /// tells.
    max_ack_delay: Duration,
    /// Whether connections opened from now on offer short headers (see
    /// [`Session::accept_short_headers_everywhere`](super::Session::accept_short_headers_everywhere)).
    short_on_new_paths: bool,
}

impl PeerTerms {
    /// Terms before the handshake: the peer is assumed to delay its ACKs
    /// as long as we do (`ours`).
    pub fn new(ours: Duration) -> Self {
        PeerTerms {
            max_ack_delay: ours,
            short_on_new_paths: false,
        }
    }

    /// The longest the peer delays an ACK.
    pub fn max_ack_delay(&self) -> Duration {
        self.max_ack_delay
    }

    /// The peer's handshake stated its ACK delay limit, `us` µs: a claim,
    /// so at most [`MAX_PEER_ACK_DELAY`].
    pub fn on_max_ack_delay(&mut self, us: u64) {
        self.max_ack_delay = Duration::from_micros(us).min(MAX_PEER_ACK_DELAY);
    }

    /// Whether a connection opened now offers short headers.
    pub fn short_on_new_paths(&self) -> bool {
        self.short_on_new_paths
    }

    /// Every connection opened from now on offers short headers.
    pub fn offer_short_on_new_paths(&mut self) {
        self.short_on_new_paths = true;
    }
}
