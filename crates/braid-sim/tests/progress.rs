//! The retry limit measures time without progress, not losses: a sender
//! that loses most of its packets on a path that still delivers completes.

use braid_sim::Scenario;

/// NKP-0024's fixed session window of 3000 packets into a 5-packet queue:
/// almost everything is lost, and each segment is retransmitted many times
/// over, but something is acknowledged every round trip.
#[test]
fn a_huge_ncp_window_into_a_tiny_queue_completes_slowly() {
    let s = Scenario::from_str(
        r#"
        name = "ncp into a 5-packet queue"
        time_limit = "600s"
        [[path]]
        rate = "10Mbit"
        delay = "20ms"
        queue = 5
        [[flow]]
        cc = "ncp"
        bytes = "2MB"
        send_window = "4MiB"
        initial_windows = [3000]
        "#,
        ".",
    )
    .unwrap();
    let r = braid_sim::run(&s, Some(1)).to_json(false);
    let f = &r["flows"][0];
    assert_eq!(f["verified"], true, "{f}");
    assert!(f["retransmitted"].as_u64().unwrap() > 15 * 1450, "{f}");
}

/// The same flood at 1 Mbit/s with 10 % loss each way, and a small flow
/// on the same queue: the front of ncp's stream waited 15 s for one of its
/// copies to get through, and the retry limit counted its 15 timeouts
/// (probes are 1 s apart) in those 15 s and failed a transfer that
/// completes 25 s later. It now waits as long as 16 doubling timeouts
/// would take, as TCP does.
#[test]
fn a_flood_stalling_for_15_s_is_outwaited() {
    let r = all_complete(&flood_beside_a_small_flow(0.1), 3);
    // The stall that used to end it.
    let ncp = &r["flows"][0];
    assert!(ncp["duration_s"].as_f64().unwrap() > 30.0, "{ncp}");
}

/// The same flood without loss keeps the 5-packet queue full for 40 s: a
/// second session's HELLOs, one a second, find no room for seconds (which
/// one first finds a slot free is chance: the 6th here, the 11th while the
/// flood's receiver still asked for its few ACK ranges to be acknowledged),
/// and a 10 s handshake timeout used to end it. Kernel TCP's SYNs (0, 1,
/// 3 ... 63 s) keep trying; so does braid now.
#[test]
fn a_handshake_behind_a_40_s_flood_outwaits_it() {
    let mut s = flood_beside_a_small_flow(0.0);
    all_complete(&s, 1);
    // What it outwaited: giving up at 4 s fails.
    s.flows[1].session.handshake_timeout = std::time::Duration::from_secs(4);
    let r = braid_sim::run(&s, Some(1)).to_json(false);
    let small = &r["flows"][1];
    let error = small["error"].as_str().unwrap_or_default();
    assert!(error.contains("handshake timed out"), "{small}");
}

/// ncp's 5 MB flood through a 5-packet, 1 Mbit/s queue, with `loss` each
/// way, and a 12 KB cubic flow starting a second later.
fn flood_beside_a_small_flow(loss: f64) -> Scenario {
    Scenario::from_str(
        &format!(
            r#"
            name = "ncp flood with a small flow"
            time_limit = "600s"
            [[path]]
            rate = "1Mbit"
            delay = "10ms"
            loss = {loss}
            reverse_loss = {loss}
            queue = 5
            [[flow]]
            cc = "ncp"
            bytes = "5MB"
            [[flow]]
            cc = "cubic"
            bytes = 12421
            start = "1s"
            "#
        ),
        ".",
    )
    .unwrap()
}

/// Runs `s` with `seed` and checks that every flow delivered and verified.
fn all_complete(s: &Scenario, seed: u64) -> serde_json::Value {
    let r = braid_sim::run(s, Some(seed)).to_json(false);
    for f in r["flows"].as_array().unwrap() {
        assert_eq!(f["error"], serde_json::Value::Null, "{f}");
        assert_eq!(f["verified"], true, "{f}");
    }
    r
}

/// One connection closes for good and the other is down for 6.6 s: the
/// retry limit counts per connection, so the closed one's timeouts do not
/// add up with the other's, and the transfer completes when it is back.
/// (Found by the property test.)
#[test]
fn a_long_outage_beside_a_dead_path_is_outlasted() {
    let s = Scenario::from_str(
        r#"
        name = "outage beside a dead path"
        time_limit = "120s"
        sample_interval = "100ms"
        [[path]]
        rate = "3Mbit"
        delay = "44ms"
        jitter = "1ms"
        reverse_loss = 0.0505
        queue = 6
        events = [{ at = "1218ms", do = "down", for = "6603ms" }]
        [[path]]
        rate = "1Mbit"
        delay = "10ms"
        jitter = "4ms"
        duplicate = 0.0316
        queue = 9
        events = [{ at = "997ms", do = "close" }]
        [[flow]]
        cc = "aimd"
        bytes = 0
        reverse_bytes = 151651
        "#,
        ".",
    )
    .unwrap();
    let r = braid_sim::run(&s, Some(67030)).to_json(false);
    let f = &r["flows"][0];
    assert_eq!(f["reverse"]["verified"], true, "{f}");
}

