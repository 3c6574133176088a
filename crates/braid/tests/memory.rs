//! What peers that completed the handshake can make a listener hold, on
//! loopback, measured in the process's resident memory (a test file of its
//! own, so no other test's buffers count). The peers run unprotected so
//! that the test can write their frames: these are the attacks of an
//! authenticated but malicious peer.

mod common;

use braid::{Listener, SessionConfig};
use braid_proto::wire::{clear_datagram, Frame};
use braid_proto::PathId;
use common::rss_bytes;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::UdpSocket;

/// An unprotected client's opening.
fn hello(session_id: u64) -> Vec<u8> {
    let zero = braid_proto::Instant::ZERO;
    let mut s = braid_proto::Session::connect(SessionConfig::insecure(), session_id, zero, [1; 32])
        .unwrap();
    let mut buf = Vec::new();
    let t = s.poll_transmit(zero, 1, &mut buf).unwrap();
    buf.truncate(t.size);
    buf
}

fn datagram(session_id: u64, pn: u64, frames: &[Frame<'_>]) -> Vec<u8> {
    clear_datagram(session_id, PathId(0), pn, frames)
}

/// Sessions of a receiver that reads everything it can, as `braid recv
/// --keep` does, are sent what used to pin 64 MiB each: BLOCKED reports at
/// the advertised limit (which once doubled the window each time) and one
/// byte each at offsets scattered over the window, leaving the first byte
/// out so that nothing can be read; then bytes beyond the window, up to
/// the largest window a peer could once talk a receiver into. Each session
/// holds the bytes that arrived and no more, its window stays where it
/// was, and bytes beyond it end the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_reports_and_scattered_bytes_do_not_pin_memory() {
    const SESSIONS: u64 = 8;
    const PIECES: u64 = 4000;
    let listener =
        Listener::bind("127.0.0.1:0".parse().unwrap(), SessionConfig::insecure()).unwrap();
    let to: SocketAddr = listener.local_addr();
    let max_window = SessionConfig::default().max_window;
    let initial = SessionConfig::default().recv_window;
    let (monitors_tx, mut monitors) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(mut s) = listener.accept().await {
            let _ = monitors_tx.send(s.monitor());
            tokio::spawn(async move {
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got).await;
            });
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = rss_bytes();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let send = |id: u64, pn: u64, offset: u64| {
        let frames = [
            Frame::Blocked(initial),
            Frame::Stream {
                offset,
                fin: false,
                data: b"x",
            },
        ];
        datagram(id, pn, &frames)
    };
    let mut sent = 0u64;
    for s in 0..SESSIONS {
        let id = 77_000 + s;
        sock.send_to(&hello(id), to).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        for i in 1..=PIECES {
            let d = send(id, i, 1 + (i * 7919 * 4096) % (initial - 1));
            sent += d.len() as u64;
            let _ = sock.send_to(&d, to).await;
            if i % 200 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let grown = rss_bytes().saturating_sub(before);
    let mut accepted = Vec::new();
    while let Ok(m) = monitors.try_recv() {
        accepted.push(m);
    }
    assert_eq!(accepted.len() as u64, SESSIONS);
    for m in &accepted {
        let st = m.stats();
        assert!(st.recv_buffered > 0 && st.recv_buffered <= PIECES, "{st:?}");
        assert_eq!(
            st.bytes_received + st.recv_window,
            initial,
            "the window grew"
        );
    }
    // Before, each session held a buffer as large as its highest offset.
    assert!(
        grown < 32 << 20,
        "memory grew by {} MB for {} KB sent",
        grown >> 20,
        sent >> 10
    );
    // Beyond the window: each session ends, and frees what it held.
    for s in 0..SESSIONS {
        let d = send(77_000 + s, PIECES + 1, max_window - 1);
        let _ = sock.send_to(&d, to).await;
    }
    for m in &accepted {
        let e = tokio::time::timeout(Duration::from_secs(5), m.failed())
            .await
            .expect("a session took bytes beyond its window");
        assert!(e.to_string().contains("protocol violation"), "{e}");
    }
    eprintln!(
        "{SESSIONS} sessions, {} KB sent: memory +{} MB",
        sent >> 10,
        grown >> 20
    );
}
