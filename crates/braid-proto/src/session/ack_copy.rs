//! Copies of a slow connection's ACKs on the fastest one.
//!
//! A connection's ACKs travel on the connection itself, so a sender learns
//! how a slow connection's first flight fared a whole slow round trip after
//! it left: on NKP-0024's 1 s paths beside a 100 ms one, a second of the
//! slow paths' capacity went unused before their first ACK. When another
//! connection's round trip is at most a quarter of this one's, each ACK
//! the slow connection sends is also copied, as a PATH_ACK frame naming it,
//! into an ACK-only datagram on the fastest connection, as multipath QUIC
//! lets an ACK travel on any path (draft-ietf-quic-multipath's PATH_ACK).
//! Before its packets or a challenge date a connection, a server judges it
//! by how much later than on the first connection the client's opening (or
//! first sealed packet, which the client also sends on every connection at
//! once) arrived there: that first flight is where copies gain the most.
//! A copy waits a little for the fast connection's own next ACK to share
//! its datagram (at most a quarter of its RTT and the ACK delay limit).
//!
//! Round trips come from acknowledged packets or, at a receiver that sends
//! nothing acknowledged, from the handshake and path challenges
//! ([`Path::least_rtt`](crate::path::Path::least_rtt),
//! [`Path::opening_lag`](crate::path::Path::opening_lag)).
//!
//! The sender acts on whichever copy arrives first; a later one acknowledges
//! nothing new and changes nothing. The originals still go on their own
//! connections, so a fast connection that fails costs the head start only.

use super::Session;
use crate::stats::PathState;
use crate::wire::Frame;
use crate::{Instant, PathId};

/// Bytes of frames an ACK-only datagram may hold with its copies: well
/// inside a 1280-byte IPv6 minimum MTU with headers and tag.
const COPY_BUDGET: usize = 1200;

/// ACK ranges a copy carries, so that one copy with its receive times
/// always fits [`COPY_BUDGET`] on its own; the original has them all.
const COPY_RANGES: usize = 16;

/// A connection whose round trip is at most this fraction of another's
/// carries the other's ACK copies. The gain is in the return delays, which
/// a receiver cannot tell from the forward queue a round trip includes:
/// where the two are close, copies and originals would take turns
/// arriving first, and the connection's delivery-rate samples would mix
/// the two routes' spacing (NKP-0024 row 8's equal-delay paths, where a
/// 128 pps path's queue made its round trip 1.8 times the other's, held
/// 12 % of the window instead of 11 % at a two-thirds threshold).
const FASTER: (u32, u32) = (1, 4);

/// Second copies the session owes or has weighed.
#[derive(Debug, Default)]
pub(super) struct Copies {
    /// Copies of slow connections' ACKs owed on the fastest one.
    pub acks: AckCopies,
    /// The last tail-copy deadline handled, µs on `Session::clock_us`'s
    /// scale (see `tail_copy`).
    pub tail_checked: Option<i64>,
}

/// Connections whose latest ACK awaits its copy.
#[derive(Debug, Default)]
pub(super) struct AckCopies {
    pending: Vec<PathId>,
    /// When the oldest of them was owed.
    since: Option<Instant>,
}

impl Session {
    /// Where copies of `slow`'s ACKs go: the usable, validated connection
    /// with the least RTT, if it is clearly faster than `slow`.
    pub(super) fn ack_copy_route(&self, slow: PathId) -> Option<PathId> {
        // Alone, a connection is its own fastest: no copies, at no cost
        // (this runs for every ACK sent).
        if self.paths.len() < 2 {
            return None;
        }
        let (fast, fast_rtt) = self
            .paths
            .values()
            .filter(|p| p.is_usable() && p.state() == PathState::Active && p.is_validated())
            .filter_map(|p| Some((p.id(), p.least_rtt()?)))
            .min_by_key(|&(_, rtt)| rtt)?;
        // Until anything dates `slow`, how late the client's opening came
        // there says how much longer its way is.
        let slow = self.paths.get(&slow).filter(|p| p.is_usable())?;
        let slow_rtt = slow
            .least_rtt()
            .or_else(|| Some(fast_rtt + 2 * slow.opening_lag()?));
        let clearly_faster = slow_rtt.is_some_and(|s| fast_rtt * FASTER.1 <= s * FASTER.0);
        (fast != slow.id() && clearly_faster).then_some(fast)
    }

    /// `slow` just sent its ACK: a copy is owed if a faster route exists.
    pub(super) fn on_own_ack_sent(&mut self, now: Instant, slow: PathId) {
        if self.ack_copy_route(slow).is_none() {
            return;
        }
        if !self.copies.acks.pending.contains(&slow) {
            self.copies.acks.pending.push(slow);
        }
        self.copies.acks.since.get_or_insert(now);
    }

    /// The connection owed copies go on, and when they must leave at the
    /// latest (`None` when none are owed or none can go).
    pub(super) fn ack_copy_due(&self) -> Option<(PathId, Instant)> {
        let since = self.copies.acks.since?;
        if !self.is_established() {
            return None;
        }
        let fast = self
            .copies
            .acks
            .pending
            .iter()
            .find_map(|&slow| self.ack_copy_route(slow))?;
        let fast_rtt = self.paths[&fast].least_rtt().unwrap_or_default();
        let hold = self.cfg.max_ack_delay.min(fast_rtt / 4);
        Some((fast, since + hold))
    }

    /// Appends a PATH_ACK for each owed copy whose route is `fast`, as far
    /// as the datagram's budget allows; the rest wait for the next one.
    pub(super) fn push_ack_copies(&mut self, now: Instant, fast: PathId, buf: &mut Vec<u8>) {
        let cumulative = self.streams.recv.cumulative();
        let fin = self.streams.recv.is_fin_received();
        let max_data = self.streams.recv.max_data();
        let mut left = Vec::new();
        for slow in std::mem::take(&mut self.copies.acks.pending) {
            if !self.paths.contains_key(&slow) || self.ack_copy_route(slow) != Some(fast) {
                continue;
            }
            let p = self.paths.get_mut(&slow).expect("checked");
            let mut ack = p.ack_frame(now, cumulative, fin, max_data);
            ack.ranges.truncate(COPY_RANGES);
            // The first flight's receive times date the bottleneck
            // (`cc::bbr`'s ACK train): the copy that arrives first has them.
            ack.rx_times = p.ack_rx_times();
            let start = buf.len();
            Frame::PathAck { path: slow, ack }.encode(buf);
            if self.packets.len(buf) > COPY_BUDGET {
                buf.truncate(start);
                left.push(slow);
            }
        }
        self.copies.acks.since = (!left.is_empty()).then_some(now);
        self.copies.acks.pending = left;
    }
}
