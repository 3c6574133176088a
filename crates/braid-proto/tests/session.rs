//! Two sessions wired back to back in virtual time, each test a short story.

mod common;

use braid_proto::{
    Datagram, Event, Instant, PathId, PathState, Session, SessionConfig, SessionError,
};
use common::{Pair, MS};
use std::collections::BTreeMap;
use std::time::Duration;

fn cfg() -> SessionConfig {
    SessionConfig::default()
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn graceful_close_delivers_everything_in_both_directions() {
    let mut pair = Pair::new(cfg(), cfg(), 10 * MS);
    let up = payload(300_000);
    let down = payload(100_000);
    assert_eq!(pair.client.write(&up), up.len());
    pair.client.finish();
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    let server = pair.server.as_mut().unwrap();
    assert_eq!(server.write(&down), down.len());
    server.finish();
    pair.drive_until(Duration::from_secs(60), |p| {
        p.client.is_closed() && p.server().is_closed()
    });
    assert_eq!(pair.received, up);
    assert_eq!(pair.received_by_client, down);
    assert!(pair.client_events.contains(&Event::SendFinished));
    assert!(pair.client_events.contains(&Event::Closed));
    assert!(pair.server_events.contains(&Event::RecvFinished));
    assert!(pair.server_events.contains(&Event::Closed));
    assert!(pair.client.error().is_none() && pair.server().error().is_none());
}

#[test]
fn handshake_to_nobody_fails_within_the_timeout() {
    let mut c = cfg();
    c.handshake_timeout = Duration::from_secs(3);
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    pair.drop = Box::new(|_, _, _| true);
    pair.drive_until(Duration::from_secs(30), |p| p.client.error().is_some());
    assert_eq!(
        pair.client.error(),
        Some(&SessionError::HandshakeTimeout(Duration::from_secs(3)))
    );
    assert!(pair.now <= Instant::ZERO + Duration::from_secs(3));
    assert!(pair
        .client
        .error()
        .unwrap()
        .to_string()
        .contains("handshake timed out"));
}

#[test]
fn handshake_negotiates_the_minimum_of_both_sides() {
    let mut c = cfg();
    c.segment_size = 1200;
    c.send_window = 1 << 20;
    c.paths = 3;
    let mut s = cfg();
    s.segment_size = 1000;
    s.recv_window = 1 << 19;
    s.max_paths = 2;
    let mut pair = Pair::new(c, s, 5 * MS);
    pair.drive_until(Duration::from_secs(2), |p| p.client.is_established());
    let agreed = pair.client.config();
    assert_eq!(agreed.segment_size, 1000);
    assert_eq!(agreed.send_window, 1 << 20);
    assert_eq!(agreed.recv_window, 1 << 19);
    assert_eq!(agreed.paths, 2);
    assert_eq!(pair.client.path_states().len(), 2);
    assert_eq!(pair.server().config().segment_size, 1000);
}

#[test]
fn unknown_controller_is_refused_with_a_clear_error() {
    use braid_proto::wire::{Frame, Frames, Header, Hello};
    let insecure = SessionConfig::insecure;
    let mut client = Session::connect(insecure(), 42, Instant::ZERO, [1; 32]).unwrap();
    let mut buf = Vec::new();
    client.poll_transmit(Instant::ZERO, 1, &mut buf).unwrap();
    // Rewrite the HELLO to ask for a controller no build has.
    let (header, payload) = Header::decode(&buf).unwrap();
    let Some(Ok(Frame::Hello(hello))) = Frames::new(payload).next() else {
        panic!("first frame is a HELLO")
    };
    let mut forged = Vec::new();
    header.encode(&mut forged);
    Frame::Hello(Hello {
        cc: "warp".into(),
        ..hello
    })
    .encode(&mut forged);
    braid_proto::wire::pad_to(&mut forged, braid_proto::wire::MIN_INITIAL_DATAGRAM);
    let mut server =
        Session::accept(insecure(), Instant::ZERO, PathId(0), &forged, [2; 32]).unwrap();
    let t = server
        .poll_transmit(Instant::ZERO, 1, &mut buf)
        .expect("the server explains its refusal");
    client.handle_datagram(
        Instant::ZERO + MS,
        Datagram::new(Instant::ZERO + MS, t.path, &mut buf[..t.size].to_vec()),
    );
    assert_eq!(
        client.error(),
        Some(&SessionError::UnknownController("warp".into()))
    );
    assert!(client.error().unwrap().to_string().contains("warp"));
}

#[test]
fn abort_surfaces_as_an_error_on_the_other_side() {
    let mut pair = Pair::new(cfg(), cfg(), 10 * MS);
    pair.client.write(&payload(50_000));
    pair.drive_until(Duration::from_secs(2), |p| p.received.len() >= 10_000);
    pair.client.abort(7, "user pressed ctrl-c");
    pair.drive_until(Duration::from_secs(5), |p| p.server().error().is_some());
    let err = pair.server().error().expect("server saw the abort");
    assert_eq!(
        err,
        &SessionError::PeerAborted {
            code: 7,
            reason: "user pressed ctrl-c".into()
        }
    );
    // The client stays to answer the server's packets for three RTOs.
    assert!(!pair.client.is_closed());
    pair.drive_until(Duration::from_secs(10), |p| p.client.is_closed());
    assert!(pair.client.is_closed());
}

/// Every data packet is lost once established (ACKs and probes pass, so
/// the peer is heard all along): nothing new is acknowledged, and after the
/// retry limit's RTOs, and as long as that many doubling RTOs would take,
/// the session says so, long before the idle timeout.
#[test]
fn no_progress_for_the_retry_limit_of_rtos_fails() {
    let mut c = cfg();
    c.retry_limit = Some(3);
    c.idle_timeout = Duration::from_secs(600);
    c.max_probe_interval = Duration::from_millis(300);
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    pair.drive_until(Duration::from_secs(1), |p| p.client.is_established());
    let started = pair.now;
    pair.drop = Box::new(|to_server, _, bytes| to_server && bytes.len() > 200);
    pair.client.write(&payload(5_000));
    pair.drive_until(Duration::from_secs(600), |p| p.client.error().is_some());
    match pair.client.error() {
        Some(SessionError::NoProgress { after, rtos }) => {
            assert_eq!(*rtos, 3);
            // Probes every 300 ms pass the count of 3 RTOs within about a
            // second; the session waits out what four doubling RTOs from
            // the 200 ms minimum would take: 200 + 400 + 800 + 1,600 ms.
            assert!(*after >= Duration::from_millis(3_000), "{after:?}");
            assert!(
                pair.now - started < Duration::from_millis(3_500),
                "{:?}",
                pair.now - started
            );
        }
        other => panic!("expected a no-progress error, got {other:?}"),
    }
    assert!(pair
        .client
        .error()
        .unwrap()
        .to_string()
        .contains("retry limit"));
}

/// A probe carries our ACK even when none is owed: the client's ACKs of
/// the server's data are lost, and then everything the server sends. The
/// client's keep-alive probes are all the server hears, and only their ACK
/// tells it that its data arrived.
#[test]
fn a_probe_repeats_the_ack_the_peer_lost() {
    let mut c = cfg();
    c.keep_alive = Some(Duration::from_millis(500));
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    pair.drive_until(Duration::from_secs(1), |p| p.server.is_some());
    let until = pair.now + 200 * MS;
    pair.drive_until(Duration::from_secs(2), |p| p.now >= until);
    let down = payload(10_000); // within the initial window
    pair.drop = Box::new(|to_server, _, _| to_server);
    let server = pair.server.as_mut().unwrap();
    assert_eq!(server.write(&down), down.len());
    server.finish();
    let until = pair.now + 100 * MS;
    pair.drive_until(Duration::from_secs(3), |p| p.now >= until);
    assert_eq!(pair.received_by_client, down);
    pair.drop = Box::new(|to_server, _, _| !to_server);
    pair.drive_until(Duration::from_secs(10), |p| p.server().is_send_finished());
    assert!(pair.server().is_send_finished(), "the server never learnt");
    assert!(
        pair.now < Instant::ZERO + Duration::from_secs(5),
        "{:?}",
        pair.now
    );
}

#[test]
fn idle_timeout_when_the_peer_vanishes() {
    let mut c = cfg();
    c.idle_timeout = Duration::from_secs(5);
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    pair.drive_until(Duration::from_secs(2), |p| p.client.is_established());
    pair.drop = Box::new(|_, _, _| true);
    pair.client.write(&payload(10_000));
    pair.drive_until(Duration::from_secs(60), |p| p.client.error().is_some());
    assert_eq!(
        pair.client.error(),
        Some(&SessionError::IdleTimeout(Duration::from_secs(5)))
    );
    assert!(pair.now <= Instant::ZERO + Duration::from_secs(8));
}

#[test]
fn a_dead_path_is_probed_and_its_data_moves_to_the_other() {
    let mut c = cfg();
    c.paths = 2;
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    pair.drive_until(Duration::from_secs(1), |p| p.client.is_established());
    // Path 1 goes dark in both directions for good, while the application
    // writes 100 kB every 100 ms for 3 s.
    pair.drop = Box::new(|_, path, _| path == PathId(1));
    let data = payload(3_000_000);
    for chunk in data.chunks(100_000) {
        assert_eq!(pair.client.write(chunk), chunk.len());
        let until = pair.now + 100 * MS;
        pair.drive_until(Duration::from_secs(60), |p| p.now >= until);
    }
    pair.client.finish();
    pair.drive_until(Duration::from_secs(60), |p| p.client.is_send_finished());
    assert!(pair.received == data, "every byte arrived, in order");
    assert!(pair.client_events.contains(&Event::PathDown(PathId(1))));
    assert_eq!(pair.client.path_states()[1].1, PathState::Probing);
    let stats = pair.client.stats();
    assert!(stats.paths[1].1.timeouts >= 2);
    assert!(
        stats.paths[0].1.stream_bytes_acked >= 2_900_000,
        "path 0 carried the data"
    );
    assert!(pair.client.error().is_none());
}

/// Path 0 goes dark while the client keeps sending on path 1; then the
/// server (which only acknowledged until then, so no timer of its own
/// noticed) replies. The reply takes path 1 at once instead of being lost
/// on path 0, where it would go first, and waiting out its timeouts.
#[test]
fn a_reply_avoids_a_path_the_peer_fell_silent_on() {
    let mut c = cfg();
    c.paths = 2;
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    // Path 1 is the faster: where a reply would go.
    pair.jitter = Box::new(|_, path, _| {
        if path == PathId(0) {
            15 * MS
        } else {
            Duration::ZERO
        }
    });
    pair.drive_until(Duration::from_secs(1), |p| p.client.is_established());
    let data = payload(600_000);
    assert_eq!(pair.client.write(&data[..300_000]), 300_000);
    pair.drive_until(Duration::from_secs(5), |p| p.received.len() == 300_000);
    let both = pair.server().stats();
    assert!(
        both.paths.iter().all(|(_, p)| p.packets_received > 10),
        "both carried data"
    );
    pair.drop = Box::new(|_, path, _| path == PathId(0));
    assert_eq!(pair.client.write(&data[300_000..]), 300_000);
    pair.client.finish();
    pair.drive_until(Duration::from_secs(10), |p| p.received.len() == 600_000);
    let dark = pair.now;
    let server = pair.server.as_mut().unwrap();
    assert_eq!(server.write(b"verdict"), 7);
    server.finish();
    pair.drive_until(Duration::from_secs(20), |p| p.received_by_client.len() == 7);
    assert_eq!(pair.received_by_client, b"verdict");
    let took = pair.now.saturating_duration_since(dark);
    // Path 1's round trip is 20 ms; path 0's timeouts would take seconds.
    assert!(took < 100 * MS, "the reply took {took:?}");
}

#[test]
fn paths_can_join_and_leave_during_the_session() {
    let mut pair = Pair::new(cfg(), cfg(), 10 * MS);
    let data = payload(400_000);
    let mut wrote = pair.client.write(&data);
    pair.drive_until(Duration::from_secs(1), |p| p.received.len() > 50_000);
    assert!(pair.client.add_path(pair.now, PathId(1)));
    pair.drive_until(Duration::from_secs(2), |p| {
        p.server().path_states().len() == 2
    });
    assert_eq!(
        pair.server().path_states().len(),
        2,
        "the server learned of the new path"
    );
    pair.client.close_path(PathId(0));
    while wrote < data.len() {
        wrote += pair.client.write(&data[wrote..]);
        pair.drive_until(Duration::from_secs(30), |p| p.received.len() >= wrote);
    }
    pair.client.finish();
    pair.drive_until(Duration::from_secs(30), |p| p.client.is_send_finished());
    assert_eq!(pair.received, data);
    assert!(pair.server_events.contains(&Event::PathClosed(PathId(0))));
    assert_eq!(pair.client.path_states()[0].1, PathState::Closed);
}

#[test]
fn garbage_is_dropped_and_counted() {
    let mut pair = Pair::new(cfg(), cfg(), 10 * MS);
    pair.drive_until(Duration::from_secs(1), |p| p.client.is_established());
    let now = pair.now;
    pair.client
        .handle_datagram(now, Datagram::new(now, PathId(0), &mut [1, 2, 3].to_vec()));
    let mut forged = braid_proto::wire::clear_datagram(42, PathId(0), 999, &[]);
    forged.push(0x3f); // unknown frame type
    pair.client
        .handle_datagram(now, Datagram::new(now, PathId(0), &mut forged.to_vec()));
    let mut other = forged.clone();
    other[2] ^= 0xff; // another session
    pair.client
        .handle_datagram(now, Datagram::new(now, PathId(0), &mut other.to_vec()));
    let stats = pair.client.stats();
    // Too short for a header; does not open with the keys; another session.
    assert_eq!(stats.malformed_dropped, 1);
    assert_eq!(stats.forged_dropped, 1);
    assert_eq!(stats.unexpected_dropped, 1);
    assert!(pair.client.error().is_none());
}

#[test]
fn flow_control_stops_the_sender_until_the_reader_reads() {
    let mut s = cfg();
    s.recv_window = 64 * 1024;
    let mut pair = Pair::new(cfg(), s, 5 * MS);
    pair.server_reads = false;
    let data = payload(1_000_000);
    pair.client.write(&data);
    pair.client.finish();
    pair.drive_until(Duration::from_secs(5), |_| false);
    let held = pair.server().readable();
    assert!(
        held > 0 && held <= 64 * 1024,
        "the receiver holds at most its window: {held}"
    );
    assert!(pair.received.is_empty());
    assert!(pair.client.stats().bytes_acked <= 64 * 1024);
    // Reading reopens the window; the rest follows.
    pair.server_reads = true;
    pair.drive_until(Duration::from_secs(60), |p| p.received.len() == data.len());
    assert_eq!(pair.received, data);
}

#[test]
fn ncp_windows_always_sum_to_the_session_window() {
    let mut c = cfg();
    c.cc = braid_proto::cc::Algorithm::Ncp;
    c.paths = 3;
    c.segment_size = 1024;
    c.send_window = 1 << 20;
    let mut pair = Pair::new(c, cfg(), 10 * MS);
    // Path 2 loses every other datagram, so its window is halved again and again.
    let mut n = 0u64;
    pair.drop = Box::new(move |to_server, path, _| {
        n += 1;
        to_server && path == PathId(2) && n.is_multiple_of(2)
    });
    pair.client.write(&payload(3_000_000));
    pair.drive_until(Duration::from_secs(30), |p| p.received.len() >= 2_000_000);
    let stats = pair.client.stats();
    let total: u64 = stats.paths.iter().map(|(_, p)| p.window).sum();
    let target = (1u64 << 20) / 1024 * 1024;
    assert!(
        total.abs_diff(target) <= 3 * 1024,
        "windows sum to {total}, session window {target}"
    );
    let lossy = stats.paths[2].1.window;
    let clean = stats.paths[0].1.window;
    assert!(
        lossy < clean,
        "the lossy connection holds the smaller share: {lossy} vs {clean}"
    );
}

#[test]
fn a_batch_s_datagrams_open_like_single_ones() {
    let mut pair = Pair::new(cfg(), cfg(), 10 * MS);
    pair.drive_until(Duration::from_secs(1), |p| {
        p.client.is_established() && p.server.is_some()
    });
    pair.drive_until(Duration::from_secs(1), |p| p.in_flight.is_empty());
    // Within the initial window: all of it leaves at once, in one batch of
    // datagrams one after another, each sealed where it starts.
    let data = payload(8_000);
    assert_eq!(pair.client.write(&data), data.len());
    let now = pair.now;
    let mut buf = Vec::new();
    let mut batches = Vec::new();
    while let Some(t) = pair.client.poll_transmit(now, 64, &mut buf) {
        assert_eq!(buf.len(), t.size);
        batches.push((t.segment_size.unwrap_or(t.size), buf.clone()));
    }
    assert!(batches.len() < 3, "{} batches", batches.len());
    let datagrams: Vec<_> = batches
        .iter_mut()
        .flat_map(|(segment, batch)| batch.chunks_mut(*segment))
        .collect();
    assert!(datagrams.len() >= 5, "{} datagrams", datagrams.len());
    let server = pair.server.as_mut().unwrap();
    for datagram in datagrams {
        assert!(server.handle_datagram(
            now + 10 * MS,
            Datagram::new(now + 10 * MS, PathId(0), datagram)
        ));
    }
    let mut got = vec![0u8; data.len() + 1];
    let n = server.read(now + 10 * MS, &mut got);
    assert_eq!(n, data.len());
    assert!(got[..n] == data[..], "content differs");
    assert_eq!(server.stats().forged_dropped, 0);
}

#[test]
fn batches_carry_per_connection_what_single_polls_would() {
    let ready = || {
        let mut two = cfg();
        two.paths = 2;
        let mut pair = Pair::new(two, cfg(), 10 * MS);
        pair.drive_until(Duration::from_secs(1), |p| {
            p.client.is_established() && p.server.is_some()
        });
        pair.drive_until(Duration::from_secs(1), |p| p.in_flight.is_empty());
        assert_eq!(pair.client.write(&payload(60_000)), 60_000);
        pair
    };
    // Each connection's datagrams in the order they leave, and the
    // connection of each call.
    let sent = |pair: &mut Pair, max: usize| {
        let mut by_path: BTreeMap<PathId, Vec<Vec<u8>>> = BTreeMap::new();
        let (mut buf, mut calls) = (Vec::new(), Vec::new());
        while let Some(t) = pair.client.poll_transmit(pair.now, max, &mut buf) {
            calls.push(t.path);
            let segment = t.segment_size.unwrap_or(t.size);
            let datagrams = by_path.entry(t.path).or_default();
            datagrams.extend(buf.chunks(segment).map(<[u8]>::to_vec));
        }
        (by_path, calls)
    };
    let (single, order) = sent(&mut ready(), 1);
    let (batched, calls) = sent(&mut ready(), 64);
    assert_eq!(single.len(), 2, "both connections carry data");
    assert!(single == batched, "the same datagrams, in the same order");
    // At most two batches per connection: a datagram larger than the
    // batch's first (the stream offset's encoding grew) starts another.
    assert!(calls.len() <= 4, "{} datagrams in {calls:?}", order.len());
}
