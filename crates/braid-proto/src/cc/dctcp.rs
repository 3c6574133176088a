//! DCTCP's response to single-bit ECN, RFC 8257
//! (<https://www.rfc-editor.org/rfc/rfc8257>), for the window controllers:
//! instead of halving on any mark, reduce in proportion to the fraction of
//! bytes marked, so a shallow marking threshold keeps both a short queue
//! and a full link.

use crate::Instant;

/// §4.2 estimation gain g = 1/16.
const G: f64 = 1.0 / 16.0;

#[derive(Debug, Clone)]
pub struct Dctcp {
    /// Estimated fraction of marked bytes (§4.2), starting at 1 so the
    /// first reaction is as strong as a loss response (§4.2: "alpha = 1").
    alpha: f64,
    acked: u64,
    marked: u64,
    /// Packets sent before this instant belong to the current observation window.
    window_end: Option<Instant>,
}

impl Default for Dctcp {
    fn default() -> Self {
        Dctcp {
            alpha: 1.0,
            acked: 0,
            marked: 0,
            window_end: None,
        }
    }
}

impl Dctcp {
    /// Bytes acknowledged; once per window of data (a packet sent after the
    /// window began is acknowledged) alpha is updated from the marked share.
    pub fn on_ack(&mut self, now: Instant, sent_at: Instant, bytes: u64) {
        self.acked += bytes;
        let end = *self.window_end.get_or_insert(now);
        if sent_at >= end {
            let fraction = if self.acked == 0 {
                0.0
            } else {
                (self.marked as f64 / self.acked as f64).min(1.0)
            };
            // §4.2: alpha = (1 − g)·alpha + g·M / (bytes acknowledged).
            self.alpha = (1.0 - G) * self.alpha + G * fraction;
            self.acked = 0;
            self.marked = 0;
            self.window_end = Some(now);
        }
    }

    /// Bytes the peer reported as CE-marked.
    pub fn on_marked(&mut self, bytes: u64) {
        self.marked = self.marked.saturating_add(bytes);
    }

    /// The factor to multiply the window by on a marked round (§4.3:
    /// cwnd = cwnd × (1 − alpha / 2)).
    pub fn decrease_factor(&self) -> f64 {
        1.0 - self.alpha / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn alpha_converges_to_the_marked_fraction() {
        let mut d = Dctcp::default();
        assert_eq!(d.decrease_factor(), 0.5, "the first reaction halves");
        // 200 windows in which a tenth of the bytes are marked.
        for w in 1..=200u64 {
            d.on_marked(100);
            for i in 0..10 {
                d.on_ack(at(w * 10 + i), at(w * 10 - 10 + i), 100);
            }
        }
        assert!((d.alpha - 0.1).abs() < 0.01, "alpha {}", d.alpha);
        assert!((d.decrease_factor() - 0.95).abs() < 0.005);
    }

    #[test]
    fn unmarked_windows_decay_alpha_by_g() {
        let mut d = Dctcp::default();
        d.on_ack(at(0), at(0), 1000);
        let before = d.alpha;
        d.on_ack(at(10), at(5), 1000);
        assert!((d.alpha - before * (1.0 - G)).abs() < 1e-12);
    }
}
