//! What a path has heard from the peer, and when: whether anything
//! authentic ever arrived here, and when the peer's latest new packet did.

use crate::Instant;

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Heard {
    /// Whether anything authentic from the peer arrived on this path.
    any: bool,
    /// When the peer's latest new packet arrived here.
    last_received: Option<Instant>,
}

impl Heard {
    /// Something authentic from the peer arrived.
    pub fn on_authentic(&mut self) {
        self.any = true;
    }

    /// Whether anything authentic from the peer ever arrived.
    pub fn any(&self) -> bool {
        self.any
    }

    /// A new packet of the peer's arrived at `now`.
    pub fn on_new_packet(&mut self, now: Instant) {
        self.last_received = Some(now);
    }

    /// When the peer's latest new packet arrived.
    pub fn last_received(&self) -> Option<Instant> {
        self.last_received
    }
}
