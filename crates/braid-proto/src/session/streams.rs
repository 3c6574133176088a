//! The two streams of a session with what it remembers about them: which
//! direction finished, whether the peer is owed a window update, and the
//! BLOCKED frames that tell the peer its window holds us back.

use crate::recv_stream::RecvStream;
use crate::send_stream::SendStream;
use crate::Instant;
use std::time::Duration;

/// See the module documentation.
#[derive(Debug)]
pub(super) struct Streams {
    /// What we send.
    pub send: SendStream,
    /// What the peer sends.
    pub recv: RecvStream,
    /// Everything written, and the FIN, was acknowledged (reported once).
    send_finished: bool,
    /// The peer's whole stream has been read (reported once).
    recv_finished: bool,
    /// The receive window moved enough that the peer should hear of it.
    window_update: bool,
    /// A BLOCKED frame is owed.
    blocked_pending: bool,
    /// When the last BLOCKED frame was owed.
    blocked_sent: Option<Instant>,
    /// The highest in-order point the peer's ACKs reported for our
    /// stream: its own is at least this.
    peer_cumulative: u64,
}

/// A direction that has just finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finished {
    Send,
    Recv,
}

impl Streams {
    /// The peer's ACK reported its in-order point of our stream.
    pub fn on_peer_cumulative(&mut self, cumulative: u64) {
        self.peer_cumulative = self.peer_cumulative.max(cumulative);
    }

    /// How far the peer's in-order point may be from an offset we send:
    /// what it reported to our flow-control limit (the truncated STREAM
    /// offsets' span, see `wire::stream_offset_len`).
    pub fn offset_span(&self) -> u64 {
        self.send.max_data().saturating_sub(self.peer_cumulative)
    }

    pub fn new(send: SendStream, recv: RecvStream) -> Self {
        Streams {
            send,
            recv,
            send_finished: false,
            recv_finished: false,
            window_update: false,
            blocked_pending: false,
            blocked_sent: None,
            peer_cumulative: 0,
        }
    }

    /// Whether everything written, and the FIN, was acknowledged.
    pub fn is_send_finished(&self) -> bool {
        self.send_finished
    }

    /// Whether the peer's whole stream has been read.
    pub fn is_recv_finished(&self) -> bool {
        self.recv_finished
    }

    /// The directions that finished since the last call, send first.
    pub fn poll_finished(&mut self) -> impl Iterator<Item = Finished> {
        let send = !self.send_finished && self.send.is_complete();
        self.send_finished |= send;
        let recv = !self.recv_finished && self.recv.is_finished();
        self.recv_finished |= recv;
        [
            send.then_some(Finished::Send),
            recv.then_some(Finished::Recv),
        ]
        .into_iter()
        .flatten()
    }

    /// Whether both directions finished.
    pub fn are_finished(&self) -> bool {
        self.send_finished && self.recv_finished
    }

    /// The peer should hear of our receive window (if `owed`).
    pub fn owe_window_update(&mut self, owed: bool) {
        self.window_update |= owed;
    }

    /// Whether an ACK-only packet is owed for the window: an update, or a
    /// BLOCKED frame.
    pub fn is_window_news_owed(&self) -> bool {
        self.window_update || self.blocked_pending
    }

    /// An ACK told the peer our window.
    pub fn on_window_advertised(&mut self) {
        self.recv.on_advertised();
        self.window_update = false;
    }

    /// Nothing could be sent at `now`: if only the peer's window holds us
    /// back, a BLOCKED frame is owed, at most one per `rtt` (the receiver
    /// grows its window at most that often anyway).
    pub fn on_nothing_to_send(&mut self, now: Instant, rtt: Duration) {
        let due = self.blocked_sent.is_none_or(|t| now >= t + rtt);
        if self.send.is_flow_blocked() && due {
            self.blocked_sent = Some(now);
            self.blocked_pending = true;
        }
    }

    /// Whether a BLOCKED frame is owed (once).
    pub fn take_blocked(&mut self) -> bool {
        std::mem::take(&mut self.blocked_pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn streams() -> Streams {
        // No window from the peer yet: whatever is written is blocked.
        Streams::new(
            SendStream::new(1000, 1 << 20, 1024, 0),
            RecvStream::new(1 << 20),
        )
    }

    #[test]
    fn blocked_is_owed_at_most_once_a_round_trip() {
        let mut s = streams();
        let rtt = Duration::from_millis(100);
        s.on_nothing_to_send(t(0), rtt);
        assert!(!s.is_window_news_owed(), "nothing written: not blocked");
        s.send.write(b"data");
        s.on_nothing_to_send(t(0), rtt);
        assert!(s.is_window_news_owed());
        assert!(s.take_blocked() && !s.take_blocked());
        s.on_nothing_to_send(t(99), rtt);
        assert!(!s.take_blocked(), "within the round trip");
        s.on_nothing_to_send(t(100), rtt);
        assert!(s.take_blocked());
    }

    #[test]
    fn a_window_update_is_owed_until_an_ack_carries_it() {
        let mut s = streams();
        s.owe_window_update(false);
        assert!(!s.is_window_news_owed());
        s.owe_window_update(true);
        assert!(s.is_window_news_owed());
        s.on_window_advertised();
        assert!(!s.is_window_news_owed());
    }

    #[test]
    fn each_direction_finishes_once() {
        let mut s = streams();
        assert_eq!(s.poll_finished().count(), 0);
        s.recv.insert(0, b"", true).unwrap();
        assert_eq!(s.poll_finished().collect::<Vec<_>>(), [Finished::Recv]);
        assert_eq!(s.poll_finished().count(), 0);
        assert!(s.is_recv_finished() && !s.is_send_finished() && !s.are_finished());
    }
}
