//! The scenario parser's tests: every key, its defaults and its errors.

use super::*;
use crate::link::{EcnMode, LinkEventKind, QueueLimit};
use crate::loss::Gilbert;
use crate::units::Rate;
use std::sync::Arc;

fn parse_ok(text: &str) -> Scenario {
    Scenario::from_str(text, ".").unwrap()
}

fn parse_err(text: &str) -> String {
    Scenario::from_str(text, ".").unwrap_err().to_string()
}

const MIN: &str = "[[path]]\nrate = \"10Mbit\"\n[[flow]]\n";

#[test]
fn initial_windows_are_packets_per_connection() {
    let two = "[[path]]\nrate = \"1Mbit\"\n[[path]]\nrate = \"1Mbit\"\n[[flow]]\n";
    let s = parse_ok(&format!("{two}initial_windows = [1, 4095]\n"));
    assert_eq!(s.flows[0].session.initial_windows, [1, 4095]);
    assert!(parse_ok(two).flows[0].session.initial_windows.is_empty());
    let e = parse_err(&format!("{two}initial_windows = [0, 4]\n"));
    assert!(e.contains("flow[0].initial_windows"), "{e}");
    let e = parse_err(&format!("{two}initial_windows = [1, 2, 3]\n"));
    assert!(e.contains("3 windows for 2 connections"), "{e}");
}

#[test]
fn flow_keys_set_the_session_config() {
    let s = parse_ok(&format!(
        "{MIN}cc = \"aimd\"\nrto_k = 6.0\nmin_rto = \"100ms\"\nmax_rto = \"10s\"\ninitial_rto = \"5s\"\nretry_limit = -1\n"
    ));
    let want = SessionConfig {
        cc: braid_proto::cc::Algorithm::Aimd,
        rto: braid_proto::RtoConfig {
            k: 6.0,
            min_rto: Duration::from_millis(100),
            max_rto: Duration::from_secs(10),
            initial_rto: Duration::from_secs(5),
            ..SessionConfig::insecure().rto
        },
        retry_limit: None,
        ..SessionConfig::insecure()
    };
    assert_eq!(s.flows[0].session, want);
    let s = parse_ok(&format!("{MIN}retry_limit = 3\n"));
    assert_eq!(s.flows[0].session.retry_limit, Some(3));
}

#[test]
fn example_parses() {
    let s = Scenario::example();
    assert_eq!(s.name.as_deref(), Some("two heterogeneous paths"));
    assert_eq!(s.paths.len(), 2);
    let p0 = &s.paths[0].forward;
    assert_eq!(p0.rate, Some(Rate::mbit(40)));
    assert_eq!(p0.delay, Duration::from_millis(20));
    assert_eq!(p0.queue, QueueLimit::Packets(300));
    let p1 = &s.paths[1];
    assert_eq!(p1.forward.rate, Some(Rate::mbit(10)));
    assert_eq!(p1.forward.delay, Duration::from_millis(40));
    assert_eq!(p1.forward.loss, 0.01);
    assert_eq!(p1.reverse.loss, 0.0);
    assert_eq!(p1.reverse.delay, Duration::from_millis(40));
    assert_eq!(p1.forward.queue, QueueLimit::Packets(100));
    assert_eq!(s.flows.len(), 1);
    assert_eq!(s.flows[0].bytes, 20_000_000);
    assert_eq!(s.flows[0].session, SessionConfig::insecure());
    assert_eq!(s.flows[0].paths, [0, 1]);
}

#[test]
fn new_has_the_defaults_of_a_file() {
    let file = parse_ok("[[path]]\nrate = \"1Mbit\"\n[[flow]]\n");
    let new = Scenario::new(file.paths.clone(), file.flows.clone());
    assert_eq!(
        (new.name, new.seed, new.time_limit, new.sample_interval),
        (file.name, file.seed, file.time_limit, file.sample_interval)
    );
    assert_eq!(
        (new.published, new.base_dir),
        (file.published, file.base_dir)
    );
}

#[test]
fn defaults_apply() {
    let s = parse_ok(MIN);
    assert_eq!(s.seed, 1);
    assert_eq!(s.time_limit, Duration::from_secs(600));
    assert_eq!(s.sample_interval, Duration::from_millis(100));
    let f = &s.paths[0].forward;
    assert_eq!(f.queue, QueueLimit::Packets(1000));
    assert_eq!(
        (f.delay, f.jitter, f.loss, f.duplicate),
        (Duration::ZERO, Duration::ZERO, 0.0, 0.0)
    );
    assert_eq!(f.ecn, EcnMode::Off);
    assert_eq!((f.mtu, s.paths[0].reverse.mtu), (Some(1500), Some(1500)));
    assert_eq!(s.paths[0].reverse.rate, Some(Rate::mbit(10)));
    assert_eq!(
        s.flows[0],
        FlowSpec {
            paths: vec![0],
            ..FlowSpec::default()
        }
    );
}

