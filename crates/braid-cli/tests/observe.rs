//! Seeing inside a real transfer: qlog files and the protocol's log.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every record of a JSON-SEQ file, parsed: the header first.
fn records(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap();
    text.split('\u{1e}')
        .skip(1)
        .map(|r| serde_json::from_str(r).unwrap_or_else(|e| panic!("{e}: {r}")))
        .collect()
}

fn only_file(dir: &Path, prefix: &str) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

#[test]
fn send_and_recv_each_write_a_qlog_of_the_same_session() {
    let dir = tempfile::tempdir().unwrap();
    let (out, qlog) = (dir.path().join("out"), dir.path().join("qlog"));
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    write_data(&input, 2_000_000);
    let qlog_arg = qlog.to_str().unwrap();
    let recv = start_recv(&["--output", out.to_str().unwrap(), "--qlog", qlog_arg]);
    let mut args = recv.send_args(input.to_str().unwrap());
    args.extend(["--to", &recv.addr, "--json", "--qlog", qlog_arg]);
    let sent = run(&args);
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert!(stderr(&sent).contains("braid: qlog "), "{}", stderr(&sent));
    assert!(wait(recv.child, Duration::from_secs(20)).success());
    let record: Value = serde_json::from_slice(&sent.stdout).unwrap();

    let send = records(&only_file(&qlog, "send-"));
    let recv = records(&only_file(&qlog, "recv-"));
    let id = |r: &[Value]| r[0]["trace"]["common_fields"]["ODCID"].clone();
    assert_eq!(id(&send), id(&recv), "both sides log one session");
    assert_eq!(send[0]["trace"]["vantage_point"]["type"], "client");
    assert_eq!(recv[0]["trace"]["vantage_point"]["type"], "server");
    let count = |r: &[Value], name: &str| r.iter().filter(|e| e["name"] == name).count();
    // Every datagram the sender sent is in its log, per connection (the
    // record is read a moment before the log ends: a packet may fall between).
    let mut sent_per_path = BTreeMap::new();
    for e in send.iter().filter(|e| e["name"] == "transport:packet_sent") {
        *sent_per_path
            .entry(e["data"]["path_id"].as_u64().unwrap())
            .or_insert(0u64) += 1;
    }
    for c in record["connections"].as_array().unwrap() {
        let path = c["id"].as_u64().unwrap();
        let logged = sent_per_path.get(&path).copied().unwrap_or(0);
        let counted = c["packets_sent"].as_u64().unwrap();
        assert!(
            logged.abs_diff(counted) <= 3,
            "connection {path}: {logged} logged, {c}"
        );
    }
    // The receiver logged the data it received: at least the file's bytes.
    let stream_bytes: u64 = recv
        .iter()
        .filter(|e| e["name"] == "transport:packet_received")
        .flat_map(|e| e["data"]["frames"].as_array().unwrap().clone())
        .filter(|f| f["frame_type"] == "stream")
        .map(|f| f["length"].as_u64().unwrap())
        .sum();
    assert!(stream_bytes >= 2_000_000, "{stream_bytes}");
    // Each connection that had packets acknowledged reported its window
    // and RTT.
    let acked: std::collections::BTreeSet<u64> = send
        .iter()
        .filter(|e| e["name"] == "recovery:packets_acked")
        .map(|e| e["data"]["path_id"].as_u64().unwrap())
        .collect();
    assert!(!acked.is_empty());
    for path in &acked {
        let reported = |field: &str| {
            send.iter().any(|e| {
                e["name"] == "recovery:metrics_updated"
                    && e["data"]["path_id"] == *path
                    && e["data"][field].is_number()
            })
        };
        assert!(reported("congestion_window"), "path {path}");
        assert!(reported("smoothed_rtt"), "path {path}");
    }
    assert!(count(&send, "transport:parameters_set") >= 1);
}

#[test]
fn verbose_logs_the_handshake_and_quiet_logs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    write_data(&input, 100_000);
    for verbose in [true, false] {
        let _ = std::fs::remove_file(out.join("data.bin"));
        let recv = start_recv(&["--output", out.to_str().unwrap()]);
        let mut args = recv.send_args(input.to_str().unwrap());
        args.extend(["--to", &recv.addr, "--quiet"]);
        if verbose {
            args.push("-v");
        }
        let sent = braid().args(&args).env_remove("RUST_LOG").output().unwrap();
        assert!(sent.status.success(), "{}", stderr(&sent));
        let log = stderr(&sent);
        assert_eq!(log.contains("handshake complete"), verbose, "{log}");
        assert_eq!(log.contains("DEBUG"), verbose, "{log}");
        assert!(wait(recv.child, Duration::from_secs(20)).success());
    }
}
