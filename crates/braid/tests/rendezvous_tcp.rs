//! Ends that reach their relay only over TCP, on loopback: a gate in front
//! of the relay's UDP (a firewall that drops UDP both ways, and lets it
//! through when opened) listens on the port number of the relay's TCP
//! listener, so the ends, told that one address, find UDP silent and TCP
//! answering. The session runs over the stream; when the gate opens, the
//! ends move back to UDP mid-transfer.

mod common;

use braid::rendezvous::{
    code_handle, connect_via, Meeting, Reach, Rendezvous, RendezvousRelay, ServerConfig, TcpOptions,
};
use braid::Listener;
use common::{code_cfg as cfg, content, receive, CODE};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// UDP on the relay's TCP port number, forwarded to its real UDP socket
/// (one upstream socket per client, as a NAT) unless closed.
struct Gate {
    closed: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Gate {
    fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
    }
}

async fn gate(front: UdpSocket, to: SocketAddr) -> Gate {
    let closed = Arc::new(AtomicBool::new(true));
    let front = Arc::new(front);
    let shut = closed.clone();
    let task = tokio::spawn(async move {
        let mut ups: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
        let mut buf = vec![0u8; 65536];
        let mut tasks = Vec::new();
        loop {
            let Ok((n, client)) = front.recv_from(&mut buf).await else {
                continue;
            };
            if shut.load(Ordering::SeqCst) {
                continue;
            }
            let up = match ups.get(&client) {
                Some(up) => up.clone(),
                None => {
                    let up = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
                    let (up2, front2, shut2) = (up.clone(), front.clone(), shut.clone());
                    tasks.push(tokio::spawn(async move {
                        let mut buf = vec![0u8; 65536];
                        while let Ok(n) = up2.recv(&mut buf).await {
                            if !shut2.load(Ordering::SeqCst) {
                                let _ = front2.send_to(&buf[..n], client).await;
                            }
                        }
                    }));
                    up.connect(to).await.unwrap();
                    ups.insert(client, up.clone());
                    up
                }
            };
            let _ = up.send(&buf[..n]).await;
        }
    });
    Gate { closed, task }
}

/// A relay whose TCP listener and a closed [`Gate`] to its UDP share one
/// port number: the address the ends are given.
async fn relay_behind_gate() -> (RendezvousRelay, Gate, SocketAddr) {
    for _ in 0..16 {
        let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let at = front.local_addr().unwrap();
        let tcp = TcpOptions {
            listen: Some(at),
            ..TcpOptions::default()
        };
        let Ok(relay) =
            RendezvousRelay::start_with(addr("127.0.0.1:0"), ServerConfig::default(), Some(tcp))
        else {
            continue;
        };
        let g = gate(front, relay.local_addr()).await;
        return (relay, g, at);
    }
    panic!("no port free for both UDP and TCP");
}

/// Through the relay only (loopback would let a direct path through).
fn relay_only(relay: SocketAddr) -> Rendezvous {
    Rendezvous {
        direct: false,
        ..Rendezvous::new(&[relay], code_handle(CODE))
    }
}

async fn wait(m: &Meeting, what: &str, within: Duration, done: impl Fn(&Reach) -> bool) {
    tokio::time::timeout(within, m.wait_until(done))
        .await
        .unwrap_or_else(|_| panic!("{what} within {within:?}: {:?}", m.reach()));
}

