//! A path's probe timers: the tail-loss probe (RFC 8985 §7), the
//! retransmission timeout with its backoff, and, while the path probes,
//! the probe timer. They count from the same few instants (the newest
//! ack-eliciting send, the last progress, the probe that fired), so they
//! live together, as RFC 9002's probe timeout keeps its backoff beside
//! its anchor.
//!
//! The path decides whether a timer is armed at all (what it has in
//! flight, its state, its RTT estimate); this part says when it fires.

use crate::Instant;
use std::time::Duration;

/// Floor of the tail-loss probe timeout (RFC 8985 §7.2 uses 10 ms).
const MIN_PTO: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy)]
pub(super) struct ProbeTimers {
    /// Consecutive RTO expiries without an acknowledgement.
    backoffs: u32,
    /// Time the retransmission timer counts from.
    rto_anchor: Instant,
    /// Send time of the newest ack-eliciting packet.
    last_eliciting: Instant,
    /// When the tail-loss probe of the current flight fired, if it has.
    tlp_fired: Option<Instant>,
    /// One packet may exceed the window and the pacer: the tail-loss probe.
    tlp_credit: bool,
}

impl ProbeTimers {
    pub fn new(now: Instant) -> Self {
        ProbeTimers {
            backoffs: 0,
            rto_anchor: now,
            last_eliciting: now,
            tlp_fired: None,
            tlp_credit: false,
        }
    }

    /// Consecutive retransmission timeouts without an acknowledgement.
    pub fn backoffs(&self) -> u32 {
        self.backoffs
    }

    /// Whether the tail-loss probe of the current flight has fired.
    pub fn tlp_fired(&self) -> bool {
        self.tlp_fired.is_some()
    }

    /// Whether the next packet is the tail-loss probe, which may exceed
    /// the window and the pacer.
    pub fn has_tlp_credit(&self) -> bool {
        self.tlp_credit
    }

    /// When the tail-loss probe fires, if it has not yet in this flight:
    /// two smoothed RTTs after the newest send, plus the peer's ACK delay
    /// (RFC 8985 §7.2).
    pub fn tlp_deadline(&self, srtt: Duration, max_ack_delay: Duration) -> Option<Instant> {
        if self.tlp_fired.is_some() {
            return None;
        }
        let pto = (srtt * 2).max(MIN_PTO) + max_ack_delay;
        Some(self.last_eliciting + pto)
    }

    /// The probe timer of a probing path, `wait` long: from the last
    /// probe, not the last packet, so that the ACKs a probing path sends
    /// for the peer's data do not put its probes off.
    pub fn probe_deadline(&self, wait: Duration) -> Instant {
        self.last_eliciting + wait
    }

    /// The retransmission timer, `rto` long; re-armed when the tail-loss
    /// probe goes out (RFC 8985 §7.3).
    pub fn rto_deadline(&self, rto: Duration) -> Instant {
        let anchor = self
            .tlp_fired
            .map_or(self.rto_anchor, |t| t.max(self.rto_anchor));
        anchor + rto
    }

    /// An ack-eliciting packet charging `charge` bytes left at `now`;
    /// `idle` if nothing was in flight before it.
    pub fn on_sent(&mut self, now: Instant, idle: bool, charge: u64) {
        if idle {
            self.rto_anchor = now;
        }
        self.last_eliciting = now;
        if self.tlp_credit && charge > 0 {
            self.tlp_credit = false;
        }
    }

    /// The tail-loss probe fired: the next packet may exceed the window.
    pub fn on_tlp(&mut self, now: Instant) {
        self.tlp_fired = Some(now);
        self.tlp_credit = true;
    }

    /// The retransmission timer fired; `backs_off` unless it declared
    /// nothing lost but an MTU probe (too big; the path is fine).
    pub fn on_rto(&mut self, now: Instant, backs_off: bool) {
        self.end_flight();
        if backs_off {
            self.backoffs += 1;
        }
        self.rto_anchor = now;
    }

    /// An ACK acknowledged packets of the flight: a later flight has its
    /// own tail-loss probe.
    pub fn end_flight(&mut self) {
        self.tlp_fired = None;
        self.tlp_credit = false;
    }

    /// Something new was acknowledged: the retransmission timer starts
    /// over without backoff.
    pub fn on_progress(&mut self, now: Instant) {
        self.rto_anchor = now;
        self.backoffs = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn the_tail_loss_probe_fires_once_per_flight_and_rearms_the_rto() {
        let mut t = ProbeTimers::new(at(0));
        t.on_sent(at(100), true, 1200);
        // Two smoothed RTTs (floored) and the ACK delay after the send.
        assert_eq!(t.tlp_deadline(MS, 25 * MS), Some(at(135)));
        assert_eq!(t.tlp_deadline(100 * MS, 25 * MS), Some(at(325)));
        assert_eq!(t.rto_deadline(1000 * MS), at(1100));
        t.on_tlp(at(325));
        assert!(t.tlp_fired() && t.has_tlp_credit());
        assert_eq!(t.tlp_deadline(100 * MS, 25 * MS), None);
        assert_eq!(t.rto_deadline(1000 * MS), at(1325));
        // Only a packet with a charge spends the credit.
        t.on_sent(at(325), false, 0);
        assert!(t.has_tlp_credit());
        t.on_sent(at(325), false, 1200);
        assert!(!t.has_tlp_credit());
        t.end_flight();
        assert!(!t.tlp_fired());
    }

    #[test]
    fn timeouts_back_off_until_progress() {
        let mut t = ProbeTimers::new(at(0));
        t.on_rto(at(1000), false);
        assert_eq!(t.backoffs(), 0, "a lone MTU probe's loss backs nothing off");
        t.on_rto(at(2000), true);
        t.on_rto(at(4000), true);
        assert_eq!(t.backoffs(), 2);
        assert_eq!(t.rto_deadline(1000 * MS), at(5000));
        t.on_sent(at(4500), false, 1200);
        assert_eq!(t.probe_deadline(500 * MS), at(5000));
        t.on_progress(at(4600));
        assert_eq!(t.backoffs(), 0);
        assert_eq!(t.rto_deadline(1000 * MS), at(5600));
    }
}
