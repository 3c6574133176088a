//! The `braid` command's transfers and error cases, on loopback.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn send_and_recv_verify_a_file_over_two_connections() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 3_000_000);
    let recv = start_recv(&["--output", out.to_str().unwrap()]);
    let mut args = recv.send_args(input.to_str().unwrap());
    args.extend(["--to", &recv.addr, "--json"]);
    let sent = run(&args);
    assert!(sent.status.success(), "{}", stderr(&sent));
    let json: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    assert_eq!(json["outcome"], "verified");
    assert_eq!(json["bytes"], 3_000_000);
    assert_eq!(json["connections"].as_array().unwrap().len(), 2);
    assert_eq!(json["forged_dropped"], 0, "always present");
    assert!(wait(recv.child, Duration::from_secs(20)).success());
    let got = std::fs::read(out.join("data.bin")).unwrap();
    assert!(got == data, "received file differs");
    let leftovers: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only the verified file remains");
}

#[test]
fn stdin_to_stdout() {
    let recv = start_recv(&["--output", "-"]);
    let mut send = braid()
        .args(recv.send_args("-"))
        .arg("--quiet")
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
    let out = recv.child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hello through braid\n");
}

/// `-v` is offered by the commands whose work it logs, and refused by
/// those where it would do nothing.
#[test]
fn verbose_is_offered_only_where_it_logs() {
    let help = |cmd: &str| String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).into_owned();
    for cmd in ["send", "recv", "demo", "sim", "relay"] {
        assert!(help(cmd).contains("-v, --verbose"), "{cmd}");
    }
    for cmd in ["keygen", "plot", "link", "emulate"] {
        assert!(!help(cmd).contains("--verbose"), "{cmd}");
        let o = run(&[cmd, "-v"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(stderr(&o).contains("'-v'"), "{cmd}: {}", stderr(&o));
    }
    assert!(!help("keygen").contains("verbose"));
}

/// `braid bench ARGS` runs the braid-bench beside braid with ARGS (its
/// `--help` too), or says how to build it.
#[test]
fn bench_runs_braid_bench_or_says_how_to_build_it() {
    let o = run(&["bench", "--help"]);
    let beside = std::path::Path::new(env!("CARGO_BIN_EXE_braid"))
        .with_file_name(format!("braid-bench{}", std::env::consts::EXE_SUFFIX));
    if beside.is_file() {
        assert!(o.status.success(), "{}", stderr(&o));
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("Usage: braid-bench"), "{help}");
        assert!(help.contains("reach"), "{help}");
        assert!(help.contains("-v, --verbose"), "{help}");
    } else {
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stderr(&o).contains("cargo build --release -p braid-bench"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn bad_command_lines_are_one_line_and_exit_2() {
    let allow = format!("recv --listen 127.0.0.1:0 --allow {}", "ab".repeat(32));
    let mut cases: Vec<(Vec<&str>, &str)> = [
        ("send x --to 127.0.0.1:1 --bogus", "--bogus"),
        ("send x --to 127.0.0.1:1 --cc reno9", "reno9"),
        ("recv --listen abc", "\"abc\" is not an address"),
        ("recv --listen 127.0.0.1:0 -o - --json", "cannot be combined with --output -"),
        ("send - --to 127.0.0.1:1 --insecure --name a/b", "without directories"),
        ("send x --to 127.0.0.1:1", "--peer"),
        ("send x --to 127.0.0.1:1 --insecure --code abcdef", "cannot be used with"),
        ("recv --listen 127.0.0.1:0 --insecure --code abcdef", "cannot be used with"),
        ("send x --to 127.0.0.1:1 --to 127.0.0.1:2 --bind 127.0.0.1:0 --bind 127.0.0.1:0 --bind 127.0.0.1:0 --insecure", "3 --bind for 2 --to"),
        ("send x --to 127.0.0.1:1 --insecure --handshake-timeout 0s", "longer than 0"),
        ("send x --to 127.0.0.1:1 --peer 00ff", "--peer"),
        ("sim --cc fastest", "fastest"),
        ("recv --listen 127.0.0.1:0 --code river-464-attic", "does not start with a number"),
        (allow.as_str(), "--key"),
        ("send x --to 127.0.0.1:1 --code 1-abc-def --key k", "cannot be used with"),
        ("send x --to 127.0.0.1:1 --peer /no/such.pub", "neither a public key (64 hex digits) nor a file"),
    ]
    .map(|(line, needle)| (line.split(' ').collect(), needle))
    .into();
    // A code typed with a space between its parts is one argument.
    cases.push((
        vec!["send", "x", "--to", "127.0.0.1:1", "--code", "464 river"],
        "the code has 2 parts, not 3; a code is a number and two words",
    ));
    for (args, needle) in cases {
        let o = run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let err: String = err
            .lines()
            .filter(|l| !l.contains("warning: --insecure"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("braid: ") && err.contains(needle), "{err}");
    }
}

#[test]
fn runtime_errors_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_data(&input, 1000);
    let held = UdpSocket::bind("127.0.0.1:0").unwrap();
    let in_use = held.local_addr().unwrap().to_string();
    let not_a_dir = format!("{}/sub/", input.display());
    // Local errors exit 5; the emulator is not a transfer and keeps 1.
    let cases: Vec<(Vec<&str>, &str, i32)> = vec![
        (
            vec![
                "send",
                "/no/such/file",
                "--to",
                "127.0.0.1:9",
                "--code",
                "1-abc-def",
            ],
            "cannot open /no/such/file",
            5,
        ),
        (
            vec!["recv", "--listen", &in_use],
            "address already in use",
            5,
        ),
        (
            vec!["emulate", "--listen", &in_use, "--to", &in_use],
            "address already in use",
            1,
        ),
        (
            vec!["recv", "--listen", "127.0.0.1:0", "--output", &not_a_dir],
            "cannot create the output directory",
            5,
        ),
    ];
    for (args, needle, status) in cases {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(status), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_silent_peer_fails_after_the_handshake_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_data(&input, 1000);
    let (_silent, to) = silent_port();
    let start = Instant::now();
    let o = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &to,
        "--handshake-timeout",
        "600ms",
        "--code",
        "1-abc-def",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(3), "no answer");
    let err = stderr(&o);
    assert!(err.contains("no answer from 127.0.0.1:"), "{err}");
    assert!(err.contains("handshake timed out after 600 ms"), "{err}");
    assert!(!err.contains("cannot reach"), "{err}");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// Nobody listening on a host that says so ("port unreachable"): the
/// sender fails at once, naming the address, with exit status 3.
#[test]
fn a_closed_port_fails_at_once_with_nothing_listening() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_data(&input, 1000);
    let to = free_port();
    let start = Instant::now();
    let o = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &to,
        "--code",
        "1-abc-def",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("nothing is listening on {to}")),
        "{err}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// A handshake that waits longer than 5 s says once whom it is waiting
/// for and until when, so that a mistyped address does not look like a
/// hang; --quiet hides the bar, not this.
#[test]
fn a_long_silent_handshake_says_whom_it_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("f");
    write_data(&input, 1000);
    let (_silent, to) = silent_port();
    let o = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &to,
        "--handshake-timeout",
        "6s",
        "--code",
        "1-abc-def",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    let notice = format!("no answer from {to} after 5 s");
    assert_eq!(err.matches(&notice).count(), 1, "{err}");
    assert!(err.contains("trying until 6 s"), "{err}");
    assert!(err.contains("handshake timed out"), "{err}");
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
    write_data(&input, 4_000_000);
    let recv = start_recv(&["--output", mnt.to_str().unwrap()]);
    let started = Instant::now();
    // From standard input, whose size is unknown: a file of known size is
    // refused before it arrives (tests/outputs.rs); this one fills the disk.
    let mut args = recv.send_args("-");
    args.push("--quiet");
    let sent = braid()
        .args(&args)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let took = started.elapsed();
    let recv_status = wait(recv.child, Duration::from_secs(20));
    let leftovers: Vec<_> = std::fs::read_dir(&mnt).unwrap().collect();
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(sent.status.code(), Some(1));
    // The receiver's own reason, while the sender was still sending.
    assert!(stderr(&sent).contains("No space left"), "{}", stderr(&sent));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(!recv_status.success());
    assert!(leftovers.is_empty(), "the partial file was removed");
}

fn kill(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn keygen_writes_a_private_key_and_its_public_half() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id.key");
    let o = run(&["keygen", "-o", key.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let public = String::from_utf8(o.stdout).unwrap();
    let pub_file = std::fs::read_to_string(dir.path().join("id.key.pub")).unwrap();
    assert_eq!(public.trim(), pub_file.trim());
    assert_eq!(public.trim().len(), 64);
    assert_ne!(std::fs::read_to_string(&key).unwrap().trim(), public.trim());
    // A second run keeps the first key unless told otherwise.
    let again = run(&["keygen", "-o", key.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(5), "a local error");
    assert!(stderr(&again).contains("--overwrite"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("id.key.pub")).unwrap(),
        pub_file
    );
}

#[test]
fn a_pinned_key_transfer_verifies_and_a_wrong_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let other = dir.path().join("other.key");
    let other_pub = run(&["keygen", "-o", other.to_str().unwrap()]).stdout;
    let other_pub = String::from_utf8(other_pub).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 500_000);
    let recv = start_recv(&[
        "--key",
        key.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(recv.auth[0], "--peer");
    // The wrong key: refused within seconds, and the receiver keeps listening.
    let start = Instant::now();
    let wrong = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &recv.addr,
        "--peer",
        other_pub.trim(),
        "--quiet",
    ]);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(wrong.status.code(), Some(4));
    let err = stderr(&wrong);
    assert!(err.starts_with("braid: wrong key: "), "{err}");
    assert!(err.contains("did not accept our key"), "{err}");
    assert!(!err.contains("cannot reach"), "{err}");
    let mut args = recv.send_args(input.to_str().unwrap());
    args.push("--quiet");
    let sent = run(&args);
    delivered(&sent, recv, &out.join("data.bin"), &data);
}

#[test]
fn a_wrong_code_does_not_take_a_one_shot_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 200_000);
    let recv = start_recv(&["--output", dir.path().join("got").to_str().unwrap()]);
    assert_eq!(recv.auth[0], "--code");
    let start = Instant::now();
    let wrong = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &recv.addr,
        "--code",
        "0-wrong-guess",
        "--quiet",
    ]);
    // Told within seconds, not at the 75 s handshake timeout.
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(wrong.status.code(), Some(4));
    let err = stderr(&wrong);
    assert!(
        err.starts_with("braid: wrong code (or someone tried to intercept)"),
        "{err}"
    );
    assert!(!err.contains("cannot reach"), "{err}");
    assert_eq!(
        err.lines().count(),
        1,
        "the error once, nothing else: {err}"
    );
    let mut args = recv.send_args(input.to_str().unwrap());
    args.push("--quiet");
    let sent = run(&args);
    delivered(&sent, recv, &dir.path().join("got"), &data);
}

