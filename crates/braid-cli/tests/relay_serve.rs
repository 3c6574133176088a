//! `braid relay --serve` with `braid recv --relay` and `braid send --relay`
//! as users run them, on loopback: by code and by key, both records saying
//! how the two ends met, and the errors a user meets.

mod common;

use common::{braid, fails, keygen, lines, run, spawn_piped, stderr, wait, write_data};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A running `braid relay --serve`; killed on drop.
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve() -> Served {
    serve_at(common::free_port())
}

fn serve_at(addr: String) -> Served {
    let mut child = braid()
        .args(["relay", "--serve", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let line = out.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(line.starts_with("relay serving on "), "{line}");
    Served { child, addr }
}

/// A `braid recv --relay` with `extra`; returns it, its stderr lines and
/// the sender options it printed.
fn recv_via(relay: &str, dir: &str, extra: &[&str]) -> (Child, Receiver<String>, Vec<String>) {
    let (child, err) = spawn_piped(
        braid()
            .args(["recv", "--relay", relay, "-o", dir, "--json", "--quiet"])
            .args(extra),
    );
    let mut said = String::new();
    let option = loop {
        let line = err
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("recv said only:\n{said}"));
        said += &format!("{line}\n");
        if let Some(rest) = line.strip_prefix("on the sender: braid send FILE ") {
            break rest.split(' ').map(str::to_owned).collect::<Vec<_>>();
        }
    };
    assert!(said.contains("waiting at relay"), "{said}");
    (child, err, option)
}

fn record(bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `braid send FILE --json --quiet` with `options`, then the receiver
/// `recv`'s end: both succeed. Their records, and how long the sender ran.
fn send_through(recv: Child, file: &Path, options: &[&str]) -> (Value, Value, Duration) {
    let start = Instant::now();
    let sent = braid()
        .args(["send", file.to_str().unwrap(), "--json", "--quiet"])
        .args(options)
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(sent.status.success(), "{}", stderr(&sent));
    let recv_out = recv.wait_with_output().unwrap();
    assert!(recv_out.status.success());
    (record(&sent.stdout), record(&recv_out.stdout), took)
}

/// Both records: verified, the same hash, a relay connection and a direct
/// one on the sender, the pairing and the direct path's time in `reach`.
fn check_records(send: &Value, recv: &Value, relay: &str) {
    for r in [send, recv] {
        assert_eq!(r["outcome"], "verified", "{r}");
        assert_eq!(r["reach"]["relays"][0]["relay"], relay, "{r}");
        assert!(r["reach"]["relays"][0]["paired_ms"].is_number(), "{r}");
    }
    assert_eq!(send["blake3"], recv["blake3"]);
    let via: Vec<&str> = send["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["via"].as_str().unwrap())
        .collect();
    assert!(via.contains(&"relay") && via.contains(&"direct"), "{via:?}");
    assert!(
        send["reach"]["direct"]["validated_ms"].is_number(),
        "{send}"
    );
}

#[test]
fn a_code_and_a_relay_are_all_the_two_ends_need() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    // Large enough that the transfer outlasts the punching, even on a busy machine.
    let data = write_data(&file, 20_000_000);
    let out = dir.path().join("out/");
    let (recv, _err, option) = recv_via(&relay.addr, out.to_str().unwrap(), &[]);
    assert_eq!(option[..2], ["--relay".to_owned(), relay.addr.clone()]);
    assert_eq!(option[2], "--code");
    let option: Vec<&str> = option.iter().map(String::as_str).collect();
    let (send, recv, _) = send_through(recv, &file, &option);
    check_records(&send, &recv, &relay.addr);
    assert_eq!(std::fs::read(out.join("data.bin")).unwrap(), data);
}

#[test]
fn a_receiver_is_found_by_its_public_key_alone() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let file = dir.path().join("data.bin");
    write_data(&file, 20_000_000);
    let out = dir.path().join("out/");
    let (recv, _err, option) = recv_via(
        &relay.addr,
        out.to_str().unwrap(),
        &["--key", key.to_str().unwrap()],
    );
    assert_eq!(option[2], "--peer");
    let pubkey = dir.path().join("r.key.pub");
    let options = ["--relay", &relay.addr, "--peer", pubkey.to_str().unwrap()];
    let (send, recv, _) = send_through(recv, &file, &options);
    check_records(&send, &recv, &relay.addr);
}

#[test]
fn relay_only_opens_no_direct_path() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    write_data(&file, 500_000);
    let out = dir.path().join("out/");
    let (recv, _err, option) = recv_via(&relay.addr, out.to_str().unwrap(), &["--no-direct"]);
    let sent = braid()
        .args([
            "send",
            file.to_str().unwrap(),
            "--json",
            "--quiet",
            "--no-direct",
        ])
        .args(&option)
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    let send = record(&sent.stdout);
    assert_eq!(send["connections"].as_array().unwrap().len(), 1, "{send}");
    assert_eq!(send["connections"][0]["via"], "relay");
    assert!(send["reach"]["direct"].is_null());
    wait(recv, Duration::from_secs(10));
}

