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