/// A guesser spends a code listener's guesses one after the other: the
/// receiver reports each wrong guess when its sender gives up, within
/// about a round trip (not when the half-open handshake would expire),
/// ends at the eighth with `code_spent`, and a ninth sender finds nobody.
#[test]
fn each_wrong_code_is_reported_when_it_happens_and_the_eighth_ends_the_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    write_data(&input, 10_000);
    let recv = start_recv(&["--output", dir.path().join("got").to_str().unwrap()]);
    let guess = |n: u32| {
        run(&[
            "send",
            input.to_str().unwrap(),
            "--to",
            &recv.addr,
            "--code",
            &format!("0-wrong-guess{}", "s".repeat(n as usize)),
            "--quiet",
        ])
    };
    for n in 1..=8 {
        let wrong = guess(n);
        assert_eq!(wrong.status.code(), Some(4), "{}", stderr(&wrong));
        let told = Instant::now();
        let said = match n {
            8 => "stopped listening".to_owned(),
            _ => format!("{n} of 8 wrong guesses"),
        };
        recv.said(&said, Duration::from_secs(5));
        assert!(
            told.elapsed() < Duration::from_secs(2),
            "guess {n} reported {:?} after its sender ended",
            told.elapsed()
        );
    }
    let start = Instant::now();
    let status = wait(recv.child, Duration::from_secs(5));
    assert_eq!(status.code(), Some(4), "code_spent");
    assert!(start.elapsed() < Duration::from_secs(2));
    let ninth = guess(9);
    assert_eq!(ninth.status.code(), Some(3), "{}", stderr(&ninth));
    assert!(stderr(&ninth).contains("nothing is listening"));
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn an_existing_file_is_replaced_only_with_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("data.bin"), b"precious").unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 100_000);

    let recv = start_recv(&["--output", out.to_str().unwrap()]);
    let sent = run(&recv.send_args(input.to_str().unwrap()));
    assert_eq!(sent.status.code(), Some(1));
    assert!(
        stderr(&sent).contains("exists on the receiver"),
        "{}",
        stderr(&sent)
    );
    assert!(!wait(recv.child, Duration::from_secs(20)).success());
    assert_eq!(std::fs::read(out.join("data.bin")).unwrap(), b"precious");

    // Naming the file itself is refused before listening.
    let named = out.join("data.bin");
    fails(
        &[
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--output",
            named.to_str().unwrap(),
        ],
        5,
        "--overwrite",
    );

    let recv = start_recv(&["--output", out.to_str().unwrap(), "--overwrite"]);
    let sent = run(&recv.send_args(input.to_str().unwrap()));
    delivered(&sent, recv, &out.join("data.bin"), &data);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

