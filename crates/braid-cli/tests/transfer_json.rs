//! What scripts and people read from `braid send` and `braid recv`: the
//! transfer record of --json (docs/transfer-json.md), exit statuses, the
//! words of failures, and forgiving input. Loopback only.

mod common;

use common::*;
use serde_json::Value;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn both_sides_print_a_record_and_their_hashes_agree() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 2_000_000);
    let recv = start_recv(&["--output", out.to_str().unwrap(), "--json"]).with_records();
    let mut args = recv.send_args(input.to_str().unwrap());
    args.push("--json");
    let sent = run(&args);
    assert_eq!(sent.status.code(), Some(0), "{}", stderr(&sent));
    assert!(
        sent.stderr.is_empty(),
        "nothing but the record: {}",
        stderr(&sent)
    );
    let s: Value = serde_json::from_slice(&sent.stdout).unwrap();
    let r = recv.record(Duration::from_secs(20));
    for (v, role) in [(&s, "send"), (&r, "recv")] {
        assert_eq!(v["schema"], "braid.transfer/1", "{v}");
        assert_eq!(v["role"], role);
        assert_eq!(v["outcome"], "verified");
        assert!(v["error"].is_null());
        assert_eq!(v["file"], "data.bin");
        assert_eq!(v["size"], 2_000_000);
        assert_eq!(v["bytes"], 2_000_000);
        assert_eq!(v["mode"], "code");
        assert_eq!(v["blake3"].as_str().unwrap().len(), 64);
        assert!(v["duration_s"].as_f64().unwrap() > 0.0);
        assert!(v["goodput_mbps"].as_f64().unwrap() > 0.0);
        assert!(v["started_unix_s"].as_f64().unwrap() > 1.6e9);
        assert_eq!(v["forged_dropped"], 0);
        let conns = v["connections"].as_array().unwrap();
        assert_eq!(conns.len(), 1);
        assert_eq!(conns[0]["answered"], true);
        assert_eq!(conns[0]["share"], 1.0);
    }
    assert_eq!(s["blake3"], r["blake3"], "both sides hashed the same bytes");
    assert_eq!(s["peer"], recv.addr.as_str());
    assert_eq!(r["peer"], r["connections"][0]["remote"]);
    assert_eq!(s["connections"][0]["remote"], recv.addr.as_str());
    assert_eq!(r["connections"][0]["local"], recv.addr.as_str());
    // The sender's socket is bound to any address; its record still says
    // which one it sent from, as the receiver saw it.
    assert_eq!(s["connections"][0]["local"], r["peer"]);
    let written = out.join("data.bin");
    assert_eq!(r["written_to"], written.to_str().unwrap());
    assert!(s["written_to"].is_null());
    // Only the sender measures round trips and retransmissions.
    assert!(s["connections"][0]["rtt_ms"]["min"].as_f64().unwrap() > 0.0);
    assert!(s["retransmitted"].is_u64());
    assert!(r["connections"][0]["rtt_ms"].is_null());
    assert!(r["retransmitted"].is_null());
    assert!(wait(recv.child, Duration::from_secs(20)).success());
    assert!(std::fs::read(&written).unwrap() == data);
}

#[test]
fn recv_keep_prints_one_line_per_transfer_saying_where_it_went() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let recv = start_recv(&["--output", out.to_str().unwrap(), "--keep", "--json"]).with_records();
    for name in ["a.bin", "b.bin"] {
        let input = dir.path().join(name);
        write_data(&input, 50_000);
        let mut args = recv.send_args(input.to_str().unwrap());
        args.push("--quiet");
        let sent = run(&args);
        assert!(sent.status.success(), "{}", stderr(&sent));
        let r = recv.record(Duration::from_secs(20));
        assert_eq!(r["outcome"], "verified", "{r}");
        assert_eq!(r["file"], name);
        assert_eq!(r["written_to"], out.join(name).to_str().unwrap());
    }
    // A failed transfer is a line too: the file exists now.
    let again = dir.path().join("a.bin");
    let sent = run(&recv.send_args(again.to_str().unwrap()));
    assert_eq!(sent.status.code(), Some(1), "{}", stderr(&sent));
    let r = recv.record(Duration::from_secs(20));
    assert_eq!(r["outcome"], "failed", "{r}");
    assert_eq!(r["error"]["code"], "local");
    assert_eq!(r["error"]["exit_status"], 5);
    assert!(r["written_to"].is_null());
    recv.stop();
}

#[test]
fn failures_have_a_code_an_exit_status_and_words() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_data(&input, 1000);
    let file = input.to_str().unwrap();
    let (_hole, silent) = silent_port();
    let closed = free_port();
    let recv = start_recv(&["--keep"]);
    let case = |to: &str, auth: &str, extra: &[&str]| {
        let mut args = vec![
            "send",
            file,
            "--to",
            to,
            "--handshake-timeout",
            "1s",
            "--json",
        ];
        args.extend(["--code", auth]);
        args.extend(extra);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    // The command, the error codes allowed, the exit status, some words.
    let cases = [
        (
            case(&silent, "1-abc-def", &[]),
            vec!["no_answer"],
            3,
            "no answer from ".to_owned(),
        ),
        // The host answers "port unreachable".
        (
            case(&closed, "1-abc-def", &[]),
            vec!["nothing_listening"],
            3,
            closed.clone(),
        ),
        (
            case(&recv.addr, "999-wrong-guess", &[]),
            vec!["wrong_code"],
            4,
            "wrong code (or someone tried to intercept)".to_owned(),
        ),
        (
            case("127.0.0.1:1", "1-abc-def", &["--bind", "192.0.2.1:0"]),
            vec!["local"],
            5,
            "cannot bind 192.0.2.1:0".to_owned(),
        ),
    ];
    for (args, codes, status, words) in cases {
        let start = Instant::now();
        let o = run(&args);
        assert!(start.elapsed() < Duration::from_secs(10), "{args:?}");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(status), "{args:?}: {err}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["outcome"], "failed");
        let code = v["error"]["code"].as_str().unwrap();
        assert!(codes.contains(&code), "{args:?}: {code}");
        assert_eq!(v["error"]["exit_status"], status);
        assert_eq!(v["file"], "f");
        // The error first and once, and never "cannot reach" for a peer
        // that answered or a socket of ours.
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(
            err.trim_end(),
            format!("braid: {}", v["error"]["message"].as_str().unwrap())
        );
        assert!(err.contains(&words), "{args:?}: {err}");
        assert!(!err.contains("cannot reach"), "{err}");
    }
    recv.stop();
}

