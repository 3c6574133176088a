//! The real-time link emulator on loopback: delay, rate, loss, marking, clients and
//! link state. Bounds are loose where they depend on the scheduler; where the
//! link model guarantees something (a datagram is never early) they are tight.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use braid::emulator::EmulatorStats;
use braid::udp::{self, UdpIo};
use braid::{Emulator, EmulatorConfig};
use braid_link::{EcnMode, LinkConfig, LinkEvent, LinkEventKind, LinkState, QueueLimit, Rate};
use braid_proto::{wire, Ecn};
use quinn_udp::RecvMeta;
use tokio::net::UdpSocket;

const PATIENCE: Duration = Duration::from_secs(5);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

async fn socket() -> UdpSocket {
    UdpSocket::bind(loopback()).await.unwrap()
}

fn start(to: SocketAddr, link: LinkConfig) -> Emulator {
    Emulator::start(EmulatorConfig::new(loopback(), to, link)).unwrap()
}

/// A UDP echo server for the rest of the test.
async fn echo_server() -> SocketAddr {
    let sock = socket().await;
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0; 65536];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let _ = sock.send_to(&buf[..n], from).await;
        }
    });
    addr
}

async fn recv(sock: &UdpSocket, wait: Duration) -> Option<(Vec<u8>, SocketAddr)> {
    let mut buf = vec![0; 65536];
    match tokio::time::timeout(wait, sock.recv_from(&mut buf)).await {
        Ok(Ok((n, from))) => Some((buf[..n].to_vec(), from)),
        _ => None,
    }
}

/// Polls the emulator's counters until `done` holds, or fails after a while.
async fn wait_for(emulator: &Emulator, done: impl Fn(&EmulatorStats) -> bool) -> EmulatorStats {
    let give_up = Instant::now() + PATIENCE;
    loop {
        let s = emulator.stats();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < give_up, "gave up waiting: {s:#?}");
        tokio::time::sleep(ms(5)).await;
    }
}

/// Sends `len`-byte datagrams numbered 0.. in bytes 2..6, header bytes 0.
async fn send_numbered(from: &UdpSocket, to: SocketAddr, count: u32, len: usize) {
    for i in 0..count {
        let mut d = vec![0; len];
        d[2..6].copy_from_slice(&i.to_be_bytes());
        from.send_to(&d, to).await.unwrap();
    }
}