#[test]
fn long_and_hostile_names_arrive_and_print_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for name in [
        "n".repeat(251) + ".bin",
        "evil\x1b[2J\u{202e}name.txt".to_owned(),
    ] {
        let input = dir.path().join(&name);
        let data = write_data(&input, 10_000);
        let mut recv = braid()
            .args(["recv", "--listen", "127.0.0.1:0", "--insecure", "--output"])
            .arg(&out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(recv.stderr.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("listening on ") {
            line.clear();
            err.read_line(&mut line).unwrap();
        }
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        let sent = run(&[
            "send",
            input.to_str().unwrap(),
            "--to",
            &addr,
            "--insecure",
            "--quiet",
        ]);
        assert!(sent.status.success(), "{}", stderr(&sent));
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        assert!(recv.wait().unwrap().success());
        assert!(std::fs::read(out.join(&name)).unwrap() == data);
        assert!(
            !rest.contains('\x1b') && !rest.contains('\u{202e}'),
            "{rest}"
        );
        if name.starts_with("evil") {
            assert!(rest.contains("evil\\u{1b}[2J\\u{202e}name.txt"), "{rest}");
        }
    }
}

#[test]
fn an_emulator_refuses_to_forward_to_itself() {
    let port = free_port();
    fails(
        &["emulate", "--listen", &port, "--to", &port],
        1,
        "forward to itself",
    );
}

/// `braid relay` is the rendezvous relay: its help has no link options,
/// and the emulator's old spelling, `braid relay --listen --to`, is
/// refused with a pointer to `braid emulate`, with or without --serve.
#[test]
fn the_relay_and_the_emulator_are_two_commands() {
    let relay = String::from_utf8_lossy(&run(&["relay", "--help"]).stdout).into_owned();
    assert!(relay.contains("--serve"), "{relay}");
    for link_option in [
        "--listen", "--to ", "--rate", "--delay", "--loss", "--trace",
    ] {
        assert!(!relay.contains(link_option), "{link_option}: {relay}");
    }
    let emulate = String::from_utf8_lossy(&run(&["emulate", "--help"]).stdout).into_owned();
    for option in ["--listen", "--to", "--rate", "--delay", "--loss", "--trace"] {
        assert!(emulate.contains(option), "{option}: {emulate}");
    }
    let port = free_port();
    fails(
        &["relay", "--listen", &port, "--to", &port],
        2,
        "braid emulate",
    );
    fails(
        &["relay", "--serve", "127.0.0.1:0", "--listen", &port],
        2,
        "braid emulate",
    );
}

/// A sender whose input stalls mid-transfer: the receiver holds a partial
/// file until one side is stopped by a signal.
fn stalled_transfer(out: &Path) -> (Recv, Child, std::process::ChildStdin) {
    let recv = start_recv(&["--output", out.to_str().unwrap(), "--insecure"]);
    let mut send = braid()
        .args(["send", "-", "--to", &recv.addr, "--insecure", "--quiet"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = send.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, &vec![7u8; 1 << 20]).unwrap();
    // Until the receiver has written three quarters of it (it writes in
    // pieces of 256 KiB): the transfer is stalled, not starting. How long
    // a silent peer is waited for depends on how many packets the path
    // carried, and 16 KiB datagrams on loopback carry the first bytes in
    // a handful.
    let start = Instant::now();
    // Into a hidden staging folder, until it is complete.
    fn written(dir: &Path) -> u64 {
        let files = std::fs::read_dir(dir).unwrap();
        files
            .map(|f| {
                let f = f.unwrap();
                match f.metadata() {
                    Ok(m) if m.is_dir() => written(&f.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                }
            })
            .sum()
    }
    let written = || written(out);
    loop {
        let n = written();
        if n >= 3 << 18 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{n} bytes written"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (recv, send, stdin)
}

#[test]
fn a_signal_on_either_side_reaches_the_other_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // The receiver is terminated: the sender learns why within moments.
    let out = dir.path().join("a");
    std::fs::create_dir(&out).unwrap();
    let (recv, mut send, _stdin) = stalled_transfer(&out);
    kill(&recv.child, "-TERM");
    let recv_status = wait(recv.child, Duration::from_secs(5));
    let mut said = String::new();
    let sent = std::thread::scope(|s| {
        let err = send.stderr.take().unwrap();
        let reader = s.spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(err), &mut text);
            text
        });
        let start = Instant::now();
        while send.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = send.kill();
        let status = send.wait().unwrap();
        said = reader.join().unwrap();
        status
    });
    assert_eq!(recv_status.code(), Some(143));
    assert_eq!(sent.code(), Some(1), "{said}");
    assert!(said.contains("receiver terminated (SIGTERM)"), "{said}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "no partial file"
    );

    // The sender is interrupted: the receiver says why and keeps nothing.
    let out = dir.path().join("b");
    std::fs::create_dir(&out).unwrap();
    let (recv, send, _stdin) = stalled_transfer(&out);
    kill(&send, "-INT");
    let started = Instant::now();
    let Recv { child, err, .. } = recv;
    let recv_status = wait(child, Duration::from_secs(5));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(wait(send, Duration::from_secs(5)).code(), Some(130));
    assert_eq!(recv_status.code(), Some(1));
    // All it printed, now that it has exited.
    let said = err.iter().collect::<Vec<_>>().join("\n");
    assert!(said.contains("sender interrupted (SIGINT)"), "{said}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "no partial file"
    );
}

