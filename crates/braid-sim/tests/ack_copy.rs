//! ACKs of a slow connection copied onto a fast one: the sender hears of
//! the slow connection's packets after its one-way delay plus the fast
//! one's, and the originals still carry the transfer when the fast
//! connection fails.

use braid_sim::Scenario;

/// 8 Mbit/s at 20 ms RTT beside 2 Mbit/s at 500 ms, 4 MB with `bbr`, and
/// `events` on the fast connection.
fn scenario(events: &str) -> Scenario {
    Scenario::from_str(
        &format!(
            r#"
            name = "fast and slow"
            time_limit = "120s"
            [[path]]
            rate = "8Mbit"
            delay = "10ms"
            queue = 100
            {events}
            [[path]]
            rate = "2Mbit"
            delay = "250ms"
            queue = 100
            [[flow]]
            cc = "bbr"
            bytes = "4MB"
            "#
        ),
        ".",
    )
    .unwrap()
}

/// The slow connection's round trips are measured by the copies that come
/// back on the fast one: 250 ms out and 10 ms back, not 500 ms.
#[test]
fn a_slow_connection_hears_of_its_packets_over_the_fast_one() {
    let run = braid_sim::run(&scenario(""), Some(1));
    let f = &run.flows[0];
    assert!(f.error.is_none(), "{:?}", f.error);
    assert!(f.forward.verified);
    let slow = &f.forward.paths[1];
    assert!(slow.packets_sent > 100, "the slow path carried {slow:?}");
    assert!(
        slow.srtt_ms < 350.0,
        "slow connection's smoothed RTT {:.0} ms: its ACKs came back on it",
        slow.srtt_ms
    );
}

/// The fast connection goes down for good 2 s in, ACK copies and all: the
/// slow connection's own ACKs carry the rest of the transfer.
#[test]
fn the_originals_carry_the_transfer_when_the_fast_connection_fails() {
    let down = r#"events = [{ at = "2s", do = "down", for = "200s" }]"#;
    let run = braid_sim::run(&scenario(down), Some(1));
    let f = &run.flows[0];
    assert!(f.error.is_none(), "{:?}", f.error);
    assert!(f.forward.verified);
    let slow = &f.forward.paths[1];
    assert!(
        slow.srtt_ms > 450.0,
        "after the fast connection failed, the slow one's RTT is its own: {:.0} ms",
        slow.srtt_ms
    );
}
