//! `braid relay --serve --metrics ADDR`: the relay's counters, and its
//! process's CPU time and memory, in Prometheus's text exposition format
//! (version 0.0.4, <https://prometheus.io/docs/instrumenting/exposition_formats/>),
//! answered over plain HTTP/1.1 to `GET /metrics`.
//!
//! Anyone who reaches the port may connect, so the server is bounded
//! ([`Limits`]): a few connections at once (more are closed as they
//! arrive), a request head of a few KiB, a few seconds per connection, one
//! answer per connection; it reads nothing after the request's head.

use std::convert::Infallible;
use std::fmt::{Display, Write as _};
use std::sync::Arc;
use std::time::Duration;

use braid::rendezvous::ServerStats;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use braid::process::Usage;

/// The text format's content type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the metrics' server allows one client.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more are closed as they arrive.
    pub connections: usize,
    /// Bytes of a request's head (request line and headers); a longer
    /// one is answered 431.
    pub head_bytes: usize,
    /// From accepting a connection to closing it, answered or not.
    pub per_connection: Duration,
}

impl Default for Limits {
    /// A scraper sends a head of a few hundred bytes at once and reads a
    /// few KiB; one scraper or two per relay is usual.
    fn default() -> Limits {
        Limits {
            connections: 4,
            head_bytes: 4096,
            per_connection: Duration::from_secs(3),
        }
    }
}

/// What a relay's operator reads: its counters `s` and its process's CPU
/// time and memory (`None`: unknown on this system, left out).
pub fn exposition(s: &ServerStats, process: Option<Usage>) -> String {
    let mut out = Exposition::default();
    pairs_now(&mut out, s);
    forwarding(&mut out, s);
    requests(&mut out, s);
    pair_changes(&mut out, s);
    if let Some(p) = process {
        process_usage(&mut out, &p);
    }
    out.0
}

/// Who waits and who forwards now, and how many pairs were made.
fn pairs_now(out: &mut Exposition, s: &ServerStats) {
    out.one(
        "braid_relay_registrations",
        Kind::Gauge,
        "Receivers waiting under a code or key now, paired or not.",
        s.registrations,
    );
    out.one(
        "braid_relay_pairs",
        Kind::Gauge,
        "Pairs forwarding now.",
        s.pairs,
    );
    out.one(
        "braid_relay_paired_total",
        Kind::Counter,
        "Pairs made.",
        s.paired,
    );
}

/// What the relay carried for its pairs, and what it would not.
fn forwarding(out: &mut Exposition, s: &ServerStats) {
    out.one(
        "braid_relay_forwarded_datagrams_total",
        Kind::Counter,
        "Datagrams forwarded between the two ends of a pair.",
        s.forwarded_datagrams,
    );
    out.one(
        "braid_relay_forwarded_bytes_total",
        Kind::Counter,
        "Bytes forwarded between the two ends of a pair (UDP payload).",
        s.forwarded_bytes,
    );
    out.by(
        "braid_relay_dropped_datagrams_total",
        Kind::Counter,
        "Datagrams dropped: over_limit, over a pair's rate or quota; \
         unknown, from an address in no pair, or malformed.",
        &[
            ("over_limit", s.dropped_over_limit),
            ("unknown", s.dropped_unknown),
        ],
    );
}

/// How the relay answered requests: with a cookie, or a refusal and why.
fn requests(out: &mut Exposition, s: &ServerStats) {
    out.one(
        "braid_relay_cookies_total",
        Kind::Counter,
        "Requests answered with a cookie, keeping no state (an address's first request).",
        s.cookies,
    );
    let by = &s.refused_by;
    out.by(
        "braid_relay_refused_total",
        Kind::Counter,
        "Requests refused: unknown, nobody waits under the code or key; busy, \
         another end holds it or its receiver is paired; host_full, the requester's \
         host holds --max-per-host; relay_full, the relay holds --max-registrations \
         or --max-pairs.",
        &[
            ("unknown", by.unknown),
            ("busy", by.busy),
            ("host_full", by.host_full),
            ("relay_full", by.relay_full),
        ],
    );
}

/// How pairs changed after they were made: moved, replaced, released.
fn pair_changes(out: &mut Exposition, s: &ServerStats) {
    out.one(
        "braid_relay_rebound_total",
        Kind::Counter,
        "Ends of pairs moved to a new address after a NAT rebinding.",
        s.rebound,
    );
    out.one(
        "braid_relay_replaced_total",
        Kind::Counter,
        "Pairs given to a new sender because the receiver never answered the first.",
        s.replaced,
    );
    out.one(
        "braid_relay_released_total",
        Kind::Counter,
        "Pairs an end released or left.",
        s.released,
    );
}

