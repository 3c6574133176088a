//! `braid link`: a real transfer from a command behind the emulated link to
//! a receiver outside it. Needs root and /dev/net/tun (CI has both); without
//! them the tests say so and check only the error.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

/// Whether this machine lets braid link make its namespace and devices
/// (root, /dev/net/tun, iproute2): a probe run says, in its own words.
fn can_run_links() -> bool {
    let probe = braid()
        .args(["link", "--quiet", "--", "true"])
        .output()
        .unwrap();
    if probe.status.success() {
        return true;
    }
    let err = String::from_utf8_lossy(&probe.stderr);
    let missing = [
        "needs root",
        "no /dev/net/tun",
        "needs iproute2",
        "cannot create a network namespace",
        "cannot create TUN device",
    ];
    assert!(
        missing.iter().any(|m| err.contains(m)),
        "braid link failed for another reason: {err}"
    );
    eprintln!("skipping: {}", err.trim());
    false
}

fn namespaces() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_transfer_through_the_link_has_its_delay_and_rate() {
    if !can_run_links() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let data: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&input, &data).unwrap();
    let output = dir.path().join("out.bin");
    let log = dir.path().join("up.log");
    let port = {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let mut recv = braid()
        .args([
            "recv",
            "--listen",
            &format!("0.0.0.0:{port}"),
            "--insecure",
            "--quiet",
        ])
        .arg("--output")
        .arg(&output)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));

    let started = Instant::now();
    let out = braid()
        .args(["link", "--rate", "20mbit", "--delay", "10ms", "--quiet"])
        .arg("--uplink-log")
        .arg(&log)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "exec \"$0\" send \"$1\" --to \"$BRAID_LINK_HOST:{port}\" --insecure --json"
        ))
        .arg(env!("CARGO_BIN_EXE_braid"))
        .arg(&input)
        .output()
        .unwrap();
    let status = recv.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.success());
    assert_eq!(std::fs::read(&output).unwrap(), data);

    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["outcome"], "verified");
    // 16 Mbit of payload at 20 Mbit/s on the wire takes at least 0.8 s.
    let goodput = json["goodput_mbps"].as_f64().unwrap();
    assert!(goodput < 20.0 && goodput > 10.0, "goodput {goodput}");
    assert!(started.elapsed() > Duration::from_millis(800));
    let srtt = json["connections"][0]["rtt_ms"]["smoothed"]
        .as_f64()
        .unwrap();
    assert!(srtt >= 20.0, "srtt {srtt} ms below the link's 20 ms");

    // The log: every packet in, and out 10 ms later or more.
    let log = std::fs::read_to_string(&log).unwrap();
    let ins = log.lines().filter(|l| l.contains(" + ")).count();
    let delays: Vec<u64> = log
        .lines()
        .filter(|l| l.contains(" - "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    // At least one packet per full datagram: path MTU discovery finds up
    // to 1,472 bytes on this link, and no datagram carries more payload.
    assert!(ins >= data.len() / 1472, "{ins} packets logged");
    assert!(delays.len() + 2 >= ins, "{} of {ins} left", delays.len());
    assert!(delays.iter().all(|&d| d >= 10), "a packet left early");

    // Other tests may have links running; none may outlive its braid.
    for name in namespaces().split_whitespace() {
        if let Some(pid) = name.strip_prefix("braid-link-") {
            assert!(
                std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "{name} left behind"
            );
        }
    }
}

#[test]
fn the_command_exit_status_is_braids() {
    if !can_run_links() {
        return;
    }
    let out = braid()
        .args(["link", "--quiet", "--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
}

#[test]
fn without_root_the_error_names_it() {
    // setpriv (util-linux) drops to nobody; as nobody from the start, no need.
    // SAFETY: geteuid has no preconditions.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_braid"));
        c
    } else {
        braid()
    };
    let Ok(out) = cmd.args(["link", "--", "true"]).output() else {
        eprintln!("skipping: no setpriv");
        return;
    };
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs root"), "{err}");
}
