//! The end of a transfer over a fast and a slow connection: the last
//! packets the slow one carries, and what happens when they are lost.

use braid_sim::Scenario;

/// 8 Mbit/s at 20 ms RTT beside 2 Mbit/s at 500 ms with a deep queue,
/// which `cubic` fills: 4 MB, the slow connection down from `down_at` (sim
/// time) for 10 s, or never.
fn scenario(down_at: Option<&str>) -> Scenario {
    let events = down_at.map_or(String::new(), |at| {
        format!(r#"events = [{{ at = "{at}", do = "down", for = "10s" }}]"#)
    });
    Scenario::from_str(
        &format!(
            r#"
            name = "fast and slow tail"
            time_limit = "60s"
            [[path]]
            rate = "8Mbit"
            delay = "10ms"
            [[path]]
            rate = "2Mbit"
            delay = "250ms"
            queue = 200
            {events}
            [[flow]]
            cc = "cubic"
            bytes = "4MB"
            "#
        ),
        ".",
    )
    .unwrap()
}

/// The slow connection goes down for the last quarter second of the
/// transfer, losing the packets it carried then and their ACKs. Its last
/// packets have no later ones to be found lost by, and its timeout counts
/// from an RTT its full queue inflated; the fast connection, idle by then,
/// sends them again once their acknowledgements are overdue. Without those
/// copies the transfer ends 0.87 s after the clean run, with them 0.48 s.
#[test]
fn packets_lost_on_a_slow_path_at_the_end_go_again_on_the_fast_one() {
    let clean = braid_sim::run(&scenario(None), Some(1));
    let clean = &clean.flows[0].forward;
    assert!(clean.verified);
    // With no loss there is nothing to copy.
    assert_eq!(clean.retransmitted, 0, "copies without a loss");
    let slow = &clean.paths[1];
    assert!(slow.packets_sent > 100, "the slow path carried {slow:?}");

    // The handshake takes one fast round trip before the clock starts.
    let end = clean.duration_s + 0.02;
    let down_at = format!("{}ms", ((end - 0.25) * 1000.0) as u64);
    let cut = braid_sim::run(&scenario(Some(&down_at)), Some(1));
    let f = &cut.flows[0];
    assert!(f.error.is_none(), "{:?}", f.error);
    assert!(f.forward.verified);
    assert!(
        f.forward.retransmitted > 0,
        "the outage did not catch the slow path's tail"
    );
    let late = f.forward.duration_s - clean.duration_s;
    assert!(
        late < 0.65,
        "{:.2} s after the clean run's {:.2} s",
        late,
        clean.duration_s
    );
}
