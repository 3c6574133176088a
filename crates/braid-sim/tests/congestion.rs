//! Generous floors on representative benchmark rows (issue 3), so that a
//! congestion-control regression fails CI. The full suites, with their real
//! targets, are run by `braid bench`; these only guard the shape.

use braid_sim::{FlowResult, RunResult, Scenario};
use std::path::PathBuf;

fn scenario(row: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(format!("{row}.toml"));
    Scenario::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `row` with every flow on controller `cc`, with the file's seed.
fn run(row: &str, cc: &str) -> RunResult {
    let mut s = scenario(row);
    for f in &mut s.flows {
        f.session.cc = cc.parse().expect("a known controller");
    }
    braid_sim::run(&s, None)
}

fn only_flow(r: &RunResult) -> &FlowResult {
    let f = &r.flows[0];
    assert!(
        f.forward.completed && f.forward.verified,
        "{}: flow did not complete: {:?}",
        r.scenario,
        f.error
    );
    f
}

/// Goodput at least `fraction` of `ideal_mbps`.
fn assert_floor(row: &str, cc: &str, ideal_mbps: f64, fraction: f64) -> RunResult {
    let r = run(row, cc);
    let goodput = only_flow(&r).forward.goodput_mbps;
    assert!(
        goodput >= fraction * ideal_mbps,
        "{row} with {cc}: {goodput:.2} Mbit/s < {:.0} % of {ideal_mbps} Mbit/s",
        fraction * 100.0
    );
    r
}

/// Both directions of a full-duplex row complete, each with at least
/// `fraction` of `ideal_mbps`.
fn assert_duplex_floor(row: &str, cc: &str, ideal_mbps: f64, fraction: f64) {
    let r = run(row, cc);
    let f = only_flow(&r);
    let back = f
        .reverse
        .as_ref()
        .expect("duplex row has a reverse direction");
    assert!(
        back.completed && back.verified,
        "{row}: reverse did not complete"
    );
    for (dir, g) in [
        ("forward", f.forward.goodput_mbps),
        ("reverse", back.goodput_mbps),
    ] {
        assert!(
            g >= fraction * ideal_mbps,
            "{row} {dir} with {cc}: {g:.2} Mbit/s < {:.0} % of {ideal_mbps}",
            fraction * 100.0
        );
    }
}

#[test]
fn random_loss_does_not_stop_bbr() {
    // catchunks: TCP cubic gets 3.1 Mbit/s here, kernel BBR 46.9.
    assert_floor("catchunks-loss/loss-1pct", "bbr", 49.5, 0.8);
    assert_floor("catchunks-loss/loss-5pct", "bbr", 47.5, 0.8);
}

#[test]
fn a_20_packet_queue_is_filled_by_every_window_controller() {
    // catchunks' AIMD got 5.7 Mbit/s of 50 here; pacing is the cure.
    for cc in ["cubic", "bbr"] {
        assert_floor("catchunks-queue/queue-20", cc, 50.0, 0.8);
    }
}

#[test]
fn jitter_is_not_mistaken_for_loss() {
    for cc in ["cubic", "bbr"] {
        let r = assert_floor("catchunks-jitter/rtt-100ms-jitter-20ms", cc, 50.0, 0.8);
        let f = only_flow(&r);
        let spurious = f.forward.spurious_retransmits as f64 / f.forward.segments as f64;
        assert!(
            spurious < 0.01,
            "{cc}: {:.2} % of segments retransmitted spuriously",
            spurious * 100.0
        );
    }
}

#[test]
fn cubic_has_no_spurious_timeouts_on_a_400ms_path() {
    // catchunks' CUBIC at k = 4 had 260 spurious retransmissions here.
    let r = run("catchunks-cubic-aimd/cubic-k4", "cubic");
    let f = only_flow(&r);
    assert_eq!(f.forward.timeouts, 0);
    assert_eq!(f.forward.spurious_retransmits, 0);
}

#[test]
fn windows_autotune_past_the_default_on_a_long_fat_path() {
    // 1 Gbit/s × 30 ms is 3.75 MB; the windows start at 4 MiB and must grow
    // to twice that for the path to fill.
    assert_floor("rapid/rtt-30ms", "cubic", 1000.0, 0.7);
}

#[test]
fn mbecn_keeps_a_short_queue() {
    let r = assert_floor("mbecn/one-flow", "mbecn", 100.0, 0.9);
    let rtt = only_flow(&r).forward.rtt_ms;
    // 1 ms each way; a 22-packet standing queue at 100 Mbit/s adds ~2.5 ms
    // (issue 3's target is 20 packets).
    assert!(
        rtt.avg < rtt.min + 2.5,
        "average RTT {:.1} ms over a minimum of {:.1} ms",
        rtt.avg,
        rtt.min
    );
}

#[test]
fn mbecn_flows_share_a_bottleneck() {
    // The second flow starts at 2 s; compare mean throughputs from 2.5 s
    // until the first flow to finish stops.
    let r = run("mbecn/two-flows", "mbecn");
    let end = r
        .flows
        .iter()
        .map(|f| f.series.last().map_or(0.0, |p| p.t))
        .fold(f64::INFINITY, f64::min);
    let means: Vec<f64> = r
        .flows
        .iter()
        .map(|f| {
            let xs: Vec<f64> = f
                .series
                .iter()
                .filter(|p| p.t >= 2.5 && p.t < end - 0.1)
                .map(|p| p.throughput_mbps)
                .collect();
            xs.iter().sum::<f64>() / xs.len().max(1) as f64
        })
        .collect();
    let sum: f64 = means.iter().sum();
    let sq: f64 = means.iter().map(|x| x * x).sum();
    let jain = sum * sum / (means.len() as f64 * sq);
    assert!(jain >= 0.98, "Jain {jain:.4} of {means:?} Mbit/s");
}

#[test]
fn two_paths_of_different_rates_are_both_filled() {
    // NKP-0024's equal-start experiment: 1024 + 128 packets/s, 1024 bytes.
    let ideal = (1024.0 + 128.0) * 1024.0 * 8.0 / 1e6;
    assert_floor("nkp0024/8-window-equal-start", "bbr", ideal, 0.8);
}

#[test]
fn ncp_fills_one_connection_from_a_flow_blocked_start() {
    // NKP-0024 row 1: the session window is the whole flow-control window,
    // so the sender is blocked before its first RTT sample.
    let ideal = 1024.0 * 1024.0 * 8.0 / 1e6;
    assert_floor("nkp0024/1-base", "ncp", ideal, 0.9);
}

#[test]
fn full_duplex_bbr_fills_both_directions() {
    // Each direction's ACKs queue behind the other's data. Without the ACK
    // path's delay in its window, one BBR direction starved at 27 Mbit/s.
    assert_duplex_floor("rudp/loss-0pct-duplex", "bbr", 50.0, 0.85);
}

#[test]
fn slow_long_paths_add_to_a_fast_one_without_holding_up_the_tail() {
    // NKP-0024 row 5: 1024 pps at 100 ms plus four 128 pps paths at 1 s.
    // Blind first flights on the slow paths and their tail once held the
    // stream up (79 % of ideal); the scheduler now gets past 92 %.
    let ideal = (1024.0 + 4.0 * 128.0) * 1024.0 * 8.0 / 1e6;
    let r = assert_floor("nkp0024/5-base-plus-4-slow", "ncp", ideal, 0.92);
    let f = only_flow(&r);
    // Each slow path carries at least most of its share.
    for p in f.forward.paths.iter().filter(|p| p.path > 0) {
        assert!(
            p.goodput_mbps >= 0.7 * 128.0 * 1024.0 * 8.0 / 1e6,
            "slow path {} carried only {:.2} Mbit/s",
            p.path,
            p.goodput_mbps
        );
    }
}

#[test]
fn initial_windows_set_each_connection_s_first_window() {
    // Row 9: the fast connection starts at 4095 packets, the slow at 1.
    let r = run("nkp0024/9-window-extreme-start", "ncp");
    let f = only_flow(&r);
    let first = |path: u8| {
        f.series
            .iter()
            .find(|p| p.path == path)
            .map(|p| p.window)
            .expect("a sample of each connection")
    };
    assert!(
        first(0) >= 4000.0,
        "fast connection started at {}",
        first(0)
    );
    assert!(first(1) <= 16.0, "slow connection started at {}", first(1));
}

#[test]
fn full_duplex_bbr_with_jitter_and_loss_fills_both_directions() {
    // Each direction's first-flight ACKs ride on the other's paced data or
    // queue behind it: measured on arrival they gave 8 Mbit/s (50 real) and
    // STARTUP ended there, so one direction ran at 30.5 Mbit/s. The
    // receiver's receive times give the train; queueing on the ACK path
    // no longer reads as our own queue in STARTUP's loss exit.
    assert_duplex_floor("rudp/loss-10pct-jitter-duplex", "bbr", 45.0, 0.75);
}

#[test]
fn full_duplex_bbr_with_jitter_keeps_acks_small() {
    // Every queue-overflow loss leaves a hole in the received packet
    // numbers for good, so ACK frames listing every range grew to ~330
    // bytes, went in packets of their own and took 13 % of each direction's
    // bytes: 39.3/39.5 Mbit/s. Forgetting ranges the sender has heard of
    // gives 42.8/43.4.
    assert_duplex_floor("rudp/loss-0pct-jitter-duplex", "bbr", 50.0, 0.82);
}

#[test]
fn a_slow_connection_starting_with_a_huge_window_does_not_queue_the_stream() {
    // NKP-0024 row 10: the 128 pps connection starts at 4095 packets. Its
    // queue once held the stream up for ~30 s (3.4-3.7 Mbit/s); the
    // scheduler's queue cap keeps it near four times its BDP (~9.1-9.2 now).
    let ideal = (1024.0 + 128.0) * 1024.0 * 8.0 / 1e6;
    for cc in ["aimd", "ncp"] {
        assert_floor("nkp0024/10-window-extreme-start-reversed", cc, ideal, 0.85);
    }
}

#[test]
fn ncp_window_shares_follow_the_rates_within_two_seconds() {
    // NKP-0024 row 8: equal start on 1024 and 128 pps. NKP-0024's per-ACK
    // growth takes ~10 s to bring the shares within 10 % of 8/9 and 1/9;
    // sharing the session window by delivery rate takes about one second.
    assert_slow_share_settled("nkp0024/8-window-equal-start", 2000);
}

#[test]
fn ncp_window_shares_follow_the_rates_from_an_extreme_start() {
    // NKP-0024 row 9 (fast path from 4095 packets, slow from 1): the fast
    // path's rate read across its first-flight gap stayed ~10 % low until
    // 1.15 s; measured by difference the shares settle by 0.4 s.
    assert_slow_share_settled("nkp0024/9-window-extreme-start", 800);
}

/// Asserts the slow connection's window share stays within 10 % of 1/9
/// from `from_ms` on.
fn assert_slow_share_settled(row: &str, from_ms: u64) {
    let r = run(row, "ncp");
    let f = only_flow(&r);
    let mut at: std::collections::BTreeMap<u64, (f64, f64)> = Default::default();
    for p in &f.series {
        let e = at.entry((p.t * 1000.0).round() as u64).or_default();
        if p.path == 0 {
            e.0 = p.window;
        } else {
            e.1 = p.window;
        }
    }
    let late: Vec<_> = at.iter().filter(|(t, _)| **t >= from_ms).collect();
    assert!(late.len() > 50, "too few samples after {from_ms} ms");
    for (t, (fast, slow)) in late {
        let share = slow / (fast + slow);
        assert!(
            (share - 1.0 / 9.0).abs() <= 0.1 / 9.0,
            "{row}: slow share {share:.3} at {t} ms"
        );
    }
}

/// A link at 1.2 Mbit/s for 5 s that then speeds up tenfold (a mahimahi
/// trace): the bytes `cc` delivers in the first second at the new rate.
fn delivered_in_the_second_after_a_speedup(cc: &str) -> u64 {
    let dir = std::env::temp_dir().join(format!("braid-speedup-{}-{cc}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let slow = (10..5000).step_by(10);
    let fast = 5001..=10_000;
    let stamps: Vec<String> = slow.chain(fast).map(|ms| ms.to_string()).collect();
    std::fs::write(dir.join("speedup.trace"), stamps.join("\n")).unwrap();
    let delivered_by = |limit: &str| {
        let text = format!(
            "time_limit = \"{limit}\"\n\
             [[path]]\ntrace = \"speedup.trace\"\nreverse_rate = \"12Mbit\"\n\
             delay = \"20ms\"\nqueue = 300\n\
             [[flow]]\ncc = \"{cc}\"\nbytes = \"20MB\"\n"
        );
        let r = braid_sim::run(&Scenario::from_str(&text, &dir).unwrap(), None);
        r.flows[0].forward.delivered
    };
    let gained = delivered_by("6s") - delivered_by("5s");
    std::fs::remove_dir_all(&dir).unwrap();
    gained
}

#[test]
fn bbr_follows_a_link_that_speeds_up_within_a_second() {
    // BBR's bandwidth filter learns the new rate only as fast as it sends;
    // the queue built while the link was slow drains at the new rate, and
    // pacing at the peer's receive rate sends at it from the first round.
    // The new rate's payload bytes per second, at braid's own overhead.
    let segment = braid_proto::SessionConfig::default().segment_size;
    let datagram = usize::from(segment)
        + braid_proto::wire::datagram_overhead(false)
        + braid_proto::wire::stream_frame_overhead(1 << 20)
        + braid_link::IP_UDP_OVERHEAD as usize;
    let fast = 12e6 / 8.0 * f64::from(segment) / datagram as f64;
    let bbr = delivered_in_the_second_after_a_speedup("bbr");
    assert!(
        bbr as f64 >= 0.5 * fast,
        "bbr delivered {bbr} B in the second after the speedup, < half of {fast:.0}"
    );
}
