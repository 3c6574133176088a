//! Path MTU discovery in virtual time: a flow grows its datagrams to what
//! the link carries, and one whose link's MTU falls mid-transfer finishes
//! at the smaller size.

use braid_sim::{Delivery, RunResult, Scenario, Sim};

fn run(toml: &str) -> RunResult {
    let scenario = Scenario::from_str(toml, ".").expect("scenario parses");
    let seed = scenario.seed;
    Sim::new(scenario, seed).run()
}

/// The only flow's forward delivery, which must have completed and verified.
fn delivered(toml: &str) -> Delivery {
    let mut r = run(toml);
    let flow = r.flows.swap_remove(0);
    let f = flow.forward;
    assert!(f.completed && f.verified, "{:?}", flow.error);
    f
}

/// [`delivered`] of a flow that searches for its path MTU (with `flow`'s
/// keys besides) over one `link`, a TOML inline table, within `time_limit`.
fn searching(time_limit: &str, link: &str, flow: &str) -> Delivery {
    delivered(&format!(
        "time_limit = \"{time_limit}\"\npath = [{link}]\nflow = [{{ pmtud = true, {flow} }}]\n"
    ))
}

#[test]
fn a_flow_on_an_ethernet_link_finds_its_1472_byte_payload() {
    let f = searching(
        "60s",
        r#"{ rate = "20Mbit", delay = "10ms", queue = 100 }"#,
        r#"bytes = "5MB""#,
    );
    let p = &f.paths[0];
    assert_eq!(p.max_datagram, 1472, "1500-byte MTU less IPv4 and UDP");
    assert_eq!(p.pmtu_black_holes, 0);
    // Nothing larger than the MTU was needed: no timeouts on a clean link.
    assert_eq!(p.timeouts, 0);
}

#[test]
fn a_larger_mtu_is_found_as_far_as_the_link_carries() {
    let f = searching(
        "60s",
        r#"{ rate = "50Mbit", delay = "5ms", mtu = 9000 }"#,
        r#"bytes = "5MB""#,
    );
    assert_eq!(f.paths[0].max_datagram, 9000 - 28);
}

#[test]
fn a_flow_that_does_not_ask_stays_at_its_base_size() {
    let r = run(r#"
        time_limit = "60s"
        [[path]]
        rate = "20Mbit"
        delay = "10ms"
        [[flow]]
        bytes = "1MB"
        segment_size = 1024
        "#);
    let f = &r.flows[0].forward;
    assert!(f.completed);
    // The base: 1024 of payload, the header (11 bytes at most), a 9-byte STREAM header at most.
    assert_eq!(f.paths[0].max_datagram, 1024 + 11 + 9);
}

#[test]
fn an_mtu_falling_mid_transfer_is_a_black_hole_the_flow_falls_back_from() {
    // 1500 until 2 s, then 1280 (IPv6's minimum, as a tunnel on the route).
    let f = searching(
        "120s",
        r#"{ rate = "20Mbit", delay = "10ms", queue = 100, events = [{ at = "2s", do = "mtu", mtu = 1280 }] }"#,
        r#"bytes = "20MB", segment_size = 1200"#,
    );
    let p = &f.paths[0];
    assert_eq!(p.pmtu_black_holes, 1, "{p:?}");
    assert!(
        p.max_datagram <= 1280 - 28 && p.max_datagram > 1200,
        "settles under the new MTU: {}",
        p.max_datagram
    );
    // 20 MB at 20 Mbit/s takes 8 s: the fallback cost little.
    assert!(f.duration_s < 12.0, "{}", f.duration_s);
}

#[test]
fn datagrams_larger_than_the_initial_window_still_fill_a_fast_short_link() {
    // Loopback-like: 16 KiB datagrams, a 50 µs delay. The first probe is
    // acknowledged before the initial window (10 segments of 1,380 bytes)
    // holds two of them, and a lone packet in flight waits out the peer's
    // 10 ms ACK delay every round trip unless the window is at least two.
    let f = searching(
        "60s",
        r#"{ rate = "1Gbit", delay = "50us", mtu = 16412 }"#,
        r#"bytes = "20MB""#,
    );
    assert_eq!(f.paths[0].max_datagram, 16384);
    let mbit = f.goodput_mbps;
    assert!(mbit > 600.0, "{mbit:.0} Mbit/s of 1000");
}

#[test]
fn an_outage_is_no_black_hole() {
    // A 3-second outage times out everything in flight, full-size packets
    // all. Counted as black-hole evidence when the timer fired, they sent
    // the flow back to the base size. They count only once an ACK of a
    // later packet confirms them, and the full-size packets acknowledged
    // after the outage clear them.
    let f = searching(
        "120s",
        r#"{ rate = "20Mbit", delay = "20ms", queue = 100, events = [{ at = "3s", do = "down", for = "3s" }] }"#,
        r#"bytes = "20MB""#,
    );
    let p = &f.paths[0];
    assert!(p.timeouts >= 2, "{p:?}");
    assert_eq!((p.pmtu_black_holes, p.max_datagram), (0, 1472), "{p:?}");
}
