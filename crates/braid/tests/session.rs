//! Sessions on loopback sockets: delivery, graceful close, abort, failures.

mod common;

use braid::{connect, Error, Listener, PathSpec, Session, SessionConfig, SessionError};
use common::{client_cfg, server_cfg};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

/// A listener on loopback serving one session: it reads the stream to its
/// end, writes `reply` (if any), ends its own direction and hands back what
/// it read with `then`'s account of the session at that moment.
fn serve_one<T: Send + 'static>(
    reply: &'static [u8],
    then: impl FnOnce(&Session) -> T + Send + 'static,
) -> (SocketAddr, JoinHandle<(Vec<u8>, T)>) {
    let listener = Listener::bind(localhost(), server_cfg()).unwrap();
    let to = listener.local_addr();
    let server = tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        if !reply.is_empty() {
            s.write_all(reply).await.unwrap();
        }
        s.shutdown().await.unwrap();
        let account = then(&s);
        (got, account)
    });
    (to, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_close_delivers_everything_both_ways() {
    let (to, server) = serve_one(b"thanks", |_| ());
    let data = pattern(8 << 20);
    let expected = data.clone();
    let mut s = connect(&[PathSpec::to(to)], client_cfg()).await.unwrap();
    s.write_all(&data).await.unwrap();
    s.shutdown().await.unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"thanks");
    let (got, ()) = tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "stream content differs");
    assert_eq!(s.stats().bytes_acked, expected.len() as u64);
    tokio::time::timeout(Duration::from_secs(10), s.closed())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_on_one_socket_share_the_stream() {
    let (to, server) = serve_one(b"", |s| (s.paths().len(), s.stats().forged_dropped));
    let data = pattern(4 << 20);
    let expected = data.clone();
    let mut s = connect(&[PathSpec::to(to), PathSpec::to(to)], client_cfg())
        .await
        .unwrap();
    s.write_all(&data).await.unwrap();
    s.shutdown().await.unwrap();
    let (got, (server_paths, server_forged)) = server.await.unwrap();
    assert!(got == expected);
    assert_eq!(server_paths, 2);
    let stats = s.stats();
    assert_eq!(stats.paths.len(), 2);
    assert!(stats.paths.iter().all(|(_, p)| p.data_packets_sent > 0));
    // The second connection's copy of the handshake is no forgery.
    assert_eq!((stats.forged_dropped, server_forged), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_surfaces_as_an_error_on_the_other_side() {
    let listener = Listener::bind(localhost(), server_cfg()).unwrap();
    let to = listener.local_addr();
    let server = tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(_) => continue,
                Err(e) => return Err(e),
            }
        }
    });
    let mut s = connect(&[PathSpec::to(to)], client_cfg()).await.unwrap();
    s.write_all(&pattern(100_000)).await.unwrap();
    s.abort(7, "changed my mind");
    let err = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .expect_err("the reader must see the abort");
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
    assert!(
        matches!(
            inner,
            Some(Error::Session(SessionError::PeerAborted { code: 7, reason }))
                if reason == "changed my mind"
        ),
        "{err}"
    );
}

