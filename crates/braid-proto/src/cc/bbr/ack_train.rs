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
//! When the ACK frames carry the receiver's receive times, the gaps are
//! taken on the receiver's clock: the ACK path then adds nothing. In full
//! duplex the ACKs wait in the other direction's queue or ride on the
//! peer's paced data, and their arrival spacing shows the peer's pacing, not
//! our bottleneck (far above or below it).
//!
//! A receiver dates the first flight's packets one by one in its ACKs
//! (`AckFrame::rx_times`, from the kernel's receive stamps at runtime), so a
//! flight read in one batch still shows its spacing. A link that releases
//! packets in bursts (a trace emulator's 1 ms ticks, cellular or Wi-Fi
//! aggregates) gives bursts of near-equal receive times: the rate is then
//! taken between bursts (see `bursty_rate`), and packets that passed each
//! other on the way say nothing.
//!
//! Random loss at the link's entry leaves the survivors back to back, so a
//! train with lost packets still measures the bottleneck: it completes when
//! each packet is acknowledged or declared lost. The estimate is refused,
//! and the caller starts as usual, when it cannot be trusted: a timeout
//! before the train completes, fewer than [`MIN_GAPS`] ACK gaps, gaps
//! (per byte acknowledged) that differ by more than [`MAX_GAP_SPREAD`]
//! (jitter, ACK compression or a delayed ACK) on the sender's clock, or a
//! train sent no faster than [`MIN_SEND_SPEEDUP`] × the rate it measured (it
//! measured the sender). Receive times that differ that much show the
//! receiver's reading more than the link (a real receiver stamps a batch of
//! datagrams at once, or late when descheduled): the train's whole span is
//! then used, at [`NOISY_TRAIN_SHARE`] of its rate.
//!
//! Some estimates are only lower bounds ([`Estimate::lower_bound`]): a half
//! share of a noisy train, and a bursty train of two bursts, whose rate
//! rests on the last burst alone. The train ends inside that burst, so it
//! shows what was left to deliver, not what the link could have: a trace
//! emulator that woke late and released eight of the ten at once leaves two
//! for the next tick, half of a tick's capacity.
//!
//! A train received within [`MIN_TRAIN_SPAN`] measured whatever held it
//! and let it go at once (a relay's late timer), not the path: its receive
//! times microseconds apart read as a multi-Gbit/s link (one `braid demo`
//! run: a 53.9 MB window and a 20.5 Gbit/s pacing rate at 70 ms, 1,998
//! packets lost). Such a train grants no more than the delivery rate it
//! shows on our clock: its bytes over the longer of its send span and the
//! time from its first send to the ACK that completed it, as a
//! delivery-rate sample is taken
//! (draft-cheng-iccrg-delivery-rate-estimation-02 §3.3, max(send_elapsed,
//! ack_elapsed)), and as a lower bound: STARTUP grows from it as from a
//! rate sample.

use crate::Instant;
use std::time::Duration;

/// A send gap above this ends the train: its packets were not back to back.
const MAX_SEND_GAP: Duration = Duration::from_millis(1);
/// Fewest gaps between ACK frames for an estimate (three ACKs).
const MIN_GAPS: u32 = 2;
/// A first flight of fewer packets was the application's (a request, a
/// file's manifest before the receiver answers), not a train: the train
/// waits for the next flight, once.
const MIN_TRAIN_PACKETS: u32 = 4;
/// Largest ratio of two ACK gaps, each per byte acknowledged. A receiver
/// acknowledging every packet or every other one gives equal gaps per byte.
const MAX_GAP_SPREAD: f64 = 2.5;
/// Share of the estimate taken from a train whose receive times are uneven
/// (see `finish`): a read delayed on the first frame would shorten the span
/// and overstate the rate, so such a train starts lower and lets STARTUP's
/// own growth find the rest, a round or two instead of ~log2(BDP / IW).
const NOISY_TRAIN_SHARE: f64 = 0.5;
/// The train must have left at least this much faster than the rate it
/// measured, or the ACK spacing only shows the sender's spacing.
const MIN_SEND_SPEEDUP: f64 = 2.0;
/// Receive gaps this many times shorter than the train's longest are
/// inside one of the link's bursts (see `bursts`).
const BURST_GAP_RATIO: u32 = 4;
/// Receive span of a train below which it measured a release, not the
/// path (braid's choice): 3 µs a packet of IW10, what a receiver reading a
/// burst in one batch spends on each. A link delivering IW10 that fast
/// runs at over 3.5 Gbit/s, where STARTUP then takes a few more rounds;
/// the 1 Gbit/s rows (IW10 over ~100 µs) keep their estimate.
const MIN_TRAIN_SPAN: Duration = Duration::from_micros(30);

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Collecting the back-to-back packets of the first flight.
    Sending,
    /// The train is closed; waiting for its ACKs.
    Acking,
    /// Finished, with the estimate if it could be trusted.
    Done(Option<Estimate>),
}