#[test]
fn full_file_parses() {
    let s = parse_ok(
        r#"
name = "full"
seed = 7
time_limit = "30s"
sample_interval = "10ms"

[[path]]
rate = "1024pps"
reverse_rate = "1Mbit"
delay = "20ms"
jitter = "2ms"
loss = 0.02
reverse_loss = 0.01
duplicate = 0.001
gilbert = { p = 0.01, r = 0.3 }
queue = "256KB"
ecn = "threshold:20"
events = [{ at = "9s", do = "up" }, { at = "5s", do = "down", for = "1s" }, { at = "20s", do = "close" }]

[[path]]
rate = "5Mbit"
ecn = "mbecn"

[[flow]]
cc = "ncp"
bytes = "50MB"
reverse_bytes = 1000
start = "1.5s"
paths = [1, 0]
segment_size = 1024
send_window = "4MiB"
recv_window = 65536

[published]
seed_tcp = 47.5
source = "NKP-0024"
"#,
    );
    assert_eq!((s.seed, s.time_limit), (7, Duration::from_secs(30)));
    let p = &s.paths[0];
    assert_eq!(p.forward.rate, Some(Rate::PacketsPerSec(1024.0)));
    assert_eq!(p.reverse.rate, Some(Rate::mbit(1)));
    assert_eq!((p.forward.loss, p.reverse.loss), (0.02, 0.01));
    assert_eq!(p.reverse.duplicate, 0.001);
    assert_eq!(
        p.forward.gilbert,
        Some(Gilbert {
            p: 0.01,
            r: 0.3,
            h: 1.0,
            k: 0.0
        })
    );
    assert_eq!(p.reverse.gilbert, None);
    assert_eq!(p.forward.queue, QueueLimit::Bytes(256_000));
    assert_eq!(p.reverse.ecn, EcnMode::Threshold(20));
    assert_eq!(p.reverse.jitter, Duration::from_millis(2));
    let kinds: Vec<_> = p
        .forward
        .events
        .iter()
        .map(|e| (e.at.as_secs(), e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                5,
                LinkEventKind::Down {
                    duration: Some(Duration::from_secs(1))
                }
            ),
            (9, LinkEventKind::Up),
            (20, LinkEventKind::Close)
        ]
    );
    assert_eq!(p.reverse.events, p.forward.events);
    assert_eq!(s.paths[1].forward.ecn, EcnMode::MbEcn);
    let f = &s.flows[0];
    assert_eq!(f.session.cc, braid_proto::cc::Algorithm::Ncp);
    assert_eq!((f.bytes, f.reverse_bytes), (50_000_000, 1000));
    assert_eq!(f.start, Duration::from_millis(1500));
    assert_eq!(f.paths, [1, 0]);
    assert_eq!(f.session.segment_size, 1024);
    assert_eq!(
        (f.session.send_window, f.session.recv_window),
        (4 << 20, 65536)
    );
    let published = s.published.unwrap();
    assert_eq!(published.source.as_deref(), Some("NKP-0024"));
    assert_eq!(published.seed_tcp, Some(47.5));
}

#[test]
fn mtu_is_an_alias_of_segment_size() {
    let new = parse_ok(&format!("{MIN}segment_size = 1024\n"));
    let old = parse_ok(&format!("{MIN}mtu = 1024\n"));
    assert_eq!(new.flows[0].session.segment_size, 1024);
    assert_eq!(old.flows[0].session, new.flows[0].session);
    let e = parse_err(&format!("{MIN}segment_size = 1024\nmtu = 1024\n"));
    assert!(e.contains("duplicate field `segment_size`"), "{e}");
}

#[test]
fn segment_size_range_is_the_session_configs() {
    let range = SessionConfig::SEGMENT_SIZE_RANGE;
    for (size, ok) in [
        (range.start() - 1, false),
        (*range.start(), true),
        (*range.end(), true),
        (range.end() + 1, false),
    ] {
        let file = Scenario::from_str(&format!("{MIN}segment_size = {size}\n"), ".");
        assert_eq!(file.is_ok(), ok, "{size}");
        let cfg = SessionConfig {
            segment_size: size,
            ..SessionConfig::insecure()
        };
        assert_eq!(cfg.validate().is_ok(), ok, "{size}");
    }
}