/// An abort's CLOSE is answered once, and the answer ends both sides'
/// drivers within a few round trips, not three timeouts (600 ms at least):
/// a process awaiting `ended()` before it exits is not held up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_abort_ends_both_sides_at_once() {
    let listener = Listener::bind(localhost(), server_cfg()).unwrap();
    let to = listener.local_addr();
    let server = tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        let told = Instant::now();
        s.ended().await;
        told.elapsed()
    });
    let mut s = connect(&[PathSpec::to(to)], client_cfg()).await.unwrap();
    s.write_all(&pattern(100_000)).await.unwrap();
    let aborted = Instant::now();
    s.abort(7, "changed my mind");
    tokio::time::timeout(Duration::from_secs(5), s.ended())
        .await
        .unwrap();
    let closing = aborted.elapsed();
    let draining = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
    assert!(closing < Duration::from_millis(300), "closing {closing:?}");
    assert!(
        draining < Duration::from_millis(300),
        "draining {draining:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_to_a_silent_host_fails_within_the_timeout() {
    // A socket that never reads: no answer, and no ICMP error either.
    let silent = std::net::UdpSocket::bind(localhost()).unwrap();
    let cfg = SessionConfig {
        handshake_timeout: Duration::from_millis(800),
        ..client_cfg()
    };
    let started = Instant::now();
    let err = connect(&[PathSpec::to(silent.local_addr().unwrap())], cfg)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, Error::Session(SessionError::HandshakeTimeout(_))),
        "{err}"
    );
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// A port that was just free: nobody listens there, and the host says so.
fn closed_port() -> SocketAddr {
    std::net::UdpSocket::bind(localhost())
        .unwrap()
        .local_addr()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_to_a_closed_port_fails_at_once() {
    let started = Instant::now();
    // The default handshake timeout is far longer than the bound below.
    let err = connect(&[PathSpec::to(closed_port())], client_cfg())
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, Error::Session(SessionError::NothingListening)),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_beside_a_live_one_is_dropped_not_waited_for() {
    let (live, server) = serve_one(b"", |_| ());
    let dead = closed_port();
    let data = pattern(4 << 20);
    let expected = data.clone();
    let started = Instant::now();
    let mut s = connect(&[PathSpec::to(dead), PathSpec::to(live)], client_cfg())
        .await
        .unwrap();
    s.write_all(&data).await.unwrap();
    s.shutdown().await.unwrap();
    let took = started.elapsed();
    let paths = s.paths();
    let dead_state = paths.iter().find(|p| p.remote == Some(dead)).unwrap().state;
    assert_eq!(dead_state, braid::PathState::Closed, "{paths:?}");
    // Nothing waited for the dead connection's retransmission timeouts.
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(server.await.unwrap().0, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_on_a_port_in_use_is_a_clear_error() {
    let first = Listener::bind(localhost(), server_cfg()).unwrap();
    let err = Listener::bind(first.local_addr(), server_cfg()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("cannot listen on") && msg.contains("address already in use"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_sessions_on_one_listener_all_verify() {
    let listener = Listener::bind(localhost(), server_cfg()).unwrap();
    concurrent_sessions_all_verify(listener, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_read_by_several_sockets_on_one_address_all_verify() {
    let listener = Listener::bind_spread(localhost(), server_cfg(), Default::default(), 4).unwrap();
    // The address is shared only among sockets that asked to share it.
    let err = Listener::bind(listener.local_addr(), server_cfg()).unwrap_err();
    assert!(err.to_string().contains("address already in use"), "{err}");
    concurrent_sessions_all_verify(listener, 32).await;
}

/// `sessions` clients send 1 MiB each at once; each gets back the hash
/// of what the listener read.
async fn concurrent_sessions_all_verify(listener: Listener, sessions: usize) {
    const BYTES: usize = 1 << 20;
    let to = listener.local_addr();
    let server = tokio::spawn(async move {
        let mut handlers = Vec::new();
        for _ in 0..sessions {
            let mut s = listener.accept().await.unwrap();
            handlers.push(tokio::spawn(async move {
                let mut got = Vec::new();
                s.read_to_end(&mut got).await.unwrap();
                let hash = blake3::hash(&got);
                s.write_all(hash.as_bytes()).await.unwrap();
                s.shutdown().await.unwrap();
                got.len()
            }));
        }
        let mut total = 0;
        for h in handlers {
            total += h.await.unwrap();
        }
        total
    });
    let started = Instant::now();
    let mut clients = Vec::new();
    for i in 0..sessions {
        clients.push(tokio::spawn(async move {
            let data: Vec<u8> = (0..BYTES).map(|j| ((i * 7 + j) % 253) as u8).collect();
            let mut s = connect(&[PathSpec::to(to)], client_cfg()).await.unwrap();
            s.write_all(&data).await.unwrap();
            s.shutdown().await.unwrap();
            let mut echo = Vec::new();
            s.read_to_end(&mut echo).await.unwrap();
            echo == blake3::hash(&data).as_bytes()
        }));
    }
    let mut verified = 0;
    for c in clients {
        verified += usize::from(
            tokio::time::timeout(Duration::from_secs(60), c)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let total = server.await.unwrap();
    eprintln!(
        "{verified}/{sessions} sessions of 1 MiB verified in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(verified, sessions);
    assert_eq!(total, sessions * BYTES);
}