#[test]
fn a_killed_peer_is_declared_gone_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    // The sender is killed mid-stream: the receiver's probes go unanswered.
    let out = dir.path().join("a");
    std::fs::create_dir(&out).unwrap();
    let (recv, mut send, _stdin) = stalled_transfer(&out);
    kill(&send, "-KILL");
    send.wait().unwrap();
    let start = Instant::now();
    let status = wait(recv.child, Duration::from_secs(25));
    let took = start.elapsed();
    // Its stderr, up to the end (the reader thread stops at EOF).
    let said: String = recv.err.iter().collect::<Vec<_>>().join("\n");
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(said.contains("went silent"), "{said}");
    assert!(took < Duration::from_secs(15), "noticed after {took:?}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "partial file left"
    );

    // The receiver is killed while the sender has data outstanding.
    let out = dir.path().join("b");
    std::fs::create_dir(&out).unwrap();
    let (mut recv, send, mut stdin) = stalled_transfer(&out);
    recv.child.kill().unwrap();
    recv.child.wait().unwrap();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &vec![9u8; 1 << 20]);
        std::thread::sleep(Duration::from_secs(30));
    });
    let out = send.wait_with_output().unwrap();
    let took = start.elapsed();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("went silent"), "{said}");
    assert!(took < Duration::from_secs(15), "noticed after {took:?}");
}