fn number(d: &[u8]) -> u32 {
    u32::from_be_bytes(d[2..6].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_waits_the_one_way_delay_each_way() {
    let emulator = start(
        echo_server().await,
        LinkConfig {
            delay: ms(10),
            ..LinkConfig::default()
        },
    );
    let client = socket().await;
    for _ in 0..3 {
        let sent = Instant::now();
        client
            .send_to(b"ping", emulator.local_addr())
            .await
            .unwrap();
        let (reply, from) = recv(&client, PATIENCE).await.expect("no echo");
        let rtt = sent.elapsed();
        assert_eq!(
            (reply.as_slice(), from),
            (&b"ping"[..], emulator.local_addr())
        );
        assert!(rtt >= ms(20), "round trip of {rtt:?} beat 2 × 10 ms");
        assert!(rtt < ms(1000), "round trip of {rtt:?}");
    }
    let s = wait_for(&emulator, |s| s.reverse.sent == 3).await;
    assert_eq!((s.forward.sent, s.forward.link.delivered), (3, 3));
    assert_eq!(s.clients, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_spreads_a_burst_over_its_serialisation_time() {
    let sink = socket().await;
    let emulator = start(
        sink.local_addr().unwrap(),
        LinkConfig {
            rate: Some(Rate::mbit(8)),
            queue: QueueLimit::Packets(1000),
            ..LinkConfig::default()
        },
    );
    let client = socket().await;
    let first_sent = Instant::now();
    send_numbered(&client, emulator.local_addr(), 200, 1000).await;
    let mut last = None;
    let mut numbers = Vec::new();
    while numbers.len() < 200 {
        let Some((d, _)) = recv(&sink, ms(2000)).await else {
            break;
        };
        last = Some(Instant::now());
        numbers.push(number(&d));
    }
    assert_eq!(numbers, (0..200).collect::<Vec<_>>(), "lost or reordered");
    // 200 × (1000 + 28) wire bytes at 8 Mbit/s take 205.6 ms, and the link
    // never lets a datagram out early.
    let spread = last.unwrap() - first_sent;
    assert!(spread >= ms(205), "{spread:?}");
    assert!(spread < ms(1500), "{spread:?}");
    let s = emulator.stats();
    assert_eq!(s.forward.link.delivered, 200);
    assert!(s.forward.link.max_queue_packets >= 50, "{s:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_loss_delivers_nothing_and_counts_drops() {
    let sink = socket().await;
    let emulator = start(
        sink.local_addr().unwrap(),
        LinkConfig {
            loss: 1.0,
            ..LinkConfig::default()
        },
    );
    let client = socket().await;
    send_numbered(&client, emulator.local_addr(), 50, 100).await;
    let s = wait_for(&emulator, |s| s.forward.link.offered == 50).await;
    assert_eq!(
        (s.forward.link.dropped_loss, s.forward.link.delivered),
        (50, 0)
    );
    assert!(recv(&sink, ms(100)).await.is_none());
    assert_eq!(emulator.stats().forward.sent, 0);
}

/// An unimpaired link forwards straight from the receive buffers: GSO
/// batches (arriving as GRO batches, joined again where they can) leave
/// with every datagram intact, in order, with its ECN codepoint, a short
/// last one of a batch included, and counted as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unimpaired_link_forwards_batches_intact_and_in_order() {
    for short_tail in [true, false] {
        forward_batches(short_tail).await;
    }
}

async fn forward_batches(short_tail: bool) {
    let sink = UdpIo::bind(loopback(), 1 << 20).unwrap();
    let emulator = start(sink.local_addr(), LinkConfig::default());
    let client = UdpIo::bind(loopback(), 1 << 20).unwrap();
    let segs = client.max_gso_segments().clamp(1, 8) as u32;
    let (batches, len) = (20u32, 1200);
    let short = if short_tail { 700 } else { len };
    let mut next = 0u32;
    for _ in 0..batches {
        let mut batch = Vec::new();
        for i in 0..segs {
            let mut d = vec![0u8; if i + 1 == segs { short } else { len }];
            d[2..6].copy_from_slice(&next.to_be_bytes());
            d[HEADER_PAD..].iter_mut().for_each(|b| *b = next as u8);
            next += 1;
            batch.extend_from_slice(&d);
        }
        client
            .send(emulator.local_addr(), Ecn::Ect0, &batch, Some(len))
            .await
            .unwrap();
    }
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; udp::RECV_BUFFER];
    while got.len() < next as usize {
        let mut bufs = [std::io::IoSliceMut::new(&mut buf)];
        let mut meta = [RecvMeta::default()];
        tokio::time::timeout(PATIENCE, sink.recv(&mut bufs, &mut meta))
            .await
            .expect("datagrams lost")
            .unwrap();
        let m = meta[0];
        assert_eq!(udp::from_codepoint(m.ecn), Ecn::Ect0);
        let stride = if m.stride == 0 { m.len } else { m.stride };
        got.extend(buf[..m.len].chunks(stride).map(<[u8]>::to_vec));
    }
    for (want, d) in got.iter().enumerate() {
        let want = want as u32;
        assert_eq!(number(d), want);
        let last = want % segs == segs - 1;
        assert_eq!(d.len(), if last { short } else { len });
        assert!(d[HEADER_PAD..].iter().all(|&b| b == want as u8));
    }
    let s = wait_for(&emulator, |s| s.forward.sent == u64::from(next)).await;
    assert_eq!(
        (s.forward.send_errors, s.forward.link.delivered),
        (0, u64::from(next))
    );
}

/// Past any braid header, so the emulator's MB-ECN byte is not in the pattern.
const HEADER_PAD: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mbecn_writes_the_queue_depth_into_the_header() {
    let sink = socket().await;
    let emulator = start(
        sink.local_addr().unwrap(),
        LinkConfig {
            rate: Some(Rate::mbit(1)),
            ecn: EcnMode::MbEcn,
            ..LinkConfig::default()
        },
    );
    let client = socket().await;
    send_numbered(&client, emulator.local_addr(), 100, 100).await;
    // Too short for a braid header: left alone however deep the queue.
    let short = [0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0];
    client.send_to(&short, emulator.local_addr()).await.unwrap();

    let mut levels = vec![None; 100];
    let mut short_seen = None;
    for _ in 0..101 {
        let (d, _) = recv(&sink, ms(2000)).await.expect("datagram lost");
        if d.len() < wire::HEADER_LEN {
            short_seen = Some(d);
        } else {
            levels[number(&d) as usize] = Some(d[wire::MBECN_OFFSET]);
        }
    }
    assert_eq!(short_seen.as_deref(), Some(&short[..]));
    let levels: Vec<u8> = levels.into_iter().map(|l| l.expect("missing")).collect();
    // The first finds an empty queue; a burst into 1 Mbit/s builds one, and
    // each datagram carries (depth including itself) / 16.
    assert_eq!(levels[0], 0);
    let marked = levels.iter().filter(|&&l| l > 0).count();
    assert!(marked >= 40, "{levels:?}");
    assert!(levels.iter().all(|&l| l <= 100 >> 4), "{levels:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_marks_ce_on_the_wire() {
    let sink = UdpIo::bind(loopback(), 1 << 20).unwrap();
    let emulator = start(
        sink.local_addr(),
        LinkConfig {
            rate: Some(Rate::mbit(1)),
            ecn: EcnMode::Threshold(5),
            ..LinkConfig::default()
        },
    );
    let client = UdpIo::bind(loopback(), 1 << 20).unwrap();
    for _ in 0..30 {
        client
            .send(emulator.local_addr(), Ecn::Ect0, &[0; 100], None)
            .await
            .unwrap();
    }
    let mut codepoints = Vec::new();
    let mut buf = vec![0; udp::RECV_BUFFER];
    while codepoints.len() < 30 {
        let mut bufs = [std::io::IoSliceMut::new(&mut buf)];
        let mut meta = [RecvMeta::default()];
        tokio::time::timeout(ms(2000), sink.recv(&mut bufs, &mut meta))
            .await
            .expect("datagram lost")
            .unwrap();
        let count = meta[0].len.div_ceil(meta[0].stride.max(1)).max(1);
        codepoints.extend(std::iter::repeat_n(udp::from_codepoint(meta[0].ecn), count));
    }
    assert_eq!(codepoints[0], Ecn::Ect0, "{codepoints:?}");
    let ce = codepoints.iter().filter(|&&c| c == Ecn::Ce).count();
    assert!(ce >= 10, "{codepoints:?}");
    assert_eq!(ce as u64, emulator.stats().forward.link.ce_marked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_gets_its_own_replies() {
    let emulator = start(
        echo_server().await,
        LinkConfig {
            delay: ms(2),
            ..LinkConfig::default()
        },
    );
    let (a, b) = (socket().await, socket().await);
    for _ in 0..5 {
        a.send_to(b"from a", emulator.local_addr()).await.unwrap();
        b.send_to(b"from b", emulator.local_addr()).await.unwrap();
    }
    for (sock, want) in [(&a, &b"from a"[..]), (&b, &b"from b"[..])] {
        for _ in 0..5 {
            let (d, from) = recv(sock, PATIENCE).await.expect("reply lost");
            assert_eq!((d.as_slice(), from), (want, emulator.local_addr()));
        }
    }
    assert_eq!(emulator.stats().clients, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_outage_drops_until_the_link_comes_back() {
    let emulator = start(
        echo_server().await,
        LinkConfig {
            events: vec![LinkEvent {
                at: Duration::ZERO,
                kind: LinkEventKind::Down {
                    duration: Some(ms(1000)),
                },
            }],
            ..LinkConfig::default()
        },
    );
    let started = Instant::now();
    let client = socket().await;
    client
        .send_to(b"early", emulator.local_addr())
        .await
        .unwrap();
    let s = wait_for(&emulator, |s| s.forward.link.offered == 1).await;
    assert_eq!(s.forward.link.dropped_down, 1);
    tokio::time::sleep_until((started + ms(1100)).into()).await;
    client
        .send_to(b"late", emulator.local_addr())
        .await
        .unwrap();
    let (d, _) = recv(&client, PATIENCE).await.expect("still down");
    assert_eq!(d, b"late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_state_takes_both_directions_down_and_up() {
    let emulator = start(echo_server().await, LinkConfig::default());
    let client = socket().await;
    emulator.set_state(LinkState::Down);
    client
        .send_to(b"lost", emulator.local_addr())
        .await
        .unwrap();
    assert!(recv(&client, ms(100)).await.is_none());
    emulator.set_state(LinkState::Up);
    client
        .send_to(b"back", emulator.local_addr())
        .await
        .unwrap();
    let (d, _) = recv(&client, PATIENCE).await.expect("still down");
    assert_eq!(d, b"back");
    let s = emulator.stats();
    assert_eq!(
        (s.forward.link.dropped_down, s.reverse.link.offered),
        (1, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_in_flight_are_lost_when_the_link_goes_down() {
    let sink = socket().await;
    let emulator = start(
        sink.local_addr().unwrap(),
        LinkConfig {
            delay: ms(500),
            ..LinkConfig::default()
        },
    );
    let client = socket().await;
    client
        .send_to(b"doomed", emulator.local_addr())
        .await
        .unwrap();
    wait_for(&emulator, |s| s.forward.link.delivered == 1).await;
    emulator.set_state(LinkState::Down);
    assert!(recv(&sink, ms(700)).await.is_none());
    let s = emulator.stats();
    assert_eq!((s.forward.dropped_in_flight, s.forward.sent), (1, 0));
}

#[tokio::test]
async fn port_in_use_is_a_clear_error() {
    let taken = std::net::UdpSocket::bind(loopback()).unwrap();
    let addr = taken.local_addr().unwrap();
    let e = Emulator::start(EmulatorConfig::new(addr, addr, LinkConfig::default())).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("cannot listen on {addr}: address already in use")
    );
}
