//! Splitting the round trip into its two directions, to tell how much of an
//! RTT above the minimum is queueing on the ACK path.
//!
//! Every ACK frame carries the receiver's clock when it received the
//! largest acknowledged packet. Receiver clock minus our send time is the
//! forward one-way delay plus an unknown, constant clock offset; the RTT
//! (less the ACK delay) minus that is the reverse delay minus the same
//! offset. The offset cancels in each direction's excess over its own
//! minimum, which is what queueing adds (the idea of LEDBAT's base delay,
//! RFC 6817 §3.4.2, applied to the reverse direction; the timestamp is that
//! of draft-smith-quic-receive-ts).
//!
//! A full-duplex transfer queues one direction's ACKs behind the other's
//! data. That delay is in every RTT sample but not in RTprop, and no pacing
//! of ours can drain it, so a model-based controller needs it in its
//! window: [`crate::cc::RateSample::ack_queue_delay`].

use crate::Instant;
use std::time::Duration;

/// How long a minimum is trusted before any later sample replaces it (as
/// BBR's RTprop window; it also bounds clock drift's effect).
const MIN_WINDOW: Duration = Duration::from_secs(10);

/// A minimum over roughly the last [`MIN_WINDOW`].
#[derive(Debug, Clone, Copy, Default)]
struct WindowedMin {
    value: Option<(i64, Instant)>,
}

impl WindowedMin {
    fn update(&mut self, now: Instant, sample: i64) -> i64 {
        match self.value {
            Some((v, at)) if v <= sample && now < at + MIN_WINDOW => v,
            _ => {
                self.value = Some((sample, now));
                sample
            }
        }
    }
}

/// What the samples so far allow of the clock offset. A sample's reverse
/// delay less offset `r`, over a round trip `rtt`, says the offset's
/// negation lies in `[r - rtt, r]` (each direction takes between nothing
/// and the whole round trip); honest samples all contain it. A sample that
/// shares no point with the others is a forged (or broken) receive time:
/// it is moved to the nearest value that does, so one absurd timestamp
/// cannot become the minimum for a whole window, and a peer skewing its
/// stamps moves the estimate by at most a round trip per window (the
/// bounds start over each window, as clocks drift).
#[derive(Debug, Clone, Copy, Default)]
struct OffsetBounds {
    /// Lowest and highest values of the offset's negation, µs, and since when.
    range: Option<(i64, i64, Instant)>,
}

impl OffsetBounds {
    /// The sample `reverse` (µs) over `rtt_us`, moved within the bounds.
    fn admit(&mut self, now: Instant, reverse: i64, rtt_us: i64) -> i64 {
        let rtt_us = rtt_us.max(0);
        let Some((lo, hi, since)) = self.range else {
            self.range = Some((reverse.saturating_sub(rtt_us), reverse, now));
            return reverse;
        };
        let r = reverse.clamp(lo, hi.saturating_add(rtt_us));
        self.range = Some(if now >= since + MIN_WINDOW {
            (r.saturating_sub(rtt_us), r, now)
        } else {
            (lo.max(r.saturating_sub(rtt_us)), hi.min(r), since)
        });
        r
    }
}

/// Reverse-path queueing estimate of one connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckPathDelay {
    offset: OffsetBounds,
    reverse_min: WindowedMin,
    /// Smoothed excess of the reverse delay over its minimum, µs.
    smoothed_us: Option<f64>,
}

impl AckPathDelay {
    /// One timed ACK: the packet's RTT less the peer's ACK delay, the
    /// forward one-way delay plus clock offset (receiver clock − send
    /// clock, µs), and the most the ACK path can have queued: the round
    /// trip's excess over the minimum RTT, on our clock. The receive time
    /// is the peer's word; that bound is not.
    pub fn on_sample(
        &mut self,
        now: Instant,
        rtt_adjusted: Duration,
        forward_us: i64,
        most: Duration,
    ) {
        let rtt_us = crate::time::micros_i64(rtt_adjusted);
        let reverse = self
            .offset
            .admit(now, rtt_us.saturating_sub(forward_us), rtt_us);
        let base = self.reverse_min.update(now, reverse);
        let most = crate::time::micros_i64(most);
        let excess = reverse.saturating_sub(base).clamp(0, most) as f64;
        // RFC 6298's 1/8 gain, as for sRTT: one late ACK is not a queue.
        self.smoothed_us = Some(match self.smoothed_us {
            None => excess,
            Some(s) => s + (excess - s) / 8.0,
        });
    }