/// Runs `braid keygen -o DIR/NAME`; returns the key file's path.
fn pub_of(key: &Path) -> String {
    format!("{}.pub", key.display())
}

#[test]
fn a_key_file_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let public = std::fs::read_to_string(pub_of(&key)).unwrap();
    let input = dir.path().join("f");
    write_data(&input, 1000);
    for mode in [0o644, 0o640, 0o604, 0o620] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let fix = format!("chmod 600 {}", key.display());
        let recv = run(&[
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--key",
            key.to_str().unwrap(),
        ]);
        assert_eq!(recv.status.code(), Some(5), "{mode:o}");
        let err = stderr(&recv);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&fix) && err.contains("other users"), "{err}");
        fails(
            &[
                "send",
                input.to_str().unwrap(),
                "--to",
                "127.0.0.1:9",
                "--peer",
                public.trim(),
                "--key",
                key.to_str().unwrap(),
            ],
            5,
            &fix,
        );
    }
    // Private again, it is used.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let recv = start_recv(&["--key", key.to_str().unwrap()]);
    assert_eq!(recv.auth, ["--peer", public.trim()]);
    let mut child = recv.child;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_code_typed_with_spaces_and_capitals_works() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 100_000);
    let recv = start_recv(&["--output", dir.path().join("got").to_str().unwrap()]);
    assert_eq!(recv.auth[0], "--code");
    // 417-amber-walrus, read out and typed as " 417 Amber  WALRUS ".
    let typed = format!(" {} ", recv.auth[1].replace('-', "  ").to_uppercase());
    let sent = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &recv.addr,
        "--code",
        &typed,
        "--quiet",
    ]);
    delivered(&sent, recv, &dir.path().join("got"), &data);
}

