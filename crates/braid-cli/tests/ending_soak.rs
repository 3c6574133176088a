//! How transfers end through a lossy emulated link, repeated: a soak, not part of
//! the default run (it takes minutes). Each transfer goes from `braid send`
//! through one `braid emulate --loss` to a fresh `braid recv` on loopback,
//! sealed with a pinned key. The two sides must agree on every transfer
//! (both verified, or both failed with no file kept), and the time from
//! the receiver's outcome to both processes' exits is printed.
//!
//! ```sh
//! BRAID_SOAK_RUNS=200 BRAID_SOAK_LOSS=5% cargo test --release -p braid-cli --test ending_soak -- --ignored --nocapture
//! ```

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn free_udp_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().port()
}

/// A child's first stdout line and when it came, its exit status, and
/// when it exited.
type Watch = (Option<(String, Instant)>, Option<i32>, Instant);

/// A child whose first stdout line (its JSON record) and exit are timed.
struct Watched {
    waiter: std::thread::JoinHandle<Watch>,
}

impl Watched {
    fn spawn(args: &[&str]) -> Watched {
        let mut child: Child = Command::new(BRAID)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let waiter = std::thread::spawn(move || {
            let mut first = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if first.is_none() && !line.trim().is_empty() {
                    first = Some((line, Instant::now()));
                }
            }
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            let status = child.wait().ok().and_then(|s| s.code());
            (first, status, Instant::now())
        });
        Watched { waiter }
    }

    /// The record, the exit status and when each came.
    fn finish(self) -> (Option<(Value, Instant)>, Option<i32>, Instant) {
        let (line, status, exit_at) = self.waiter.join().unwrap();
        let record = line.and_then(|(l, at)| serde_json::from_str(&l).ok().map(|v| (v, at)));
        (record, status, exit_at)
    }
}

fn verified(r: &Option<(Value, Instant)>, status: Option<i32>) -> bool {
    status == Some(0) && r.as_ref().is_some_and(|(v, _)| v["outcome"] == "verified")
}

#[test]
#[ignore = "a soak of minutes; run it with --ignored"]
fn both_sides_agree_on_how_every_transfer_ended() {
    let runs: usize = env_or("BRAID_SOAK_RUNS", "50").parse().unwrap();
    let loss = env_or("BRAID_SOAK_LOSS", "5%");
    let size: usize = env_or("BRAID_SOAK_BYTES", "2000000").parse().unwrap();
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("in.bin");
    let data: Vec<u8> = (0..size).map(|i| (i * 131 % 251) as u8).collect();
    std::fs::write(&input, &data).unwrap();
    let key = work.path().join("recv.key");
    let made = Command::new(BRAID)
        .args(["keygen", "-o"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success());
    let peer = key.with_extension("key.pub");
    let (recv_port, emulator_port) = (free_udp_port(), free_udp_port());
    let listen = format!("127.0.0.1:{recv_port}");
    let via = format!("127.0.0.1:{emulator_port}");
    let mut emulator = Command::new(BRAID)
        .args([
            "emulate", "--listen", &via, "--to", &listen, "--loss", &loss,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut disagreements = Vec::new();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let mut to_exits = Vec::new();
    for i in 0..runs {
        let out = work.path().join(format!("out-{i}.bin"));
        let out_s = out.to_str().unwrap().to_owned();
        let key_s = key.to_str().unwrap().to_owned();
        let recv = Watched::spawn(&[
            "recv", "--listen", &listen, "--key", &key_s, "--output", &out_s, "--json", "--quiet",
        ]);
        std::thread::sleep(Duration::from_millis(150));
        let send = Watched::spawn(&[
            "send",
            input.to_str().unwrap(),
            "--to",
            &via,
            "--peer",
            peer.to_str().unwrap(),
            "--json",
            "--quiet",
        ]);
        let (s, s_code, s_exit) = send.finish();
        let (r, r_code, r_exit) = recv.finish();
        let (s_ok, r_ok) = (verified(&s, s_code), verified(&r, r_code));
        let kept = Path::new(&out).exists() && std::fs::read(&out).unwrap() == data;
        *outcomes
            .entry(format!(
                "send {} ({s_code:?}), recv {} ({r_code:?})",
                if s_ok { "ok" } else { "failed" },
                if r_ok { "ok" } else { "failed" }
            ))
            .or_default() += 1;
        if s_ok != r_ok || kept != r_ok {
            let err = |v: &Option<(Value, Instant)>| {
                v.as_ref()
                    .map(|(v, _)| v["error"].to_string())
                    .unwrap_or_default()
            };
            disagreements.push(format!(
                "run {i}: sender ok {s_ok} ({}), receiver ok {r_ok} ({}), file kept {kept}",
                err(&s),
                err(&r)
            ));
        }
        if let Some((_, at)) = r.as_ref().filter(|_| r_ok) {
            to_exits.push(s_exit.max(r_exit).duration_since(*at).as_secs_f64());
        }
        let _ = std::fs::remove_file(&out);
    }
    let _ = emulator.kill();
    let _ = emulator.wait();
    println!(
        "{runs} transfers of {size} bytes through braid emulate --loss {loss} (loopback, sealed)"
    );
    for (k, n) in &outcomes {
        println!("  {n:4}  {k}");
    }
    to_exits.sort_by(f64::total_cmp);
    if !to_exits.is_empty() {
        let at = |p: f64| to_exits[((to_exits.len() - 1) as f64 * p).round() as usize];
        println!(
            "from the receiver's outcome to both exits: median {:.2} s, p99 {:.2} s, max {:.2} s",
            at(0.5),
            at(0.99),
            to_exits[to_exits.len() - 1]
        );
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}