    /// Queueing the ACKs meet now, beyond the least seen; never more
    /// than a round trip's excess over the minimum RTT.
    pub fn get(&self) -> Duration {
        Duration::from_micros(self.smoothed_us.unwrap_or(0.0).max(0.0) as u64)
    }

    /// The least reverse one-way delay of the window, µs, less the clock
    /// offset; `None` before the first timed ACK. Connections whose
    /// timestamps share an origin share the offset, so their values
    /// compare.
    pub fn reverse_base_us(&self) -> Option<i64> {
        self.reverse_min.value.map(|(v, _)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const MIN_RTT: Duration = Duration::from_millis(20);

    /// A sample whose bound is the round trip's excess over `MIN_RTT`.
    fn sample(d: &mut AckPathDelay, now: Instant, rtt: Duration, forward_us: i64) {
        d.on_sample(now, rtt, forward_us, rtt.saturating_sub(MIN_RTT));
    }

    #[test]
    fn offset_cancels_and_only_reverse_queueing_counts() {
        let mut d = AckPathDelay::default();
        let offset = -7_000_000_i64; // receiver clock far behind ours
        let t0 = Instant::ZERO;
        // 10 ms each way, no queue.
        sample(&mut d, t0, ms(20), 10_000 + offset);
        assert_eq!(d.get(), Duration::ZERO);
        // 30 ms of forward queueing: our own queue, not the ACK path's.
        for i in 1..50 {
            sample(&mut d, t0 + ms(i), ms(50), 40_000 + offset);
        }
        assert!(d.get() < ms(1), "{:?}", d.get());
        // 30 ms of reverse queueing shows up, smoothed.
        for i in 50..100 {
            sample(&mut d, t0 + ms(i), ms(50), 10_000 + offset);
        }
        let got = d.get();
        assert!(got > ms(29) && got <= ms(30), "{got:?}");
    }

    /// A peer's receive times are its word: absurd ones cannot make the
    /// ACK path's queue exceed what our own clock saw of the round trip.
    #[test]
    fn forged_receive_times_are_bounded_by_the_round_trip() {
        let mut d = AckPathDelay::default();
        let t0 = Instant::ZERO;
        sample(&mut d, t0, ms(30), (1 << 62) - 1);
        for i in 1..100 {
            sample(&mut d, t0 + ms(i), ms(30), 0);
            sample(&mut d, t0 + ms(i), ms(30), i64::MIN);
        }
        assert!(d.get() <= ms(10), "{:?}", d.get());
    }

    /// A forged receive time far from the others moves the ACK path's base,
    /// which the scheduler compares across connections, by at most a round
    /// trip, and not past the minimum's window.
    #[test]
    fn a_forged_receive_time_moves_the_base_by_at_most_a_round_trip() {
        let mut d = AckPathDelay::default();
        let t0 = Instant::ZERO;
        sample(&mut d, t0, ms(30), 15_000);
        let honest = d.reverse_base_us().unwrap();
        assert_eq!(honest, 15_000);
        for forged in [i64::MAX, (1 << 62) - 1, 10_000_000_000] {
            sample(&mut d, t0 + ms(1), ms(30), forged);
        }
        let base = d.reverse_base_us().unwrap();
        assert!(
            base >= honest - 30_000,
            "base {base} µs after forged receive times"
        );
        // Skewed stamps for 100 s: a round trip per window at most.
        for i in 1..=100 {
            sample(&mut d, t0 + ms(1000 * i), ms(30), 4_000_000_000);
        }
        let base = d.reverse_base_us().unwrap();
        assert!(base >= honest - 30_000 * 11, "base {base} µs");
    }

    #[test]
    fn an_old_minimum_expires() {
        let mut d = AckPathDelay::default();
        let t0 = Instant::ZERO;
        sample(&mut d, t0, ms(20), 10_000);
        // The reverse path lengthens for good (a route change): after the
        // window the new delay is the base, not a queue.
        for i in 1..200 {
            sample(&mut d, t0 + ms(100 * i), ms(40), 10_000);
        }
        assert!(d.get() < ms(1), "{:?}", d.get());
    }
}
