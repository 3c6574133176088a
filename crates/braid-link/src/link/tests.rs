//! The link model against hand-computed departures, queues, marks and seeds.

use super::*;
use crate::config::{state_changes, LinkEventKind};
use crate::loss::Gilbert;

#[test]
fn a_bursty_link_delivers_on_its_ticks_at_the_same_rate() {
    let cfg = |burst| LinkConfig {
        burst,
        ..LinkConfig::new(Rate::BitsPerSec(48_000_000), Duration::from_millis(5))
    };
    let mut even = Link::new(cfg(Duration::ZERO), 1);
    let mut bursty = Link::new(cfg(Duration::from_millis(1)), 1);
    let mut last = (Instant::ZERO, Instant::ZERO);
    let mut per_tick = std::collections::BTreeMap::new();
    for i in 0..100u64 {
        // 1500 bytes every 0.2 ms, faster than the 0.25 ms it takes to
        // serve one: a queue builds and each tick carries what was
        // served by then, four packets.
        let now = Instant::from_nanos(i * 200_000);
        let at = |o: Offer| match o {
            Offer::Deliver { at, .. } => at,
            Offer::Dropped(why) => panic!("dropped: {why:?}"),
        };
        let e = at(even.offer(now, 1500, Ecn::NotEct, 0));
        let b = at(bursty.offer(now, 1500, Ecn::NotEct, 0));
        assert_eq!(b.as_nanos() % 1_000_000, 0, "off the tick: {b:?}");
        assert!(b >= e && b - e < Duration::from_millis(1), "{b:?} vs {e:?}");
        *per_tick.entry(b).or_insert(0) += 1;
        last = (e, b);
    }
    // Same rate overall: the last packets leave within a tick.
    assert!(last.1 - last.0 < Duration::from_millis(1));
    let counts: Vec<u32> = per_tick.values().copied().collect();
    let inner = &counts[1..counts.len() - 1];
    assert!(
        inner.iter().all(|&n| n == 4),
        "48 Mbit/s is four 1500 B packets a ms: {counts:?}"
    );
}

#[test]
fn outages_end_in_order() {
    let s = Duration::from_secs;
    let events = [
        LinkEvent {
            at: s(1),
            kind: LinkEventKind::Down {
                duration: Some(s(2)),
            },
        },
        LinkEvent {
            at: s(3),
            kind: LinkEventKind::Close,
        },
    ];
    assert_eq!(
        state_changes(&events),
        [
            (s(1), LinkState::Down),
            (s(3), LinkState::Up),
            (s(3), LinkState::Closed)
        ]
    );
}

const MS: u64 = 1_000_000;

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * MS)
}

fn deliver(o: Offer) -> (Instant, Ecn, u8, Duration, Option<Instant>) {
    match o {
        Offer::Deliver {
            at,
            ecn,
            mbecn,
            queue_delay,
            duplicate_at,
        } => (at, ecn, mbecn, queue_delay, duplicate_at),
        Offer::Dropped(r) => panic!("dropped: {r:?}"),
    }
}

fn at(o: Offer) -> u64 {
    deliver(o).0.as_nanos()
}

fn link(cfg: LinkConfig) -> Link {
    Link::new(cfg, 1)
}

fn traced(text: &str) -> LinkConfig {
    LinkConfig {
        trace: Some(Arc::new(Trace::parse(text).unwrap())),
        ..LinkConfig::default()
    }
}

#[test]
fn fifty_megabit_serialises_at_the_right_rate() {
    let mut cfg = LinkConfig::new(Rate::mbit(50), Duration::from_millis(20));
    cfg.queue = QueueLimit::Packets(1000);
    let mut l = link(cfg);
    let mut last = 0;
    for i in 0..1000u64 {
        let (a, _, _, qd, _) = deliver(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0));
        // 1500 B at 50 Mbit/s = 240 us each.
        assert_eq!(a.as_nanos(), (i + 1) * 240_000 + 20 * MS);
        assert_eq!(qd, Duration::from_nanos(i * 240_000));
        last = a.as_nanos();
    }
    assert_eq!(last, 260 * MS);
    let s = l.stats();
    assert_eq!(
        (s.delivered, s.bytes_delivered, s.max_queue_packets),
        (1000, 1_500_000, 1000)
    );
    // The queue empties at 240 ms and a new packet starts at once.
    assert_eq!(l.queue_packets(ms(240)), 0);
    assert_eq!(
        at(l.offer(ms(300), 1500, Ecn::NotEct, 0)),
        300 * MS + 240_000 + 20 * MS
    );
}

