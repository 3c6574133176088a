//! A connection's own round trip, for reports: its packets out and their
//! ACK back on the connection itself.
//!
//! A slow connection's ACKs are also copied onto a faster one
//! (`session::ack_copy`), and the sender acts on whichever copy arrives
//! first; a copy's round trip is the slow connection's way out and the
//! fast one's way back, and the controller's estimate ([`RttEstimator`])
//! takes it as it comes. Reporting that as the connection's RTT would
//! show a 600 ms path as 350 ms. The original ACK still arrives on the
//! connection itself, later, acknowledging nothing new: this tally keeps
//! the send time of each packet a copy dated and takes the round trip when
//! the original of that ACK (the same largest packet number) arrives.
//! Nothing here feeds the controller or the timers.
//!
//! [`RttEstimator`]: crate::rtt::RttEstimator

use crate::rtt::AckRoute;
use crate::rtt_histogram::RttHistogram;
use crate::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Packets dated by a copy whose original has not arrived yet, at most:
/// copies come at most once per ACK of the slow connection, and each
/// original clears those up to its own.
const MAX_WAITING: usize = 64;

/// Raw round-trip samples of the ACKs that came back on the connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnRtt {
    /// Largest packet number and send time of each ACK a copy brought
    /// first, in increasing number, until its original arrives.
    waiting: VecDeque<(u64, Instant)>,
    min: Option<Duration>,
    max: Duration,
    sum_nanos: u128,
    samples: u64,
    histogram: RttHistogram,
}

impl OwnRtt {
    /// An ACK frame whose largest packet number is `largest` came back by
    /// `route`; `dated` is that packet's send time when the frame newly
    /// acknowledged it (it was not acknowledged before).
    pub fn on_ack(&mut self, now: Instant, route: AckRoute, largest: u64, dated: Option<Instant>) {
        match route {
            AckRoute::Copy => {
                if let Some(sent_at) = dated {
                    if self.waiting.len() >= MAX_WAITING {
                        self.waiting.pop_front();
                    }
                    self.waiting.push_back((largest, sent_at));
                }
            }
            AckRoute::Own => {
                let copied = self
                    .waiting
                    .iter()
                    .find(|&&(pn, _)| pn == largest)
                    .map(|&(_, at)| at);
                if let Some(sent_at) = dated.or(copied) {
                    self.record(now.saturating_duration_since(sent_at));
                }
                while self.waiting.front().is_some_and(|&(pn, _)| pn <= largest) {
                    self.waiting.pop_front();
                }
            }
        }
    }

    fn record(&mut self, rtt: Duration) {
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        self.max = self.max.max(rtt);
        self.sum_nanos += rtt.as_nanos();
        self.samples += 1;
        self.histogram.record(rtt);
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Minimum, average, maximum and 95th percentile (within ±2.2 %) of
    /// the samples; `None` before any.
    pub fn summary(&self) -> Option<(Duration, Duration, Duration, Duration)> {
        let min = self.min?;
        let avg = Duration::from_nanos((self.sum_nanos / u128::from(self.samples)) as u64);
        let p95 = self.histogram.quantile(0.95)?;
        Some((min, avg, self.max, p95))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn an_ack_on_the_connection_itself_is_a_sample() {
        let mut r = OwnRtt::default();
        assert_eq!(r.summary(), None);
        r.on_ack(at(600), AckRoute::Own, 3, Some(at(0)));
        assert_eq!(r.samples(), 1);
        assert_eq!(r.summary().unwrap().0, 600 * MS);
    }

    /// A copy on a fast connection dates packet 7 at 350 ms; the original,
    /// which acknowledges nothing new, arrives at 600 ms: the connection's
    /// round trip is 600 ms, and the copy alone is no sample.
    #[test]
    fn a_copy_waits_for_its_original() {
        let mut r = OwnRtt::default();
        r.on_ack(at(350), AckRoute::Copy, 7, Some(at(0)));
        assert_eq!(r.samples(), 0);
        // An original of an older ACK neither samples nor forgets packet 7.
        r.on_ack(at(590), AckRoute::Own, 5, None);
        assert_eq!(r.samples(), 0);
        r.on_ack(at(600), AckRoute::Own, 7, None);
        let (min, avg, max, _) = r.summary().unwrap();
        assert_eq!((min, avg, max), (600 * MS, 600 * MS, 600 * MS));
        // Taken once: a repeat of the original is no second sample.
        r.on_ack(at(650), AckRoute::Own, 7, None);
        assert_eq!(r.samples(), 1);
    }

    #[test]
    fn originals_clear_what_they_pass_and_the_waiting_are_bounded() {
        let mut r = OwnRtt::default();
        for pn in 0..(MAX_WAITING as u64 + 10) {
            r.on_ack(at(pn), AckRoute::Copy, pn, Some(at(0)));
        }
        assert_eq!(r.waiting.len(), MAX_WAITING);
        // The original of a copy that had a larger number than any it
        // waits for: nothing to date, everything below it cleared.
        r.on_ack(at(900), AckRoute::Own, 1_000, None);
        assert!(r.waiting.is_empty());
        assert_eq!(r.samples(), 0);
    }
}