#[test]
fn queue_is_packets_or_bytes_as_on_the_command_line() {
    let queue = |q: &str| {
        parse_ok(&format!(
            "[[path]]\nrate = \"1Mbit\"\nqueue = {q}\n[[flow]]\n"
        ))
        .paths[0]
            .forward
            .queue
    };
    assert_eq!(queue("300"), QueueLimit::Packets(300));
    assert_eq!(queue("\"300\""), QueueLimit::Packets(300));
    assert_eq!(queue("\"64KB\""), QueueLimit::Bytes(64_000));
    for text in ["300", "64KB", "1500B"] {
        assert_eq!(queue(&format!("{text:?}")), text.parse().unwrap(), "{text}");
    }
}

#[test]
fn probabilities_are_fractions_or_percentages() {
    let s = parse_ok(
        "[[path]]\nrate = \"1Mbit\"\nloss = \"1%\"\nreverse_loss = 0.5\nduplicate = 1\n[[flow]]\n",
    );
    let p = &s.paths[0];
    assert_eq!((p.forward.loss, p.reverse.loss), (0.01, 0.5));
    assert_eq!((p.forward.duplicate, p.reverse.duplicate), (1.0, 1.0));
}

#[test]
fn unknown_keys_are_named() {
    let e = parse_err(&format!("{MIN}colour = 3\n"));
    assert!(e.contains("colour"), "{e}");
    let e = parse_err("[[path]]\nrate = \"1Mbit\"\nlatency = \"2ms\"\n[[flow]]\n");
    assert!(
        e.contains("latency") && e.contains("<inline scenario>"),
        "{e}"
    );
    let e = parse_err("seeed = 1\n");
    assert!(e.contains("seeed"), "{e}");
    let e = parse_err(&format!("{MIN}[published]\ntarget_mpbs = 36\n"));
    assert!(e.contains("target_mpbs"), "{e}");
}

#[test]
fn bad_values_are_named() {
    let cases = [
        ("", "no [[path]]"),
        ("[[path]]\nrate = \"1Mbit\"\n", "no [[flow]]"),
        ("[[path]]\ndelay = \"1ms\"\n[[flow]]\n", "path[0].rate: missing"),
        ("[[path]]\nrate = \"0Mbit\"\n[[flow]]\n", "path[0].rate: 0bit must be above zero"),
        ("[[path]]\nrate = \"1Mbit\"\nloss = 1.5\n[[flow]]\n", "path[0].loss: 1.5 is not a probability"),
        ("[[path]]\nrate = \"1Mbit\"\nreverse_loss = \"150%\"\n[[flow]]\n", "path[0].reverse_loss: 1.5 is not"),
        ("[[path]]\nrate = \"1Mbit\"\nloss = \"lots\"\n[[flow]]\n", "expected a probability"),
        ("[[path]]\nrate = \"1Mbit\"\nreverse_rate = \"0pps\"\n[[flow]]\n", "path[0].reverse_rate: 0pps must be above zero"),
        (
            "[[path]]\nrate = \"1Mbit\"\ngilbert = { p = 0.1, r = -0.3 }\n[[flow]]\n",
            "path[0].gilbert.r",
        ),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\npaths = [2]\n", "flow[0].paths: path 2 does not exist"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\npaths = []\n", "flow[0].paths: must name"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\npaths = [0, 0]\n", "listed twice"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nsegment_size = 20\n", "flow[0].segment_size: 20 is out of range"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nsegment_size = 70000\n", "flow[0].segment_size: 70000"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nmtu = 20\n", "flow[0].segment_size: 20 is out of range"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nsend_window = 0\n", "flow[0].send_window: 0 is out of range (allowed >= segment_size)"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nrto_k = -1.0\n", "flow[0].rto_k: -1 is out of range"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nmin_rto = \"2s\"\nmax_rto = \"1s\"\n", "flow[0].max_rto: 1s is out of range (allowed >= min_rto)"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\ninitial_windows = [-1]\n", "flow[0].initial_windows: -1: expected a packet count"),
        (
            "[[path]]\nrate = \"1Mbit\"\nevents = [{ at = \"1s\", do = \"up\", for = \"1s\" }]\n[[flow]]\n",
            "path[0].events[0].for: only applies",
        ),
        ("[[path]]\nrate = \"1Mbit\"\nqueue = 0\n[[flow]]\n", "at least 1"),
        ("[[path]]\nrate = \"1Mbit\"\nqueue = -3\n[[flow]]\n", "queue of -3 packets"),
        ("[[path]]\nrate = \"1Mbit\"\nqueue = \"0\"\n[[flow]]\n", "at least 1"),
        ("[[path]]\nrate = \"1Mbit\"\nqueue = \"0KB\"\n[[flow]]\n", "at least one byte"),
        ("[[path]]\nrate = \"1Mbit\"\necn = \"red\"\n[[flow]]\n", "unknown ECN mode"),
        ("[[path]]\nrate = \"1Mbit\"\necn = \"threshold:0\"\n[[flow]]\n", "bad ECN threshold"),
        ("[[path]]\nrate = \"50 furlongs\"\n[[flow]]\n", "unknown unit"),
        ("[[path]]\nrate = 50\n[[flow]]\n", "needs a unit"),
        ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nbytes = \"-1MB\"\n", "negative"),
        ("time_limit = 0\n[[path]]\nrate = \"1Mbit\"\n[[flow]]\n", "time_limit: must be longer"),
        (
            "[[path]]\nrate = \"1Mbit\"\nevents = [{ at = \"1s\", do = \"explode\" }]\n[[flow]]\n",
            "unknown variant",
        ),
        ("[[path]]\nrate = \"1Mbit\"\ntrace = \"x\"\n[[flow]]\n", "either rate or trace"),
    ];
    for (text, want) in cases {
        let e = parse_err(text);
        assert!(e.contains(want), "{text:?}\n  gave: {e}\n  wanted: {want}");
    }
}

