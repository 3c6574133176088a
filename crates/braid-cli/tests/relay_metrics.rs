//! `braid relay --serve --metrics` on loopback, scraped over a plain TCP
//! connection: every counter is there in Prometheus's text format, and a
//! client that sends too much or too slowly is closed in bounded time
//! while a scrape is still answered.

mod common;

use common::{braid, lines};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Longer than the relay gives one connection (3 s), on a busy machine too.
const BOUND: Duration = Duration::from_secs(10);

/// A running `braid relay --serve --metrics`; killed on drop.
struct Served {
    child: Child,
    relay: String,
    metrics: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve() -> Served {
    let mut child = braid()
        .args(["relay", "--serve", "127.0.0.1:0"])
        .args(["--metrics", "127.0.0.1:0", "--stats-every", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = lines(child.stdout.take().unwrap());
    let line = out.recv_timeout(BOUND).unwrap();
    let (relay, _) = line
        .strip_prefix("relay serving on ")
        .and_then(|l| l.split_once(": "))
        .unwrap_or_else(|| panic!("{line}"));
    let line = out.recv_timeout(BOUND).unwrap();
    let metrics = line
        .strip_prefix("metrics at http://")
        .and_then(|l| l.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"));
    Served {
        relay: relay.to_owned(),
        metrics: metrics.to_owned(),
        child,
    }
}

/// The whole answer to `request`, read until the relay closes.
fn ask(at: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(at).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s.write_all(request).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    got
}

/// A scrape's samples by series, each value a number.
fn scrape(at: &str) -> HashMap<String, f64> {
    let got = ask(at, b"GET /metrics HTTP/1.1\r\nHost: relay\r\n\r\n");
    let (head, body) = got.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let value = value.parse().unwrap_or_else(|e| panic!("{e}: {l}"));
            (series.to_owned(), value)
        })
        .collect()
}

#[test]
fn a_scrape_finds_every_counter_of_the_relay_and_its_process() {
    let relay = serve();
    // A datagram from an address in no pair is dropped and counted.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(&[8u8; 100], &relay.relay).unwrap();
    let dropped = "braid_relay_dropped_datagrams_total{cause=\"unknown\"}";
    let start = Instant::now();
    let m = loop {
        let m = scrape(&relay.metrics);
        if m.get(dropped) == Some(&1.0) || start.elapsed() > BOUND {
            break m;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(m.get(dropped), Some(&1.0), "{m:?}");
    for series in [
        "braid_relay_registrations",
        "braid_relay_pairs",
        "braid_relay_paired_total",
        "braid_relay_forwarded_datagrams_total",
        "braid_relay_forwarded_bytes_total",
        "braid_relay_dropped_datagrams_total{cause=\"over_limit\"}",
        "braid_relay_cookies_total",
        "braid_relay_refused_total{cause=\"unknown\"}",
        "braid_relay_refused_total{cause=\"busy\"}",
        "braid_relay_refused_total{cause=\"host_full\"}",
        "braid_relay_refused_total{cause=\"relay_full\"}",
        "braid_relay_rebound_total",
        "braid_relay_replaced_total",
        "braid_relay_released_total",
    ] {
        assert_eq!(m.get(series), Some(&0.0), "{series} in {m:?}");
    }
    assert!(m["process_cpu_seconds_total"] >= 0.0, "{m:?}");
    assert!(m["process_resident_memory_bytes"] > 0.0, "{m:?}");
    // Nothing else is served.
    let other = ask(&relay.metrics, b"GET / HTTP/1.1\r\n\r\n");
    assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
}

/// Whether `e` is the relay closing or resetting the connection, not our
/// own timeout running out.
fn closed_by_peer(e: &std::io::Error) -> bool {
    !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[test]
fn a_huge_or_slow_request_is_cut_off_and_a_scrape_still_answered() {
    let relay = serve();
    let start = Instant::now();
    // Half a request, then nothing.
    let mut slow = TcpStream::connect(&relay.metrics).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    // Headers without end: the relay stops reading after a few KiB, so
    // the writes fail once the socket buffers are full (or earlier, reset).
    let mut huge = TcpStream::connect(&relay.metrics).unwrap();
    huge.set_write_timeout(Some(BOUND)).unwrap();
    huge.set_read_timeout(Some(BOUND)).unwrap();
    let header = format!("X-Fill: {}\r\n", "a".repeat(1000));
    let mut written = 0usize;
    let stopped = loop {
        if let Err(e) = huge.write_all(header.as_bytes()) {
            break e;
        }
        written += header.len();
        assert!(written < 256 << 20, "256 MiB of head taken");
    };
    assert!(closed_by_peer(&stopped), "{stopped} after {written} bytes");
    let mut answer = Vec::new();
    if let Err(e) = huge.read_to_end(&mut answer) {
        assert!(closed_by_peer(&e), "{e}");
    }
    // The 431 arrives unless the reset overtook it.
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 431 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // Meanwhile a scrape is answered.
    assert!(scrape(&relay.metrics).contains_key("braid_relay_pairs"));
    // The slow one is closed unanswered, after the relay's 3 s.
    slow.set_read_timeout(Some(BOUND)).unwrap();
    let mut said = Vec::new();
    match slow.read_to_end(&mut said) {
        Ok(_) => assert!(said.is_empty()),
        Err(e) => assert!(closed_by_peer(&e), "{e}"),
    }
    assert!(start.elapsed() < BOUND, "{:?}", start.elapsed());
}
