//! The bottleneck rate from the first flight's ACK train, for a faster start.
//!
//! The initial window leaves back to back (no RTT is known yet, so nothing
//! paces it); the bottleneck spaces the packets out, and the receiver's ACKs
//! keep that spacing. Bytes acknowledged after the first ACK over the time
//! from the first to the last ACK is the bottleneck's rate: packet-train
//! dispersion (Dovrolis, Ramanathan, Moore, "Packet-Dispersion Techniques and
//! a Capacity-Estimation Methodology", IEEE/ACM ToN 12(6), 2004). RAPID
//! (Konda, Kaur, "RAPID: Shrinking the Congestion-Control Timescale",
//! INFOCOM 2009) and Paced Chirping start from such estimates instead of
//! doubling per round trip.
//!
//! The estimate is refused, and the caller starts as usual, when it cannot
//! be trusted: a loss in the train, fewer than [`MIN_GAPS`] ACK gaps, gaps
//! (per byte acknowledged) that differ by more than [`MAX_GAP_SPREAD`]
//! (jitter, ACK compression or a delayed ACK), or a train sent no faster
//! than [`MIN_SEND_SPEEDUP`] × the rate it measured (it measured the sender).

use crate::Instant;
use std::time::Duration;

/// A send gap above this ends the train: its packets were not back to back.
const MAX_SEND_GAP: Duration = Duration::from_millis(1);
/// Fewest gaps between ACK frames for an estimate (three ACKs).
const MIN_GAPS: u32 = 2;
/// Largest ratio of two ACK gaps, each per byte acknowledged. A receiver
/// acknowledging every packet or every other one gives equal gaps per byte.
const MAX_GAP_SPREAD: f64 = 2.0;
/// The train must have left at least this much faster than the rate it
/// measured, or the ACK spacing only shows the sender's spacing.
const MIN_SEND_SPEEDUP: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Collecting the back-to-back packets of the first flight.
    Sending,
    /// The train is closed; waiting for its ACKs.
    Acking,
    /// Finished, with the estimate (bytes/s) if it could be trusted.
    Done(Option<f64>),
}

/// Measures the first flight's ACK dispersion once per connection.
#[derive(Debug, Clone)]
pub(super) struct AckTrain {
    state: State,
    first_sent: Instant,
    last_sent: Instant,
    packets: u32,
    bytes: u64,
    acked: u32,
    /// (time, bytes acknowledged) per ACK frame of the train's packets.
    frames: Vec<(Instant, u64)>,
}

impl AckTrain {
    pub fn new() -> Self {
        AckTrain {
            state: State::Sending,
            first_sent: Instant::ZERO,
            last_sent: Instant::ZERO,
            packets: 0,
            bytes: 0,
            acked: 0,
            frames: Vec::new(),
        }
    }

    /// A data packet of `bytes` left at `now`.
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        if self.state != State::Sending || bytes == 0 {
            return;
        }
        if self.packets > 0 && now.saturating_duration_since(self.last_sent) > MAX_SEND_GAP {
            self.state = State::Acking;
            return;
        }
        if self.packets == 0 {
            self.first_sent = now;
        }
        self.packets += 1;
        self.bytes += bytes;
        self.last_sent = now;
    }

    /// A packet of `bytes` sent at `sent_at` was acknowledged at `now`; the
    /// packets of one ACK frame share `now`. Returns the estimate (bytes/s)
    /// when this ACK completes the train and the estimate is trusted.
    pub fn on_ack(&mut self, now: Instant, sent_at: Instant, bytes: u64) -> Option<f64> {
        if self.state == State::Sending && self.packets > 0 {
            self.state = State::Acking;
        }
        let in_train = sent_at >= self.first_sent && sent_at <= self.last_sent;
        if self.state != State::Acking || bytes == 0 || !in_train {
            return None;
        }
        self.acked += 1;
        match self.frames.last_mut() {
            Some((at, b)) if *at == now => *b += bytes,
            _ => self.frames.push((now, bytes)),
        }
        if self.acked < self.packets {
            return None;
        }
        let estimate = self.finish();
        self.state = State::Done(estimate);
        estimate
    }

    fn finish(&self) -> Option<f64> {
        if self.frames.len() < MIN_GAPS as usize + 1 {
            return None;
        }
        let (mut min_gap, mut max_gap) = (f64::INFINITY, 0.0f64);
        for pair in self.frames.windows(2) {
            let gap = (pair[1].0 - pair[0].0).as_secs_f64() / pair[1].1 as f64;
            min_gap = min_gap.min(gap);
            max_gap = max_gap.max(gap);
        }
        if max_gap > MAX_GAP_SPREAD * min_gap {
            return None;
        }
        let (first, last) = (self.frames[0].0, self.frames[self.frames.len() - 1].0);
        let span = (last - first).as_secs_f64();
        // The first frame's bytes arrived before the clock started.
        let after_first: u64 = self.frames[1..].iter().map(|&(_, b)| b).sum();
        let rate = after_first as f64 / span;
        let send_span = (self.last_sent - self.first_sent).as_secs_f64();
        (send_span * rate * MIN_SEND_SPEEDUP <= self.bytes as f64).then_some(rate)
    }

    /// A loss or timeout: the train's spacing no longer shows the bottleneck.
    pub fn abort(&mut self) {
        if !matches!(self.state, State::Done(_)) {
            self.state = State::Done(None);
        }
    }
}