/// What a completed train says about the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Estimate {
    /// Bytes per second.
    pub bw: f64,
    /// The link may be faster: the caller grows from it as STARTUP grows
    /// from a rate sample, rather than taking it as the capacity.
    pub lower_bound: bool,
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
    /// Packets acknowledged with their own receive time.
    dated: u32,
    lost: u32,
    /// (arrival, bytes acknowledged) per ACK frame of the train's packets,
    /// and within a frame per receive time when it dates packets one by one.
    frames: Vec<(Instant, u64)>,
    /// The receiver's receive time per frame, on its clock; `None` once a
    /// frame came without one.
    rx_times: Option<Vec<Instant>>,
    /// The receive time of the frame being processed.
    frame_rx: Option<Instant>,
    /// The receive time of the last entry of `frames`.
    last_rx: Option<Instant>,
    /// Whether any frame carried a receive time: the peer sends them, so a
    /// frame without one showed reordering.
    any_rx: bool,
    /// The first flight was too short and the train waits for the next.
    rearmed: bool,
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
            dated: 0,
            lost: 0,
            frames: Vec::new(),
            rx_times: Some(Vec::new()),
            frame_rx: None,
            last_rx: None,
            any_rx: false,
            rearmed: false,
        }
    }

    /// Whether the train waits for the flight after a first one too short
    /// to be one: that flight leaves back to back, as the first would
    /// have before any RTT was known, or its ACKs show only the pacing.
    pub fn awaits_flight(&self) -> bool {
        self.rearmed && self.state == State::Sending
    }

    /// An ACK frame arrives: the peer's clock when it received the frame's
    /// largest packet, if known. Precedes the frame's [`Self::on_ack`] calls.
    pub fn on_frame(&mut self, rx: Option<Instant>) {
        self.frame_rx = rx;
        self.any_rx |= rx.is_some();
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
    /// packets of one ACK frame share `now`. `rx` is the peer's clock when
    /// it received this packet, if the ACK dated it; otherwise the frame's
    /// receive time stands for it. Returns the estimate when this ACK
    /// completes the train and the estimate is trusted.
    pub fn on_ack(
        &mut self,
        now: Instant,
        sent_at: Instant,
        bytes: u64,
        rx: Option<Instant>,
    ) -> Option<Estimate> {
        if !self.is_train(sent_at) || bytes == 0 {
            return None;
        }
        self.acked += 1;
        self.dated += u32::from(rx.is_some());
        let rx = rx.or(self.frame_rx);
        self.any_rx |= rx.is_some();
        match self.frames.last_mut() {
            Some((at, b)) if *at == now && rx == self.last_rx => *b += bytes,
            _ => {
                self.frames.push((now, bytes));
                self.last_rx = rx;
                self.rx_times = match (self.rx_times.take(), rx) {
                    (Some(mut times), Some(rx)) => {
                        times.push(rx);
                        Some(times)
                    }
                    _ => None,
                };
            }
        }
        self.complete(now)
    }

    /// `packets` were declared lost at `now`, the newest sent at
    /// `sent_at`. Returns the estimate when this completes the train and
    /// it is trusted.
    pub fn on_lost(&mut self, now: Instant, sent_at: Instant, packets: u64) -> Option<Estimate> {
        if !self.is_train(sent_at) {
            return None;
        }
        self.lost = self
            .lost
            .saturating_add(u32::try_from(packets).unwrap_or(u32::MAX));
        self.complete(now)
    }

    /// Whether a packet sent at `sent_at` belongs to the train, whose ACKs
    /// are still awaited. The first ACK or loss closes the train.
    fn is_train(&mut self, sent_at: Instant) -> bool {
        if self.state == State::Sending && self.packets > 0 {
            self.state = State::Acking;
        }
        self.state == State::Acking && sent_at >= self.first_sent && sent_at <= self.last_sent
    }

    fn complete(&mut self, now: Instant) -> Option<Estimate> {
        if self.acked.saturating_add(self.lost) < self.packets {
            return None;
        }
        if self.packets < MIN_TRAIN_PACKETS && !self.rearmed {
            *self = AckTrain {
                rearmed: true,
                ..AckTrain::new()
            };
            return None;
        }
        let estimate = self.finish(now);
        self.state = State::Done(estimate);
        estimate
    }

    /// The estimate, bounded as the module docs say when the train arrived
    /// within [`MIN_TRAIN_SPAN`]. One that arrived faster than it left is
    /// refused already (see `checked`).
    fn finish(&self, now: Instant) -> Option<Estimate> {
        let (est, spread) = self.estimate()?;
        if spread >= MIN_TRAIN_SPAN {
            return Some(est);
        }
        let send_span = self.last_sent - self.first_sent;
        let elapsed = send_span.max(now.saturating_duration_since(self.first_sent));
        if elapsed.is_zero() {
            return None;
        }
        let delivered = self.bytes as f64 / elapsed.as_secs_f64();
        Some(Estimate {
            bw: est.bw.min(delivered),
            lower_bound: true,
        })
    }

    /// The estimate from the receive times, and the train's receive span.
    fn estimate(&self) -> Option<(Estimate, Duration)> {
        let (frames, receiver_clock) = match &self.rx_times {
            // Packets that passed each other (jitter after the bottleneck)
            // say nothing about its spacing.
            Some(rx) if rx.windows(2).any(|pair| pair[1] < pair[0]) => return None,
            Some(rx) => (
                coalesce(rx.iter().zip(&self.frames).map(|(&t, &(_, b))| (t, b))),
                true,
            ),
            None if self.any_rx => return None,
            None => (self.frames.clone(), false),
        };
        let spread = match (frames.first(), frames.last()) {
            (Some(first), Some(last)) => last.0.saturating_duration_since(first.0),
            _ => Duration::ZERO,
        };
        if receiver_clock {
            // Bursts: packets dated one by one that share a receive time
            // (a link's tick), or whose gaps are far below the others'.
            let shared = self.dated == self.acked && frames.len() < self.acked as usize;
            let bursts = bursts(&frames);
            if shared || bursts.len() < frames.len() {
                let rate = bursty_rate(&bursts)?;
                let lower_bound = bursts.len() == 2;
                return self
                    .checked(rate)
                    .map(|bw| (Estimate { bw, lower_bound }, spread));
            }
        }
        let gaps: Vec<f64> = frames
            .windows(2)
            .map(|pair| {
                pair[1].0.saturating_duration_since(pair[0].0).as_secs_f64() / pair[1].1 as f64
            })
            .collect();
        let spread_ok = |gaps: &[f64]| {
            let min = gaps.iter().copied().fold(f64::INFINITY, f64::min);
            gaps.iter().all(|&g| g <= MAX_GAP_SPREAD * min)
        };
        // A last packet without a partner waits for the receiver's ACK
        // delay: its frame shows the timer, not the bottleneck.
        let even = match gaps.split_last() {
            Some((_, rest)) if !spread_ok(&gaps) && !rest.is_empty() && spread_ok(rest) => {
                Some(&frames[..frames.len() - 1])
            }
            _ if spread_ok(&gaps) => Some(&frames[..]),
            _ => None,
        };
        let (frames, share) = match even {
            Some(even) if even.len() > MIN_GAPS as usize => (even, 1.0),
            // The receiver's clock is free of the ACK path; uneven gaps
            // there mostly show when it got to read (a busy or descheduled
            // process stamps late), which moves single gaps far more than
            // the train's whole span. Kept, at a share.
            _ if receiver_clock && frames.len() > MIN_GAPS as usize => {
                (&frames[..], NOISY_TRAIN_SHARE)
            }
            _ => return None,
        };
        let span = frames[frames.len() - 1]
            .0
            .saturating_duration_since(frames[0].0)
            .as_secs_f64();
        if span <= 0.0 {
            return None;
        }
        // The first frame's bytes arrived before the clock started.
        let after_first: u64 = frames[1..].iter().map(|&(_, b)| b).sum();
        self.checked(after_first as f64 / span).map(|rate| {
            let est = Estimate {
                bw: rate * share,
                lower_bound: share < 1.0,
            };
            (est, spread)
        })
    }

    /// `rate`, unless the train left too slowly to have measured anything
    /// but the sender.
    fn checked(&self, rate: f64) -> Option<f64> {
        let send_span = (self.last_sent - self.first_sent).as_secs_f64();
        (send_span * rate * MIN_SEND_SPEEDUP <= self.bytes as f64).then_some(rate)
    }

    /// A timeout: the train's ACKs are not coming.
    pub fn abort(&mut self) {
        if !matches!(self.state, State::Done(_)) {
            self.state = State::Done(None);
        }
    }
}

