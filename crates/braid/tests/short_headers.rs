//! Short headers on loopback: once each side has told its peer's address
//! apart, data goes without the session id and path; a NAT that rebinds
//! in the middle of a transfer (the client's datagrams suddenly come from
//! another port) costs a timeout, after which the client names its
//! session in full, the server follows it to the new address, and short
//! headers resume there. A connection whose address another connection
//! holds gets it once that one has ended.

mod common;

use braid::{connect, Listener, PathSpec};
use braid_proto::wire::is_short;
use common::{answer_with_hash, client_cfg, content, send_in_pieces, server_cfg};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Datagrams a NAT forwarded to the server, by form, and for each of its
/// outside sockets (one per binding) how many short ones came back there.
#[derive(Default)]
struct Counts {
    short_up: AtomicU64,
    long_up: AtomicU64,
    short_down: Mutex<Vec<u64>>,
}

/// A NAT between one client and a server: it forwards the client's
/// datagrams from its current outside socket and the replies to that
/// socket back; `rebind` moves to a new outside socket (a new port), and
/// replies to the old one are dropped, as a NAT whose mapping expired does.
struct Nat {
    at: SocketAddr,
    counts: Arc<Counts>,
    rebind: tokio::sync::mpsc::Sender<()>,
}

async fn nat(server: SocketAddr) -> Nat {
    let inside = Arc::new(UdpSocket::bind(loopback()).await.unwrap());
    let at = inside.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let (rebind, mut rebinds) = tokio::sync::mpsc::channel(1);
    let c = counts.clone();
    tokio::spawn(async move {
        let mut client = None;
        let mut outside = Arc::new(UdpSocket::bind(loopback()).await.unwrap());
        let mut replies = replies(outside.clone(), inside.clone(), c.clone(), 0, client);
        let mut buf = vec![0u8; 65536];
        loop {
            tokio::select! {
                r = inside.recv_from(&mut buf) => {
                    let Ok((n, from)) = r else { return };
                    if client != Some(from) {
                        client = Some(from);
                        replies.abort();
                        let binding = c.short_down.lock().unwrap().len() - 1;
                        replies = self::replies(outside.clone(), inside.clone(), c.clone(), binding, client);
                    }
                    let d = &buf[..n];
                    let form = if is_short(d[0]) { &c.short_up } else { &c.long_up };
                    form.fetch_add(1, Ordering::Relaxed);
                    let _ = outside.send_to(d, server).await;
                }
                Some(()) = rebinds.recv() => {
                    replies.abort();
                    outside = Arc::new(UdpSocket::bind(loopback()).await.unwrap());
                    let binding = c.short_down.lock().unwrap().len();
                    replies = self::replies(outside.clone(), inside.clone(), c.clone(), binding, client);
                }
            }
        }
    });
    Nat { at, counts, rebind }
}