#[test]
fn a_sender_with_nobody_waiting_says_so_and_exits_3() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    write_data(&file, 1000);
    fails(
        &[
            "send",
            file.to_str().unwrap(),
            "--relay",
            &relay.addr,
            "--code",
            "5-acid-acorn",
            "--handshake-timeout",
            "1s",
        ],
        3,
        &format!(
            "no receiver came: {} said nobody is waiting under that code or key",
            relay.addr
        ),
    );
    // A relay address where nothing answers is named as such.
    let (_silent, nobody) = common::silent_port();
    fails(
        &[
            "send",
            file.to_str().unwrap(),
            "--relay",
            &nobody,
            "--code",
            "5-acid-acorn",
            "--handshake-timeout",
            "1s",
        ],
        3,
        "no relay answered",
    );
}

#[test]
fn insecure_cannot_meet_at_a_relay_and_recv_needs_listen_or_relay() {
    fails(
        &["send", "x", "--relay", "127.0.0.1:9", "--insecure"],
        2,
        "--relay pairs the two ends",
    );
    let o = run(&["recv", "--code", "5-acid-acorn"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_taken_code_number_makes_a_second_receiver_pick_another() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let (first, _e1, o1) = recv_via(
        &relay.addr,
        dir.path().to_str().unwrap(),
        &["--code", "5-acid-acorn"],
    );
    assert_eq!(o1[3], "5-acid-acorn");
    // Given the same number, a receiver cannot wait there.
    let o = braid()
        .args([
            "recv",
            "--relay",
            &relay.addr,
            "--code",
            "5-bacon-badge",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let refused = format!(
        "relay {} refused: that code or key is in use by another transfer",
        relay.addr
    );
    assert!(stderr(&o).contains(&refused), "{}", stderr(&o));
    assert!(!stderr(&o).contains("on the sender:"), "{}", stderr(&o));
    let mut first = first;
    let _ = first.kill();
    let _ = first.wait();
}

/// The record a command printed with --json.
/// A guesser spends a code receiver's guesses through a relay: each wrong
/// guess is reported by the receiver as it happens, the eighth ends it
/// (`code_spent`), and the senders that come after, the right code's
/// included, are told the code is spent (exit 4) within seconds instead
/// of waiting for a receiver that is gone.
#[test]
fn a_spent_code_is_said_to_the_senders_that_come_after() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    write_data(&file, 1000);
    let out = dir.path().join("out/");
    let (recv, err, option) = recv_via(&relay.addr, out.to_str().unwrap(), &[]);
    let code = option[3].clone();
    let number = code.split('-').next().unwrap();
    let send = |code: &str| {
        let args = ["send", file.to_str().unwrap(), "--relay", &relay.addr];
        braid()
            .args(args)
            .args(["--code", code, "--json", "--quiet"])
            .output()
            .unwrap()
    };
    for n in 1..=8 {
        let wrong = send(&format!("{number}-wrong-guess"));
        assert_eq!(failure_of(&wrong)["error"]["code"], "wrong_code");
        let told = Instant::now();
        let needle = match n {
            8 => "stopped listening".to_owned(),
            _ => format!("{n} of 8 wrong guesses"),
        };
        let line = loop {
            let line = err
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("guess {n} not reported"));
            if line.contains(&needle) {
                break line;
            }
        };
        assert!(
            told.elapsed() < Duration::from_secs(2),
            "{line}: {:?} after the guess",
            told.elapsed()
        );
    }
    let recv_out = recv.wait_with_output().unwrap();
    assert_eq!(recv_out.status.code(), Some(4));
    assert_eq!(record(&recv_out.stdout)["error"]["code"], "code_spent");
    for late in [format!("{number}-wrong-guess"), code] {
        let start = Instant::now();
        let o = send(&late);
        assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
        assert_eq!(failure_of(&o)["error"]["code"], "code_spent");
        assert!(
            stderr(&o).contains("too many wrong guesses"),
            "{}",
            stderr(&o)
        );
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "{:?}",
            start.elapsed()
        );
    }
}

fn failure_of(o: &std::process::Output) -> Value {
    let r = record(&o.stdout);
    assert_eq!(r["outcome"], "failed", "{r}");
    r
}

#[test]
fn a_relay_that_never_answers_ends_both_sides_in_seconds_saying_so() {
    // Bound, so no "port unreachable" comes back either: as a firewall
    // that drops UDP to the relay.
    let (_silent, nobody) = common::silent_port();
    // TCP to it was tried too after 3 s, and the message says so.
    let said = format!("no relay answered at {nobody} (over UDP or TCP");
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let o = run(&[
        "recv",
        "--relay",
        &nobody,
        "-o",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    // It never looked ready: no code, no command for the sender.
    assert!(!stderr(&o).contains("on the sender:"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("waiting at relay"), "{}", stderr(&o));
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let r = failure_of(&o);
    assert_eq!(r["error"]["code"], "no_relay", "{r}");
    let duration = r["duration_s"].as_f64().unwrap();
    assert!((4.0..10.0).contains(&duration), "{r}");
    // The sender, with the handshake's 75 s untouched.
    let file = dir.path().join("data.bin");
    write_data(&file, 1000);
    let start = Instant::now();
    let o = run(&[
        "send",
        file.to_str().unwrap(),
        "--relay",
        &nobody,
        "--code",
        "5-acid-acorn",
        "--json",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    // Not the question about the receiver: no relay was there to ask.
    assert!(
        !stderr(&o).contains("braid recv` running"),
        "{}",
        stderr(&o)
    );
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let r = failure_of(&o);
    assert_eq!(r["error"]["code"], "no_relay", "{r}");
    assert!(
        (4.0..10.0).contains(&r["duration_s"].as_f64().unwrap()),
        "{r}"
    );
    // What the relay said: nothing.
    assert_eq!(r["reach"]["relays"][0]["relay"], nobody.as_str(), "{r}");
    assert!(r["reach"]["relays"][0]["reflexive"].is_null(), "{r}");
    // --relay-timeout sets how long the receiver waits for its relays.
    let start = Instant::now();
    let o = run(&[
        "recv",
        "--relay",
        &nobody,
        "-o",
        dir.path().to_str().unwrap(),
        "--relay-timeout",
        "1s",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn an_ipv6_relay_needs_no_listen_option() {
    // Hosts without IPv6 cannot bind this; the IPv4 tests cover them there.
    let Ok(probe) = std::net::UdpSocket::bind("[::1]:0") else {
        return;
    };
    let addr = probe.local_addr().unwrap().to_string();
    drop(probe);
    let relay = serve_at(addr);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    let data = write_data(&file, 2_000_000);
    let out = dir.path().join("out/");
    let (recv, _err, option) = recv_via(&relay.addr, out.to_str().unwrap(), &[]);
    assert_eq!(option[..2], ["--relay".to_owned(), relay.addr.clone()]);
    let option: Vec<&str> = option.iter().map(String::as_str).collect();
    let (send, recv, took) = send_through(recv, &file, &option);
    assert!(took < Duration::from_secs(10));
    for r in [&send, &recv] {
        assert_eq!(r["outcome"], "verified", "{r}");
        assert_eq!(r["reach"]["relays"][0]["relay"], relay.addr, "{r}");
        assert!(r["reach"]["relays"][0]["paired_ms"].is_number(), "{r}");
    }
    assert_eq!(send["blake3"], recv["blake3"]);
    assert_eq!(std::fs::read(out.join("data.bin")).unwrap(), data);
}

#[test]
fn a_key_receiver_started_again_at_once_takes_the_next_transfer() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let pubkey = dir.path().join("r.key.pub");
    let file = dir.path().join("data.bin");
    write_data(&file, 1_000_000);
    let send = || {
        braid()
            .args(["send", file.to_str().unwrap(), "--quiet"])
            .args(["--relay", &relay.addr, "--peer", pubkey.to_str().unwrap()])
            .output()
            .unwrap()
    };
    for round in ["one/", "two/"] {
        let out = dir.path().join(round);
        // The second receiver starts as soon as the first has exited, and
        // must find its key's handle free at the relay.
        let (recv, _err, _option) = recv_via(
            &relay.addr,
            out.to_str().unwrap(),
            &["--key", key.to_str().unwrap()],
        );
        let start = Instant::now();
        let sent = send();
        assert!(sent.status.success(), "{round}: {}", stderr(&sent));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{round}: {:?}",
            start.elapsed()
        );
        assert!(wait(recv, Duration::from_secs(10)).success(), "{round}");
        assert!(out.join("data.bin").exists(), "{round}");
    }
}

#[test]
fn a_receiver_stopped_while_waiting_says_how_long_it_waited() {
    let relay = serve();
    let dir = tempfile::tempdir().unwrap();
    let (recv, _err, _option) = recv_via(&relay.addr, dir.path().to_str().unwrap(), &[]);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: a pid of our own child, not yet reaped.
    unsafe { libc::kill(recv.id() as libc::pid_t, libc::SIGTERM) };
    let o = recv.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM));
    let r = failure_of(&o);
    assert_eq!(r["error"]["code"], "interrupted", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("while waiting for a sender: none came"),
        "{r}"
    );
    assert!(r["duration_s"].as_f64().unwrap() >= 1.4, "{r}");
    assert!(r["reach"]["relays"][0]["reflexive"].is_string(), "{r}");
}
