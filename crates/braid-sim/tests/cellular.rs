//! BBR on recorded cellular links (the Verizon and AT&T LTE traces of
//! `scenarios/real/`): capacity that falls from ~10 to under 1 Mbit/s
//! within seconds, and an uplink that stalls for seconds at a time.

use braid_sim::{Delivery, Scenario};
use std::path::PathBuf;

/// The row's first 10 MB with seeds 1 to 3, each checked complete.
fn runs(row: &str) -> impl Iterator<Item = (u64, Delivery)> {
    runs_of(scenario(row))
}

fn scenario(row: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/real")
        .join(row);
    Scenario::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn runs_of(mut sc: Scenario) -> impl Iterator<Item = (u64, Delivery)> {
    sc.flows[0].bytes = 10_000_000;
    (1..=3).map(move |seed| {
        sc.seed = seed;
        let mut r = braid_sim::run(&sc, None);
        let flow = r.flows.remove(0);
        assert!(
            flow.forward.completed && flow.forward.verified,
            "seed {seed}: {:?}",
            flow.error
        );
        (seed, flow.forward)
    })
}

#[test]
fn bbr_drains_the_queue_when_rtprop_expires_on_a_cellular_link() {
    // Verizon, 10 MB: the first ~18 s, through the slow spell from 11 to
    // 17 s, while a queue stands long enough for RTprop to expire.
    for (seed, f) in runs("verizon-lte.toml") {
        // RTprop expires about 13.6 s in, with ~350 ms queued. When the
        // expired sample (not the propagation delay) sized PROBE_RTT's
        // window, PROBE_RTT drained nothing and the next ten seconds ran
        // with a BDP nine times too large: the queue grew to 2.3 s
        // (p95 RTT 1.3-1.4 s, retransmissions 0.2 %).
        assert!(
            f.rtt_ms.max < 1500.0 && f.rtt_ms.p95 < 800.0,
            "seed {seed}: RTT max {:.0} ms, p95 {:.0} ms",
            f.rtt_ms.max,
            f.rtt_ms.p95
        );
        // Not at the cost of the rate (4.45-4.53 Mbit/s either way).
        assert!(
            f.goodput_mbps > 4.2,
            "seed {seed}: {:.2} Mbit/s",
            f.goodput_mbps
        );
        assert!(
            f.retransmitted * 200 < f.segments,
            "seed {seed}: {} of {} retransmitted",
            f.retransmitted,
            f.segments
        );
    }
}

#[test]
fn bbr_keeps_the_link_busy_through_the_uplinks_stalls() {
    // AT&T behind a 200-packet queue: its uplink delivers nothing for
    // 1.0, 2.2 and 0.9 s within the first 9 s, while the downlink runs at
    // 10-17 Mbit/s. Only data already in flight when the ACKs stop keeps
    // the link busy through a stall, and after it the sender must catch
    // up with what the receiver gets at once.
    for (seed, f) in runs("att-lte-q200.toml") {
        // 4.92-5.00 Mbit/s. A window that covered 100 ms of ACKs at BtlBw
        // (Linux's bound on the aggregation estimate) gave 4.47-4.56; pacing
        // that kept up with the receiver only to 2 × BtlBw when the link
        // sped up after a stall, 4.73-4.79.
        assert!(
            f.goodput_mbps > 4.85,
            "seed {seed}: {:.2} Mbit/s",
            f.goodput_mbps
        );
        assert!(
            f.rtt_ms.p95 < 1200.0 && f.retransmitted * 20 < f.segments,
            "seed {seed}: p95 RTT {:.0} ms, {} of {} retransmitted",
            f.rtt_ms.p95,
            f.retransmitted,
            f.segments
        );
    }
}

#[test]
fn an_uplink_stall_is_a_spurious_timeout_not_losses_or_a_black_hole() {
    // AT&T behind 300 packets, with path MTU discovery as `braid send`
    // runs it: the uplink's first stalls hold the ACKs past the
    // retransmission timeout while the data waits in the queue. Taking
    // the timeout at its word declared 550-820 packets lost, and their
    // ~1,470-byte losses looked like a path MTU black hole 2-3 times.
    let mut sc = scenario("att-lte.toml");
    sc.discover_path_mtu(0);
    for (seed, f) in runs_of(sc) {
        let p = &f.paths[0];
        assert!(
            f.spurious_timeouts >= 1 && f.lost_packets == 0,
            "seed {seed}: {} of {} timeouts spurious, {} packets lost",
            f.spurious_timeouts,
            f.timeouts,
            f.lost_packets
        );
        assert_eq!(
            (p.pmtu_black_holes, p.max_datagram),
            (0, 1472),
            "seed {seed}"
        );
        assert!(
            f.retransmitted * 100 < f.segments,
            "seed {seed}: {} of {} retransmitted",
            f.retransmitted,
            f.segments
        );
    }
}
