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
