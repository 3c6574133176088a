//! The attacks of issue 11 replayed on loopback against sealed sessions:
//! an attacker who sees every datagram (a sniffing forwarder between the
//! two sides) and sends from its own socket, spoofing nothing.
//!
//! Each test asserts that the honest transfer still ends with identical
//! content on both sides, that the forgeries were counted as dropped, and
//! that nobody got more than 3x the bytes it sent to the server.

mod common;

use braid::Session;
use braid::{connect, Listener, PathSpec, Security, SessionConfig};
use braid_proto::wire::{AckFrame, Frame, Header, HEADER_LEN};
use common::{answer_with_hash, client_cfg, content, rss_bytes, send_in_pieces, server_cfg};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// The last datagram seen each way that names its session (a long
/// header: the handshake's, or one after a timeout), the last short one,
/// and where the client sends from.
#[derive(Default)]
struct Seen {
    to_server: Option<Vec<u8>>,
    to_client: Option<Vec<u8>>,
    short_to_server: Option<Vec<u8>>,
    short_to_client: Option<Vec<u8>>,
    client: Option<SocketAddr>,
}

/// Where a datagram goes in [`Seen`]: by its header's form.
fn keep(datagram: &[u8], long: &mut Option<Vec<u8>>, short: &mut Option<Vec<u8>>) {
    match datagram
        .first()
        .is_some_and(|&b| braid_proto::wire::is_short(b))
    {
        true => *short = Some(datagram.to_vec()),
        false => *long = Some(datagram.to_vec()),
    }
}

/// A forwarder between client and server that shows everything it carries
/// to the attacker: the position of an on-path sniffer.
async fn sniffing_forwarder(server: SocketAddr) -> (SocketAddr, Arc<Mutex<Seen>>) {
    let outside = Arc::new(UdpSocket::bind(addr("127.0.0.1:0")).await.unwrap());
    let inside = Arc::new(UdpSocket::bind(addr("127.0.0.1:0")).await.unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let at = outside.local_addr().unwrap();
    let (o, i, s) = (outside.clone(), inside.clone(), seen.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = o.recv_from(&mut buf).await {
            {
                let mut s = s.lock().unwrap();
                s.client = Some(from);
                let s = &mut *s;
                keep(&buf[..n], &mut s.to_server, &mut s.short_to_server);
            }
            let _ = i.send_to(&buf[..n], server).await;
        }
    });
    let (o, i, s) = (outside, inside, seen.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, _)) = i.recv_from(&mut buf).await {
            let client = {
                let mut s = s.lock().unwrap();
                let s = &mut *s;
                keep(&buf[..n], &mut s.to_client, &mut s.short_to_client);
                s.client
            };
            if let Some(c) = client {
                let _ = o.send_to(&buf[..n], c).await;
            }
        }
    });
    (at, seen)
}

/// What a captured datagram's header lets an attacker write: the same
/// session and path, later packet numbers, any frames in clear.
fn forge(captured: &[u8], pn_ahead: u64, frames: &[Frame<'_>]) -> Vec<u8> {
    let (mut header, _) = Header::decode(captured).unwrap();
    header.packet_number += pn_ahead;
    let mut d = Vec::new();
    header.encode(&mut d);
    for f in frames {
        f.encode(&mut d);
    }
    d
}

/// Every forgery of the issue, built from one captured datagram.
fn forgeries(captured: &[u8], round: u64) -> Vec<Vec<u8>> {
    let ack = AckFrame {
        ranges: vec![(0, 1 << 40)],
        ack_delay_us: 0,
        cumulative: 1 << 40,
        fin: true,
        max_data: 1,
        ce_count: 1 << 30,
        rx_timestamp_us: 0,
        rx_times: Vec::new(),
        short_headers: true,
    };
    let ahead = 1 + round % 64;
    let (header, _) = Header::decode(captured).unwrap();
    let mut unknown_path = header;
    unknown_path.path = braid_proto::PathId(5 + (round % 10) as u8);
    let mut join = Vec::new();
    unknown_path.encode(&mut join);
    Frame::Ping.encode(&mut join);
    vec![
        forge(
            captured,
            ahead,
            &[Frame::Stream {
                offset: 0,
                fin: true,
                data: b"attacker bytes",
            }],
        ),
        forge(
            captured,
            ahead,
            &[Frame::Close {
                code: 1,
                reason: b"forged",
            }],
        ),
        forge(captured, ahead, &[Frame::PathClose { path: header.path }]),
        forge(captured, ahead, &[Frame::Ack(ack)]),
        // A bare header: once enough to steer the server's replies.
        captured[..HEADER_LEN].to_vec(),
        // A replay of the genuine datagram from the attacker's address.
        captured.to_vec(),
        // An unknown path id: once enough to join the session.
        join,
    ]
}

/// Sends to the server its data, in pieces `pause` apart so that an attack
/// has time to act, then reads back the hash of what the server got.
async fn honest_client(to: SocketAddr, data: &[u8], pause: Duration) -> (Session, Vec<u8>) {
    let mut s = connect(&[PathSpec::to(to)], client_cfg()).await.unwrap();
    let hash = send_in_pieces(&mut s, data, 64 << 10, pause).await;
    (s, hash)
}

/// Receives one session and answers with the BLAKE3 of what it read.
fn hashing_server(listener: Listener) -> tokio::task::JoinHandle<(Session, Vec<u8>)> {
    tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let got = answer_with_hash(&mut s).await.unwrap();
        s.shutdown().await.unwrap();
        (s, got)
    })
}