#[test]
fn odd_rates_do_not_drift() {
    // 7 bits/s-ish rounding: 1 byte at 3 bit/s takes 2.666… s.
    let mut l = link(LinkConfig::new(Rate::BitsPerSec(3), Duration::ZERO));
    let times: Vec<u64> = (0..3)
        .map(|_| at(l.offer(Instant::ZERO, 1, Ecn::NotEct, 0)))
        .collect();
    assert_eq!(times, [2_666_666_667, 5_333_333_334, 8_000_000_000]);
}

#[test]
fn packet_rate_ignores_size() {
    let mut l = link(LinkConfig::new(Rate::PacketsPerSec(1024.0), Duration::ZERO));
    for n in 1..=10u64 {
        let size = if n % 2 == 0 { 100 } else { 1500 };
        let want = (n as f64 * 1e9 / 1024.0).ceil() as u64;
        assert_eq!(at(l.offer(Instant::ZERO, size, Ecn::NotEct, 0)), want);
    }
}

#[test]
fn packet_queue_overflows_exactly() {
    // 12 Mbit/s: one 1500-byte packet per ms.
    let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
    cfg.queue = QueueLimit::Packets(10);
    let mut l = link(cfg);
    let outcomes: Vec<bool> = (0..15)
        .map(|_| {
            matches!(
                l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
                Offer::Deliver { .. }
            )
        })
        .collect();
    assert_eq!(outcomes, [&[true; 10][..], &[false; 5]].concat());
    assert_eq!(l.stats().dropped_queue, 5);
    // Just before the first departure the queue is still full.
    let o = l.offer(Instant::from_nanos(MS - 1), 1500, Ecn::NotEct, 0);
    assert_eq!(o, Offer::Dropped(DropReason::Queue));
    // At 1 ms one packet has left; exactly one more fits.
    assert_eq!(at(l.offer(ms(1), 1500, Ecn::NotEct, 0)), 11 * MS);
    assert_eq!(
        l.offer(ms(1), 1500, Ecn::NotEct, 0),
        Offer::Dropped(DropReason::Queue)
    );
}

#[test]
fn byte_queue_overflows_exactly() {
    let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
    cfg.queue = QueueLimit::Bytes(4000);
    let mut l = link(cfg);
    assert!(matches!(
        l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
        Offer::Deliver { .. }
    ));
    assert!(matches!(
        l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
        Offer::Deliver { .. }
    ));
    assert_eq!(
        l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
        Offer::Dropped(DropReason::Queue)
    );
    assert!(matches!(
        l.offer(Instant::ZERO, 1000, Ecn::NotEct, 0),
        Offer::Deliver { .. }
    ));
    assert_eq!(
        l.offer(Instant::ZERO, 1, Ecn::NotEct, 0),
        Offer::Dropped(DropReason::Queue)
    );
    assert_eq!(l.queue_bytes(Instant::ZERO), 4000);
    assert_eq!(l.queue_bytes(ms(1)), 2500);
}

#[test]
fn jitter_reorders_within_bounds() {
    let mut cfg = LinkConfig::new(Rate::mbit(100), Duration::from_millis(10));
    cfg.jitter = Duration::from_millis(5);
    let mut l = link(cfg);
    let mut prev = 0;
    let mut reordered = 0;
    for i in 0..2000u64 {
        let now = Instant::from_nanos(i * 200_000);
        let a = at(l.offer(now, 1000, Ecn::NotEct, 0));
        let dep = now.as_nanos() + 80_000;
        assert!(a >= dep + 5 * MS && a <= dep + 15 * MS, "{a} vs {dep}");
        reordered += u32::from(a < prev);
        prev = a;
    }
    assert!(reordered > 100, "{reordered}");
}

#[test]
fn jitter_larger_than_delay_never_arrives_before_departure() {
    let mut cfg = LinkConfig::new(Rate::mbit(100), Duration::from_millis(1));
    cfg.jitter = Duration::from_millis(5);
    let mut l = link(cfg);
    for i in 0..1000u64 {
        let now = Instant::from_nanos(i * MS);
        assert!(at(l.offer(now, 1000, Ecn::NotEct, 0)) >= now.as_nanos() + 80_000);
    }
}

