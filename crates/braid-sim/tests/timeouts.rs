//! Retransmission timeouts that prove spurious, in virtual time: the
//! packets they declared lost are in flight again, and what the stall
//! cost is not mistaken for the path's behaviour since.

use braid_sim::Scenario;

/// Two 1024-packet/s paths, one down for a second while its queue holds
/// on to what it had: the timeout there is partly spurious (packets that
/// had arrived, their ACKs dropped) and partly not (the ones the outage
/// dropped). Those found lost after the timeout was undone were counted
/// in BBR's rate sample as random loss, which BBR paces through: the path
/// kept a 100 ms standing queue to the end (p95 one-way delay 157 ms).
#[test]
fn losses_found_after_a_spurious_timeout_are_not_random_loss() {
    let s = Scenario::from_str(
        r#"
        name = "outage on one of two paths"
        time_limit = "120s"
        path = [
            { rate = "1024pps", delay = "50ms", queue = 20000 },
            { rate = "1024pps", delay = "50ms", queue = 20000, events = [{ at = "4s", do = "down", for = "1s" }] },
        ]
        [[flow]]
        cc = "bbr"
        bytes = "24MiB"
        segment_size = 1024
        send_window = "4MiB"
        recv_window = "4MiB"
        "#,
        ".",
    )
    .unwrap();
    for seed in 1..=3 {
        let r = braid_sim::run(&s, Some(seed));
        let f = &r.flows[0].forward;
        assert!(f.completed && f.verified, "seed {seed}");
        assert!(f.spurious_timeouts >= 1, "seed {seed}: {f:?}");
        let owd = f.owd_p95_ms.expect("measured");
        assert!(owd < 100.0, "seed {seed}: p95 one-way delay {owd:.1} ms");
    }
}
