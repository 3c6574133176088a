//! Pacing: spreads a connection's packets over the RTT instead of sending a
//! window in one burst, which is what overflows shallow queues.
//!
//! A token bucket at the pacing rate. Its depth allows a short burst so a
//! driver whose timers fire every millisecond still reaches the rate (quinn
//! sizes its pacer the same way: a couple of milliseconds of sending, at
//! least ten packets at the start).

use crate::Instant;
use std::time::Duration;

/// Time the bucket depth covers at the pacing rate.
const BURST_INTERVAL: Duration = Duration::from_millis(2);
/// Fewest packets the bucket admits in one burst.
const MIN_BURST_PACKETS: u64 = 2;
/// Most bytes in one burst, so a fast path still spreads its window: 256
/// Ethernet-sized packets (quinn caps its bursts at 256 packets). A driver
/// woken by a millisecond timer (tokio) reaches the rate only while the
/// bucket outlasts that millisecond: this does up to 3 Gbit/s; 64 packets
/// stopped at 750 Mbit/s and held the CLI on a 1,500-byte-MTU loopback to
/// ~0.8x of this goodput. Counted in bytes, so that 16 KiB datagrams
/// (loopback) do not burst 4 MB into a receive buffer.
const MAX_BURST_BYTES: u64 = 256 * 1500;
/// Gain over window / sRTT in slow start, so the window can double per RTT
/// (Linux `sysctl_tcp_pacing_ss_ratio`: 200 %).
pub(crate) const SLOW_START_GAIN: f64 = 2.0;
/// Gain in congestion avoidance, so pacing never limits an ACK-clocked
/// window (Linux `sysctl_tcp_pacing_ca_ratio` 120 %; quinn 1.25).
pub(crate) const AVOIDANCE_GAIN: f64 = 1.25;

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    /// Bytes that may leave now.
    tokens: f64,
    last: Instant,
    /// Bytes per second; `None` = not pacing (no RTT measured yet).
    rate: Option<f64>,
    depth: f64,
    /// When the packet held back may go, if one was.
    wakeup: Option<Instant>,
}

impl Pacer {
    /// A pacer that lets the first `initial_burst` bytes go at once.
    pub fn new(now: Instant, initial_burst: u64) -> Self {
        Pacer {
            tokens: initial_burst as f64,
            last: now,
            rate: None,
            depth: initial_burst as f64,
            wakeup: None,
        }
    }

    /// Sets the rate (bytes/s) for packets of up to `segment_size` bytes.
    fn set_rate(&mut self, now: Instant, rate: Option<f64>, segment_size: u64) {
        self.refill(now);
        self.rate = rate.filter(|r| r.is_finite() && *r > 0.0);
        if let Some(rate) = self.rate {
            let burst = rate * BURST_INTERVAL.as_secs_f64();
            let lo = (MIN_BURST_PACKETS * segment_size) as f64;
            let hi = lo.max(MAX_BURST_BYTES as f64);
            self.depth = burst.clamp(lo, hi);
            self.tokens = self.tokens.min(self.depth);
        }
    }

    fn refill(&mut self, now: Instant) {
        if let Some(rate) = self.rate {
            let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
            self.tokens = (self.tokens + rate * elapsed).min(self.depth);
        }
        self.last = self.last.max(now);
    }

    /// When a packet of `bytes` may leave: `None` = now. One larger than
    /// the bucket (a datagram path MTU discovery grew past the segments
    /// the depth is sized in) waits for a full bucket, then overdraws it:
    /// the rate holds, and the packet is not held back forever.
    fn delay(&mut self, now: Instant, bytes: u64) -> Option<Instant> {
        self.refill(now);
        let rate = self.rate?;
        let missing = (bytes as f64).min(self.depth) - self.tokens;
        // Rounded up, so the wake-up never lands before the tokens exist.
        (missing > 0.0)
            .then(|| now + Duration::from_nanos((missing / rate * 1e9).ceil().max(1.0) as u64))
    }

    /// Whether a packet of `bytes` may leave now at `rate` (see
    /// [`Pacer::set_rate`]); if not, the pacer remembers when it may.
    pub fn is_ready(
        &mut self,
        now: Instant,
        rate: Option<f64>,
        segment_size: u64,
        bytes: u64,
    ) -> bool {
        self.set_rate(now, rate, segment_size);
        match self.delay(now, bytes) {
            Some(at) => {
                self.wakeup = Some(at);
                false
            }
            None => true,
        }
    }