#[test]
fn peer_takes_the_public_key_file_but_not_the_secret_one() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 100_000);
    fails(
        &[
            "send",
            input.to_str().unwrap(),
            "--to",
            "127.0.0.1:9",
            "--peer",
            key.to_str().unwrap(),
        ],
        2,
        "secret key file",
    );
    let recv = start_recv(&[
        "--key",
        key.to_str().unwrap(),
        "--output",
        dir.path().join("got").to_str().unwrap(),
    ]);
    let sent = run(&[
        "send",
        input.to_str().unwrap(),
        "--to",
        &recv.addr,
        "--peer",
        &pub_of(&key),
        "--quiet",
    ]);
    delivered(&sent, recv, &dir.path().join("got"), &data);
}

#[test]
fn recv_allow_admits_only_the_listed_senders() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "r.key");
    let alice = keygen(dir.path(), "alice.key");
    let mallory = keygen(dir.path(), "mallory.key");
    let alice_pub = std::fs::read_to_string(pub_of(&alice)).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 200_000);
    let recv = start_recv(&[
        "--key",
        key.to_str().unwrap(),
        "--allow",
        &pub_of(&mallory),
        "--allow",
        alice_pub.trim(),
        "--output",
        out.to_str().unwrap(),
    ]);
    let send = |own: Option<&Path>| {
        let mut args = vec![
            "send",
            input.to_str().unwrap(),
            "--to",
            &recv.addr,
            "--peer",
            &recv.auth[1],
            "--quiet",
        ];
        if let Some(k) = own {
            args.extend(["--key", k.to_str().unwrap()]);
        }
        let start = Instant::now();
        let o = run(&args);
        (o, start.elapsed())
    };
    // Another key, or none (a fresh one): refused at once, nothing written.
    let eve = keygen(dir.path(), "eve.key");
    for own in [Some(eve.as_path()), None] {
        let (o, took) = send(own);
        assert_eq!(o.status.code(), Some(4), "{own:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert!(
            stderr(&o).starts_with("braid: wrong key: ")
                && stderr(&o).contains("did not accept our key")
                && stderr(&o).contains("--allow"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }
    let (o, _) = send(Some(&alice));
    delivered(&o, recv, &out.join("data.bin"), &data);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

/// A UDP forwarder between one sender and `to` that corrupts (flips the
/// last byte of) `corrupt` of the sender's datagrams after its first ten.
fn corrupting_proxy(
    to: &str,
    corrupt: usize,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = sock.local_addr().unwrap().to_string();
    let to: std::net::SocketAddr = to.parse().unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let (mut client, mut from_client, mut corrupted) = (None, 0, 0);
        while !stopped.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            if from == to {
                if let Some(c) = client {
                    let _ = sock.send_to(&buf[..n], c);
                }
                continue;
            }
            client = Some(from);
            from_client += 1;
            if from_client > 10 && from_client % 7 == 0 && corrupted < corrupt {
                buf[n - 1] ^= 0x5a;
                corrupted += 1;
            }
            let _ = sock.send_to(&buf[..n], to);
        }
    });
    (addr, stop)
}