#[test]
fn bernoulli_loss_rate_is_close() {
    let mut cfg = LinkConfig::new(Rate::mbit(100), Duration::ZERO);
    cfg.loss = 0.05;
    let mut l = Link::new(cfg, 9);
    for i in 0..100_000u64 {
        l.offer(Instant::from_nanos(i * MS), 1000, Ecn::NotEct, 0);
    }
    let s = l.stats();
    let rate = s.dropped_loss as f64 / s.offered as f64;
    assert!((rate - 0.05).abs() < 0.003, "{rate}");
    assert_eq!(s.dropped_loss + s.delivered, 100_000);
}

#[test]
fn threshold_marks_ecn_capable_packets_only() {
    let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
    cfg.ecn = EcnMode::Threshold(5);
    let mut l = link(cfg);
    let marks: Vec<Ecn> = (0..10)
        .map(|_| deliver(l.offer(Instant::ZERO, 1500, Ecn::Ect0, 0)).1)
        .collect();
    assert_eq!(marks, [&[Ecn::Ect0; 4][..], &[Ecn::Ce; 6]].concat());
    assert_eq!(
        deliver(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0)).1,
        Ecn::NotEct
    );
    assert_eq!(deliver(l.offer(Instant::ZERO, 1500, Ecn::Ce, 0)).1, Ecn::Ce);
    assert_eq!(l.stats().ce_marked, 6);
}

#[test]
fn mbecn_ors_queue_depth_over_sixteen() {
    let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
    cfg.ecn = EcnMode::MbEcn;
    let mut l = link(cfg);
    let fields: Vec<u8> = (0..40)
        .map(|_| deliver(l.offer(Instant::ZERO, 1500, Ecn::Ect1, 0)).2)
        .collect();
    // Packet i sees a queue of i + 1.
    for (i, &f) in fields.iter().enumerate() {
        assert_eq!(f, ((i + 1) >> 4) as u8, "packet {i}");
    }
    // 41 deep → 2, OR 4 → 6.
    assert_eq!(deliver(l.offer(Instant::ZERO, 1500, Ecn::Ect1, 4)).2, 6);
}

#[test]
fn trace_of_one_is_twelve_megabit() {
    let mut l = link(LinkConfig {
        delay: Duration::from_millis(5),
        ..traced("1")
    });
    for n in 1..=100u64 {
        assert_eq!(
            at(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0)),
            (n + 5) * MS
        );
    }
    // 1.2 MB in 100 ms is 12 Mbit/s; the queue is empty again at 100 ms.
    assert_eq!(l.queue_packets(ms(100)), 0);
}

#[test]
fn trace_opportunities_are_shared_and_split() {
    let mut l = link(traced("1"));
    let mut send = |now: u64, size| at(l.offer(Instant::from_nanos(now), size, Ecn::NotEct, 0));
    assert_eq!([send(0, 500), send(0, 500), send(0, 500)], [MS; 3]);
    // 1000 + 1000: the second takes the rest of 2 ms and half of 3 ms.
    assert_eq!([send(0, 1000), send(0, 1000)], [2 * MS, 3 * MS]);
    // Arriving at 3.5 ms after the queue emptied: the leftover of 3 ms
    // is gone, the next opportunity is 4 ms.
    assert_eq!(send(3 * MS + MS / 2, 1500), 4 * MS);
    // A 4000-byte packet spans three opportunities.
    assert_eq!(send(3 * MS + MS / 2, 4000), 7 * MS);
}

#[test]
fn trace_loops_and_wastes_idle_opportunities() {
    let mut l = link(traced("1\n1\n3"));
    let times: Vec<u64> = (0..6)
        .map(|_| at(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0)) / MS)
        .collect();
    assert_eq!(times, [1, 1, 3, 4, 4, 6]);
    // Idle until 20 ms: loop 6 has 19, 19, 21 and loop 7 has 22, 22, 24.
    let times: Vec<u64> = (0..4)
        .map(|_| at(l.offer(ms(20), 1500, Ecn::NotEct, 0)) / MS)
        .collect();
    assert_eq!(times, [21, 22, 22, 24]);
}

