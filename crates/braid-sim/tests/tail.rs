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

/// NKP-0024's base connection and four slow ones, packet-rate links with
/// queues deep enough never to drop: nothing is lost, so nothing may go
/// twice. The receiver sends only ACKs; had it asked for them to be
/// acknowledged (a PING each round trip, for its few ranges), the sender's
/// ACK-only answers would each take a data packet's place on a 128 pps
/// link and hold the data behind them a packet time, past when the tail
/// copies judge the slow connections' last segments overdue: 289 of them
/// went again on the base connection, 0.2 % of the goodput.
#[test]
fn a_lossless_transfer_over_packet_rate_links_sends_nothing_twice() {
    let slow = r#"
        [[path]]
        rate = "128pps"
        delay = "500ms"
        queue = 20000
    "#;
    let scenario = Scenario::from_str(
        &format!(
            r#"
            name = "base plus four slow"
            time_limit = "60s"
            [[path]]
            rate = "1024pps"
            delay = "50ms"
            queue = 20000
            {slow}{slow}{slow}{slow}
            [[flow]]
            cc = "ncp"
            bytes = "16MiB"
            segment_size = 1024
            send_window = "4MiB"
            recv_window = "4MiB"
            initial_rto = "5s"
            max_rto = "10s"
            "#
        ),
        ".",
    )
    .unwrap();
    let run = braid_sim::run(&scenario, Some(1));
    let f = &run.flows[0].forward;
    assert!(f.verified);
    assert_eq!(f.lost_packets, 0);
    assert!(
        f.paths[1..].iter().all(|p| p.packets_sent > 1000),
        "the slow connections carried {:?}",
        f.paths
    );
    assert_eq!(f.retransmitted, 0, "segments sent twice without a loss");
}
