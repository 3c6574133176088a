//! The `braid` command's transfers and error cases, on loopback.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn run(args: &[&str]) -> Output {
    braid().args(args).output().expect("braid runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn free_port() -> String {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().to_string()
}

/// Starts `braid recv` on a free port and returns it with its address.
fn start_recv(extra: &[&str]) -> (Child, String) {
    let mut child = braid()
        .args(["recv", "--listen", "127.0.0.1:0", "--quiet"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    // Keep draining stderr so the receiver never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while err.read_line(&mut sink).unwrap_or(0) > 0 {}
    });
    (child, addr)
}

fn wait(mut child: Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_random(path: &Path, len: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..len as u64)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn send_and_recv_verify_a_file_over_two_connections() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    let data = write_random(&input, 3_000_000);
    let (recv, addr) = start_recv(&["--output", out.to_str().unwrap()]);
    let sent = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &addr,
        "--to",
        &addr,
        "--json",
    ]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    let json: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    let flow = &json["flows"][0];
    assert_eq!(flow["verified"], true);
    assert_eq!(flow["completed"], true);
    assert_eq!(flow["delivered"], 3_000_000);
    assert_eq!(flow["paths"].as_array().unwrap().len(), 2);
    assert_eq!(json["wall_s"], flow["duration_s"]);
    assert!(wait(recv, Duration::from_secs(20)).success());
    let got = std::fs::read(out.join("data.bin")).unwrap();
    assert!(got == data, "received file differs");
    let leftovers: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only the verified file remains");
}

#[test]
fn stdin_to_stdout() {
    let (recv, addr) = start_recv(&["--output", "-"]);
    let mut send = braid()
        .args(["send", "-", "--to", &addr, "--quiet"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = send.stdin.take().unwrap();
        stdin.write_all(b"hello through braid\n").unwrap();
    }
    assert!(wait(send, Duration::from_secs(20)).success());
    let out = recv.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hello through braid\n");
}

#[test]
fn bad_command_lines_are_one_line_and_exit_2() {
    for (args, needle) in [
        (
            vec!["send", "x", "--to", "127.0.0.1:1", "--bogus"],
            "--bogus",
        ),
        (
            vec!["send", "x", "--to", "127.0.0.1:1", "--cc", "reno9"],
            "reno9",
        ),
        (vec!["sim", "--cc", "fastest"], "fastest"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("braid: ") && err.contains(needle), "{err}");
    }
}

#[test]
fn runtime_errors_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_random(&input, 1000);
    let held = UdpSocket::bind("127.0.0.1:0").unwrap();
    let in_use = held.local_addr().unwrap().to_string();
    let not_a_dir = format!("{}/sub/", input.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["send", "/no/such/file", "--to", "127.0.0.1:9"],
            "cannot open /no/such/file",
        ),
        (vec!["recv", "--listen", &in_use], "address already in use"),
        (
            vec!["recv", "--listen", "127.0.0.1:0", "--output", &not_a_dir],
            "does not exist",
        ),
    ];
    for (args, needle) in cases {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn unreachable_peer_fails_after_the_handshake_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_random(&input, 1000);
    let start = Instant::now();
    let o = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &free_port(),
        "--handshake-timeout",
        "600ms",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("handshake timed out"), "{err}");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// Needs root to mount a tiny tmpfs; elsewhere it says so and checks nothing.
#[test]
fn disk_full_mid_transfer_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(&mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    }
    let input = dir.path().join("big.bin");
    write_random(&input, 4_000_000);
    let (recv, addr) = start_recv(&["--output", mnt.to_str().unwrap()]);
    let sent = run(&["send", input.to_str().unwrap(), "--to", &addr, "--quiet"]);
    let recv_status = wait(recv, Duration::from_secs(20));
    let leftovers: Vec<_> = std::fs::read_dir(&mnt).unwrap().collect();
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(sent.status.code(), Some(1));
    assert!(stderr(&sent).contains("No space left"), "{}", stderr(&sent));
    assert!(!recv_status.success());
    assert!(leftovers.is_empty(), "the partial file was removed");
}
