//! The NAT lab (`braid-bench lab`): what each kind of NAT router lets
//! through, checked with plain UDP sockets made in the lab's namespaces
//! (no braid protocol involved), that rebinding, cutting the direct path
//! and taking a hop down do what they say, that the lab leaves nothing
//! behind, and cases of `braid-bench reach` end to end (NAT pairs,
//! failover, one LAN, UDP blocked). Needs root,
//! iproute2, nftables (scripts/install-lab-deps.sh) and /dev/net/tun;
//! without them each test says why it skipped.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

const RELAY: [Ipv4Addr; 2] = [Ipv4Addr::new(198, 18, 1, 10), Ipv4Addr::new(198, 18, 2, 10)];
const PUBLIC: [[Ipv4Addr; 2]; 2] = [
    [Ipv4Addr::new(198, 18, 11, 2), Ipv4Addr::new(198, 18, 11, 3)],
    [Ipv4Addr::new(198, 18, 12, 2), Ipv4Addr::new(198, 18, 12, 3)],
];
const HOST: [Ipv4Addr; 2] = [Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(198, 51, 100, 2)];

/// Why this machine cannot run the lab, if it cannot.
fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    for tool in ["nft", "ip"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!(
                "no `{tool}` (scripts/install-lab-deps.sh installs it)"
            ));
        }
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    None
}

/// Every lab removes the labs of dead processes when it starts: the test
/// that kills one holds this exclusively, the others share it.
static LABS: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    LABS.read().unwrap_or_else(|e| e.into_inner())
}

macro_rules! lab_or_skip {
    ($($arg:expr),*) => {
        match missing() {
            Some(why) => {
                eprintln!("skipping: the NAT lab cannot run here: {why}");
                return;
            }
            None => (shared(), Lab::start(&[$($arg),*])),
        }
    };
}

/// A running `braid-bench lab`, ended (stdin closed, then killed) on drop.
struct Lab {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pid: u32,
}

impl Lab {
    fn start(args: &[&str]) -> Lab {
        let mut child = Command::new(env!("CARGO_BIN_EXE_braid-bench"))
            .arg("lab")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        let pid = child.id();
        let lab = Lab {
            child,
            stdin,
            lines,
            pid,
        };
        let first = lab.line();
        let desc: serde_json::Value = serde_json::from_str(&first).unwrap();
        assert_eq!(desc["relays"][0], RELAY[0].to_string());
        assert_eq!(desc["namespaces"]["host-a"], lab.ns("host-a"));
        lab
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(15))
            .expect("braid-bench lab said nothing")
    }

    fn ns(&self, node: &str) -> String {
        format!("braid-lab-{}-{node}", self.pid)
    }

    /// A command to the lab, which must answer "ok".
    fn ctl(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        assert_eq!(self.line(), "ok", "lab command {command:?}");
    }

    /// Closes its stdin and waits for it to exit.
    fn end(&mut self) -> std::process::ExitStatus {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "the lab did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A UDP socket bound to `addr` inside namespace `ns`.
fn socket_in(ns: &str, addr: SocketAddrV4) -> UdpSocket {
    let f = File::open(format!("/run/netns/{ns}")).unwrap();
    std::thread::spawn(move || {
        // SAFETY: setns on this short-lived thread only, with a file we hold.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        let s = UdpSocket::bind(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(40))).unwrap();
        s
    })
    .join()
    .unwrap()
}

fn any() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)
}

/// A relay's socket: anything on relay `i`, port chosen by the kernel.
fn relay_socket(lab: &Lab, i: usize) -> UdpSocket {
    socket_in(
        &lab.ns(["relay-a", "relay-b"][i]),
        SocketAddrV4::new(RELAY[i], 0),
    )
}

fn host_socket(lab: &Lab, site: usize) -> UdpSocket {
    socket_in(&lab.ns(["host-a", "host-b"][site]), any())
}

/// Where `relay` sees `from`'s datagrams come from (its reflexive
/// address), after a reply got back: tries for up to a second. Each
/// question carries a number of its own, so a late answer to an earlier
/// one is not taken for it.
fn reflexive(from: &UdpSocket, relay: &UdpSocket) -> Option<SocketAddr> {
    static ASKED: AtomicU64 = AtomicU64::new(0);
    let question = format!("where am I {}", ASKED.fetch_add(1, Ordering::Relaxed));
    let answer = format!("there {question}");
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        from.send_to(question.as_bytes(), relay.local_addr().unwrap())
            .unwrap();
        while let Ok((n, seen)) = relay.recv_from(&mut buf) {
            if &buf[..n] != question.as_bytes() {
                continue;
            }
            relay.send_to(answer.as_bytes(), seen).unwrap();
            while let Ok((n, _)) = from.recv_from(&mut buf) {
                if &buf[..n] == answer.as_bytes() {
                    return Some(seen);
                }
            }
        }
    }
    None
}

