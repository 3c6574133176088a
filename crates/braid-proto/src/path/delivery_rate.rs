//! A path's delivery-rate estimate
//! (draft-cheng-iccrg-delivery-rate-estimation).
//!
//! Each packet remembers how much the path had delivered when it left;
//! its ACK turns the bytes delivered since then into a rate sample for the
//! rate-based controllers. A windowed maximum of the samples is what the
//! scheduler and the window normalisation take the path to deliver.

use super::sent::SentPacket;
use crate::cc::RateSample;
use crate::rtt::RttEstimator;
use crate::Instant;
use std::time::Duration;

/// Round trips a delivery-rate maximum is kept before a lower sample may
/// replace it (BBR keeps its bandwidth maximum for 10 rounds; shorter here
/// so the scheduler follows a path that slows down).
const DELIVERY_RATE_RTTS: u32 = 4;

/// The path's delivery state when a packet left.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SendState {
    delivered: u64,
    delivered_time: Instant,
    /// The peer's clock at `delivered_time`'s delivery, µs, when known.
    delivered_rx_us: Option<u64>,
    first_sent_time: Instant,
    app_limited: bool,
}

/// What an acknowledged packet contributes to the ACK's rate sample.
#[derive(Debug, Clone, Copy)]
struct RateState {
    prior_delivered: u64,
    prior_time: Instant,
    prior_rx_us: Option<u64>,
    send_elapsed: Duration,
    rtt: Duration,
    app_limited: bool,
}

/// The rate sample of one ACK frame, built packet by packet.
#[derive(Debug)]
pub(super) struct AckSample {
    /// The peer's receive time of these deliveries, µs, when the ACK dates them.
    rx_us: Option<u64>,
    /// The interval starts where the acknowledged packet that left last
    /// (with the most delivered before it) says.
    start: Option<RateState>,
    acked_bytes: u64,
}

impl AckSample {
    pub fn new(rx_us: Option<u64>) -> Self {
        AckSample {
            rx_us,
            start: None,
            acked_bytes: 0,
        }
    }
}

#[derive(Debug)]
pub(super) struct DeliveryRate {
    delivered: u64,
    delivered_time: Instant,
    /// The peer's receive time of the newest delivery, µs (see
    /// [`crate::wire::AckFrame::rx_timestamp_us`]).
    delivered_rx_us: Option<u64>,
    first_sent_time: Instant,
    /// `delivered` value until which samples are application-limited; 0 = not.
    app_limited_until: u64,
    /// Windowed maximum of recent samples, bytes/s, and when it was taken.
    max_rate: f64,
    max_rate_at: Instant,
    /// First rate sample of the current group of samples sharing one
    /// delivery point (`prior_delivered`, bytes delivered, interval); see
    /// `update_max`.
    rate_group: Option<(u64, u64, Duration)>,
    /// Bytes of the initial window: groups starting no later are measured
    /// by difference.
    first_flight: u64,
}

impl DeliveryRate {
    pub fn new(now: Instant, first_flight: u64) -> Self {
        DeliveryRate {
            delivered: 0,
            delivered_time: now,
            delivered_rx_us: None,
            first_sent_time: now,
            app_limited_until: 0,
            max_rate: 0.0,
            max_rate_at: now,
            rate_group: None,
            first_flight,
        }
    }

    /// Bytes per second the path has recently delivered; 0 = not measured.
    pub fn rate(&self) -> f64 {
        self.max_rate
    }

    /// A packet leaves now; `idle` when nothing else is in flight, and
    /// samples then start afresh (draft §3.2).
    pub fn on_sent(&mut self, now: Instant, idle: bool) -> SendState {
        if idle {
            self.first_sent_time = now;
            self.delivered_time = now;
            self.delivered_rx_us = None;
        }
        SendState {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            delivered_rx_us: self.delivered_rx_us,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited_until != 0,
        }
    }

