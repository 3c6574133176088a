//! Rounds whose loss shows the queue overflowing, and the rate they
//! delivered: BBRv3's `bw_lo` response to congestion, on v1's filter.
//!
//! v1 forgets a rate only when it ages out of the 10-round max filter. When
//! a cellular link's capacity falls several-fold within a second, that keeps
//! pacing at the old rate and cwnd at twice the old BDP for ten rounds, each
//! longer than the last as the queue grows: the queue stays full and
//! overflows (the AT&T LTE trace behind a 200-packet queue: 13 % of the
//! packets retransmitted, RTT up to 5.9 s in the simulator). BBRv3
//! (draft-ietf-ccwg-bbr, "Updating the Model Lower Bounds":
//! BBRAdaptLowerBoundsFromCongestion, BBRLossLowerBounds; quiche's
//! `Bbr2NetworkModel::AdaptLowerBounds`) keeps a lower bound `bw_lo` that
//! each round with loss cuts to max(`bw_latest`, BBRBeta × `bw_lo`),
//! BBRBeta = 0.7, `bw_latest` the round's highest delivery rate, and paces
//! at min(`max_bw`, `bw_lo`). Here the cut applies to the max filter itself
//! (v1's cycle has no refill phase that would reset a separate bound; a
//! higher rate comes back through samples and the receive-rate floor), and
//! only after a round whose loss shows its queue overflowing:
//!
//! - its loss share is above the random-loss estimate by more than
//!   [`LOSS_THRESH`] (BBRLossThresh, 2 %), and
//! - its smallest RTT, less the ACK path's queueing, is above
//!   [`QUEUE_RATIO`] × the minimum: a queue stood through the whole round.
//!
//! With a queue standing all round the bottleneck was never idle, so the
//! round's highest delivery rate is what it delivers now: BtlBw falls to
//! it at once, without v3's floor of BBRBeta (0.7) × the old bound, which
//! would take three rounds to follow a drop to a third. Random loss
//! without a queue changes nothing, as elsewhere in this BBR.

use super::RateSample;
use std::time::Duration;

/// Loss share above the random-loss estimate that marks congestion
/// (draft-ietf-ccwg-bbr BBRLossThresh).
const LOSS_THRESH: f64 = 0.02;
/// A round's smallest RTT above the minimum × this shows a standing queue
/// (as STARTUP's loss exit judges one).
const QUEUE_RATIO: f64 = 1.25;

#[derive(Debug, Clone, Default)]
pub(super) struct CongestedRound {
    lost: u64,
    delivered: u64,
    /// Highest delivery rate of the round (`bw_latest`), bytes/s.
    max_rate: f64,
    round_min_rtt: Option<Duration>,
}

impl CongestedRound {
    /// One rate sample. At a round's start, returns the rate the round
    /// that ended delivered at most, if it was congested.
    pub fn on_sample(
        &mut self,
        round_start: bool,
        min_rtt: Option<Duration>,
        random_loss: f64,
        s: &RateSample,
    ) -> Option<f64> {
        let verdict = if round_start {
            self.end_round(min_rtt, random_loss)
        } else {
            None
        };
        self.lost += s.newly_lost;
        self.delivered += s.newly_acked;
        if s.delivery_rate.is_finite() {
            self.max_rate = self.max_rate.max(s.delivery_rate);
        }
        if !s.rtt.is_zero() {
            let rtt = s.rtt.saturating_sub(s.ack_queue_delay);
            self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |r| r.min(rtt)));
        }
        verdict
    }

    fn end_round(&mut self, min_rtt: Option<Duration>, random_loss: f64) -> Option<f64> {
        let total = self.lost + self.delivered;
        let lossy = total > 0 && self.lost as f64 > (random_loss + LOSS_THRESH) * total as f64;
        let queued = match (self.round_min_rtt, min_rtt) {
            (Some(r), Some(m)) => r.as_secs_f64() > m.as_secs_f64() * QUEUE_RATIO,
            _ => false,
        };
        let verdict = (lossy && queued && self.max_rate > 0.0).then_some(self.max_rate);
        *self = CongestedRound::default();
        verdict
    }
}