#[test]
fn traces_load_relative_to_the_scenario_file() {
    let dir = std::env::temp_dir().join(format!("braid-scenario-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    std::fs::write(dir.join("traces/one.trace"), "1\n").unwrap();
    std::fs::write(dir.join("traces/bad.trace"), "1\nfast\n").unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "[[path]]\ntrace = \"traces/one.trace\"\n[[path]]\ntrace = \"traces/one.trace\"\nreverse_rate = \"1Mbit\"\n[[flow]]\n",
    )
    .unwrap();
    let s = Scenario::from_file(&file).unwrap();
    assert_eq!(s.base_dir, dir);
    let t0 = s.paths[0].forward.trace.as_ref().unwrap();
    assert_eq!(t0.average_bits_per_sec(), 12e6);
    assert!(Arc::ptr_eq(t0, s.paths[0].reverse.trace.as_ref().unwrap()));
    assert!(Arc::ptr_eq(t0, s.paths[1].forward.trace.as_ref().unwrap()));
    assert_eq!(s.paths[1].reverse.trace, None);
    assert_eq!(s.paths[1].reverse.rate, Some(Rate::mbit(1)));

    std::fs::write(&file, "[[path]]\ntrace = \"traces/bad.trace\"\n[[flow]]\n").unwrap();
    let e = Scenario::from_file(&file).unwrap_err().to_string();
    assert!(
        e.contains("s.toml") && e.contains("path[0].trace") && e.contains("line 2"),
        "{e}"
    );
    std::fs::write(&file, "[[path]]\ntrace = \"traces/none.trace\"\n[[flow]]\n").unwrap();
    let e = Scenario::from_file(&file).unwrap_err().to_string();
    assert!(
        e.contains("cannot read trace") && e.contains("none.trace"),
        "{e}"
    );
    let e = Scenario::from_file(dir.join("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot read scenario file") && e.contains("missing.toml"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pmtud_probes_up_to_the_smallest_link_mtu_and_mtus_are_checked() {
    assert_eq!(parse_ok(MIN).flows[0].session.max_datagram, None);
    let two = "[[path]]\nrate = \"1Mbit\"\nmtu = 9000\n[[path]]\nrate = \"1Mbit\"\nmtu = 4000\n";
    let asked = parse_ok(&format!("{two}[[flow]]\npmtud = true\n"));
    assert_eq!(asked.flows[0].session.max_datagram, Some(4000 - 28));
    let one = parse_ok(&format!("{two}[[flow]]\npmtud = true\npaths = [0]\n"));
    assert_eq!(one.flows[0].session.max_datagram, Some(9000 - 28));
    // What a file asks for, a program can: `bench real` simulates `braid
    // send`, which always probes.
    let mut later = parse_ok(&format!("{two}[[flow]]\npaths = [0]\n[[flow]]\n"));
    assert_eq!(later.flows[1].session.max_datagram, None);
    later.discover_path_mtu(1);
    assert_eq!(later.flows[1].session.max_datagram, Some(4000 - 28));
    assert_eq!(later.flows[0].session.max_datagram, None);
    for bad in ["mtu = 1000", "events = [{ at = \"1s\", do = \"mtu\" }]"] {
        let text = format!("[[path]]\nrate = \"1Mbit\"\n{bad}\n[[flow]]\n");
        assert!(Scenario::from_str(&text, ".").is_err(), "{bad}");
    }
}