/// Carries replies arriving at `outside` back to the client, counting the
/// short ones as binding `binding`'s.
fn replies(
    outside: Arc<UdpSocket>,
    inside: Arc<UdpSocket>,
    counts: Arc<Counts>,
    binding: usize,
    client: Option<SocketAddr>,
) -> tokio::task::JoinHandle<()> {
    {
        let mut down = counts.short_down.lock().unwrap();
        if down.len() <= binding {
            down.resize(binding + 1, 0);
        }
    }
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = outside.recv(&mut buf).await {
            if is_short(buf[0]) {
                counts.short_down.lock().unwrap()[binding] += 1;
            }
            if let Some(c) = client {
                let _ = inside.send_to(&buf[..n], c).await;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_headers_carry_the_data_and_survive_a_nat_rebinding() {
    let listener = Listener::bind(loopback(), server_cfg()).unwrap();
    let nat = nat(listener.local_addr()).await;
    let receiver = tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let got = answer_with_hash(&mut s).await.unwrap();
        s.shutdown().await.unwrap();
        got.len()
    });
    let data = content(6 << 20);
    let mut session = connect(&[PathSpec::to(nat.at)], client_cfg())
        .await
        .unwrap();
    let transfer = async {
        for (i, piece) in data.chunks(256 << 10).enumerate() {
            if i == 10 {
                nat.rebind.send(()).await.unwrap();
            }
            session.write_all(piece).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        session.shutdown().await.unwrap();
        let mut hash = Vec::new();
        session.read_to_end(&mut hash).await.unwrap();
        hash
    };
    let hash = tokio::time::timeout(Duration::from_secs(60), transfer)
        .await
        .expect("the transfer outlasts the rebinding");
    assert_eq!(hash, blake3::hash(&data).as_bytes());
    assert_eq!(receiver.await.unwrap(), data.len());

    let c = &nat.counts;
    let (short, long) = (
        c.short_up.load(Ordering::Relaxed),
        c.long_up.load(Ordering::Relaxed),
    );
    // The handshake, a few packets until the first ACK, and those after
    // the timeout the rebinding caused are long; the data is short.
    assert!(short > 10 * long, "short {short}, long {long}");
    let down = c.short_down.lock().unwrap().clone();
    eprintln!("to the server: {short} short, {long} long; short back per binding: {down:?}");
    assert_eq!(down.len(), 2, "one rebinding: {down:?}");
    assert!(
        down.iter().all(|&n| n > 20),
        "the server sent short headers to both bindings: {down:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_gets_its_address_once_the_one_holding_it_ends() {
    // Two sessions from one socket to one server address: the server
    // tells them apart by address only for the first, and the second
    // names its session in every datagram until the first has ended.
    let listener = Listener::bind(loopback(), server_cfg()).unwrap();
    let nat = nat(listener.local_addr()).await;
    let server = tokio::spawn(async move {
        let mut first = listener.accept().await.unwrap();
        let first = tokio::spawn(async move {
            let got = answer_with_hash(&mut first).await.unwrap();
            // The end's acknowledgment may not come: a client that has
            // the hash may abort the session first.
            let _ = first.shutdown().await;
            got.len()
        });
        let mut second = listener.accept().await.unwrap();
        let got = answer_with_hash(&mut second).await.unwrap();
        let _ = second.shutdown().await;
        (first.await.unwrap(), got.len())
    });
    let endpoint = braid::Endpoint::bind(loopback()).unwrap();
    let mut first = endpoint.connect(&[nat.at], client_cfg()).await.unwrap();
    let mut second = endpoint.connect(&[nat.at], client_cfg()).await.unwrap();
    let (a, b) = (content(1 << 20), content(3 << 20));
    let test = async {
        let hash = send_in_pieces(&mut first, &a, 256 << 10, Duration::ZERO).await;
        assert_eq!(hash, blake3::hash(&a).as_bytes());
        // Closed at once, rather than kept 10 s to answer retransmissions.
        first.abort(0, "done");
        first.ended().await;
        drop(first);
        let c = &nat.counts;
        let before = c.short_up.load(Ordering::Relaxed);
        // Over 2.5 s: the refused binding is tried again each second.
        let hash = send_in_pieces(&mut second, &b, 256 << 10, Duration::from_millis(200)).await;
        assert_eq!(hash, blake3::hash(&b).as_bytes());
        c.short_up.load(Ordering::Relaxed) - before
    };
    let short_after = tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("both transfers end");
    // The listener hands them over in the order their clients confirmed,
    // which the two handshakes race for.
    let (x, y) = server.await.unwrap();
    assert_eq!((x.min(y), x.max(y)), (a.len(), b.len()));
    let long = nat.counts.long_up.load(Ordering::Relaxed);
    eprintln!("short to the server once the first ended: {short_after}, long in all: {long}");
    assert!(
        short_after > 100,
        "the second session went short once it had the address: {short_after} short, {long} long"
    );
}
