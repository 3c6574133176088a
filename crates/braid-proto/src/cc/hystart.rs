//! HyStart++, RFC 9406 (<https://www.rfc-editor.org/rfc/rfc9406>): leaves
//! slow start when the RTT starts to rise, before the queue overflows.
//!
//! Rounds are counted by send time rather than sequence numbers: a round
//! ends when a packet sent after it began is acknowledged (§4.2's
//! `windowEnd`, in time). braid paces, so the ACK-count limit L is infinite
//! (§4.3: "L = infinity if paced").

use crate::Instant;
use std::time::Duration;

/// §4.3 MIN_RTT_THRESH.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
/// §4.3 MAX_RTT_THRESH.
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// §4.3 MIN_RTT_DIVISOR.
const MIN_RTT_DIVISOR: u32 = 8;
/// §4.3 N_RTT_SAMPLE: RTT samples a round needs before it can end slow start.
const N_RTT_SAMPLE: u32 = 8;
/// §4.3 CSS_GROWTH_DIVISOR: Conservative Slow Start grows this much slower.
pub const CSS_GROWTH_DIVISOR: f64 = 4.0;
/// §4.3 CSS_ROUNDS: rounds of Conservative Slow Start before avoidance.
const CSS_ROUNDS: u32 = 5;

/// Where slow start stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Standard slow start.
    SlowStart,
    /// Conservative Slow Start: growth divided by [`CSS_GROWTH_DIVISOR`].
    Conservative,
    /// Leave slow start now: set ssthresh to the window.
    Exit,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct HyStart {
    round_start: Option<Instant>,
    last_round_min: Option<Duration>,
    current_round_min: Option<Duration>,
    samples: u32,
    /// `cssBaselineMinRtt` while in Conservative Slow Start.
    css_baseline: Option<Duration>,
    css_rounds: u32,
    exited: bool,
}

impl HyStart {
    /// An ACK during slow start for a packet sent at `sent_at`, with RTT
    /// sample `rtt`. Returns the phase the window should grow in.
    pub fn on_ack(&mut self, now: Instant, sent_at: Instant, rtt: Duration) -> Phase {
        if self.exited {
            return Phase::Exit;
        }
        let new_round = self.round_start.is_none_or(|start| sent_at >= start);
        if new_round {
            self.round_start = Some(now);
            self.last_round_min = self.current_round_min;
            self.current_round_min = None;
            self.samples = 0;
            if self.css_baseline.is_some() {
                self.css_rounds += 1;
                self.exited |= self.css_rounds >= CSS_ROUNDS;
            }
        }
        self.current_round_min = Some(self.current_round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        let (Some(current), Some(last)) = (self.current_round_min, self.last_round_min) else {
            return self.phase();
        };
        if self.samples < N_RTT_SAMPLE {
            return self.phase();
        }
        match self.css_baseline {
            None => {
                // §4.2: RttThresh = clamp(lastRoundMinRTT / 8, 4 ms, 16 ms).
                let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if current >= last + thresh {
                    self.css_baseline = Some(current);
                    self.css_rounds = 0;
                }
            }
            Some(baseline) if current < baseline => {
                // The RTT rise was spurious: back to standard slow start.
                self.css_baseline = None;
            }
            Some(_) => {}
        }
        self.phase()
    }

    fn phase(&self) -> Phase {
        if self.exited {
            Phase::Exit
        } else if self.css_baseline.is_some() {
            Phase::Conservative
        } else {
            Phase::SlowStart
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// One round of `n` ACKs at `rtt`, the round starting at `t` ms.
    fn round(h: &mut HyStart, t: u64, rtt: u64, n: u32) -> Phase {
        let start = Instant::ZERO + ms(t);
        let mut phase = Phase::SlowStart;
        for i in 0..n {
            let now = start + ms(rtt) + Duration::from_micros(u64::from(i));
            phase = h.on_ack(now, start + Duration::from_micros(u64::from(i)), ms(rtt));
        }
        phase
    }

    #[test]
    fn flat_rtt_stays_in_slow_start() {
        let mut h = HyStart::default();
        for r in 0..10 {
            assert_eq!(round(&mut h, r * 100, 100, 20), Phase::SlowStart);
        }
    }

    #[test]
    fn rtt_rise_enters_css_then_exits_after_five_rounds() {
        let mut h = HyStart::default();
        assert_eq!(round(&mut h, 0, 100, 20), Phase::SlowStart);
        assert_eq!(round(&mut h, 100, 100, 20), Phase::SlowStart);
        // 100 ms / 8 = 12.5 ms threshold: a 13 ms rise is congestion.
        assert_eq!(round(&mut h, 200, 113, 20), Phase::Conservative);
        let mut phases = Vec::new();
        for r in 0..5 {
            phases.push(round(&mut h, 313 + r * 113, 113, 20));
        }
        assert_eq!(phases[..4], [Phase::Conservative; 4]);
        assert_eq!(phases[4], Phase::Exit);
    }

    #[test]
    fn a_small_rise_is_below_the_threshold() {
        let mut h = HyStart::default();
        round(&mut h, 0, 100, 20);
        assert_eq!(round(&mut h, 100, 112, 20), Phase::SlowStart);
    }

    #[test]
    fn css_returns_to_slow_start_when_the_rtt_falls_back() {
        let mut h = HyStart::default();
        round(&mut h, 0, 40, 20);
        assert_eq!(round(&mut h, 40, 50, 20), Phase::Conservative);
        assert_eq!(round(&mut h, 90, 40, 20), Phase::SlowStart);
    }

    #[test]
    fn too_few_samples_decide_nothing() {
        let mut h = HyStart::default();
        round(&mut h, 0, 100, 20);
        assert_eq!(round(&mut h, 100, 200, 7), Phase::SlowStart);
    }
}