/// Packets the link released together: the first and last receive time
/// and the bytes.
#[derive(Debug, Clone, Copy)]
struct Burst {
    first: Instant,
    last: Instant,
    bytes: u64,
}

/// Groups receive times into the link's bursts: a gap below
/// 1/[`BURST_GAP_RATIO`] of the train's longest gap separates packets the
/// link released together (a trace emulator's millisecond tick, a cellular
/// or Wi-Fi aggregate), not the bottleneck's spacing of them. Even spacing
/// gives one burst per frame.
fn bursts(frames: &[(Instant, u64)]) -> Vec<Burst> {
    let longest = frames
        .windows(2)
        .map(|pair| pair[1].0.saturating_duration_since(pair[0].0))
        .max()
        .unwrap_or_default();
    let mut merged: Vec<Burst> = Vec::new();
    for &(t, bytes) in frames {
        match merged.last_mut() {
            Some(b) if t.saturating_duration_since(b.last) * BURST_GAP_RATIO < longest => {
                b.last = t;
                b.bytes += bytes;
            }
            _ => merged.push(Burst {
                first: t,
                last: t,
                bytes,
            }),
        }
    }
    merged
}

/// The rate of a train the link delivered in bursts. Each burst's bytes
/// were all in by its last packet, and a link delivers no more than its
/// rate in any interval, so the bytes after the first burst over the time
/// from its last packet to a later burst's last packet is no more than the
/// link's rate. The last burst may be partial (the train ended inside its
/// tick), so the rate up to the one before it is taken when it is higher.
/// Refused when the silences between bursts are not clearly longer than the
/// bursts themselves (a link catching up on late ticks).
fn bursty_rate(bursts: &[Burst]) -> Option<f64> {
    let longest_burst = bursts.iter().map(|b| b.last - b.first).max()?;
    let separated = bursts
        .windows(2)
        .all(|pair| pair[1].first - pair[0].last >= longest_burst * BURST_GAP_RATIO);
    if bursts.len() < 2 || !separated {
        return None;
    }
    let rate = |bursts: &[Burst]| {
        let span = (bursts[bursts.len() - 1].last - bursts[0].last).as_secs_f64();
        let bytes: u64 = bursts[1..].iter().map(|b| b.bytes).sum();
        (span > 0.0).then(|| bytes as f64 / span)
    };
    let whole = rate(bursts)?;
    let inner = if bursts.len() > 2 {
        rate(&bursts[..bursts.len() - 1])
    } else {
        None
    };
    Some(inner.map_or(whole, |inner| whole.max(inner)))
}

/// Merges frames that share a receive time into one. A receiver that reads
/// a batch of datagrams (GRO, recvmmsg, a busy event loop) stamps them with
/// one clock reading: their gap of 0 says nothing about the bottleneck, and
/// would fail the spread check, while the batch's bytes still arrived by
/// then. The sender's arrival times are merged the same way in `on_ack`.
fn coalesce(frames: impl Iterator<Item = (Instant, u64)>) -> Vec<(Instant, u64)> {
    let mut merged: Vec<(Instant, u64)> = Vec::new();
    for (t, b) in frames {
        match merged.last_mut() {
            Some((at, bytes)) if *at == t => *bytes += b,
            _ => merged.push((t, b)),
        }
    }
    merged
}

#[cfg(test)]
mod tests;