#[test]
fn down_and_closed_links_drop() {
    let mut l = link(LinkConfig::new(Rate::mbit(10), Duration::ZERO));
    l.set_state(ms(1), LinkState::Down);
    assert!(!l.is_up());
    assert_eq!(
        l.offer(ms(1), 100, Ecn::NotEct, 0),
        Offer::Dropped(DropReason::Down)
    );
    l.set_state(ms(2), LinkState::Up);
    assert!(matches!(
        l.offer(ms(2), 100, Ecn::NotEct, 0),
        Offer::Deliver { .. }
    ));
    l.set_state(ms(3), LinkState::Closed);
    l.set_state(ms(4), LinkState::Up);
    assert_eq!(l.state(), LinkState::Closed);
    assert_eq!(l.state_since(), ms(3));
    assert_eq!(
        l.offer(ms(4), 100, Ecn::NotEct, 0),
        Offer::Dropped(DropReason::Down)
    );
    assert_eq!(l.stats().dropped_down, 2);
}

#[test]
fn duplicates_arrive_separately() {
    let mut cfg = LinkConfig::new(Rate::mbit(10), Duration::from_millis(10));
    cfg.duplicate = 1.0;
    cfg.jitter = Duration::from_millis(2);
    let mut l = link(cfg);
    let (a, _, _, _, dup) = deliver(l.offer(Instant::ZERO, 1000, Ecn::NotEct, 0));
    let dup = dup.unwrap();
    assert!(dup.as_nanos().abs_diff(a.as_nanos()) <= 4 * MS);
    assert_eq!(l.stats().duplicated, 1);
}

#[test]
fn validation_names_the_setting() {
    assert_eq!(LinkConfig::default().validate(), Ok(()));
    let bad = |cfg: LinkConfig| cfg.validate().unwrap_err().field;
    assert_eq!(
        bad(LinkConfig::new(Rate::BitsPerSec(0), Duration::ZERO)),
        "rate"
    );
    assert_eq!(
        bad(LinkConfig {
            loss: 1.5,
            ..LinkConfig::default()
        }),
        "loss"
    );
    assert_eq!(
        bad(LinkConfig {
            duplicate: f64::NAN,
            ..LinkConfig::default()
        }),
        "duplicate"
    );
    let gilbert = Some(Gilbert {
        p: 0.1,
        r: -0.3,
        h: 1.0,
        k: 0.0,
    });
    assert_eq!(
        bad(LinkConfig {
            gilbert,
            ..LinkConfig::default()
        }),
        "gilbert.r"
    );
    let full = LinkConfig {
        loss: 1.0,
        ..LinkConfig::default()
    };
    assert_eq!(full.validate(), Ok(()));
}

#[test]
fn queue_limits_parse_as_packets_or_bytes() {
    assert_eq!("300".parse(), Ok(QueueLimit::Packets(300)));
    assert_eq!("256KB".parse(), Ok(QueueLimit::Bytes(256_000)));
    assert_eq!("1500B".parse(), Ok(QueueLimit::Bytes(1500)));
    for bad in ["0", "0KB", "", "ten", "99999999999"] {
        assert!(bad.parse::<QueueLimit>().is_err(), "{bad:?}");
    }
    assert_eq!(" 300 ".parse(), Ok(QueueLimit::Packets(300)));
    assert_eq!(QueueLimit::packets(300), "300".parse());
    assert!(QueueLimit::packets(-1).unwrap_err().contains("-1 packets"));
}

#[test]
fn zero_rate_serves_nothing() {
    let mut l = link(LinkConfig::new(Rate::BitsPerSec(0), Duration::ZERO));
    assert_eq!(
        l.offer(Instant::ZERO, 100, Ecn::NotEct, 0),
        Offer::Dropped(DropReason::Queue)
    );
}

#[test]
fn same_seed_same_outcomes() {
    let mut cfg = LinkConfig::new(Rate::mbit(20), Duration::from_millis(10));
    cfg.loss = 0.05;
    cfg.gilbert = Some(Gilbert {
        p: 0.01,
        r: 0.3,
        h: 1.0,
        k: 0.0,
    });
    cfg.jitter = Duration::from_millis(3);
    cfg.duplicate = 0.02;
    cfg.queue = QueueLimit::Packets(50);
    let run = |seed| {
        let mut l = Link::new(cfg.clone(), seed);
        (0..5000u64)
            .map(|i| l.offer(Instant::from_nanos(i * 300_000), 1400, Ecn::Ect0, 0))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}
