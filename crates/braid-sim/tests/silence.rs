//! When a silent peer is declared gone: after 10 s on a path that has shown
//! it delivers, later on one that has lost much or shown little, so a live
//! peer whose answers are being lost is not given up on.

use braid_proto::SessionError;
use braid_sim::{FlowError, Scenario};

/// A 60 kB flow on a path losing a fifth of the packets each way, cut by
/// 11.5 s of outage: a few dozen packets say little about the path, so the
/// session keeps probing past 10 s. With the 5-timeout limit it declared the peer
/// silent at 10 s (as a flood on a shared queue did, in the property test).
#[test]
fn a_small_lossy_flow_outlasts_a_long_silence() {
    let mut s = Scenario::from_str(
        r#"
        name = "small lossy flow, long outage"
        time_limit = "120s"
        [[path]]
        rate = "250kbit"
        delay = "30ms"
        loss = 0.2
        reverse_loss = 0.2
        events = [{ at = "1500ms", do = "down", for = "11500ms" }]
        [[flow]]
        cc = "cubic"
        bytes = "60kB"
        "#,
        ".",
    )
    .unwrap();
    // Where the outage catches the handshake, that has its own limit.
    s.flows[0].session.handshake_timeout = std::time::Duration::from_secs(30);
    let mut cut = 0;
    for seed in 0..8 {
        let r = braid_sim::run(&s, Some(seed));
        let f = &r.flows[0];
        assert!(f.error.is_none(), "seed {seed}: {:?}", f.error);
        assert!(f.forward.verified, "seed {seed}");
        cut += u32::from(f.forward.duration_s > 11.5);
    }
    assert!(cut >= 6, "the outage cut only {cut} transfers mid-stream");
}

/// A path known from thousands of packets at 5 % loss goes dead: its peer
/// is declared silent after 10 s, as on a clean one, not at the idle timeout.
#[test]
fn a_well_known_lossy_path_still_reports_a_dead_peer_in_seconds() {
    let s = Scenario::from_str(
        r#"
        name = "dead peer on a lossy path"
        time_limit = "120s"
        [[path]]
        rate = "10Mbit"
        delay = "20ms"
        loss = 0.05
        reverse_loss = 0.05
        events = [{ at = "5s", do = "close" }]
        [[flow]]
        bytes = "50MB"
        "#,
        ".",
    )
    .unwrap();
    let r = braid_sim::run(&s, Some(1));
    let f = &r.flows[0];
    match &f.error {
        Some(FlowError::Session(SessionError::PeerSilent { after, rtos })) => {
            assert!(after.as_secs_f64() < 11.0, "after {after:?}");
            assert!((5..=8).contains(rtos), "{rtos} timeouts");
        }
        e => panic!("not declared silent: {e:?}"),
    }
}