/// Counts what arrives at a socket until the task is aborted.
fn count_received(sock: Arc<UdpSocket>) -> (Arc<Mutex<u64>>, tokio::task::JoinHandle<()>) {
    let total = Arc::new(Mutex::new(0u64));
    let t = total.clone();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = sock.recv(&mut buf).await {
            *t.lock().unwrap() += n as u64;
        }
    });
    (total, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_replayed_and_hijacking_datagrams_change_nothing() {
    let listener = Listener::bind(addr("127.0.0.1:0"), server_cfg()).unwrap();
    let server_addr = listener.local_addr();
    let (via, seen) = sniffing_forwarder(server_addr).await;
    let server = hashing_server(listener);
    let data = content(4 << 20);

    let attacker = Arc::new(UdpSocket::bind(addr("127.0.0.2:0")).await.unwrap());
    let (attacker_got, listen_task) = count_received(attacker.clone());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (a, s, d) = (attacker.clone(), seen.clone(), done.clone());
    let attack = tokio::spawn(async move {
        let (mut to_server, mut to_client, mut sent, mut short) = (0u64, 0u64, 0u64, 0u64);
        let mut round = 0;
        while !d.load(std::sync::atomic::Ordering::Relaxed) {
            let (up, down, client) = {
                let s = s.lock().unwrap();
                (s.to_server.clone(), s.to_client.clone(), s.client)
            };
            // Short headers from the attacker's address, which no session
            // was bound to: dropped before any session sees them.
            let shorts = {
                let s = s.lock().unwrap();
                [s.short_to_server.clone(), s.short_to_client.clone()]
            };
            for (captured, to) in shorts.into_iter().zip([Some(server_addr), client]) {
                if let (Some(captured), Some(to)) = (captured, to) {
                    for f in forgeries(&captured, round) {
                        sent += f.len() as u64;
                        short += u64::from(a.send_to(&f, to).await.is_ok());
                    }
                }
            }
            if let Some(up) = up.filter(|d| d.len() >= HEADER_LEN) {
                for f in forgeries(&up, round) {
                    sent += f.len() as u64;
                    to_server += u64::from(a.send_to(&f, server_addr).await.is_ok());
                }
            }
            if let (Some(down), Some(client)) = (down.filter(|d| d.len() >= HEADER_LEN), client) {
                for f in forgeries(&down, round) {
                    to_client += u64::from(a.send_to(&f, client).await.is_ok());
                }
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (to_server, to_client, sent, short)
    });

    let (client, hash) = tokio::time::timeout(
        Duration::from_secs(60),
        honest_client(via, &data, Duration::from_millis(5)),
    )
    .await
    .expect("the transfer completes despite the attack");
    let (server_session, got) = server.await.unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (to_server, to_client, sent, short) = attack.await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    listen_task.abort();

    assert!(
        got == data,
        "the server's stream differs from what was sent"
    );
    assert_eq!(hash, blake3::hash(&data).as_bytes(), "the client's verdict");
    assert!(
        to_server > 100 && to_client > 100 && short > 100,
        "{to_server} {to_client} {short}"
    );
    let (server_stats, client_stats) = (server_session.stats(), client.stats());
    // Each round sends 7 datagrams; one is a replay, not a forgery.
    assert!(
        server_stats.forged_dropped >= to_server * 5 / 7,
        "server dropped {} of {to_server}",
        server_stats.forged_dropped
    );
    assert!(
        client_stats.forged_dropped >= to_client * 5 / 7,
        "client dropped {} of {to_client}",
        client_stats.forged_dropped
    );
    // The server never adopted the attacker's address or a new path.
    assert_eq!(server_session.paths().len(), 1);
    let got_back = *attacker_got.lock().unwrap();
    assert!(
        got_back <= 3 * sent,
        "attacker got {got_back} bytes for {sent} sent"
    );
    eprintln!(
        "forged to server {to_server} (dropped {}), to client {to_client} (dropped {}), \
         short {short}; attacker got {got_back} bytes back for {sent}",
        server_stats.forged_dropped, client_stats.forged_dropped
    );
}

/// The first datagram of a client with `cfg`, dated by the wall clock as
/// a real client's (a listener refuses openings dated before it started).
fn opening(cfg: SessionConfig, session_id: u64, seed: u8) -> Vec<u8> {
    let zero = braid_proto::Instant::ZERO;
    let date = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let mut s =
        braid_proto::Session::connect_dated(cfg, session_id, zero, [seed; 32], date).unwrap();
    let mut buf = Vec::new();
    let t = s.poll_transmit(zero, 1, &mut buf).unwrap();
    buf.truncate(t.size);
    buf
}

/// A client hello as a real client would send it: the server's public key
/// is no secret.
fn client_hello(session_id: u64, seed: u8) -> Vec<u8> {
    opening(client_cfg(), session_id, seed)
}

/// An unprotected HELLO, as an insecure client opens.
fn plain_hello(session_id: u64) -> Vec<u8> {
    opening(SessionConfig::insecure(), session_id, 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_flood_neither_grows_memory_nor_locks_out_a_real_sender() {
    const SOURCES: u8 = 20;
    const HELLOS: u64 = 4200;
    let listener = Listener::bind(addr("127.0.0.1:0"), server_cfg()).unwrap();
    let server_addr = listener.local_addr();
    let server = hashing_server(listener);
    let before = rss_bytes();

    let mut socks = Vec::new();
    let mut counters = Vec::new();
    for i in 0..SOURCES {
        let sock = Arc::new(
            UdpSocket::bind(addr(&format!("127.0.0.{}:0", 10 + i)))
                .await
                .unwrap(),
        );
        let (got, task) = count_received(sock.clone());
        counters.push((got, task));
        socks.push(sock);
    }
    let hellos: Vec<Vec<u8>> = (0..HELLOS)
        .map(|i| {
            if i % 3 == 0 {
                plain_hello(1_000_000 + i)
            } else {
                client_hello(1_000_000 + i, i as u8)
            }
        })
        .collect();
    let flood = tokio::spawn(async move {
        let mut sent = 0u64;
        for (i, h) in hellos.iter().enumerate() {
            let sock = &socks[i % socks.len()];
            sent += h.len() as u64;
            let _ = sock.send_to(h, server_addr).await;
            if i % 100 == 99 {
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        }
        sent
    });
    // The real sender arrives in the middle of the flood.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let data = content(1 << 20);
    let started = std::time::Instant::now();
    let (_client, hash) = tokio::time::timeout(
        Duration::from_secs(20),
        honest_client(server_addr, &data, Duration::ZERO),
    )
    .await
    .expect("the real sender gets through");
    let took = started.elapsed();
    let (_s, got) = server.await.unwrap();
    let sent = flood.await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answered: u64 = counters
        .iter()
        .map(|(got, task)| {
            task.abort();
            *got.lock().unwrap()
        })
        .sum();
    let grown = rss_bytes().saturating_sub(before);

    assert!(got == data);
    assert_eq!(hash, blake3::hash(&data).as_bytes());
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(answered <= 3 * sent, "answered {answered} for {sent}");
    assert!(grown < 256 << 20, "memory grew by {} MB", grown >> 20);
    eprintln!(
        "{HELLOS} hellos ({sent} bytes) from {SOURCES} sources: answered {answered} bytes, \
         memory +{} MB, real transfer in {took:?}",
        grown >> 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_hello_gets_at_most_three_times_its_size() {
    let listener = Listener::bind(addr("127.0.0.1:0"), server_cfg()).unwrap();
    let to = listener.local_addr();
    let mut probes = Vec::new();
    for (source, hello) in [
        ("127.0.0.3:0", client_hello(77, 1)),
        ("127.0.0.4:0", plain_hello(78)),
    ] {
        let sock = Arc::new(UdpSocket::bind(addr(source)).await.unwrap());
        let (got, task) = count_received(sock.clone());
        sock.send_to(&hello, to).await.unwrap();
        probes.push((hello.len() as u64, got, task));
    }
    // The answer and its first retransmissions; the credit bounds any
    // later one too (a half-open session lives 15 s).
    tokio::time::sleep(Duration::from_secs(6)).await;
    for (sent, got, task) in probes {
        task.abort();
        let got = *got.lock().unwrap();
        assert!(got > 0, "the server answers a {sent}-byte hello");
        assert!(got <= 3 * sent, "{got} bytes for a {sent}-byte hello");
    }
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_code_is_not_a_session_and_guesses_are_limited() {
    let code = |c: &str| SessionConfig {
        security: Security::code(c),
        handshake_timeout: Duration::from_secs(2),
        ..SessionConfig::default()
    };
    let listener = Listener::bind(addr("127.0.0.1:0"), code("7-purple-sausage")).unwrap();
    let to = listener.local_addr();
    let wrong = connect(&[PathSpec::to(to)], code("7-purple-sausages")).await;
    assert!(wrong.is_err(), "a wrong code opens no session");
    // The guesser's give-up reaches the listener a moment later: the wrong
    // guess counts now, not when the half-open session would expire (15 s).
    let told = tokio::time::Instant::now();
    while listener.failed_handshakes() == 0 {
        assert!(told.elapsed() < Duration::from_secs(2), "guess not counted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The listener is still there for the right code.
    let server = hashing_server(listener);
    let data = content(64 << 10);
    let mut s = connect(&[PathSpec::to(to)], code("7-purple-sausage"))
        .await
        .unwrap();
    s.write_all(&data).await.unwrap();
    s.shutdown().await.unwrap();
    let mut hash = Vec::new();
    s.read_to_end(&mut hash).await.unwrap();
    assert_eq!(hash, blake3::hash(&data).as_bytes());
    let (_s, got) = server.await.unwrap();
    assert!(got == data);

    // Guessing ends the listener after CODE_GUESS_LIMIT failures.
    let listener = Listener::bind(addr("127.0.0.1:0"), code("9-amber-walrus")).unwrap();
    let to = listener.local_addr();
    let guesses: Vec<_> = (0..braid::CODE_GUESS_LIMIT)
        .map(|i| {
            tokio::spawn(async move {
                connect(&[PathSpec::to(to)], code(&format!("{i}-amber-walrus"))).await
            })
        })
        .collect();
    // Each guess is known as it fails, so the listener ends at once.
    let err = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .expect("the listener gives up within seconds")
        .expect_err("no guess is accepted");
    assert!(matches!(err, braid::Error::CodeGuessLimit(n) if n >= braid::CODE_GUESS_LIMIT));
    for g in guesses {
        assert!(g.await.unwrap().is_err(), "a guess opened a session");
    }
}

/// A forwarder on the path between client and server, and an attacker who
/// sees what it carries and sends a copy of each client datagram from its
/// own socket ahead of the genuine one: its copies are authentic and
/// arrive first. Until `relays_until` (never, if `None`) the racer also
/// carries what the server sends it to the client, so its address answers
/// challenges; after that it races and carries nothing.
struct Racer {
    /// Where the client sends.
    entry: SocketAddr,
    /// The genuine forwarder's address, as the server sees it.
    inside: SocketAddr,
    /// Bytes the server sent to the racer's address.
    received: Arc<Mutex<u64>>,
    /// Datagrams the racer carried to the client.
    relayed: Arc<Mutex<u64>>,
}

async fn racer(server: SocketAddr, relays_until: Option<std::time::Instant>) -> Racer {
    let outside = Arc::new(UdpSocket::bind(addr("127.0.0.1:0")).await.unwrap());
    let inside = Arc::new(UdpSocket::bind(addr("127.0.0.1:0")).await.unwrap());
    let racer = Arc::new(UdpSocket::bind(addr("127.0.0.66:0")).await.unwrap());
    let client = Arc::new(Mutex::new(None));
    let racing = move || relays_until.is_none_or(|t| std::time::Instant::now() < t);
    let (o, i, r, c) = (
        outside.clone(),
        inside.clone(),
        racer.clone(),
        client.clone(),
    );
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = o.recv_from(&mut buf).await {
            *c.lock().unwrap() = Some(from);
            if racing() {
                let _ = r.send_to(&buf[..n], server).await;
            }
            let _ = i.send_to(&buf[..n], server).await;
        }
    });
    let (received, relayed) = (Arc::new(Mutex::new(0u64)), Arc::new(Mutex::new(0u64)));
    for (from, is_racer) in [(inside.clone(), false), (racer, true)] {
        let (o, c) = (outside.clone(), client.clone());
        let (received, relayed) = (received.clone(), relayed.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = from.recv(&mut buf).await {
                if is_racer {
                    *received.lock().unwrap() += n as u64;
                    if relays_until.is_none_or(|t| std::time::Instant::now() >= t) {
                        continue;
                    }
                    *relayed.lock().unwrap() += 1;
                }
                let to = *c.lock().unwrap();
                if let Some(to) = to {
                    let _ = o.send_to(&buf[..n], to).await;
                }
            }
        });
    }
    Racer {
        entry: outside.local_addr().unwrap(),
        inside: inside.local_addr().unwrap(),
        received,
        relayed,
    }
}

/// RFC 9000 §9.3: the server keeps sending to the genuine address, since
/// the racer's address never answers a challenge; the transfer neither
/// stalls nor is diverted, and the racer gets only a few challenges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarder_racing_genuine_datagrams_neither_diverts_nor_stalls() {
    let listener = Listener::bind(addr("127.0.0.1:0"), server_cfg()).unwrap();
    let Racer {
        entry,
        inside,
        received: racer_got,
        ..
    } = racer(listener.local_addr(), None).await;
    let server = hashing_server(listener);
    let data = content(8 << 20);
    let started = std::time::Instant::now();
    let (_client, hash) = tokio::time::timeout(
        Duration::from_secs(30),
        honest_client(entry, &data, Duration::ZERO),
    )
    .await
    .expect("the transfer is not stalled");
    let took = started.elapsed();
    let (s, got) = server.await.unwrap();
    let racer_got = *racer_got.lock().unwrap();
    assert!(got == data);
    assert_eq!(hash, blake3::hash(&data).as_bytes());
    assert_eq!(s.paths()[0].remote, Some(inside), "the route was diverted");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(racer_got < 4096, "the racer got {racer_got} bytes");
    eprintln!("8 MiB in {took:?} with a racing forwarder; it got {racer_got} bytes");
}

/// RFC 9000 §9.3.3: a racer that carries traffic both ways wins the
/// connection (it is on the path now), and when it falls silent the
/// connection goes back to the genuine address, which the server
/// challenged when it moved away and still holds validated: the
/// transfer goes on instead of stalling on a dead address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racer_that_relays_then_falls_silent_does_not_stall_the_transfer() {
    let listener = Listener::bind(addr("127.0.0.1:0"), server_cfg()).unwrap();
    let stop = std::time::Instant::now() + Duration::from_millis(800);
    let Racer {
        entry,
        inside,
        relayed,
        ..
    } = racer(listener.local_addr(), Some(stop)).await;
    let server = hashing_server(listener);
    let data = content(4 << 20);
    let (_client, hash) = tokio::time::timeout(
        Duration::from_secs(30),
        // 64 pieces 25 ms apart: the transfer outlasts the racer.
        honest_client(entry, &data, Duration::from_millis(25)),
    )
    .await
    .expect("the transfer is not stalled");
    let took = stop.elapsed();
    let (s, got) = server.await.unwrap();
    let relayed = *relayed.lock().unwrap();
    assert!(got == data);
    assert_eq!(hash, blake3::hash(&data).as_bytes());
    // The server only acknowledges; more than its challenges (at most 6)
    // went through the racer only if the connection moved there.
    assert!(
        relayed > 16,
        "the racer never won the connection: {relayed} datagrams"
    );
    assert_eq!(
        s.paths()[0].remote,
        Some(inside),
        "the connection stayed on the racer"
    );
    assert!(
        took < Duration::from_secs(6),
        "{took:?} after the racer fell silent"
    );
    eprintln!("racer relayed {relayed} datagrams; done {took:?} after it fell silent");
}