#[test]
fn the_receiver_says_each_refused_try() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let input = dir.path().join("f");
    write_data(&input, 1000);
    let recv = start_recv(&["--key", key.to_str().unwrap(), "--keep"]);
    fails(
        &[
            "send",
            input.to_str().unwrap(),
            "--to",
            &recv.addr,
            "--code",
            "1-abc-def",
            "--quiet",
        ],
        4,
        "refused by",
    );
    let line = recv.said("refused a sender", Duration::from_secs(10));
    assert!(line.contains("another key"), "{line}");
    recv.stop();
}

#[test]
fn stdin_is_named_by_name_or_by_date() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let recv = start_recv(&["--output", out.to_str().unwrap(), "--keep", "--insecure"]);
    for name in [Some("notes.txt"), None] {
        let mut args = recv.send_args("-");
        args.push("--quiet");
        if let Some(n) = name {
            args.extend(["--name", n]);
        }
        let mut send = braid()
            .args(&args)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        send.stdin
            .take()
            .unwrap()
            .write_all(b"through braid\n")
            .unwrap();
        assert!(wait(send, Duration::from_secs(20)).success());
    }
    let start = Instant::now();
    while std::fs::read_dir(&out).unwrap().count() < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "files missing");
        std::thread::sleep(Duration::from_millis(20));
    }
    recv.stop();
    assert_eq!(
        std::fs::read(out.join("notes.txt")).unwrap(),
        b"through braid\n"
    );
    let dated: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "notes.txt")
        .collect();
    assert_eq!(dated.len(), 1);
    // stdin-YYYYMMDD-HHMMSS
    let d = &dated[0];
    assert!(
        d.len() == 21 && d.starts_with("stdin-") && d[6..14].bytes().all(|b| b.is_ascii_digit()),
        "{d}"
    );
    // A name with a directory in it is a usage error.
    let o = run(&[
        "send",
        "-",
        "--to",
        "127.0.0.1:9",
        "--insecure",
        "--name",
        "../x",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_missing_output_directory_is_created_when_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 10_000);
    let target = dir.path().join("downloads/today");
    let arg = format!("{}/", target.display());
    let recv = start_recv(&["--output", &arg, "--insecure"]);
    assert!(target.is_dir(), "created before listening");
    let sent = run(&recv.send_args(input.to_str().unwrap()));
    delivered(&sent, recv, &target.join("data.bin"), &data);
    // A file in a missing directory: said clearly, nothing created.
    let file = dir.path().join("nowhere/x.bin");
    fails(
        &[
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--insecure",
            "-o",
            file.to_str().unwrap(),
        ],
        5,
        "does not exist (end --output with /",
    );
    assert!(!dir.path().join("nowhere").exists());
}

#[test]
fn a_dead_path_beside_a_live_one_is_shown_by_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    write_data(&input, 200_000);
    let recv = start_recv(&["--output", dir.path().join("got").to_str().unwrap()]);
    let (_hole, dead) = silent_port();
    let mut args = recv.send_args(input.to_str().unwrap());
    args.extend(["--to", &dead, "--quiet"]);
    let sent = run(&args);
    let err = stderr(&sent);
    assert!(sent.status.success(), "{err}");
    // Counted apart: it carried none of the transfer.
    assert!(err.contains("over 1 connection (bbr), 1 dead\n"), "{err}");
    assert!(
        err.contains(&format!("  {dead}: dead (no answer), carried nothing")),
        "{err}"
    );
    assert!(err.contains(&format!("  {}: ", recv.addr)), "{err}");
    assert!(
        !err.contains("path 0") && !err.contains("milliseconds"),
        "{err}"
    );
    assert!(wait(recv.child, Duration::from_secs(20)).success());
    // The receiver: one connection, no figures it did not measure.
    // All it printed, now that it has exited.
    let said: String = recv.err.iter().collect::<Vec<_>>().join("\n");
    assert!(said.contains("over 1 connection"), "{said}");
    assert!(!said.contains("RTT") && !said.contains("window"), "{said}");
}

/// A receiver that fails before it listens still says which mode it was
/// started in.
#[test]
fn a_receiver_that_cannot_listen_says_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "key");
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let in_use = held.local_addr().unwrap().to_string();
    for (extra, mode) in [
        (vec!["--key", key.to_str().unwrap()], "key"),
        (vec!["--insecure"], "insecure"),
        (vec![], "code"),
    ] {
        let mut args = vec!["recv", "--listen", &in_use, "--json"];
        args.extend(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(5), "{args:?}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["outcome"], "failed");
        assert_eq!(v["mode"], mode, "{args:?}");
    }
}
