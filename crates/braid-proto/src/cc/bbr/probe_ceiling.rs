//! A ceiling on PROBE_BW's data in flight, learned from probes that lost.
//!
//! BBR v1 probes every eight rounds at 1.25 × BtlBw until 1.25 × BDP is in
//! flight. Behind a queue shallower than a quarter of the BDP each probe
//! overflows it, and the drops repeat every cycle (braid's `queue-20` row).
//! BBRv2 bounds in-flight data by `inflight_hi`, the level
//! at which a probe lost more than 2 % (draft-cardwell-iccrg-bbr-congestion-
//! control-02 §4.5.10, BBRLossThresh = 2 %, BBRBeta = 0.7), and raises it
//! again by 1, 2, 4… packets per round while probes stay clean (§4.3.3.4,
//! `BBRProbeInflightHiUpward`). This is that bound on v1's cycle:
//!
//! - A probe is judged on the losses detected from its start to the end of
//!   the next two phases (its packets are acknowledged or declared lost one
//!   round trip after they leave, and time-threshold loss takes 9/8 of one).
//! - Only loss above that of the cruise phases before the probe counts, by
//!   more than chance would give (two standard deviations of the cruise
//!   share over the probe's packets): v1's indifference to random loss is
//!   kept, also where bursty delivery hides it from [`super::random_loss`].
//! - A probe that lost sets the ceiling to [`BETA`] × the most it had in
//!   flight, never below one BDP plus the random-loss share; v2's 0.7 is
//!   for v2's own probing, which starts from a ceiling and grows slowly,
//!   and would cut v1's 1.25 × BDP probe below the BDP.
//! - Each clean probe raises the ceiling by [`FIRST_STEP`] packets, doubling
//!   per clean probe; past cwnd's own bound the ceiling is dropped.

/// Excess loss over the random-loss estimate that marks a probe as too
/// much (draft-02 BBRLossThresh).
const LOSS_THRESH: f64 = 0.02;
/// Ceiling as a share of the most the lossy probe had in flight (braid's
/// choice, see the module docs).
const BETA: f64 = 0.85;
/// Packets added by the first clean probe after a lossy one (draft-02
/// starts `bw_probe_up_cnt` at 1 packet per round).
const FIRST_STEP: u64 = 1;

/// Fewest packets acknowledged or lost while judging a probe: below it the
/// loss share says little (a path whose BDP is a few packets).
const MIN_JUDGED: u64 = 64;

#[derive(Debug, Clone, Default)]
pub(super) struct ProbeCeiling {
    ceiling: Option<u64>,
    step: u64,
    /// Judging a probe: the most in flight during it, and the losses and
    /// deliveries detected since it began.
    judging: bool,
    peak: u64,
    lost: u64,
    delivered: u64,
    /// Lost and delivered in the cruise phases since the last judgement,
    /// and their loss share when the probe began.
    cruise_lost: u64,
    cruise_delivered: u64,
    baseline: Option<f64>,
}

impl ProbeCeiling {
    /// The bound on in-flight data in PROBE_BW, bytes.
    pub fn get(&self) -> Option<u64> {
        self.ceiling
    }

    /// A probe phase begins.
    pub fn on_probe_start(&mut self) {
        let cruise = self.cruise_lost + self.cruise_delivered;
        self.baseline = (cruise > 0).then(|| self.cruise_lost as f64 / cruise as f64);
        self.cruise_lost = 0;
        self.cruise_delivered = 0;
        self.judging = true;
        self.peak = 0;
        self.lost = 0;
        self.delivered = 0;
    }

    /// One rate sample in PROBE_BW; `in_flight` before the ACK.
    pub fn on_sample(&mut self, in_flight: u64, newly_acked: u64, newly_lost: u64) {
        if !self.judging {
            self.cruise_lost += newly_lost;
            self.cruise_delivered += newly_acked;
            return;
        }
        self.peak = self.peak.max(in_flight);
        self.lost += newly_lost;
        self.delivered += newly_acked;
    }