/// The relay process's own cost, under the names every exporter uses.
fn process_usage(out: &mut Exposition, p: &Usage) {
    out.one(
        "process_cpu_seconds_total",
        Kind::Counter,
        "User and system CPU time spent, in seconds.",
        p.cpu_s,
    );
    out.one(
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory, in bytes.",
        p.rss,
    );
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// Metric families in the text format, one after another.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn head(&mut self, name: &str, kind: Kind, help: &str) {
        // HELP text escapes only these, and ours has none.
        debug_assert!(!help.contains(['\\', '\n']), "{help}");
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// A family of one sample.
    fn one(&mut self, name: &str, kind: Kind, help: &str, value: impl Display) {
        self.head(name, kind, help);
        let _ = writeln!(self.0, "{name} {value}");
    }

    /// A family of one sample per cause (a label value without quotes,
    /// backslashes or newlines, which would need escaping).
    fn by(&mut self, name: &str, kind: Kind, help: &str, causes: &[(&str, u64)]) {
        self.head(name, kind, help);
        for (cause, value) in causes {
            let _ = writeln!(self.0, "{name}{{cause=\"{cause}\"}} {value}");
        }
    }
}

/// What a request asks for, by its request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Metrics,
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

fn route(request_line: &[u8]) -> Route {
    let Ok(line) = std::str::from_utf8(request_line) else {
        return Route::BadRequest;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    if method != "GET" {
        return Route::MethodNotAllowed;
    }
    // A scraper may add parameters; there are none to take.
    match target.split('?').next() {
        Some("/metrics") => Route::Metrics,
        _ => Route::NotFound,
    }
}

/// The whole answer to `head` (a request's line and headers), rendering
/// the metrics only if they are asked for.
fn respond(head: &[u8], render: impl FnOnce() -> String) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    match route(line) {
        Route::Metrics => response("200 OK", CONTENT_TYPE, "", &render()),
        Route::NotFound => response("404 Not Found", "text/plain", "", "try /metrics\n"),
        Route::MethodNotAllowed => response(
            "405 Method Not Allowed",
            "text/plain",
            "Allow: GET\r\n",
            "only GET\n",
        ),
        Route::BadRequest => response("400 Bad Request", "text/plain", "", "bad request\n"),
    }
}

fn response(status: &str, content_type: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         {extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Where a request's head ends (after its blank line), if it has.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = bytes.windows(3).position(|w| w == b"\n\r\n").map(|i| i + 3);
    lf.into_iter().chain(crlf).min()
}

/// What renders the metrics at the moment they are asked for.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Answers each connection to `listener` within `limits`, with what
/// `render` says at that moment; runs until dropped. Needs a tokio runtime.
pub async fn serve(listener: TcpListener, limits: Limits, render: Render) -> Infallible {
    let slots = Arc::new(Semaphore::new(limits.connections));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors or the like: let some close first.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Over the bound, the connection is closed at once.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let render = render.clone();
        tokio::spawn(async move {
            let answered = answer(stream, limits.head_bytes, render.as_ref());
            let _ = tokio::time::timeout(limits.per_connection, answered).await;
            drop(slot);
        });
    }
}