/// Whether anything `from` sends to `to` arrives on `at` within 600 ms.
fn arrives(from: &UdpSocket, to: SocketAddr, at: &UdpSocket) -> bool {
    let mut buf = [0u8; 64];
    let deadline = Instant::now() + Duration::from_millis(600);
    while Instant::now() < deadline {
        from.send_to(b"knock", to).unwrap();
        if at
            .recv_from(&mut buf)
            .is_ok_and(|(n, _)| &buf[..n] == b"knock")
        {
            return true;
        }
    }
    false
}

/// Simultaneous hole punching between the two hosts, each knowing only
/// the other's reflexive address at relay A, as a rendezvous relay would
/// tell them: both send to it every 40 ms for 1.2 s; whoever hears the
/// other answers the address it heard from. Whether each side heard the
/// other.
fn punch(lab: &Lab) -> [bool; 2] {
    let relay = relay_socket(lab, 0);
    let hosts = [host_socket(lab, 0), host_socket(lab, 1)];
    let seen = hosts
        .each_ref()
        .map(|h| reflexive(h, &relay).expect("the relay is reachable"));
    let relay_addr = relay.local_addr().unwrap();
    std::thread::scope(|s| {
        let sides = [0, 1].map(|me| {
            let sock = &hosts[me];
            let peer = seen[1 - me];
            s.spawn(move || {
                let mut buf = [0u8; 64];
                let mut heard = None;
                let deadline = Instant::now() + Duration::from_millis(1200);
                while Instant::now() < deadline {
                    sock.send_to(b"punch", heard.unwrap_or(peer)).unwrap();
                    if let Ok((_, from)) = sock.recv_from(&mut buf) {
                        if from != relay_addr {
                            heard = Some(from);
                        }
                    }
                }
                heard.is_some()
            })
        });
        sides.map(|t| t.join().unwrap())
    })
}

#[test]
fn reflexive_addresses_show_each_kind_of_mapping() {
    let (_shared, mut lab) = lab_or_skip!("--a", "restricted", "--b", "symmetric");
    let relays = [relay_socket(&lab, 0), relay_socket(&lab, 1)];
    let seen_by = |sock: &UdpSocket| relays.each_ref().map(|r| reflexive(sock, r).unwrap());

    // Endpoint-independent mapping: the public address and the host's own
    // port, to every destination.
    let a = host_socket(&lab, 0);
    let port = a.local_addr().unwrap().port();
    let [ra, rb] = seen_by(&a);
    assert_eq!(ra, SocketAddr::from((PUBLIC[0][0], port)));
    assert_eq!(rb, ra);

    // Symmetric: a new port for each destination.
    let b = host_socket(&lab, 1);
    let [ra, rb] = seen_by(&b);
    assert_eq!(ra.ip(), PUBLIC[1][0]);
    assert_eq!(rb.ip(), PUBLIC[1][0]);
    assert_ne!(ra.port(), rb.port(), "a symmetric NAT kept the port");

    // A firewall translates nothing.
    lab.ctl("nat b firewall");
    let b = host_socket(&lab, 1);
    let port = b.local_addr().unwrap().port();
    assert_eq!(seen_by(&b)[0], SocketAddr::from((HOST[1], port)));
}

#[test]
fn filtering_lets_strangers_in_only_through_a_cone() {
    let (_shared, mut lab) = lab_or_skip!("--a", "cone", "--b", "restricted");
    let relays = [relay_socket(&lab, 0), relay_socket(&lab, 1)];
    for (site, open) in [(0, true), (1, false)] {
        let host = host_socket(&lab, site);
        let mapped = reflexive(&host, &relays[0]).unwrap();
        // Relay B was never written to from this port.
        assert_eq!(
            arrives(&relays[1], mapped, &host),
            open,
            "site {site}: a stranger's datagram"
        );
        // The address that was written to gets in either way.
        assert!(arrives(&relays[0], mapped, &host));
    }
    // The restricted site's firewall-like twin: UDP with the relays only.
    lab.ctl("nat b firewall");
    let host = host_socket(&lab, 1);
    assert!(reflexive(&host, &relays[1]).is_some());
    let a = host_socket(&lab, 0);
    let b_addr = SocketAddr::from((HOST[1], host.local_addr().unwrap().port()));
    assert!(
        !arrives(&a, b_addr, &host),
        "a firewall let a peer's UDP in"
    );
}