    /// The sender ran out of data with `in_flight` bytes out: samples
    /// until those are delivered understate the path.
    pub fn on_app_limited(&mut self, in_flight: u64) {
        self.app_limited_until = (self.delivered + in_flight).max(1);
    }

    /// A packet declared lost arrived after all, or one delayed through a
    /// spurious timeout: it counts as delivered, without a rate sample.
    pub fn on_late_delivery(&mut self, bytes: u64) {
        self.delivered += bytes;
    }

    /// `p` was acknowledged by the ACK frame arriving `now`.
    pub fn on_acked(&mut self, now: Instant, p: &SentPacket, ack: &mut AckSample) {
        ack.acked_bytes += p.charge;
        self.delivered += p.charge;
        self.delivered_time = now;
        self.delivered_rx_us = ack.rx_us;
        let s = &p.delivery;
        if ack.start.is_none_or(|r| s.delivered >= r.prior_delivered) {
            ack.start = Some(RateState {
                prior_delivered: s.delivered,
                prior_time: s.delivered_time,
                prior_rx_us: s.delivered_rx_us,
                send_elapsed: p.sent_at - s.first_sent_time,
                rtt: now - p.sent_at,
                app_limited: s.app_limited,
            });
            self.first_sent_time = p.sent_at;
        }
    }

    /// The ACK frame is processed: its rate sample, with `lost` bytes
    /// declared lost meanwhile and `in_flight` left, which also feeds the
    /// windowed maximum. `ack_queue_delay` is passed on to controllers.
    pub fn on_ack_end(
        &mut self,
        now: Instant,
        ack: AckSample,
        lost: u64,
        rtt: &RttEstimator,
        in_flight: u64,
        ack_queue_delay: Duration,
    ) -> Option<RateSample> {
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let r = ack.start?;
        let acked = now - r.prior_time;
        // The receiver's clock spaces deliveries free of the ACK path's
        // queueing, but it is the peer's word: it may fall short of the ACKs'
        // own interval by no more than the ACK path can have queued (this
        // round trip's excess over the minimum, on our clock) and an ACK
        // delay. A peer stamping every packet alike would otherwise make
        // each sample our own send rate.
        let excess = r.rtt.saturating_sub(rtt.min()) + ACK_DELAY_SLACK;
        let received = receive_elapsed(&r, ack.rx_us).filter(|&d| d + excess >= acked);
        let interval = r.send_elapsed.max(received.unwrap_or(acked));
        let delivered = self.delivered - r.prior_delivered;
        // An interval shorter than the minimum RTT cannot be right (§3.3).
        let valid = !interval.is_zero() && interval >= rtt.min().min(r.rtt);
        let sample = RateSample {
            delivery_rate: if valid {
                delivered as f64 / interval.as_secs_f64()
            } else {
                0.0
            },
            interval,
            delivered,
            prior_delivered: r.prior_delivered,
            total_delivered: self.delivered,
            rtt: r.rtt,
            is_app_limited: r.app_limited,
            newly_acked: ack.acked_bytes,
            newly_lost: lost,
            in_flight,
            ack_queue_delay,
            // Over at least the minimum RTT, so that a link's bursts average out.
            receive_rate: match received {
                Some(d) if !d.is_zero() && d >= rtt.min() => delivered as f64 / d.as_secs_f64(),
                _ => 0.0,
            },
        };
        self.update_max(now, &sample, rtt);
        Some(sample)
    }

