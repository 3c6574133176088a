//! ACK aggregation: how much more data ACKs acknowledge at once than the
//! bottleneck rate explains, so BBR's cwnd covers the bursts.
//!
//! Links that deliver in bursts (Wi-Fi and LTE aggregation, trace-driven
//! links, a receiver that handles a batch of datagrams before it answers)
//! stop the ACK clock for a while and then release many ACKs at once. With
//! cwnd at 2 × BDP the sender runs out of window during the gap and its
//! rate samples, hence BtlBw, fall. Linux BBR (`tcp_bbr.c`,
//! `bbr_update_ack_aggregation` and `bbr_ack_aggregation_cwnd`, 2019;
//! BBRv2 draft-cardwell-iccrg-bbr-congestion-control-02 §4.6.4.3
//! "BBRUpdateACKAggregation") estimates the excess as the data acknowledged
//! since the start of an "epoch" beyond BtlBw × the epoch's length, keeps
//! its maximum over the last 5–10 round trips, and adds it to cwnd once the
//! pipe is full.

use crate::Instant;
use std::time::Duration;

/// Rounds each of the two windows of the max filter spans
/// (Linux `bbr_extra_acked_win_rtts`).
const WINDOW_ROUNDS: u32 = 5;
/// Gain on the estimate added to cwnd (Linux `bbr_extra_acked_gain`: 1.0).
const GAIN: f64 = 1.0;
/// At most this much time at BtlBw is added (braid's; Linux
/// `bbr_extra_acked_max_us` is 100 ms, BBRv2's draft bounds the estimate by
/// cwnd alone). A cellular uplink that stalls for a second or two (the
/// AT&T LTE trace's: 1.0, 2.2 and 0.9 s within its first 9 s) releases
/// ACKs for far more than 100 ms at BtlBw: a window that covers only that
/// idles the link for the rest of each stall. The time bound stays: each epoch's
/// estimate is capped by a cwnd that already includes the last one, so a
/// peer that holds back its ACKs and releases them together could
/// otherwise grow cwnd epoch by epoch.
const MAX_EXTRA_TIME: Duration = Duration::from_millis(500);
/// An epoch that has acknowledged this many packets starts over, so an old
/// epoch cannot grow the estimate forever (Linux
/// `bbr_ack_epoch_acked_reset_thresh`).
const EPOCH_RESET_PACKETS: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub(crate) struct AckAggregation {
    epoch_start: Option<Instant>,
    epoch_acked: u64,
    /// Max excess in the current and the previous window of rounds.
    extra: [u64; 2],
    current: usize,
    rounds_in_window: u32,
}

impl AckAggregation {
    pub fn new() -> Self {
        AckAggregation {
            epoch_start: None,
            epoch_acked: 0,
            extra: [0; 2],
            current: 0,
            rounds_in_window: 0,
        }
    }

    /// An ACK at `now` acknowledged `acked` bytes; `bw` is BtlBw (bytes/s),
    /// `cwnd` caps the estimate.
    pub fn on_ack(
        &mut self,
        now: Instant,
        round_start: bool,
        bw: f64,
        acked: u64,
        cwnd: u64,
        segment_size: u64,
    ) {
        if acked == 0 {
            return;
        }
        if round_start {
            self.rounds_in_window += 1;
            if self.rounds_in_window >= WINDOW_ROUNDS {
                self.rounds_in_window = 0;
                self.current ^= 1;
                self.extra[self.current] = 0;
            }
        }
        let mut expected = match self.epoch_start {
            Some(start) => (bw * now.saturating_duration_since(start).as_secs_f64()) as u64,
            None => 0,
        };
        // The ACKs came no faster than the bottleneck's rate (or the epoch
        // is old): a new epoch starts here.
        if self.epoch_start.is_none()
            || self.epoch_acked <= expected
            || self.epoch_acked + acked >= EPOCH_RESET_PACKETS * segment_size
        {
            self.epoch_start = Some(now);
            self.epoch_acked = 0;
            expected = 0;
        }
        self.epoch_acked += acked;
        let extra = self.epoch_acked.saturating_sub(expected).min(cwnd);
        let slot = &mut self.extra[self.current];
        *slot = (*slot).max(extra);
    }