#[test]
fn hole_punching_works_where_a_mapping_can_be_learned() {
    let (_shared, mut lab) = lab_or_skip!("--a", "cone", "--b", "cone");
    // (site A, site B, whether a direct path opens)
    let pairs = [
        ("cone", "cone", true),
        ("cone", "symmetric", true),
        ("symmetric", "cone", true),
        ("restricted", "restricted", true),
        ("restricted", "symmetric", false),
        ("symmetric", "symmetric", false),
        ("firewall", "cone", false),
    ];
    let mut got = Vec::new();
    for (a, b, _) in pairs {
        lab.ctl(&format!("nat a {a}"));
        lab.ctl(&format!("nat b {b}"));
        got.push((a, b, punch(&lab)));
    }
    for ((a, b, want), (_, _, heard)) in pairs.iter().zip(&got) {
        assert_eq!(
            *heard, [*want; 2],
            "{a}–{b}: which side heard the other; all: {got:?}"
        );
    }
}

#[test]
fn a_rebind_moves_the_mapping_and_a_cut_stops_only_the_direct_path() {
    let (_shared, mut lab) = lab_or_skip!("--a", "restricted", "--b", "cone");
    let relay = relay_socket(&lab, 0);
    let a = host_socket(&lab, 0);
    let port = a.local_addr().unwrap().port();
    let before = reflexive(&a, &relay).unwrap();
    assert_eq!(before, SocketAddr::from((PUBLIC[0][0], port)));
    lab.ctl("rebind a");
    // What the relay sends to the old mapping no longer gets in; the
    // host's next datagram shows its new one.
    assert!(!arrives(&relay, before, &a));
    let after = reflexive(&a, &relay).unwrap();
    assert_eq!(after, SocketAddr::from((PUBLIC[0][1], port)));
    assert!(arrives(&relay, after, &a));

    // Site B is a cone: A reaches B's mapping directly, until the cut.
    let b = host_socket(&lab, 1);
    let b_public = reflexive(&b, &relay).unwrap();
    assert!(arrives(&a, b_public, &b));
    lab.ctl("cut");
    assert!(!arrives(&a, b_public, &b), "the cut let a datagram through");
    assert!(reflexive(&a, &relay).is_some(), "the cut stopped the relay");
    assert!(reflexive(&b, &relay).is_some(), "the cut stopped the relay");
    lab.ctl("heal");
    assert!(arrives(&a, b_public, &b));

    // A hop taken down loses everything, and comes back.
    lab.ctl("down relay-a");
    assert!(reflexive(&a, &relay).is_none());
    lab.ctl("up relay-a");
    assert!(reflexive(&a, &relay).is_some());
}

#[test]
fn the_lab_leaves_nothing_behind_even_after_kill_9() {
    if let Some(why) = missing() {
        eprintln!("skipping: the NAT lab cannot run here: {why}");
        return;
    }
    let listed = |pid: u32| {
        let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with(&format!("braid-lab-{pid}-")))
            .count()
    };
    let _only = LABS.write().unwrap_or_else(|e| e.into_inner());
    let mut first = Lab::start(&[]);
    assert_eq!(listed(first.pid), 7, "seven machines");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert_eq!(listed(first.pid), 7, "a killed lab cannot clean up");
    // The next lab removes the dead one's namespaces.
    let mut second = Lab::start(&[]);
    assert_eq!(listed(first.pid), 0);
    assert_eq!(listed(second.pid), 7);
    // SIGTERM: the lab removes itself and says it was stopped.
    // SAFETY: a pid of our own child, not yet reaped.
    unsafe { libc::kill(second.pid as libc::pid_t, libc::SIGTERM) };
    let status = second.end();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert_eq!(listed(second.pid), 0);
    // End of input: a clean exit.
    let mut third = Lab::start(&[]);
    assert!(third.end().success());
    assert_eq!(listed(third.pid), 0);
}

