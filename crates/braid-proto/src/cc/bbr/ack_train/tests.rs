//! Tests of the ACK-train estimate, with hand-made receive times.

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
    assert_eq!(
        t.on_lost(at_us(101_600), Instant::ZERO, 1),
        None,
        "one still awaited"
    );
    // The survivor after the hole, one packet's time behind: same rate.
    let est = t
        .on_ack(at_us(101_610), Instant::ZERO, SEGMENT_SIZE, None)
        .expect("trusted")
        .bw;
    let expected = (2 * SEGMENT_SIZE) as f64 / 460e-6;
    assert!((est - expected).abs() < 1e-6 * expected);
    // Loss reported after the last ACK completes it instead.
    let mut t = four_pairs_acked(10);
    let est = t
        .on_lost(at_us(101_600), Instant::ZERO, 2)
        .expect("trusted")
        .bw;
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

/// A relay's late timer released the whole first flight at once: the
/// receiver dated the packets 1 µs apart, a 110 Gbit/s link. The train
/// grants only its delivery rate on our clock (its bytes over the 100 ms
/// from its first send to the ACK), as a lower bound.
#[test]
fn a_train_received_within_the_floor_grants_its_delivery_rate() {
    let rx: Vec<u64> = (0..10).collect();
    let est = dated(&rx).expect("kept");
    assert!(est.lower_bound);
    let expected = (10 * SEGMENT_SIZE) as f64 / 0.1;
    assert!((est.bw - expected).abs() < 1e-6 * expected, "{est:?}");
    // Shared stamps in two groups 20 µs apart: as little known.
    let est = dated(&[0, 0, 0, 0, 0, 20, 20, 20, 20, 20]).expect("kept");
    assert!(
        est.lower_bound && est.bw <= expected * (1.0 + 1e-9),
        "{est:?}"
    );
    // A 1 Gbit/s link spaces IW10 over ~100 µs: its estimate stands.
    let rx: Vec<u64> = (0..10).map(|i| i * 11).collect();
    let est = dated(&rx).expect("trusted");
    assert!(!est.lower_bound && est.bw > 1e8, "{est:?}");
}

/// One packet acknowledged at `ack_us`, sent at `sent_us`.
fn one_packet(t: &mut AckTrain, sent_us: u64, ack_us: u64) -> Option<Estimate> {
    t.on_sent(at_us(sent_us), 75);
    t.on_ack(at_us(ack_us), at_us(sent_us), 75, None)
}

/// A first flight of one packet (a file's manifest, before the receiver
/// answers) is not a train: the flight after it is measured instead, and
/// leaves unpaced until the train closes.
#[test]
fn a_short_first_flight_leaves_the_train_to_the_next() {
    let mut t = AckTrain::new();
    assert!(!t.awaits_flight());
    assert_eq!(one_packet(&mut t, 0, 100_000), None);
    assert!(t.awaits_flight());
    let start = at_us(200_000);
    for _ in 0..10 {
        t.on_sent(start, SEGMENT_SIZE);
    }
    let mut est = None;
    for frame in 0..5 {
        for _ in 0..2 {
            est = t.on_ack(at_us(300_000 + frame * 460), start, SEGMENT_SIZE, None);
        }
        assert!(!t.awaits_flight(), "the first ACK closes the train");
    }
    let expected = (8 * SEGMENT_SIZE) as f64 / 1840e-6;
    assert!((est.expect("trusted").bw - expected).abs() < 1e-6 * expected);
}

/// Only once: an application that keeps sending single packets gets no
/// train and is paced as usual after its second.
#[test]
fn a_second_short_flight_ends_the_train() {
    let mut t = AckTrain::new();
    assert_eq!(one_packet(&mut t, 0, 100_000), None);
    assert_eq!(one_packet(&mut t, 200_000, 300_000), None);
    assert_eq!(t.state, State::Done(None));
    assert!(!t.awaits_flight());
}
