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

use crate::Instant;
use std::time::Duration;

/// A send gap above this ends the train: its packets were not back to back.
const MAX_SEND_GAP: Duration = Duration::from_millis(1);
/// Fewest gaps between ACK frames for an estimate (three ACKs).
const MIN_GAPS: u32 = 2;
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
        }
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
        self.complete()
    }

    /// `packets` were declared lost, the newest sent at `sent_at`. Returns
    /// the estimate when this completes the train and it is trusted.
    pub fn on_lost(&mut self, sent_at: Instant, packets: u64) -> Option<Estimate> {
        if !self.is_train(sent_at) {
            return None;
        }
        self.lost = self
            .lost
            .saturating_add(u32::try_from(packets).unwrap_or(u32::MAX));
        self.complete()
    }

    /// Whether a packet sent at `sent_at` belongs to the train, whose ACKs
    /// are still awaited. The first ACK or loss closes the train.
    fn is_train(&mut self, sent_at: Instant) -> bool {
        if self.state == State::Sending && self.packets > 0 {
            self.state = State::Acking;
        }
        self.state == State::Acking && sent_at >= self.first_sent && sent_at <= self.last_sent
    }

    fn complete(&mut self) -> Option<Estimate> {
        if self.acked.saturating_add(self.lost) < self.packets {
            return None;
        }
        let estimate = self.finish();
        self.state = State::Done(estimate);
        estimate
    }

    fn finish(&self) -> Option<Estimate> {
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
        if receiver_clock {
            // Bursts: packets dated one by one that share a receive time
            // (a link's tick), or whose gaps are far below the others'.
            let shared = self.dated == self.acked && frames.len() < self.acked as usize;
            let bursts = bursts(&frames);
            if shared || bursts.len() < frames.len() {
                let rate = bursty_rate(&bursts)?;
                return self.checked(rate).map(|bw| Estimate {
                    bw,
                    lower_bound: bursts.len() == 2,
                });
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
        self.checked(after_first as f64 / span)
            .map(|rate| Estimate {
                bw: rate * share,
                lower_bound: share < 1.0,
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
mod tests {
    use super::*;

    const SEGMENT_SIZE: u64 = 1380;

    fn at_us(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    /// Ten packets at t = 0; an ACK for every two, `gap_us` apart, the
    /// first at 100 ms. Returns the train and the estimate.
    fn acked_in_pairs(gap_us: u64) -> (AckTrain, Option<Estimate>) {
        let mut t = AckTrain::new();
        for _ in 0..10 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        let mut est = None;
        for frame in 0..5 {
            let now = at_us(100_000 + frame * gap_us);
            for _ in 0..2 {
                est = t.on_ack(now, Instant::ZERO, SEGMENT_SIZE, None);
            }
        }
        (t, est)
    }

    /// `sent` packets at t = 0; the first eight acknowledged two per frame,
    /// 460 µs apart from 100 ms on, none of them completing the train.
    fn four_pairs_acked(sent: usize) -> AckTrain {
        let mut t = AckTrain::new();
        for _ in 0..sent {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        for frame in 0..4 {
            for _ in 0..2 {
                assert_eq!(
                    t.on_ack(
                        at_us(100_000 + frame * 460),
                        Instant::ZERO,
                        SEGMENT_SIZE,
                        None
                    ),
                    None
                );
            }
        }
        t
    }

    #[test]
    fn rate_is_bytes_after_the_first_ack_over_the_ack_span() {
        // 2 packets per 460 us: 8 packets after the first frame in 1.84 ms.
        let (t, est) = acked_in_pairs(460);
        let expected = (8 * SEGMENT_SIZE) as f64 / 1840e-6;
        assert!((est.expect("trusted").bw - expected).abs() < 1e-6 * expected);
        assert_eq!(t.state, State::Done(est));
        // Done: later ACKs change nothing.
        let mut t = t;
        assert_eq!(
            t.on_ack(at_us(200_000), Instant::ZERO, SEGMENT_SIZE, None),
            None
        );
    }

    /// Ten packets at t = 0, acknowledged in pairs whose frames arrive
    /// `arrival_gap_us` apart and carry receive times `rx_gap_us` apart
    /// (`None`: the frame at that index has no receive time).
    fn timestamped_pairs(arrival_gap_us: u64, rx_gap_us: u64, no_rx: Option<u64>) -> Option<f64> {
        let mut t = AckTrain::new();
        for _ in 0..10 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        let mut est = None;
        for frame in 0..5 {
            let rx = at_us(7_000_000 + frame * rx_gap_us);
            t.on_frame((no_rx != Some(frame)).then_some(rx));
            for _ in 0..2 {
                est = t.on_ack(
                    at_us(100_000 + frame * arrival_gap_us),
                    Instant::ZERO,
                    SEGMENT_SIZE,
                    None,
                );
            }
        }
        est.map(|e| e.bw)
    }

    #[test]
    fn receive_times_measure_the_train_when_acks_are_bunched() {
        // Full duplex: the ACKs ride on the peer's data and arrive 10 us
        // apart, the receiver got the pairs 460 us apart.
        let expected = (8 * SEGMENT_SIZE) as f64 / 1840e-6;
        let est = timestamped_pairs(10, 460, None).expect("trusted");
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
        // Without receive times the bunched arrivals would give 46 x that.
        let est = acked_in_pairs(10).1.expect("trusted").bw;
        assert!(est > 40.0 * expected);
    }

    #[test]
    fn frames_read_in_one_batch_count_as_one() {
        // The receiver read pairs 1-2 and 3-4 in one batch each, so their
        // receive times are equal; the pairs were 460 us apart at the link.
        let mut t = AckTrain::new();
        for _ in 0..10 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        let rx_us = [0, 920, 920, 1840, 1840];
        let mut est = None;
        for (frame, rx) in rx_us.into_iter().enumerate() {
            t.on_frame(Some(at_us(7_000_000 + rx)));
            for _ in 0..2 {
                est = t.on_ack(
                    at_us(100_000 + frame as u64 * 460),
                    Instant::ZERO,
                    SEGMENT_SIZE,
                    None,
                );
            }
        }
        let expected = (8 * SEGMENT_SIZE) as f64 / 1840e-6;
        let est = est
            .expect("a batch's zero gap must not refuse the train")
            .bw;
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
    }

    #[test]
    fn a_frame_without_a_receive_time_refuses_the_train() {
        // The peer sends receive times: one missing shows reordering.
        assert_eq!(timestamped_pairs(460, 460, Some(3)), None);
        assert!(timestamped_pairs(460, 460, None).is_some());
    }

    #[test]
    fn a_delayed_last_ack_is_left_out() {
        let mut t = four_pairs_acked(9);
        // The ninth waits for the receiver's 10 ms ACK delay.
        let est = t.on_ack(at_us(111_380), Instant::ZERO, SEGMENT_SIZE, None);
        let expected = (6 * SEGMENT_SIZE) as f64 / 1380e-6;
        assert!((est.expect("trusted").bw - expected).abs() < 1e-6 * expected);
    }

    #[test]
    fn irregular_gaps_are_refused() {
        let mut t = AckTrain::new();
        for _ in 0..8 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        let mut est = None;
        // Jitter: gaps of 100, 900 and 300 us per pair.
        for us in [0, 100, 1000, 1300] {
            for _ in 0..2 {
                est = t.on_ack(at_us(50_000 + us), Instant::ZERO, SEGMENT_SIZE, None);
            }
        }
        assert_eq!(est, None);
        assert_eq!(t.state, State::Done(None));
    }

    /// Ten packets at t = 0, acknowledged by frames of `packets[i]`
    /// packets that carry receive times `rx_us[i]`, arriving 460 us apart.
    fn received_at(rx_us: &[u64], packets: &[u64]) -> Option<Estimate> {
        let mut t = AckTrain::new();
        for _ in 0..10 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        let mut est = None;
        for (frame, (&rx, &n)) in rx_us.iter().zip(packets).enumerate() {
            t.on_frame(Some(at_us(7_000_000 + rx)));
            for _ in 0..n {
                est = t.on_ack(
                    at_us(100_000 + frame as u64 * 460),
                    Instant::ZERO,
                    SEGMENT_SIZE,
                    None,
                );
            }
        }
        est
    }

    #[test]
    fn uneven_receive_times_give_a_share_of_the_span_rate() {
        // A receiver that read late (seen through `braid link`): gaps of
        // 433, 386, 930 and 246 us per 2, 4, 2 and 1 packets.
        let est = received_at(&[0, 433, 819, 1749, 1995], &[1, 2, 4, 2, 1]).expect("kept");
        assert!(est.lower_bound, "a share is a lower bound");
        let est = est.bw;
        let expected = NOISY_TRAIN_SHARE * (9 * SEGMENT_SIZE) as f64 / 1995e-6;
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
        // One pair, then one batch read 3.8 ms later: one gap is too few.
        assert_eq!(received_at(&[0, 3848], &[2, 8]), None);
        // Even receive times keep the whole rate.
        let est = received_at(&[0, 460, 920, 1380, 1840], &[2; 5]).expect("trusted");
        assert!(!est.lower_bound);
        let est = est.bw;
        assert!(
            (est - (8 * SEGMENT_SIZE) as f64 / 1840e-6).abs() < 1.0,
            "{est}"
        );
    }

    #[test]
    fn too_few_ack_frames_are_refused() {
        let mut t = AckTrain::new();
        for _ in 0..4 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        let mut est = None;
        for frame in 0..2 {
            for _ in 0..2 {
                est = t.on_ack(
                    at_us(50_000 + frame * 500),
                    Instant::ZERO,
                    SEGMENT_SIZE,
                    None,
                );
            }
        }
        assert_eq!(est, None, "one gap only");
    }

    #[test]
    fn a_train_sent_no_faster_than_it_measured_is_refused() {
        let mut t = AckTrain::new();
        // Paced at 1380 B per 900 us (under MAX_SEND_GAP, so still one train);
        // the ACKs come 2 packets per 1800 us: the sender's own spacing.
        for i in 0..6 {
            t.on_sent(at_us(i * 900), SEGMENT_SIZE);
        }
        let mut est = None;
        for frame in 0..3 {
            for i in 0..2 {
                let sent = at_us((frame * 2 + i) * 900);
                est = t.on_ack(at_us(50_000 + frame * 1800), sent, SEGMENT_SIZE, None);
            }
        }
        assert_eq!(est, None);
    }

    #[test]
    fn a_send_gap_ends_the_train() {
        let mut t = AckTrain::new();
        for _ in 0..4 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        t.on_sent(at_us(5_000), SEGMENT_SIZE);
        assert_eq!(t.packets, 4);
        assert_eq!(t.state, State::Acking);
        // Its ACK is not the train's.
        assert_eq!(
            t.on_ack(at_us(60_000), at_us(5_000), SEGMENT_SIZE, None),
            None
        );
        assert_eq!(t.acked, 0);
    }

    #[test]
    fn losses_complete_the_train_and_survivors_give_the_rate() {
        let mut t = four_pairs_acked(10);
        assert_eq!(t.on_lost(Instant::ZERO, 1), None, "one still awaited");
        // The survivor after the hole, one packet's time behind: same rate.
        let est = t
            .on_ack(at_us(101_610), Instant::ZERO, SEGMENT_SIZE, None)
            .expect("trusted")
            .bw;
        let expected = (2 * SEGMENT_SIZE) as f64 / 460e-6;
        assert!((est - expected).abs() < 1e-6 * expected);
        // Loss reported after the last ACK completes it instead.
        let mut t = four_pairs_acked(10);
        let est = t.on_lost(Instant::ZERO, 2).expect("trusted").bw;
        let expected = (6 * SEGMENT_SIZE) as f64 / 1380e-6;
        assert!((est - expected).abs() < 1e-6 * expected);
    }

    #[test]
    fn a_timeout_abandons_the_train() {
        let mut t = AckTrain::new();
        for _ in 0..10 {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        t.abort();
        assert_eq!(t.state, State::Done(None));
        assert_eq!(
            t.on_ack(at_us(100_000), Instant::ZERO, SEGMENT_SIZE, None),
            None
        );
    }

    /// Ten packets at t = 0, all acknowledged in one frame that dates each
    /// packet: the i-th received `rx_us[i]` after the first.
    fn dated_one_by_one(rx_us: &[u64]) -> Option<f64> {
        dated(rx_us).map(|e| e.bw)
    }

    fn dated(rx_us: &[u64]) -> Option<Estimate> {
        let mut t = AckTrain::new();
        for _ in 0..rx_us.len() {
            t.on_sent(Instant::ZERO, SEGMENT_SIZE);
        }
        t.on_frame(Some(at_us(7_000_000 + rx_us[rx_us.len() - 1])));
        let mut est = None;
        for &rx in rx_us {
            let rx = Some(at_us(7_000_000 + rx));
            est = t.on_ack(at_us(100_000), Instant::ZERO, SEGMENT_SIZE, rx);
        }
        est
    }

    #[test]
    fn a_rate_resting_on_the_last_burst_alone_is_a_lower_bound() {
        // Receive times mahimahi gave at 50 Mbit/s (4-5 packets per tick):
        // eight released at once by a late wake-up, then the last two.
        let est = dated(&[0, 34, 41, 47, 52, 56, 62, 69, 1155, 1170]).expect("trusted");
        assert!(est.lower_bound);
        let expected = (2 * SEGMENT_SIZE) as f64 / (1170e-6 - 69e-6);
        assert!((est.bw - expected).abs() < 1e-6 * expected, "{est:?}");
        // A tick skipped, then the six left: as little known.
        assert!(
            dated(&[0, 5, 9, 14, 2110, 2115, 2119, 2124, 2130, 2135])
                .expect("trusted")
                .lower_bound
        );
        // Full ticks between the first and the last measure the link.
        let three = dated(&[0, 24, 30, 35, 1129, 1144, 1149, 1154, 2249, 2265]);
        assert!(!three.expect("trusted").lower_bound);
        // Even spacing measures it too.
        let even: Vec<u64> = (0..10).map(|i| i * 232).collect();
        assert!(!dated(&even).expect("trusted").lower_bound);
    }

    #[test]
    fn packets_dated_one_by_one_give_the_spacing() {
        let rx: Vec<u64> = (0..10).map(|i| i * 232).collect();
        let expected = (9 * SEGMENT_SIZE) as f64 / (9.0 * 232e-6);
        let est = dated_one_by_one(&rx).expect("trusted");
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
    }

    #[test]
    fn a_link_delivering_on_ticks_gives_the_bytes_per_tick() {
        // A trace emulator's 1 ms ticks (each ~1.1 ms late) at 4 packets
        // per tick; the last tick is partial. The whole span would say 2
        // packets per tick.
        let rx = [0, 5, 9, 14, 1130, 1135, 1139, 1144, 2240, 2245];
        let expected = (4 * SEGMENT_SIZE) as f64 / (1144e-6 - 14e-6);
        let est = dated_one_by_one(&rx).expect("trusted");
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
        // Exact ticks (the simulator's bursty link): 4, 4, 2 at 0, 1, 2 ms.
        let rx = [0, 0, 0, 0, 1000, 1000, 1000, 1000, 2000, 2000];
        let expected = (4 * SEGMENT_SIZE) as f64 / 1e-3;
        let est = dated_one_by_one(&rx).expect("trusted");
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
        // A tick skipped: 4, then 6 in the catching-up tick.
        let rx = [0, 5, 9, 14, 2110, 2115, 2119, 2124, 2130, 2135];
        let expected = (6 * SEGMENT_SIZE) as f64 / (2135e-6 - 14e-6);
        let est = dated_one_by_one(&rx).expect("trusted");
        assert!((est - expected).abs() < 1e-6 * expected, "{est}");
    }

    #[test]
    fn a_burst_longer_than_the_silence_before_it_says_nothing() {
        // An emulator that woke late released nine at once, 37 us after
        // the first: the gap is no tick, and no link rate.
        assert_eq!(
            dated_one_by_one(&[0, 37, 45, 53, 60, 65, 71, 79, 85, 90]),
            None
        );
    }

    #[test]
    fn packets_that_passed_each_other_say_nothing() {
        // Jitter after the bottleneck: the fourth came in before the third.
        let rx = [0, 232, 700, 464, 928, 1160, 1392, 1624, 1856, 2088];
        assert_eq!(dated_one_by_one(&rx), None);
    }
}
