//! `braid sim --qlog`: the sessions' event logs, checked against the run
//! they record.

use braid_sim::{Scenario, Sim};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const TWO_PATHS: &str = r#"
name = "qlog two paths"
[[path]]
rate = "20Mbit"
delay = "15ms"
loss = 0.01
queue = 60
[[path]]
rate = "5Mbit"
delay = "40ms"
queue = 100
[[flow]]
cc = "cubic"
bytes = "2MB"
# Both ways: ACKs ride on data, whose frames the log notes as written.
reverse_bytes = "1MB"
"#;

fn scenario() -> Scenario {
    Scenario::from_str(TWO_PATHS, ".").unwrap()
}

/// The header and the events of a JSON-SEQ file, every record parsed.
fn records(file: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.starts_with('\u{1e}'), "JSON-SEQ records start with RS");
    let mut records = text.split('\u{1e}').skip(1).map(|r| {
        assert!(r.ends_with('\n'), "a record ends with a newline: {r}");
        serde_json::from_str::<Value>(r).unwrap_or_else(|e| panic!("{e}: {r}"))
    });
    let header = records.next().unwrap();
    (header, records.collect())
}

fn without_wall(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("wall_s");
    v
}

#[test]
fn the_qlog_holds_every_packet_and_loss_of_the_run_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plain = Sim::new(scenario(), 7).run();
    let (traced, files) = Sim::new(scenario(), 7)
        .with_qlog(dir.path())
        .unwrap()
        .run_with_qlog();
    let files = files.unwrap();
    assert_eq!(
        without_wall(plain.to_json(true)),
        without_wall(traced.to_json(true)),
        "recording must not change the run"
    );
    assert_eq!(files.len(), 2, "{files:?}");
    let client = files
        .iter()
        .find(|f| f.to_string_lossy().ends_with("-client.sqlog"));
    let (header, events) = records(client.unwrap());
    assert_eq!(header["qlog_version"], "0.3");
    assert_eq!(header["qlog_format"], "JSON-SEQ");
    assert_eq!(header["trace"]["vantage_point"]["type"], "client");
    assert_eq!(header["trace"]["common_fields"]["time_format"], "relative");

    let mut last = 0.0;
    let mut count: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for e in &events {
        let t = e["time"].as_f64().unwrap();
        assert!(t >= last, "events in time order: {e}");
        last = t;
        let name = e["name"].as_str().unwrap().to_owned();
        let path = e["data"]["path_id"].as_u64();
        match path {
            Some(p) => assert_eq!(e["group_id"], format!("path {p}"), "{e}"),
            None => assert_eq!(e["group_id"], "session", "{e}"),
        }
        *count.entry((name, path.unwrap_or(99))).or_default() += 1;
    }
    let flow = &traced.flows[0];
    assert_eq!(flow.forward.paths.len(), 2);
    for p in &flow.forward.paths {
        let n = |name: &str| count.get(&(name.to_owned(), u64::from(p.path))).copied();
        assert_eq!(
            n("transport:packet_sent"),
            Some(p.packets_sent),
            "path {}",
            p.path
        );
        assert_eq!(
            n("recovery:packet_lost").unwrap_or(0),
            p.lost_packets,
            "path {}",
            p.path
        );
        assert!(n("recovery:metrics_updated").unwrap() > 10);
        assert!(n("recovery:packets_acked").unwrap() > 10);
    }
    assert!(
        flow.forward.paths[0].lost_packets > 0,
        "the lossy path lost packets"
    );
}

#[test]
fn a_qlog_is_the_same_for_the_same_seed() {
    let run = |dir: &Path| {
        let (_, files) = Sim::new(scenario(), 3)
            .with_qlog(dir)
            .unwrap()
            .run_with_qlog();
        files
            .unwrap()
            .iter()
            .map(|f| std::fs::read(f).unwrap())
            .collect::<Vec<_>>()
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    assert_eq!(run(a.path()), run(b.path()));
}

#[test]
fn metrics_follow_the_window_the_run_reports() {
    let dir = tempfile::tempdir().unwrap();
    let (result, files) = Sim::new(scenario(), 5)
        .with_qlog(dir.path())
        .unwrap()
        .run_with_qlog();
    let files = files.unwrap();
    let (_, events) = records(&files[0]);
    // The last congestion window the log reports for each path, bytes.
    let mut cwnd = BTreeMap::new();
    for e in &events {
        if e["name"] == "recovery:metrics_updated" {
            if let Some(w) = e["data"]["congestion_window"].as_u64() {
                cwnd.insert(e["data"]["path_id"].as_u64().unwrap(), w);
            }
        }
    }
    for p in &result.flows[0].forward.paths {
        let logged = cwnd[&u64::from(p.path)] as f64 / 1380.0;
        assert!(
            (logged - p.final_window).abs() < 1.0,
            "path {}: log {logged} packets, report {}",
            p.path,
            p.final_window
        );
    }
}
