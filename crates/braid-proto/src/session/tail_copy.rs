//! Second copies at the end of a transfer.
//!
//! Once everything is sent, a connection's last packets have no later ones
//! whose acknowledgements would show them lost: only its timeout would, a
//! second or more on a long path, while the other connections sit idle.
//! And the scheduler sends those last packets on a slow connection just
//! when they would arrive with the fast one's last (see `scheduler`), so
//! one lost in a full drop-tail queue held a whole transfer for its
//! timeout. A tail segment whose acknowledgement is overdue goes again,
//! once, on the connection where it would arrive soonest: MPTCP's
//! opportunistic retransmission (Raiciu et al., NSDI 2012), at the tail,
//! with a per-packet deadline in place of a stalled receive window.
//!
//! Overdue means: the copy's expected arrival, plus the least time the
//! ACK path takes back (the two clock offsets cancel: this is its expected
//! acknowledgement), plus four RTT variations and the ACK delay, as
//! RFC 9002's probe timeout adds to the smoothed RTT.

use super::{scheduler, Session, Transmit};
use crate::time::micros_i64;
use crate::trace::EventKind;
use crate::{Instant, PathId};
use std::time::Duration;

impl Session {
    /// When the ACK of a tail segment sent on `path`, due at the peer at
    /// `due_us`, is overdue: µs on [`Session::clock_us`]'s scale.
    fn tail_ack_overdue_at(&self, path: PathId, due_us: i64) -> Option<i64> {
        let p = self.paths.get(&path)?;
        let back = p.ack_path_base_us()?;
        let margin = micros_i64(p.rtt().rttvar() * 4 + self.peer.max_ack_delay());
        Some(due_us.saturating_add(back).saturating_add(margin))
    }

    /// Whether a tail segment's ACK is overdue at `now_us`.
    fn is_tail_overdue(&self, path: PathId, due_us: i64, now_us: i64) -> bool {
        self.tail_ack_overdue_at(path, due_us)
            .is_some_and(|t| now_us >= t)
    }

    /// The next instant a tail segment's ACK becomes overdue, after the
    /// last one handled; one connection has its own timers for that.
    pub(super) fn tail_copy_deadline(&self) -> Option<Instant> {
        if self.paths.len() < 2 {
            return None;
        }
        let us = self
            .streams
            .send
            .tail()
            .filter_map(|(_, path, due)| self.tail_ack_overdue_at(path, due))
            .filter(|&t| self.copies.tail_checked.is_none_or(|c| t > c))
            .min()?;
        Some(self.epoch + Duration::from_micros(u64::try_from(us).unwrap_or(0)))
    }

    /// The deadline fired: `poll_transmit` sends what is overdue, and the
    /// deadlines up to now are done with (a copy that cannot go now goes
    /// on a later ACK or pacer wake-up, not a timer firing at once again).
    pub(super) fn on_tail_copy_timeout(&mut self, now: Instant) {
        self.copies.tail_checked = Some(self.clock_us(now));
    }

    /// A second copy of the oldest overdue tail segment, on the connection
    /// where it would arrive soonest other than its own.
    pub(super) fn transmit_tail_copy(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if self.paths.len() < 2 {
            return None;
        }
        let now_us = self.clock_us(now);
        // Before the scheduler sets pacer wake-ups for nothing.
        if !self
            .streams
            .send
            .tail()
            .any(|(_, path, due)| self.is_tail_overdue(path, due, now_us))
        {
            return None;
        }
        let segment_size = u64::from(self.cfg.segment_size);
        let id = scheduler::pick_tail_copy_path(&mut self.paths, now, segment_size, segment_size)?;
        let (offset, _, _) = self
            .streams
            .send
            .tail()
            .find(|&(_, path, due)| path != id && self.is_tail_overdue(path, due, now_us))?;
        let pending = self.streams.send.copy_of(offset)?;
        self.trace_event(now, EventKind::TailCopy { path: id, offset });
        self.send_segment(now, id, pending, buf)
    }
}