    /// When the packet held back may go.
    pub fn wakeup(&self) -> Option<Instant> {
        self.wakeup
    }

    /// Forgets a wake-up that has come.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.wakeup.is_some_and(|d| now >= d) {
            self.wakeup = None;
        }
    }

    /// A packet of `bytes` left.
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.refill(now);
        if self.rate.is_some() {
            self.tokens -= bytes as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn unpaced_until_a_rate_is_set() {
        let mut p = Pacer::new(at(0), 0);
        assert_eq!(p.delay(at(0), 1500), None);
    }

    #[test]
    fn spreads_packets_at_the_rate_after_the_burst() {
        let mut p = Pacer::new(at(0), 1500);
        // 1.5 MB/s: one 1500-byte packet per millisecond; depth = 2 ms = 2 packets.
        p.set_rate(at(0), Some(1_500_000.0), 1500);
        p.on_sent(at(0), 1500);
        let next = p.delay(at(0), 1500).expect("paced");
        assert_eq!(next, at(1));
        assert_eq!(p.delay(at(1), 1500), None);
        p.on_sent(at(1), 1500);
        // An idle period refills at most the depth.
        assert_eq!(p.delay(at(100), 1500), None);
        p.on_sent(at(100), 1500);
        p.on_sent(at(100), 1500);
        assert_eq!(p.delay(at(100), 1500), Some(at(101)));
    }

    /// A packet larger than the bucket's depth (2 segments here) leaves
    /// once the bucket is full, and the next waits for what it overdrew.
    #[test]
    fn a_packet_larger_than_the_bucket_still_leaves_at_the_rate() {
        let mut p = Pacer::new(at(0), 0);
        // 1.5 MB/s, 1500-byte segments: a 3000-byte bucket, 16 KB packets.
        p.set_rate(at(0), Some(1_500_000.0), 1500);
        let next = p.delay(at(0), 16_000).expect("paced");
        assert_eq!(next, at(2));
        assert_eq!(p.delay(next, 16_000), None);
        p.on_sent(next, 16_000);
        // 16 KB at 1.5 MB/s: about 10.7 ms until the next one.
        let after = p.delay(next, 16_000).expect("paced");
        let gap = after.saturating_duration_since(next);
        assert!(
            gap > Duration::from_millis(10) && gap < Duration::from_millis(11),
            "{gap:?}"
        );
    }

    #[test]
    fn sent_packets_over_a_second_match_the_rate() {
        let mut p = Pacer::new(at(0), 0);
        let rate = 12_500_000.0; // 100 Mbit/s
        p.set_rate(at(0), Some(rate), 1250);
        let mut now = at(0);
        let mut sent = 0u64;
        while now < at(1000) {
            match p.delay(now, 1250) {
                None => {
                    p.on_sent(now, 1250);
                    sent += 1250;
                }
                Some(t) => now = t,
            }
        }
        let err = (sent as f64 - rate).abs() / rate;
        assert!(err < 0.01, "sent {sent} bytes in 1 s at rate {rate}");
    }

    /// A driver that only wakes once a millisecond (a tokio timer) still
    /// sends at 3 Gbit/s of 1,472-byte datagrams: each wake-up finds a
    /// millisecond's tokens in the bucket. At 6 Gbit/s the bucket (384 KB)
    /// runs dry, so such a driver falls behind.
    #[test]
    fn a_millisecond_timer_reaches_three_gigabits() {
        let sent_in_a_second = |rate: f64| {
            let mut p = Pacer::new(at(0), 0);
            let mut sent = 0u64;
            for ms in 0..1000 {
                p.set_rate(at(ms), Some(rate), 1472);
                while p.delay(at(ms), 1472).is_none() {
                    p.on_sent(at(ms), 1472);
                    sent += 1472;
                }
            }
            sent as f64
        };
        let rate = 3e9 / 8.0;
        assert!(sent_in_a_second(rate) > 0.98 * rate);
        let rate = 6e9 / 8.0;
        assert!(sent_in_a_second(rate) < 0.7 * rate);
    }
}
