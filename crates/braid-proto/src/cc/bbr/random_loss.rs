//! The share of packets lost without a queue: random (non-congestion) loss.
//!
//! Loss at a link's entry (a radio link, netem before a rate limiter) takes
//! a share p of what is sent before the bottleneck, so a sender pacing at
//! the bottleneck's rate leaves it idle a share p of the time. Pacing at
//! rate / (1 − p) fills it; the window still bounds the queue. Only rounds
//! that end with no queue count (their smallest RTT is at the minimum):
//! loss there cannot be the bottleneck's queue overflowing. A round that
//! shows a queue counts as a round without random loss, so an estimate that
//! paces too fast and builds a queue decays. The RTT is taken less the ACK
//! path's queueing ([`RateSample::ack_queue_delay`]): in full duplex the
//! peer's data delays our ACKs without any queue of ours.

use super::RateSample;
use std::time::Duration;

/// EWMA gain per counted round.
const GAIN: f64 = 1.0 / 8.0;
/// Largest share compensated: beyond it the link is mostly loss, and pacing
/// faster mostly adds retransmissions.
const MAX_LOSS: f64 = 0.25;
/// A round's smallest RTT above min RTT × this, plus [`QUEUE_SLACK`],
/// shows a standing queue.
const QUEUE_RATIO: f64 = 1.05;
const QUEUE_SLACK: Duration = Duration::from_micros(250);

#[derive(Debug, Clone, Default)]
pub(super) struct RandomLoss {
    estimate: f64,
    lost: u64,
    delivered: u64,
    /// The whole round so far was eligible (no probing that could overflow).
    eligible: bool,
    round_min_rtt: Option<Duration>,
}

impl RandomLoss {
    /// One rate sample. `eligible`: the sender is not probing for bandwidth
    /// nor detecting the losses of a probe.
    pub fn on_sample(
        &mut self,
        round_start: bool,
        eligible: bool,
        min_rtt: Option<Duration>,
        s: &RateSample,
    ) {
        if round_start {
            self.end_round(min_rtt);
            self.eligible = eligible;
        }
        self.eligible &= eligible;
        self.lost += s.newly_lost;
        self.delivered += s.newly_acked;
        if !s.rtt.is_zero() {
            // Queueing on the ACK path (full duplex) is not our queue.
            let rtt = s.rtt.saturating_sub(s.ack_queue_delay);
            self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |r| r.min(rtt)));
        }
    }

    fn end_round(&mut self, min_rtt: Option<Duration>) {
        let total = self.lost + self.delivered;
        if self.eligible && total > 0 {
            let queued = match (self.round_min_rtt, min_rtt) {
                (Some(r), Some(m)) => r > m.mul_f64(QUEUE_RATIO) + QUEUE_SLACK,
                _ => true,
            };
            let sample = if queued {
                0.0
            } else {
                self.lost as f64 / total as f64
            };
            self.estimate += GAIN * (sample - self.estimate);
        }
        self.lost = 0;
        self.delivered = 0;
        self.round_min_rtt = None;
    }

    /// Random loss share, 0..=[`MAX_LOSS`].
    pub fn get(&self) -> f64 {
        self.estimate.min(MAX_LOSS)
    }
}
