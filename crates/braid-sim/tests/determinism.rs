//! The same scenario and seed give the same results; scenarios behave as documented.

use braid_proto::SessionError;
use braid_sim::{FlowError, Scenario, ScenarioError};

const LOSSY_TWO_PATHS: &str = r#"
name = "determinism"
[[path]]
rate = "20Mbit"
delay = "15ms"
jitter = "5ms"
loss = 0.02
queue = 60
events = [{ at = "1s", do = "down", for = "500ms" }]
[[path]]
rate = "800pps"
delay = "60ms"
duplicate = 0.01
gilbert = { p = 0.01, r = 0.3 }
queue = 1000
[[flow]]
cc = "aimd"
bytes = "4MB"
reverse_bytes = "1MB"
[[flow]]
# NCP keeps a fixed session window; it needs a queue that can hold it.
cc = "ncp"
send_window = "256KiB"
bytes = "3MB"
start = "300ms"
paths = [1]

"#;

fn json_without_wall(s: &Scenario, seed: u64) -> serde_json::Value {
    let mut v = braid_sim::run(s, Some(seed)).to_json(true);
    v.as_object_mut().unwrap().remove("wall_s");
    v
}

#[test]
fn same_seed_same_results_different_seed_different_run() {
    let s = Scenario::from_str(LOSSY_TWO_PATHS, ".").unwrap();
    let a = json_without_wall(&s, 9);
    let b = json_without_wall(&s, 9);
    assert_eq!(a, b);
    assert!(
        !a["flows"][0]["series"].as_array().unwrap().is_empty(),
        "time series recorded"
    );
    let c = json_without_wall(&s, 10);
    assert_ne!(a, c, "the seed matters");
    for f in a["flows"].as_array().unwrap() {
        assert_eq!(f["verified"], true, "{f}");
        assert_eq!(f["completed"], true);
    }
    assert_eq!(a["flows"][0]["reverse"]["verified"], true);
}

#[test]
fn the_built_in_example_completes_and_uses_both_paths() {
    let r = braid_sim::run(&Scenario::example(), None);
    let f = &r.flows[0];
    assert!(f.forward.completed && f.forward.verified);
    assert_eq!(f.forward.paths.len(), 2);
    assert!(f.forward.paths.iter().all(|p| p.packets_sent > 0));
    assert!(r.summary().contains("verified"));
}

#[test]
fn a_lossless_path_is_mostly_filled() {
    // Generous floor: 50 Mbit/s, 20 ms, 300-packet queue; AIMD should reach
    // well over half the link (exact figures belong to the benchmarks).
    let text = r#"
[[path]]
rate = "50Mbit"
delay = "10ms"
queue = 300
[[flow]]
cc = "aimd"
bytes = "20MB"
"#;
    let r = braid_sim::run(&Scenario::from_str(text, ".").unwrap(), None);
    let f = &r.flows[0].forward;
    assert!(f.completed && f.verified);
    assert!(f.goodput_mbps > 30.0, "goodput {}", f.goodput_mbps);
    assert!(
        f.goodput_mbps < 50.0,
        "cannot beat the link: {}",
        f.goodput_mbps
    );
}

#[test]
fn the_only_path_closing_fails_with_a_clear_error() {
    let text = r#"
[[path]]
rate = "10Mbit"
delay = "10ms"
events = [{ at = "1s", do = "close" }]
[[flow]]
bytes = "50MB"
"#;
    let r = braid_sim::run(&Scenario::from_str(text, ".").unwrap(), None);
    let f = &r.flows[0];
    assert!(!f.forward.completed);
    // Data is outstanding and nothing arrives: five RTOs (backed off, then
    // a probe a second) and 10 s of silence end it as a silent peer, not
    // the 30 s idle timeout.
    assert!(
        matches!(
            f.error,
            Some(FlowError::Session(SessionError::PeerSilent { .. }))
        ),
        "{:?}",
        f.error
    );
    assert!(r.virtual_s < 12.5, "failed promptly: {}", r.virtual_s);
}

#[test]
fn unknown_keys_and_controllers_are_named() {
    let err =
        Scenario::from_str("[[path]]\nrate = \"1Mbit\"\nspeed = 3\n[[flow]]\n", ".").unwrap_err();
    assert!(err.to_string().contains("speed"), "{err}");
    // A misspelt controller is refused with the file, naming the key.
    let err = Scenario::from_str(
        "[[path]]\nrate = \"1Mbit\"\n[[flow]]\ncc = \"warp\"\nbytes = 10\n",
        ".",
    )
    .unwrap_err();
    assert!(
        matches!(&err, ScenarioError::Invalid { key, .. } if key.ends_with("cc")),
        "{err}"
    );
    assert!(err.to_string().contains("warp"), "{err}");
}

#[test]
fn a_mahimahi_trace_drives_a_path() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/examples/wifi-plus-lte.toml"
    );
    let r = braid_sim::run(&Scenario::from_file(path).unwrap(), None);
    let f = &r.flows[0];
    assert!(f.forward.completed && f.forward.verified, "{:?}", f.error);
    let reverse = f.reverse.as_ref().unwrap();
    assert!(reverse.completed && reverse.verified);
    // The LTE path carries a real share in both directions.
    assert!(
        f.forward.paths[1].goodput_mbps > 0.5,
        "{:?}",
        f.forward.paths
    );
    assert!(reverse.paths[1].goodput_mbps > 0.5, "{:?}", reverse.paths);
}

#[test]
fn sealed_flows_are_deterministic_and_cost_only_their_tags() {
    let plain = Scenario::from_str(LOSSY_TWO_PATHS, ".").unwrap();
    let sealed_text = LOSSY_TWO_PATHS.replace("[[flow]]\n", "[[flow]]\nsealed = true\n");
    let sealed = Scenario::from_str(&sealed_text, ".").unwrap();
    let a = json_without_wall(&sealed, 9);
    assert_eq!(a, json_without_wall(&sealed, 9), "sealed runs repeat");
    let p = json_without_wall(&plain, 9);
    for (s, p) in a["flows"]
        .as_array()
        .unwrap()
        .iter()
        .zip(p["flows"].as_array().unwrap())
    {
        assert_eq!(s["verified"], true, "{s}");
        let (gs, gp) = (
            s["goodput_mbps"].as_f64().unwrap(),
            p["goodput_mbps"].as_f64().unwrap(),
        );
        // 16 tag bytes in ~1,200 cost ~1.3 %; the rest is a different
        // random run of the same links.
        assert!(gs > 0.85 * gp, "sealed {gs} vs plain {gp}");
    }
}