    /// Keeps the largest rate sample of the last few round trips (BBR's
    /// BtlBw filter, shortened); an application-limited sample only raises it.
    ///
    /// Packets sent between the same two deliveries share one start of
    /// interval, and a sample's interval then includes any time the path
    /// sat idle before them: the first round trip of a path, or the gap
    /// after a first flight held to the initial window, would be read as a
    /// low rate until a packet sent after the gap is acknowledged, a queue
    /// later (NKP-0024 row 9: the fast path's 1024 packets/s read as ~900
    /// for over a second). Two samples of one group differ only by what
    /// arrived between their ACKs, so their difference measures the rate
    /// with the gap left out, over at least a quarter of the minimum RTT.
    /// Only for groups sent before the first flight was delivered: later,
    /// on a bursty link (examples/wifi-plus-lte), such short differences
    /// overstated the rate.
    fn update_max(&mut self, now: Instant, s: &RateSample, rtt: &RttEstimator) {
        if s.delivery_rate <= 0.0 {
            return;
        }
        let mut rate = s.delivery_rate;
        match self.rate_group {
            Some((prior, delivered, interval)) if prior == s.prior_delivered => {
                let span = s.interval.saturating_sub(interval);
                if !s.is_app_limited
                    && s.delivered > delivered
                    && span >= rtt.min() / 4
                    && prior <= self.first_flight
                    && !span.is_zero()
                {
                    rate = rate.max((s.delivered - delivered) as f64 / span.as_secs_f64());
                }
            }
            _ => self.rate_group = Some((s.prior_delivered, s.delivered, s.interval)),
        }
        let window = rtt.srtt_or(Duration::from_secs(1)) * DELIVERY_RATE_RTTS;
        let expired = now >= self.max_rate_at + window;
        if rate >= self.max_rate || (expired && !s.is_app_limited) {
            self.max_rate = rate;
            self.max_rate_at = now;
        }
    }
}

/// The most an ACK may be held at the peer: RFC 9000's default
/// `max_ack_delay`, above braid's 10 ms.
const ACK_DELAY_SLACK: Duration = Duration::from_millis(25);

