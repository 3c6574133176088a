//! Two ends that know only a relay and a code meet there on loopback: the
//! session runs through the relay and over the direct path that hole
//! punching finds, and survives either one going away. A relay that
//! replays, reorders and injects datagrams changes nothing, and sees no
//! plaintext.

mod common;

use braid::rendezvous::{
    code_handle, connect_via, Meeting, Reach, Rendezvous, RendezvousRelay, ServerConfig,
};
use braid::{Listener, SessionConfig};
use braid_proto::rendezvous::{is_rendezvous, Server};
use common::{code_cfg as cfg, content, receive, CODE};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

async fn send(s: &mut braid::Session, data: &[u8]) -> anyhow::Result<()> {
    s.write_all(data).await?;
    s.shutdown().await?;
    let mut ack = Vec::new();
    s.read_to_end(&mut ack).await?;
    anyhow::ensure!(ack == (data.len() as u64).to_be_bytes(), "bad verdict");
    Ok(())
}

fn meet(relays: &[SocketAddr]) -> Rendezvous {
    Rendezvous::new(relays, code_handle(CODE))
}

/// Through the relay only: every datagram passes it.
fn relay_only(relay: SocketAddr) -> Rendezvous {
    Rendezvous {
        direct: false,
        ..meet(&[relay])
    }
}

/// Waits until every relay has the receiver's registration.
async fn registered(m: &Meeting) {
    let all = |r: &Reach| r.relays.iter().all(|r| r.reflexive.is_some());
    tokio::time::timeout(Duration::from_secs(5), m.wait_until(all))
        .await
        .expect("registered within 5 s");
}