/// Reads one request's head (at most `max` bytes) from `stream` and answers it.
async fn answer(
    mut stream: TcpStream,
    max: usize,
    render: &(dyn Fn() -> String + Send + Sync),
) -> std::io::Result<()> {
    let mut head = vec![0u8; max];
    let mut len = 0;
    let reply = loop {
        if len == max {
            let body = "request head too large\n";
            break response(
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
                body,
            );
        }
        let n = stream.read(&mut head[len..]).await?;
        if n == 0 {
            // Closed before a whole head: nothing to answer.
            return Ok(());
        }
        len += n;
        if let Some(end) = head_end(&head[..len]) {
            break respond(&head[..end], render);
        }
    };
    stream.write_all(&reply).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid::rendezvous::Refusals;
    use std::collections::HashMap;

    fn stats() -> ServerStats {
        ServerStats {
            registrations: 3,
            pairs: 2,
            paired: 17,
            forwarded_datagrams: 1000,
            forwarded_bytes: 1_400_000,
            dropped_over_limit: 5,
            dropped_unknown: 6,
            cookies: 40,
            refused: 10,
            refused_by: Refusals {
                unknown: 1,
                busy: 2,
                host_full: 3,
                relay_full: 4,
            },
            rebound: 7,
            replaced: 8,
            released: 9,
        }
    }

    /// Every sample of `text` by name and labels, checking the format on
    /// the way: each family has HELP then TYPE before its samples, a
    /// counter's name ends in _total, each value is a number.
    fn parse(text: &str) -> HashMap<String, f64> {
        let mut samples = HashMap::new();
        let (mut helped, mut typed) = (None::<String>, None::<(String, String)>);
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap();
                assert!(!help.is_empty(), "{line}");
                helped = Some(name.to_owned());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert_eq!(helped.as_deref(), Some(name), "{line}");
                assert!(kind == "counter" || kind == "gauge", "{line}");
                typed = Some((name.to_owned(), kind.to_owned()));
            } else {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let name = series.split('{').next().unwrap();
                let (family, kind) = typed.as_ref().expect("TYPE before samples");
                assert_eq!(name, family, "{line}");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
                let value: f64 = value.parse().unwrap_or_else(|e| panic!("{e}: {line}"));
                assert!(samples.insert(series.to_owned(), value).is_none(), "{line}");
            }
        }
        samples
    }

    #[test]
    fn every_counter_is_exposed_once_with_its_help_and_type() {
        let usage = Usage {
            cpu_s: 1.25,
            rss: 8 << 20,
            rss_peak: 9 << 20,
        };
        let text = exposition(&stats(), Some(usage));
        assert!(text.ends_with('\n'));
        let m = parse(&text);
        for (series, value) in [
            ("braid_relay_registrations", 3.0),
            ("braid_relay_pairs", 2.0),
            ("braid_relay_paired_total", 17.0),
            ("braid_relay_forwarded_datagrams_total", 1000.0),
            ("braid_relay_forwarded_bytes_total", 1_400_000.0),
            (
                "braid_relay_dropped_datagrams_total{cause=\"over_limit\"}",
                5.0,
            ),
            (
                "braid_relay_dropped_datagrams_total{cause=\"unknown\"}",
                6.0,
            ),
            ("braid_relay_cookies_total", 40.0),
            ("braid_relay_refused_total{cause=\"unknown\"}", 1.0),
            ("braid_relay_refused_total{cause=\"busy\"}", 2.0),
            ("braid_relay_refused_total{cause=\"host_full\"}", 3.0),
            ("braid_relay_refused_total{cause=\"relay_full\"}", 4.0),
            ("braid_relay_rebound_total", 7.0),
            ("braid_relay_replaced_total", 8.0),
            ("braid_relay_released_total", 9.0),
            ("process_cpu_seconds_total", 1.25),
            ("process_resident_memory_bytes", 8388608.0),
        ] {
            assert_eq!(m.get(series), Some(&value), "{series} in\n{text}");
        }
        assert_eq!(m.len(), 17, "{text}");
        // Where the process cannot be read, its two are left out.
        let m = parse(&exposition(&stats(), None));
        assert_eq!(m.len(), 15);
        assert!(!m.contains_key("process_cpu_seconds_total"));
    }

    #[test]
    fn only_get_metrics_is_answered_with_the_metrics() {
        for (line, want) in [
            ("GET /metrics HTTP/1.1", Route::Metrics),
            ("GET /metrics?x=1 HTTP/1.0\r", Route::Metrics),
            ("GET / HTTP/1.1", Route::NotFound),
            ("GET /metricsx HTTP/1.1", Route::NotFound),
            ("POST /metrics HTTP/1.1", Route::MethodNotAllowed),
            ("GET /metrics", Route::BadRequest),
            ("GET /metrics SPDY/3", Route::BadRequest),
            ("GET  /metrics HTTP/1.1", Route::BadRequest),
            ("", Route::BadRequest),
        ] {
            assert_eq!(route(line.as_bytes()), want, "{line:?}");
        }
        assert_eq!(route(b"GET /\xff HTTP/1.1"), Route::BadRequest);
        let ok = respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", || {
            "m 1\n".into()
        });
        let ok = String::from_utf8(ok).unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Length: 4\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nm 1\n"), "{ok}");
        // The metrics are not even rendered for anything else.
        let not = respond(b"GET / HTTP/1.1\r\n\r\n", || unreachable!());
        assert!(not.starts_with(b"HTTP/1.1 404 "));
    }

    #[test]
    fn a_head_ends_at_its_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }

    /// A server on loopback with `limits`, rendering "m 1".
    async fn server(limits: Limits) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, limits, Arc::new(|| "m 1\n".to_owned())));
        addr
    }

    /// Everything `stream` says until it closes (or resets), within 5 s.
    async fn said(stream: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        let read = stream.read_to_end(&mut got);
        let _ = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("the server closes the connection");
        got
    }

    #[tokio::test]
    async fn silent_and_extra_connections_are_closed_and_a_scrape_still_answered() {
        let limits = Limits {
            connections: 2,
            head_bytes: 64,
            per_connection: Duration::from_secs(1),
        };
        let addr = server(limits).await;
        // Two that send half a request and wait hold both slots...
        let mut slow = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET /metr").await.unwrap();
            slow.push(s);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // ...so a third is closed unanswered, at once.
        let mut third = TcpStream::connect(addr).await.unwrap();
        let _ = third.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(said(&mut third).await.is_empty());
        // The slow ones are closed after their time, unanswered.
        for s in &mut slow {
            assert!(said(s).await.is_empty());
        }
        // A head over the bound is refused.
        let mut big = TcpStream::connect(addr).await.unwrap();
        big.write_all(&[b'a'; 64]).await.unwrap();
        assert!(said(&mut big).await.starts_with(b"HTTP/1.1 431 "));
        // And a scrape is answered.
        let mut scrape = TcpStream::connect(addr).await.unwrap();
        scrape
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let got = String::from_utf8(said(&mut scrape).await).unwrap();
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
        assert!(got.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")));
        assert!(got.ends_with("\r\n\r\nm 1\n"), "{got}");
    }
}