    /// The probe's losses are in: judge it. `random_loss` stands in for
    /// the cruise's loss share before any cruise, `floor` is one BDP (plus
    /// what random loss needs), `cwnd_bound` what cwnd allows without a
    /// ceiling.
    pub fn on_probe_judged(
        &mut self,
        random_loss: f64,
        floor: u64,
        cwnd_bound: u64,
        segment_size: u64,
    ) {
        if !std::mem::take(&mut self.judging)
            || self.lost + self.delivered < MIN_JUDGED * segment_size
        {
            return;
        }
        let total = (self.lost + self.delivered) as f64;
        let share = self.lost as f64 / total;
        let base = self.baseline.unwrap_or(random_loss);
        // Bytes, not packets: with whole packets the deviation is larger by
        // sqrt(segment_size); `segment_size` converts.
        let packets = total / segment_size as f64;
        let chance = 2.0 * (base * (1.0 - base) / packets).sqrt();
        if share > base + chance + LOSS_THRESH {
            self.ceiling = Some(((BETA * self.peak as f64) as u64).max(floor));
            self.step = FIRST_STEP;
            return;
        }
        if let Some(c) = self.ceiling {
            let raised = c + self.step * segment_size;
            self.step = self.step.saturating_mul(2);
            self.ceiling = (raised < cwnd_bound).then_some(raised);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGMENT_SIZE: u64 = 1000;

    fn probe(c: &mut ProbeCeiling, peak: u64, lost: u64, delivered: u64) {
        c.on_probe_start();
        c.on_sample(
            peak * SEGMENT_SIZE,
            delivered * SEGMENT_SIZE,
            lost * SEGMENT_SIZE,
        );
        c.on_probe_judged(0.0, 100 * SEGMENT_SIZE, 1000 * SEGMENT_SIZE, SEGMENT_SIZE);
    }

    #[test]
    fn a_lossy_probe_sets_the_ceiling_below_its_peak() {
        let mut c = ProbeCeiling::default();
        probe(&mut c, 200, 10, 190);
        assert_eq!(c.get(), Some(170 * SEGMENT_SIZE));
        // Never below the floor.
        probe(&mut c, 110, 10, 100);
        assert_eq!(c.get(), Some(100 * SEGMENT_SIZE));
    }

    #[test]
    fn clean_probes_raise_it_faster_each_time_then_drop_it() {
        let mut c = ProbeCeiling::default();
        probe(&mut c, 200, 10, 190);
        let mut expected = 170;
        for step in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            probe(&mut c, 100, 0, 100);
            expected += step;
            assert_eq!(c.get(), Some(expected * SEGMENT_SIZE));
        }
        probe(&mut c, 100, 0, 100);
        assert_eq!(c.get(), None, "past cwnd's bound");
    }

    #[test]
    fn loss_at_the_cruise_rate_is_not_a_lossy_probe() {
        let mut c = ProbeCeiling::default();
        // Cruise: 5 % lost of 1000 packets.
        c.on_sample(150 * SEGMENT_SIZE, 950 * SEGMENT_SIZE, 50 * SEGMENT_SIZE);
        c.on_probe_start();
        // 8 % of 500 is within 2 % + two deviations (1.9 %) of 5 %.
        c.on_sample(200 * SEGMENT_SIZE, 460 * SEGMENT_SIZE, 40 * SEGMENT_SIZE);
        c.on_probe_judged(0.0, 100 * SEGMENT_SIZE, 1000 * SEGMENT_SIZE, SEGMENT_SIZE);
        assert_eq!(c.get(), None);
        c.on_sample(150 * SEGMENT_SIZE, 950 * SEGMENT_SIZE, 50 * SEGMENT_SIZE);
        c.on_probe_start();
        c.on_sample(200 * SEGMENT_SIZE, 450 * SEGMENT_SIZE, 50 * SEGMENT_SIZE);
        c.on_probe_judged(0.0, 100 * SEGMENT_SIZE, 1000 * SEGMENT_SIZE, SEGMENT_SIZE);
        assert_eq!(c.get(), Some(170 * SEGMENT_SIZE), "10 % is beyond chance");
    }

    #[test]
    fn before_any_cruise_the_random_loss_estimate_is_the_baseline() {
        let mut c = ProbeCeiling::default();
        c.on_probe_start();
        c.on_sample(200 * SEGMENT_SIZE, 95 * SEGMENT_SIZE, 5 * SEGMENT_SIZE);
        c.on_probe_judged(0.05, 100 * SEGMENT_SIZE, 1000 * SEGMENT_SIZE, SEGMENT_SIZE);
        assert_eq!(c.get(), None);
    }

    #[test]
    fn a_probe_of_few_packets_is_not_judged() {
        let mut c = ProbeCeiling::default();
        probe(&mut c, 60, 30, 30);
        assert_eq!(c.get(), None);
    }

    #[test]
    fn samples_outside_a_probe_are_ignored() {
        let mut c = ProbeCeiling::default();
        c.on_sample(500 * SEGMENT_SIZE, 0, 100 * SEGMENT_SIZE);
        c.on_probe_judged(0.0, 100 * SEGMENT_SIZE, 1000 * SEGMENT_SIZE, SEGMENT_SIZE);
        assert_eq!(c.get(), None);
    }
}