/// The client gets the server's answer just before a 4 s outage, and its
/// confirmation is lost in it: the server's half-open session must still
/// be there when the client's probes get through, as a SYN_RECV socket is
/// for TCP: braid-proto keeps it (`UNCONFIRMED_TIMEOUT`) longer than the
/// client's silence limit (`MIN_SILENCE`). When it expired sooner, the
/// client, its packets now dropped as strangers', failed in the silence.
/// (Found by the property test.)
#[test]
fn an_outage_right_after_the_handshake_is_outlasted() {
    let s = Scenario::from_str(
        r#"
        name = "outage after the answer"
        time_limit = "120s"
        [[path]]
        rate = "1Mbit"
        delay = "77ms"
        queue = 5
        events = [{ at = "165ms", do = "down", for = "4002ms" }]
        [[flow]]
        cc = "aimd"
        bytes = "20kB"
        reverse_bytes = "20kB"
        "#,
        ".",
    )
    .unwrap();
    assert_both_ways_verified(&s, 0);
}

/// The server's answers are lost in an outage longer than its half-open
/// sessions live, and the client (with a long handshake timeout) keeps
/// opening: the session that finally answers is a new one, and the
/// simulated server application starts over with it instead of counting
/// what it wrote into the forgotten one. (Found by the property test.)
#[test]
fn a_forgotten_half_open_session_starts_its_transfer_over() {
    let mut s = Scenario::from_str(
        r#"
        name = "answer lost in an outage"
        time_limit = "120s"
        [[path]]
        rate = "1Mbit"
        delay = "38ms"
        queue = 5
        events = [{ at = "48ms", do = "down", for = "17s" }]
        [[flow]]
        cc = "aimd"
        bytes = "1kB"
        reverse_bytes = "1kB"
        "#,
        ".",
    )
    .unwrap();
    s.flows[0].session.handshake_timeout = std::time::Duration::from_secs(30);
    assert_both_ways_verified(&s, 0);
}

/// Runs `s` with `seed`: its first flow ends without an error, each way verified.
fn assert_both_ways_verified(s: &Scenario, seed: u64) {
    let r = braid_sim::run(s, Some(seed)).to_json(false);
    let f = &r["flows"][0];
    assert_eq!(f["error"], serde_json::Value::Null, "{f}");
    assert_eq!(f["verified"], true, "{f}");
    assert_eq!(f["reverse"]["verified"], true, "{f}");
}

/// Full duplex at 30 % loss each way: connections often seem down, and one
/// that does probes at most a second after its last probe, however many
/// ACKs it sends for the peer's data meanwhile. Those ACKs used to put its
/// probes off, so its direction waited for the other's to finish (or
/// failed at the retry limit, as the rudp bench rows did).
#[test]
fn full_duplex_at_30_percent_loss_moves_both_ways_at_once() {
    let text = |reverse: &str| {
        format!(
            r#"
            name = "duplex at 30 % loss"
            time_limit = "600s"
            [[path]]
            rate = "50Mbit"
            delay = "0.5ms"
            loss = 0.3
            reverse_loss = 0.3
            queue = 300
            [[flow]]
            cc = "aimd"
            bytes = "2MB"
            reverse_bytes = "{reverse}"
            "#
        )
    };
    let alone = Scenario::from_str(&text("0"), ".").unwrap();
    let duplex = Scenario::from_str(&text("2MB"), ".").unwrap();
    let seeds = 1..=8;
    let mut times: Vec<f64> = seeds
        .clone()
        .map(|seed| {
            braid_sim::run(&alone, Some(seed)).flows[0]
                .forward
                .duration_s
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let alone_median = times[times.len() / 2];
    for seed in seeds {
        let r = braid_sim::run(&duplex, Some(seed));
        let f = &r.flows[0];
        assert!(f.error.is_none(), "seed {seed}: {:?}", f.error);
        let reverse = f.reverse.as_ref().unwrap();
        for (way, d) in [("forward", &f.forward), ("reverse", reverse)] {
            assert!(d.verified, "seed {seed} {way}");
            assert!(
                d.duration_s < 1.4 * alone_median,
                "seed {seed} {way}: {:.0} s, alone {alone_median:.0} s",
                d.duration_s
            );
        }
    }
}
