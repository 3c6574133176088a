//! Sessions over emulated paths (emulators on loopback): loss, reordering, a
//! path that fails and comes back, and every path failing.

mod common;

use braid::{
    connect, Emulator, EmulatorConfig, Error, Listener, PathSpec, SessionConfig, SessionError,
};
use braid_link::{LinkConfig, Rate};
use common::{answer_with_hash, client_cfg, content, server_cfg};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn lossy_jittery(mbit: u64, one_way_ms: u64, jitter_ms: u64, loss: f64) -> LinkConfig {
    LinkConfig {
        jitter: Duration::from_millis(jitter_ms),
        loss,
        ..LinkConfig::new(Rate::mbit(mbit), Duration::from_millis(one_way_ms))
    }
}

fn emulator(listen: SocketAddr, to: SocketAddr, link: LinkConfig, seed: u64) -> Emulator {
    let mut cfg = EmulatorConfig::new(listen, to, link);
    cfg.seed = seed;
    Emulator::start(cfg).unwrap()
}

/// A receiver that answers each session with the BLAKE3 of what it read.
fn hashing_receiver(listener: Listener) -> tokio::task::JoinHandle<std::io::Result<usize>> {
    tokio::spawn(async move {
        let mut s = listener.accept().await.map_err(std::io::Error::from)?;
        let got = answer_with_hash(&mut s).await?;
        s.shutdown().await?;
        Ok(got.len())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossy_reordering_paths_survive_an_emulator_restart() {
    let listener = Listener::bind(loopback(), server_cfg()).unwrap();
    let server = listener.local_addr();
    let link_a = lossy_jittery(20, 5, 3, 0.02);
    let link_b = lossy_jittery(10, 15, 5, 0.01);
    let emulator_a = emulator(loopback(), server, link_a, 1);
    let emulator_b = emulator(loopback(), server, link_b.clone(), 2);
    let b_addr = emulator_b.local_addr();
    let receiver = hashing_receiver(listener);

    let data = content(10 << 20);
    let paths = [PathSpec::to(emulator_a.local_addr()), PathSpec::to(b_addr)];
    let mut session = connect(&paths, client_cfg()).await.unwrap();
    let monitor = session.monitor();
    let sender = tokio::spawn(async move {
        session.write_all(&data).await?;
        session.shutdown().await?;
        let mut hash = Vec::new();
        session.read_to_end(&mut hash).await?;
        std::io::Result::Ok((hash == blake3::hash(&data).as_bytes(), session))
    });

    tokio::time::sleep(Duration::from_millis(600)).await;
    drop(emulator_b);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let acked_before_restart = path_acked(&monitor, 1);
    let emulator_b = emulator(b_addr, server, link_b, 3);

    let (verified, session) = tokio::time::timeout(Duration::from_secs(60), sender)
        .await
        .expect("transfer finishes")
        .unwrap()
        .unwrap();
    assert!(verified, "the receiver's hash differs");
    assert_eq!(receiver.await.unwrap().unwrap(), 10 << 20);
    let stats = session.stats();
    assert!(stats.retransmitted > 0, "the links were lossy");
    assert!(
        path_acked(&monitor, 1) > acked_before_restart,
        "path 1 carried data again after its emulator came back"
    );
    assert!(emulator_b.stats().forward.link.delivered > 0);
    drop(emulator_a);
}

fn path_acked(monitor: &braid::Monitor, path: u8) -> u64 {
    let path = braid_proto::PathId(path);
    monitor
        .stats()
        .paths
        .iter()
        .find(|(id, _)| *id == path)
        .map_or(0, |(_, p)| p.stream_bytes_acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_every_path_is_an_all_paths_down_error() {
    let listener = Listener::bind(loopback(), server_cfg()).unwrap();
    let server = listener.local_addr();
    let link = LinkConfig::new(Rate::mbit(20), Duration::from_millis(5));
    let emulator_a = emulator(loopback(), server, link.clone(), 1);
    let emulator_b = emulator(loopback(), server, link, 2);
    let _receiver = hashing_receiver(listener);
    let cfg = SessionConfig {
        idle_timeout: Duration::from_millis(1500),
        ..client_cfg()
    };
    let paths = [
        PathSpec::to(emulator_a.local_addr()),
        PathSpec::to(emulator_b.local_addr()),
    ];
    let mut session = connect(&paths, cfg).await.unwrap();
    session.write_all(&content(1 << 20)).await.unwrap();
    drop(emulator_a);
    drop(emulator_b);
    let big = content(64 << 20);
    let err = tokio::time::timeout(Duration::from_secs(20), async {
        session.write_all(&big).await?;
        session.shutdown().await
    })
    .await
    .expect("fails within the idle timeout")
    .expect_err("no path is left");
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
    assert!(
        matches!(
            inner,
            Some(Error::AllPathsDown(SessionError::IdleTimeout(_)))
        ),
        "{err}"
    );
}