fn direct_of(reach: &Reach) -> Option<SocketAddr> {
    reach.direct.first().map(|d| d.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ends_meet_by_code_and_use_the_relay_and_the_direct_path() {
    let relay = RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap();
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&meet(&[relay.local_addr()]));
    // The receiver's socket is never named to the sender.
    let receiver_addr = listener.local_addr();
    let got = receive(listener);
    registered(&registration).await;
    let (mut s, meeting) = connect_via(None, &meet(&[relay.local_addr()]), cfg())
        .await
        .unwrap();
    // Large enough that the transfer outlasts the punching, even on a busy machine.
    let data = content(24 << 20);
    send(&mut s, &data).await.unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    let reach = meeting.reach();
    assert_eq!(reach.relays[0].peer, Some(receiver_addr), "{reach:?}");
    assert_eq!(direct_of(&reach), Some(receiver_addr), "{reach:?}");
    let paths = s.paths();
    let via_relay = paths.iter().find(|p| p.remote == Some(relay.local_addr()));
    let direct = paths.iter().find(|p| p.remote == Some(receiver_addr));
    assert!(via_relay.and_then(|p| p.answered_at).is_some(), "{paths:?}");
    assert!(direct.and_then(|p| p.answered_at).is_some(), "{paths:?}");
    let stats = relay.stats();
    assert_eq!(stats.paired, 1);
    assert!(stats.forwarded_datagrams > 0);
}

/// A relay with several workers (a socket each on one port): the ends may
/// land on different sockets, and every datagram still reaches the other
/// end. Dropped, it gives its port back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_with_several_workers_forwards_between_ends_on_any_of_them() {
    let relay =
        RendezvousRelay::start_workers(addr("127.0.0.1:0"), ServerConfig::default(), None, 4)
            .unwrap();
    let at = relay.local_addr();
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&relay_only(at));
    registered(&registration).await;
    let got = receive(listener);
    let (mut s, _meeting) = connect_via(None, &relay_only(at), cfg()).await.unwrap();
    let data = content(4 << 20);
    send(&mut s, &data).await.unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    let stats = relay.stats();
    assert_eq!(stats.paired, 1);
    assert!(stats.forwarded_bytes > data.len() as u64, "{stats:?}");
    drop(relay);
    // The workers stop on their own threads: the port is free soon after.
    let mut free = false;
    for _ in 0..100 {
        if std::net::UdpSocket::bind(at).is_ok() {
            free = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(free, "{at} still bound 2 s after the relay was dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_dies_mid_transfer_leaves_the_direct_path_and_the_second_relay() {
    let relays = [
        RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap(),
        RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap(),
    ];
    let at: Vec<SocketAddr> = relays.iter().map(RendezvousRelay::local_addr).collect();
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&meet(&at));
    registered(&registration).await;
    let got = receive(listener);
    let (mut s, meeting) = connect_via(None, &meet(&at), cfg()).await.unwrap();
    let data = content(16 << 20);
    let [first, second] = relays;
    let writer = {
        let data = data.clone();
        tokio::spawn(async move {
            send(&mut s, &data).await?;
            anyhow::Ok(s)
        })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    drop(first);
    let s = writer.await.unwrap().unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    let reach = meeting.reach();
    assert!(
        reach.relays.iter().all(|r| r.paired_at.is_some()),
        "{reach:?}"
    );
    assert!(s.paths().len() >= 3, "{:?}", s.paths());
    assert!(second.stats().forwarded_datagrams > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_without_a_receiver_gives_up_with_a_clear_error() {
    let relay = RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap();
    let cfg = SessionConfig {
        handshake_timeout: Duration::from_millis(800),
        ..cfg()
    };
    let e = connect_via(None, &meet(&[relay.local_addr()]), cfg)
        .await
        .unwrap_err();
    assert!(matches!(e, braid::Error::NoPeerAtRelays { .. }), "{e}");
}

/// A socket that never reads: requests to it get no answer, and no "port
/// unreachable" either, as behind a firewall that drops UDP.
fn silent_relay() -> std::net::UdpSocket {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_never_answers_fails_both_ends_within_the_relay_timeout() {
    let silent = silent_relay();
    let at = Rendezvous {
        relay_timeout: Duration::from_millis(1500),
        ..meet(&[silent.local_addr().unwrap()])
    };
    let started = std::time::Instant::now();
    // The handshake timeout is 75 s: the relay's silence ends it sooner.
    let e = connect_via(None, &at, cfg()).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(e, braid::Error::NoRelayAnswered { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "no relay answered at {} (is UDP to it allowed?)",
            silent.local_addr().unwrap()
        )),
        "{e}"
    );
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&at);
    let started = std::time::Instant::now();
    let e = registration.registered().await.unwrap_err();
    assert!(matches!(e, braid::Error::NoRelayAnswered { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(4));
    // One relay that answers is enough: the silent one is only noted.
    let relay = RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap();
    let both = Rendezvous {
        relays: vec![silent.local_addr().unwrap(), relay.local_addr()],
        ..at
    };
    let reach = listener.register_at(&both).registered().await.unwrap();
    assert!(!reach.relays[0].answered && reach.relays[0].reflexive.is_none());
    assert!(reach.relays[1].answered && reach.relays[1].reflexive.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_stack_ends_meet_at_an_ipv4_and_an_ipv6_relay() {
    // Hosts without IPv6 cannot bind these; the IPv4 tests cover them there.
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        return;
    }
    let relays = [
        RendezvousRelay::start(addr("127.0.0.1:0"), ServerConfig::default()).unwrap(),
        RendezvousRelay::start(addr("[::1]:0"), ServerConfig::default()).unwrap(),
    ];
    let at: Vec<SocketAddr> = relays.iter().map(RendezvousRelay::local_addr).collect();
    let local = braid::rendezvous::any_local_for(&at);
    assert_eq!(local, addr("[::]:0"));
    let listener = Listener::bind(local, cfg()).unwrap();
    let registration = listener.register_at(&meet(&at));
    registered(&registration).await;
    let got = receive(listener);
    let (mut s, meeting) = connect_via(None, &meet(&at), cfg()).await.unwrap();
    let data = content(4 << 20);
    send(&mut s, &data).await.unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    let reach = meeting.reach();
    assert!(
        reach.relays.iter().all(|r| r.paired_at.is_some()),
        "{reach:?}"
    );
    // The IPv4 relay's connection is known as a relay's in its mapped form.
    for p in s.paths().iter().filter_map(|p| p.remote) {
        let relay = at.iter().any(|&r| braid_proto::rendezvous::same_addr(r, p));
        assert_eq!(reach.is_relay(p), relay, "{p}");
    }
    assert!(relays.iter().all(|r| r.stats().forwarded_datagrams > 0));
}

/// What the hostile relay did.
#[derive(Default)]
struct Mischief {
    /// Every datagram it forwarded, as a capture at the relay would show.
    captured: Vec<Vec<u8>>,
    replayed: u64,
    injected: u64,
    held: u64,
}

/// A rendezvous relay that pairs honestly but, forwarding, replays every
/// 5th datagram twice, holds every 7th back behind the next (reordering),
/// and injects a datagram of its own making (a real one with flipped bits)
/// every 3rd.
async fn hostile_relay() -> (SocketAddr, Arc<Mutex<Mischief>>) {
    let socket = Arc::new(UdpSocket::bind(addr("127.0.0.1:0")).await.unwrap());
    let at = socket.local_addr().unwrap();
    let mischief = Arc::new(Mutex::new(Mischief::default()));
    let m = mischief.clone();
    tokio::spawn(async move {
        let mut server = Server::new(ServerConfig::default(), [7; 32]);
        let start = std::time::Instant::now();
        let mut buf = vec![0u8; 65536];
        let mut held: Option<(SocketAddr, Vec<u8>)> = None;
        let mut n = 0u64;
        while let Ok((len, from)) = socket.recv_from(&mut buf).await {
            let now = braid_proto::Instant::from_nanos(start.elapsed().as_nanos() as u64);
            let mut replies = Vec::new();
            let datagram = buf[..len].to_vec();
            let to = server.handle(now, from, &datagram, &mut replies);
            for (to, r) in replies {
                let _ = socket.send_to(&r, to).await;
            }
            let Some(to) = to else { continue };
            m.lock().unwrap().captured.push(datagram.clone());
            n += 1;
            if n.is_multiple_of(7) && held.is_none() {
                held = Some((to, datagram));
                m.lock().unwrap().held += 1;
                continue;
            }
            let _ = socket.send_to(&datagram, to).await;
            if let Some((to, d)) = held.take() {
                let _ = socket.send_to(&d, to).await;
            }
            if n.is_multiple_of(5) {
                for _ in 0..2 {
                    let _ = socket.send_to(&datagram, to).await;
                }
                m.lock().unwrap().replayed += 2;
            }
            if n.is_multiple_of(3) && !is_rendezvous(&datagram) && datagram.len() > 16 {
                let mut forged = datagram.clone();
                let i = 15 + n as usize % (forged.len() - 15);
                forged[i] ^= 0x5a;
                let _ = socket.send_to(&forged, to).await;
                m.lock().unwrap().injected += 1;
            }
        }
    });
    (at, mischief)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_replays_reorders_and_injects_changes_nothing() {
    let (relay, mischief) = hostile_relay().await;
    let listener = Listener::bind(addr("127.0.0.1:0"), cfg()).unwrap();
    let registration = listener.register_at(&relay_only(relay));
    registered(&registration).await;
    let got = receive(listener);
    let (mut s, _meeting) = connect_via(None, &relay_only(relay), cfg()).await.unwrap();
    let data = content(2 << 20);
    send(&mut s, &data).await.unwrap();
    assert_eq!(got.await.unwrap().unwrap(), data);
    let m = mischief.lock().unwrap();
    // No 8 bytes of the content in a row appear in anything it carried.
    let windows: std::collections::HashSet<&[u8]> = data.windows(8).collect();
    let leaked = m
        .captured
        .iter()
        .flat_map(|d| d.windows(8))
        .filter(|w| windows.contains(w))
        .count();
    let carried: usize = m.captured.iter().map(Vec::len).sum();
    assert!(carried > data.len(), "the relay carried {carried} bytes");
    assert_eq!(leaked, 0, "plaintext visible at the relay");
    assert!(
        m.replayed > 10 && m.injected > 10 && m.held > 5,
        "{:?}",
        (m.replayed, m.injected, m.held)
    );
    assert_eq!(s.paths().len(), 1, "only the relay's connection");
    let stats = s.stats();
    assert!(stats.forged_dropped > 0, "{stats:?}");
}