/// Waits until the first relay registered `m`.
async fn registered(m: &Meeting, within: Duration) {
    wait(m, "registered", within, |r| r.relays[0].reflexive.is_some()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_udp_dropped_both_ends_move_to_tcp_and_a_transfer_completes() {
    let (relay, _gate, at) = relay_behind_gate().await;
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&relay_only(at));
    let started = std::time::Instant::now();
    registered(&registration, Duration::from_secs(8)).await;
    // Not before UDP had its three seconds.
    assert!(started.elapsed() >= Duration::from_millis(2900));
    assert!(registration.reach().relays[0].tcp);
    let got = receive(listener);
    let (mut s, meeting) = connect_via(None, &relay_only(at), cfg()).await.unwrap();
    assert!(meeting.reach().relays[0].tcp, "{:?}", meeting.reach());
    let data = content(8 << 20);
    s.write_all(&data).await.unwrap();
    s.shutdown().await.unwrap();
    let mut verdict = Vec::new();
    s.read_to_end(&mut verdict).await.unwrap();
    assert_eq!(verdict, (data.len() as u64).to_be_bytes());
    assert_eq!(got.await.unwrap().unwrap(), data);
    let tcp = relay.tcp_stats();
    assert_eq!(tcp.open, 2, "{tcp:?}");
    assert!(
        tcp.datagrams_in > 1000 && tcp.datagrams_out > 1000,
        "{tcp:?}"
    );
    assert_eq!(relay.stats().paired, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_only_goes_over_tcp_at_once_even_where_udp_answers() {
    let relay = RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap();
    assert_eq!(
        relay.tcp_addr().map(|a| a.port()),
        Some(relay.local_addr().port())
    );
    let at = Rendezvous {
        tcp_only: true,
        ..relay_only(relay.local_addr())
    };
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&at);
    registered(&registration, Duration::from_secs(2)).await;
    let got = receive(listener);
    let (mut s, meeting) = connect_via(None, &at, cfg()).await.unwrap();
    let data = content(2 << 20);
    s.write_all(&data).await.unwrap();
    s.shutdown().await.unwrap();
    let mut verdict = Vec::new();
    s.read_to_end(&mut verdict).await.unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    assert!(meeting.reach().relays[0].tcp);
    let (tcp, udp) = (relay.tcp_stats(), relay.stats());
    // Everything the relay forwarded came over its streams and left on them.
    assert!(udp.forwarded_datagrams > 1000, "{udp:?}");
    assert!(
        udp.forwarded_datagrams <= tcp.datagrams_out,
        "{udp:?} {tcp:?}"
    );
    assert!(
        udp.forwarded_datagrams <= tcp.datagrams_in,
        "{udp:?} {tcp:?}"
    );
    assert_eq!(tcp.open, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_udp_returns_mid_transfer_both_ends_move_back_to_it() {
    let (relay, gate, at) = relay_behind_gate().await;
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&relay_only(at));
    registered(&registration, Duration::from_secs(8)).await;
    let got = receive(listener);
    let (mut s, meeting) = connect_via(None, &relay_only(at), cfg()).await.unwrap();
    assert!(meeting.reach().relays[0].tcp);
    // Paced so the transfer outlasts the move: at most 5 MB/s.
    let data = content(24 << 20);
    let writer = {
        let data = data.clone();
        tokio::spawn(async move {
            for chunk in data.chunks(256 << 10) {
                s.write_all(chunk).await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            s.shutdown().await?;
            let mut verdict = Vec::new();
            s.read_to_end(&mut verdict).await?;
            anyhow::ensure!(verdict == (data.len() as u64).to_be_bytes());
            anyhow::Ok(())
        })
    };
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(relay.tcp_stats().datagrams_in > 100);
    gate.open();
    let on_udp = |r: &Reach| !r.relays[0].tcp;
    wait(&meeting, "sender on UDP", Duration::from_secs(4), on_udp).await;
    wait(
        &registration,
        "receiver on UDP",
        Duration::from_secs(4),
        on_udp,
    )
    .await;
    // Streams close once their goodbyes are written.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (tcp, forwarded) = (relay.tcp_stats(), relay.stats().forwarded_datagrams);
    assert_eq!(tcp.open, 0, "{tcp:?}");
    writer.await.unwrap().unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    // The rest went over UDP, through the gate.
    assert_eq!(relay.tcp_stats().datagrams_in, tcp.datagrams_in);
    assert!(relay.stats().forwarded_datagrams > forwarded + 1000);
    assert_eq!(relay.stats().paired, 1, "the same pair");
}