/// The whole stack in the lab, as `braid-bench reach` runs it (its NAT
/// pairs and failover cases, one small file each): braid's rendezvous
/// relays, hole punching wherever a mapping can be learnt, the relays
/// alone otherwise, and transfers that survive a relay killed, the direct
/// path cut and a NAT rebinding.
#[test]
fn bench_reach_punches_where_it_can_relays_elsewhere_and_survives_failures() {
    if let Some(why) = missing() {
        eprintln!("skipping: the NAT lab cannot run here: {why}");
        return;
    }
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_braid-bench"))
        .args(["reach", "--parts", "pairs,failover"])
        .args([
            "--rounds",
            "1",
            "--size",
            "4MB",
            "--timeout",
            "30s",
            "--out",
        ])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("reach.json")).unwrap())
            .unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 10, "{stderr}");
    for run in runs {
        let case = &report["cases"][run["case"].as_u64().unwrap() as usize];
        let name = case["name"].as_str().unwrap();
        assert_eq!(run["verified"], true, "{name}: {}", run["error"]);
        let validated = run["validated_ms"].as_f64();
        match name {
            "cone–cone" | "cone–symmetric" | "restricted–restricted" => {
                assert!(validated.is_some(), "{name}: no direct path");
            }
            "restricted–symmetric" | "symmetric–symmetric" | "firewall–cone" => {
                assert_eq!(validated, None, "{name}: a direct path");
                assert_eq!(run["direct_share"], 0.0, "{name}");
            }
            // Failover: verified is the point.
            _ => assert_eq!(case["part"], "failover", "unexpected case {name}"),
        }
    }
    let md = std::fs::read_to_string(dir.path().join("reach.md")).unwrap();
    assert!(md.starts_with("# Reach"), "{md}");
    assert!(md.contains("**Verdict: "), "{md}");
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains(&format!("braid-lab-{pid}-")), "{left}");
}

/// The same-LAN and UDP-blocked cases of `braid-bench reach`, one small
/// file each: both hosts behind one router find each other on the LAN
/// (braid --relay opens a direct path there, braid --to the LAN address
/// needs no relay), and with all UDP out dropped both ends fail naming
/// the cause (`no_relay`, exit 3) within 10 s.
#[test]
fn bench_reach_on_one_lan_and_with_udp_blocked() {
    if let Some(why) = missing() {
        eprintln!("skipping: the NAT lab cannot run here: {why}");
        return;
    }
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_braid-bench"))
        .args(["reach", "--parts", "lan,udp-blocked"])
        .args(["--rounds", "1", "--size", "2MB", "--timeout", "30s"])
        .args(["--report-name", "cases", "--out"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("cases.json")).unwrap())
            .unwrap();
    let runs = report["runs"].as_array().unwrap();
    // Without --croc and --wormhole, their cases are left out.
    assert_eq!(runs.len(), 4, "{stderr}");
    for run in runs {
        let case = &report["cases"][run["case"].as_u64().unwrap() as usize];
        let name = case["name"].as_str().unwrap();
        assert_eq!(run["as_expected"], true, "{name}: {}", run["error"]);
        match name {
            "same LAN, braid --relay" => {
                assert_eq!(run["verified"], true);
                assert!(run["validated_ms"].is_f64(), "{name}: no direct path");
            }
            "same LAN, braid --to LAN address" => assert_eq!(run["verified"], true),
            // Over TCP to the relay, after 3 s of UDP silence.
            "UDP blocked, braid" => assert_eq!(run["verified"], true, "{name}: {}", run["error"]),
            // A relay without TCP: no way through, said within 10 s.
            "UDP blocked, braid, relay without TCP" => {
                assert_eq!(run["verified"], false);
                assert_eq!(
                    run["error_codes"],
                    serde_json::json!(["no_relay", "no_relay"])
                );
                assert_eq!(run["exit_codes"], serde_json::json!([3, 3]));
                for t in run["fail_s"].as_array().unwrap() {
                    assert!(t.as_f64().is_some_and(|t| t <= 10.0), "{name}: {t}");
                }
            }
            _ => panic!("unexpected case {name}"),
        }
    }
    let md = std::fs::read_to_string(dir.path().join("cases.md")).unwrap();
    assert!(md.contains("same LAN: braid --relay goodput"), "{md}");
    assert!(md.contains("[cases.json](cases.json)"), "{md}");
}