    /// Bytes to add to cwnd (none until the pipe is full).
    pub fn cwnd_bonus(&self, bw: f64, full_bw_reached: bool) -> u64 {
        if !full_bw_reached {
            return 0;
        }
        let extra = GAIN * self.extra[0].max(self.extra[1]) as f64;
        let cap = bw * MAX_EXTRA_TIME.as_secs_f64();
        extra.min(cap) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGMENT_SIZE: u64 = 1000;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn evenly_clocked_acks_add_about_one_ack() {
        // 1 MB/s, an ACK of 1000 bytes every millisecond: as expected.
        let mut a = AckAggregation::new();
        for ms in 0..200 {
            a.on_ack(
                at(ms),
                ms % 10 == 0,
                1e6,
                SEGMENT_SIZE,
                100 * SEGMENT_SIZE,
                SEGMENT_SIZE,
            );
        }
        assert!(
            a.cwnd_bonus(1e6, true) <= 2 * SEGMENT_SIZE,
            "{}",
            a.cwnd_bonus(1e6, true)
        );
        assert_eq!(a.cwnd_bonus(1e6, false), 0);
    }

    #[test]
    fn a_burst_after_a_silence_is_measured_and_capped() {
        // 1 MB/s; ACKs stop for 20 ms, then 20 packets' worth at once.
        let mut a = AckAggregation::new();
        for ms in 0..50 {
            a.on_ack(
                at(ms),
                false,
                1e6,
                SEGMENT_SIZE,
                100 * SEGMENT_SIZE,
                SEGMENT_SIZE,
            );
        }
        for _ in 0..20 {
            a.on_ack(
                at(70),
                false,
                1e6,
                SEGMENT_SIZE,
                100 * SEGMENT_SIZE,
                SEGMENT_SIZE,
            );
        }
        let bonus = a.cwnd_bonus(1e6, true);
        assert!(
            (19 * SEGMENT_SIZE..=21 * SEGMENT_SIZE).contains(&bonus),
            "{bonus}"
        );
        // Never more than 500 ms at BtlBw, nor more than cwnd.
        assert_eq!(a.cwnd_bonus(2e4, true), 10_000);
        let mut b = AckAggregation::new();
        b.on_ack(
            at(0),
            false,
            1e6,
            SEGMENT_SIZE,
            5 * SEGMENT_SIZE,
            SEGMENT_SIZE,
        );
        b.on_ack(
            at(100),
            false,
            1e6,
            50 * SEGMENT_SIZE,
            5 * SEGMENT_SIZE,
            SEGMENT_SIZE,
        );
        assert!(b.cwnd_bonus(1e6, true) <= 5 * SEGMENT_SIZE);
    }

    #[test]
    fn the_estimate_expires_after_two_windows_of_rounds() {
        let mut a = AckAggregation::new();
        a.on_ack(
            at(0),
            false,
            1e6,
            SEGMENT_SIZE,
            100 * SEGMENT_SIZE,
            SEGMENT_SIZE,
        );
        for _ in 0..30 {
            a.on_ack(
                at(40),
                false,
                1e6,
                SEGMENT_SIZE,
                100 * SEGMENT_SIZE,
                SEGMENT_SIZE,
            );
        }
        assert!(a.cwnd_bonus(1e6, true) > 20 * SEGMENT_SIZE);
        // Even ACKs from then on, a round every 10 ms, a little below BtlBw
        // (a max filter): the epoch starts over once the ACKs fall behind
        // (~300 ms), and ten rounds later the burst is forgotten.
        for ms in 41..600 {
            a.on_ack(
                at(ms),
                ms % 10 == 0,
                1e6,
                900,
                100 * SEGMENT_SIZE,
                SEGMENT_SIZE,
            );
        }
        assert!(a.cwnd_bonus(1e6, true) <= 2 * SEGMENT_SIZE);
    }
}
