//! BBR's bottleneck-bandwidth filter: a windowed max over rounds.

/// BtlBw max-filter window, rounds (draft-00 BtlBwFilterLen; Linux `bbr_bw_rtts`).
const BW_FILTER_ROUNDS: u64 = 10;

/// Max over the last [`BW_FILTER_ROUNDS`] rounds, one slot per round so its
/// size is constant. As in Linux's minmax, slots age only when a sample is
/// taken: a run of skipped (app-limited) samples keeps the estimate.
#[derive(Debug, Clone)]
pub(super) struct MaxFilter {
    slots: [(u64, f64); BW_FILTER_ROUNDS as usize],
    latest: u64,
}

impl MaxFilter {
    /// An empty filter: every slot holds 0 from round 0.
    pub(super) fn new() -> Self {
        MaxFilter {
            slots: [(0, 0.0); BW_FILTER_ROUNDS as usize],
            latest: 0,
        }
    }

    /// Takes `bw` as a sample of round `round`.
    pub(super) fn update(&mut self, round: u64, bw: f64) {
        let slot = &mut self.slots[(round % BW_FILTER_ROUNDS) as usize];
        if slot.0 == round {
            slot.1 = slot.1.max(bw);
        } else {
            *slot = (round, bw);
        }
        self.latest = round;
    }

    /// Lowers every sample above `bw` to it: the path no longer delivers
    /// them (see `congested_round`).
    pub(super) fn cap(&mut self, bw: f64) {
        for slot in &mut self.slots {
            slot.1 = slot.1.min(bw);
        }
    }

    /// The largest sample of the last [`BW_FILTER_ROUNDS`] rounds sampled.
    pub(super) fn get(&self) -> f64 {
        self.slots
            .iter()
            .filter(|(round, _)| round + BW_FILTER_ROUNDS > self.latest)
            .fold(0.0, |max, &(_, bw)| f64::max(max, bw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_ages_out_after_the_window_of_sampled_rounds() {
        let mut filter = MaxFilter::new();
        assert_eq!(filter.get(), 0.0);
        filter.update(1, 100.0);
        filter.update(1, 50.0);
        assert_eq!(filter.get(), 100.0);
        filter.update(5, 80.0);
        assert_eq!(filter.get(), 100.0);
        filter.update(BW_FILTER_ROUNDS, 60.0);
        assert_eq!(filter.get(), 100.0);
        filter.update(BW_FILTER_ROUNDS + 1, 60.0);
        assert_eq!(filter.get(), 80.0);
    }

    #[test]
    fn rounds_without_samples_keep_the_estimate() {
        let mut filter = MaxFilter::new();
        filter.update(3, 100.0);
        // No sample for many rounds: the filter ages only when sampled.
        assert_eq!(filter.get(), 100.0);
        filter.update(3 + BW_FILTER_ROUNDS, 10.0);
        assert_eq!(filter.get(), 10.0);
    }
}