#[test]
fn datagrams_that_did_not_authenticate_are_counted_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.bin");
    let data = write_data(&input, 1_000_000);
    let recv = start_recv(&["--output", dir.path().join("got").to_str().unwrap()]);
    let (proxy, stop) = corrupting_proxy(&recv.addr, 5);
    let mut args = vec!["send", input.to_str().unwrap(), "--to", &proxy, "--json"];
    args.extend(recv.auth.iter().map(String::as_str));
    let sent = run(&args);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(sent.status.success(), "{}", stderr(&sent));
    let json: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    assert_eq!(json["forged_dropped"], 0);
    assert!(!stderr(&sent).contains("did not authenticate"));
    assert!(wait(recv.child, Duration::from_secs(20)).success());
    assert!(std::fs::read(dir.path().join("got")).unwrap() == data);
    let summary = recv.err.iter().collect::<Vec<_>>().join("\n");
    assert!(
        summary.contains("dropped 5 datagrams that did not authenticate"),
        "{summary}"
    );
}

#[test]
fn sim_delay_start_meets_another_stretch_of_a_trace() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/real/verizon-lte.toml"
    );
    let at = |delay: &str| {
        let o = run(&["sim", file, "--delay-start", delay, "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let f = &v["flows"][0];
        assert_eq!(
            (&f["completed"], &f["verified"]),
            (&true.into(), &true.into())
        );
        let (took, virtual_s) = (
            f["duration_s"].as_f64().unwrap(),
            v["virtual_s"].as_f64().unwrap(),
        );
        (f["goodput_mbps"].as_f64().unwrap(), took, virtual_s)
    };
    let (first, took0, end0) = at("0s");
    let (later, took30, end30) = at("30s");
    // The transfer is timed from its own start, and the run ends that much later.
    assert!((end0 - took0).abs() < 1.0, "{end0} {took0}");
    assert!((end30 - took30 - 30.0).abs() < 1.0, "{end30} {took30}");
    // The trace's first 30 s carry 5.3 Mbit/s, the next 45 s nearer 3.
    assert!(first > 1.3 * later, "{first} {later}");
}