/// draft-cheng-iccrg-delivery-rate-estimation §3.3 divides by the longer of
/// the send and ACK intervals, so ACK compression cannot inflate the
/// estimate. Where both ends of the interval carry the peer's receive
/// timestamps, the ACK interval is measured on the receiver's clock
/// instead: the ACK path's queueing then neither stretches it (a
/// full-duplex peer's growing queue read as a bandwidth plateau) nor
/// compresses it. `None` (then the sender's ACK interval) where one end
/// is undated.
fn receive_elapsed(r: &RateState, rx_us: Option<u64>) -> Option<Duration> {
    match (rx_us, r.prior_rx_us) {
        (Some(rx), Some(prior)) if rx >= prior => Some(Duration::from_micros(rx - prior)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const SEGMENT_SIZE: u64 = 1200;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// A path's packets in flight, oldest first, with its estimate.
    struct Flow {
        rate: DeliveryRate,
        in_flight: Vec<SentPacket>,
        rtt: RttEstimator,
    }

    impl Flow {
        fn new() -> Self {
            Flow {
                rate: DeliveryRate::new(at(0), 10 * SEGMENT_SIZE),
                in_flight: Vec::new(),
                rtt: RttEstimator::default(),
            }
        }

        fn send(&mut self, now: Instant, packets: usize) {
            for _ in 0..packets {
                let idle = self.in_flight.is_empty();
                self.in_flight.push(SentPacket {
                    sent_at: now,
                    charge: SEGMENT_SIZE,
                    segment: None,
                    retransmission: false,
                    revived: false,
                    size: 0,
                    delivery: self.rate.on_sent(now, idle),
                });
            }
        }

        /// The oldest `packets` are acknowledged now; the peer received
        /// the newest at `rx_ms` on its clock, if given.
        fn ack(&mut self, now: Instant, packets: usize, rx_ms: Option<u64>) -> RateSample {
            let acked: Vec<SentPacket> = self.in_flight.drain(..packets).collect();
            self.rtt
                .update(now - acked.last().unwrap().sent_at, Duration::ZERO);
            let mut ack = AckSample::new(rx_ms.map(|ms| ms * 1000));
            for p in &acked {
                self.rate.on_acked(now, p, &mut ack);
            }
            let in_flight = self.in_flight.len() as u64 * SEGMENT_SIZE;
            let rtt = &self.rtt;
            let sample = self
                .rate
                .on_ack_end(now, ack, 0, rtt, in_flight, Duration::ZERO);
            sample.expect("packets were acknowledged")
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b
    }

    #[test]
    fn a_flight_delivers_its_bytes_over_the_round_trip() {
        let mut flow = Flow::new();
        flow.send(at(0), 10);
        let s = flow.ack(at(100), 10, None);
        assert_eq!(
            (s.interval, s.delivered, s.newly_acked),
            (100 * MS, 12_000, 12_000)
        );
        assert!(close(s.delivery_rate, 120_000.0), "{s:?}");
        assert!(close(flow.rate.rate(), 120_000.0));
    }

    #[test]
    fn peer_timestamps_keep_ack_path_queueing_out_of_the_interval() {
        let mut flow = Flow::new();
        flow.send(at(0), 1);
        flow.send(at(60), 10);
        flow.ack(at(100), 1, Some(50));
        flow.send(at(100), 10);
        flow.ack(at(160), 10, Some(110));
        // The ACK path grew 30 ms slower: 130 ms between the ACKs, while
        // the peer received the packets 100 ms apart.
        let s = flow.ack(at(230), 10, Some(150));
        assert_eq!((s.interval, s.delivered), (100 * MS, 24_000));
        assert!(close(s.delivery_rate, 240_000.0), "{s:?}");
    }

    #[test]
    fn the_peer_receive_rate_shows_a_queue_draining_faster_than_it_was_sent() {
        let mut flow = Flow::new();
        // The peer's clock runs 1 s ahead; 50 ms each way, bare.
        flow.send(at(0), 1);
        flow.ack(at(100), 1, Some(1050));
        // A (and B behind it) wait 200 ms in a queue behind a slow link.
        flow.send(at(100), 2);
        flow.ack(at(400), 1, Some(1350));
        // Ten more, sent over 180 ms; the link has sped up, and the last
        // arrives after the bare 50 ms.
        for ms in (0..200).step_by(20) {
            flow.send(at(400 + ms), 1);
        }
        let s = flow.ack(at(680), 11, Some(1630));
        // Sent over 480 ms since A, received (and acknowledged) 280 ms
        // after it: the queue drained faster than it was sent.
        assert_eq!((s.interval, s.delivered), (480 * MS, 13_200));
        assert!(close(s.receive_rate, 13_200.0 / 0.28), "{s:?}");
        assert!(s.delivery_rate < s.receive_rate / 1.5, "{s:?}");
    }

    /// A peer stamping every packet alike (forged, or a stuck clock) would
    /// make each sample our own send rate: its receive interval is not
    /// believed beyond what the ACK path can explain.
    #[test]
    fn stuck_receive_times_do_not_make_samples_our_send_rate() {
        let mut flow = Flow::new();
        flow.send(at(0), 1);
        flow.ack(at(100), 1, Some(7));
        // Sent one per 10 ms; the bottleneck passes one per 20 ms, as the
        // ACKs show, while every receive time says 7 ms.
        for i in 0..40 {
            flow.send(at(100 + 10 * i), 1);
        }
        let mut last = None;
        for i in 0..20 {
            last = Some(flow.ack(at(200 + 20 * i), 1, Some(7)));
        }
        let s = last.unwrap();
        // 1200 bytes per 20 ms is 60 KB/s; sending was 120 KB/s.
        assert!(s.delivery_rate < 70_000.0, "{s:?}");
        assert_eq!(s.receive_rate, 0.0, "{s:?}");
    }

    #[test]
    fn no_receive_rate_over_less_than_the_minimum_rtt_or_undated() {
        let mut flow = Flow::new();
        flow.send(at(0), 3);
        flow.ack(at(100), 1, Some(50));
        flow.send(at(100), 2);
        // 40 ms on the peer's clock, under the minimum RTT (50 ms): a burst.
        let s = flow.ack(at(150), 3, Some(90));
        assert_eq!((flow.rtt.min(), s.receive_rate), (50 * MS, 0.0));
        assert!(s.delivery_rate > 0.0);
        assert_eq!(flow.ack(at(300), 1, None).receive_rate, 0.0);
    }

    #[test]
    fn app_limited_lasts_until_its_flight_is_delivered() {
        let mut flow = Flow::new();
        flow.send(at(0), 2);
        flow.rate.on_app_limited(2 * SEGMENT_SIZE);
        flow.send(at(10), 1);
        assert!(!flow.ack(at(100), 1, None).is_app_limited);
        flow.send(at(100), 1);
        assert!(flow.ack(at(110), 2, None).is_app_limited);
        // Delivered now exceeds what was out when the sender ran dry.
        assert_eq!(flow.rate.app_limited_until, 0);
        flow.send(at(110), 1);
        assert!(!flow.ack(at(210), 2, None).is_app_limited);
    }

    /// A sample of `rate` bytes/s with its own delivery point.
    fn sample(rate: f64, prior_delivered: u64, app_limited: bool) -> RateSample {
        RateSample {
            delivery_rate: rate,
            interval: 100 * MS,
            delivered: (rate / 10.0) as u64,
            prior_delivered,
            is_app_limited: app_limited,
            ..RateSample::default()
        }
    }

    #[test]
    fn the_maximum_holds_four_round_trips_and_app_limited_samples_only_raise_it() {
        let mut rate = DeliveryRate::new(at(0), 10 * SEGMENT_SIZE);
        let mut rtt = RttEstimator::default();
        rtt.update(100 * MS, Duration::ZERO);
        rate.update_max(at(0), &sample(1000.0, 1, false), &rtt);
        rate.update_max(at(399), &sample(500.0, 2, false), &rtt);
        assert_eq!(rate.rate(), 1000.0);
        rate.update_max(at(400), &sample(500.0, 3, true), &rtt);
        assert_eq!(rate.rate(), 1000.0);
        rate.update_max(at(400), &sample(2000.0, 4, true), &rtt);
        assert_eq!(rate.rate(), 2000.0);
        rate.update_max(at(800), &sample(500.0, 5, false), &rtt);
        assert_eq!(rate.rate(), 500.0);
    }

    #[test]
    fn a_first_flight_after_a_gap_is_measured_by_difference() {
        let mut rate = DeliveryRate::new(at(0), 10 * SEGMENT_SIZE);
        let mut rtt = RttEstimator::default();
        rtt.update(100 * MS, Duration::ZERO);
        // Both samples count a 1-s idle gap before their packets left; the
        // second delivered 12 kB more in 100 ms.
        let first = RateSample {
            delivery_rate: 12_000.0,
            interval: 1000 * MS,
            delivered: 12_000,
            ..RateSample::default()
        };
        let second = RateSample {
            delivery_rate: 24_000.0 / 1.1,
            interval: 1100 * MS,
            delivered: 24_000,
            ..RateSample::default()
        };
        rate.update_max(at(1000), &first, &rtt);
        rate.update_max(at(1100), &second, &rtt);
        assert!(close(rate.rate(), 120_000.0), "{}", rate.rate());
        // Past the first flight, the same difference is not trusted.
        let mut later = DeliveryRate::new(at(0), 10 * SEGMENT_SIZE);
        let past = 10 * SEGMENT_SIZE + 1;
        later.update_max(
            at(1000),
            &RateSample {
                prior_delivered: past,
                ..first
            },
            &rtt,
        );
        later.update_max(
            at(1100),
            &RateSample {
                prior_delivered: past,
                ..second
            },
            &rtt,
        );
        assert!(close(later.rate(), 24_000.0 / 1.1));
    }
}
