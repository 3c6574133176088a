//! Key phases in sealed sessions: long transfers cross several updates,
//! by packet count or by time, and deliver every byte.

mod common;

use braid_proto::wire::{Header, KEY_PHASE_BIT, VERSION};
use braid_proto::{SessionConfig, SessionStats};
use common::{Pair, MS};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 13 + i / 509) as u8).collect()
}

/// A small deterministic generator for the network's choices.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn stats(pair: &Pair) -> (SessionStats, SessionStats) {
    (pair.client.stats(), pair.server().stats())
}

/// Both sides' datagrams dropped as forged, if neither has updated its
/// keys yet (the handshake's repeated answers count there, as always).
fn forged_before_updates(pair: &Pair) -> Option<(u64, u64)> {
    let (c, s) = stats(pair);
    (c.key_updates == 0 && s.key_updates == 0).then_some((c.forged_dropped, s.forged_dropped))
}

#[test]
fn a_lossy_reordering_transfer_crosses_several_key_updates_byte_exact() {
    // Windows of 128 KB over a 50 ms round trip: ~2.6 MB/s, so the
    // transfer lasts seconds, several times the 0.6 s (three RTOs) each
    // phase's old key is kept and no newer phase may start.
    let cfg = SessionConfig {
        paths: 2,
        key_update_packets: 1000,
        send_window: 128 << 10,
        recv_window: 128 << 10,
        max_window: 128 << 10,
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(cfg.clone(), cfg, 25 * MS);
    // 1 % loss each way and up to 8 ms of extra delay: datagrams reorder
    // within a path and across the two.
    let mut lose = rng(0x9e37_79b9_7f4a_7c15);
    pair.drop = Box::new(move |_, _, _| lose().is_multiple_of(100));
    let mut delay = rng(0x2545_f491_4f6c_dd1d);
    pair.jitter = Box::new(move |_, _, _| Duration::from_micros(delay() % 8_000));
    // The key-phase bit of each client datagram, in sending order.
    let bits = Rc::new(RefCell::new(Vec::new()));
    let seen = bits.clone();
    pair.tamper = Box::new(move |to_server, _, d| {
        if to_server {
            assert_eq!(Header::decode(d).unwrap().0.version, VERSION);
            seen.borrow_mut().push(d[0] & KEY_PHASE_BIT != 0);
        }
    });
    let up = payload(6 << 20);
    let down = payload(1 << 20);
    let mut written = 0;
    let mut down_written = 0;
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    let mut forged = (0, 0);
    while !(pair.client.is_closed() && pair.server().is_closed()) {
        assert!(pair.now < braid_proto::Instant::ZERO + Duration::from_secs(120));
        written += pair.client.write(&up[written..]);
        if written == up.len() {
            pair.client.finish();
        }
        let server = pair.server.as_mut().unwrap();
        down_written += server.write(&down[down_written..]);
        if down_written == down.len() {
            server.finish();
        }
        let until = pair.now + 50 * MS - braid_proto::Instant::ZERO;
        pair.drive_until(until, |_| false);
        forged = forged_before_updates(&pair).unwrap_or(forged);
    }
    assert!(pair.received == up, "upload not byte-exact");
    assert!(pair.received_by_client == down, "download not byte-exact");
    assert!(pair.client.error().is_none() && pair.server().error().is_none());
    let (c, s) = stats(&pair);
    assert!(c.key_updates >= 3, "client: {} key updates", c.key_updates);
    assert!(s.key_updates >= 3, "server: {} key updates", s.key_updates);
    // Both sides step together, so they count the same phases.
    assert_eq!(c.key_updates, s.key_updates);
    // Reordered datagrams of a previous phase still open: nothing more is
    // dropped as forged once the keys start updating.
    assert_eq!((c.forged_dropped, s.forged_dropped), forged);
    // The client's datagrams show the phase bit flipping once per update.
    let bits = bits.borrow();
    let flips = bits.windows(2).filter(|w| w[0] != w[1]).count() as u64;
    // Late retransmissions of the old phase are not possible after an
    // update, so each update flips the bit exactly once.
    assert_eq!(flips, c.key_updates, "{} datagrams", bits.len());
}

#[test]
fn keys_update_by_time_when_few_packets_flow() {
    let cfg = SessionConfig {
        key_update_interval: Duration::from_secs(2),
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(cfg.clone(), cfg, 10 * MS);
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    // A trickle: 2 KB every 100 ms for 10 s, some 300 packets each way.
    let up = payload(200 << 10);
    let mut forged = (0, 0);
    for chunk in up.chunks(2 << 10) {
        assert_eq!(pair.client.write(chunk), chunk.len());
        let until = pair.now + 100 * MS - braid_proto::Instant::ZERO;
        pair.drive_until(until, |_| false);
        forged = forged_before_updates(&pair).unwrap_or(forged);
    }
    pair.client.finish();
    pair.server.as_mut().unwrap().finish();
    pair.drive_until(
        pair.now + Duration::from_secs(30) - braid_proto::Instant::ZERO,
        |p| p.client.is_closed() && p.server().is_closed(),
    );
    assert!(pair.received == up);
    assert!(pair.client.error().is_none() && pair.server().error().is_none());
    let (c, s) = stats(&pair);
    // About one update per 2 s, while data flows and while the sessions
    // drain (keep-alives and ACKs, 10 s): the packet limit is far away.
    let secs = (pair.now - braid_proto::Instant::ZERO).as_secs();
    assert!(c.key_updates >= 3, "{} updates", c.key_updates);
    assert!(
        c.key_updates <= secs / 2,
        "{} updates in {secs} s",
        c.key_updates
    );
    assert_eq!(c.key_updates, s.key_updates);
    assert_eq!((c.forged_dropped, s.forged_dropped), forged);
}

#[test]
fn insecure_sessions_never_update_keys() {
    let cfg = SessionConfig {
        key_update_packets: 1,
        key_update_interval: Duration::from_millis(1),
        ..SessionConfig::insecure()
    };
    let mut pair = Pair::new(cfg.clone(), cfg, 10 * MS);
    pair.tamper = Box::new(|_, _, d| {
        let (h, _) = Header::decode(d).unwrap();
        assert_eq!(
            (h.version, h.key_phase, d[0] & KEY_PHASE_BIT),
            (VERSION, false, 0)
        );
    });
    let up = payload(1 << 20);
    assert_eq!(pair.client.write(&up), up.len());
    pair.client.finish();
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    pair.server.as_mut().unwrap().finish();
    pair.drive_until(Duration::from_secs(60), |p| {
        p.client.is_closed() && p.server().is_closed()
    });
    assert!(pair.received == up);
    let (c, s) = stats(&pair);
    assert_eq!((c.key_updates, s.key_updates), (0, 0));
}

#[test]
fn datagrams_with_a_flipped_phase_bit_are_forged_and_move_nothing() {
    let cfg = SessionConfig::default();
    let mut pair = Pair::new(cfg.clone(), cfg, 10 * MS);
    pair.drive_until(Duration::from_secs(2), |p| {
        p.client.is_established() && p.server.as_ref().is_some_and(|s| s.is_peer_confirmed())
    });
    let before = forged_before_updates(&pair).unwrap();
    // An on-path attacker flips the key-phase bit of every tenth sealed
    // datagram each way: the peer tries its next key, which does not open
    // them, and stays where it was.
    let flipped = Rc::new(RefCell::new((0u64, 0u64)));
    let count = flipped.clone();
    let mut n = 0u64;
    pair.tamper = Box::new(move |to_server, _, d| {
        n += 1;
        if n.is_multiple_of(10) {
            d[0] ^= KEY_PHASE_BIT;
            let mut c = count.borrow_mut();
            if to_server {
                c.1 += 1;
            } else {
                c.0 += 1;
            }
        }
    });
    let up = payload(2 << 20);
    assert_eq!(pair.client.write(&up), up.len());
    pair.client.finish();
    pair.server.as_mut().unwrap().finish();
    pair.drive_until(Duration::from_secs(60), |p| {
        p.client.is_closed() && p.server().is_closed()
    });
    assert!(pair.received == up);
    assert!(pair.client.error().is_none() && pair.server().error().is_none());
    let (c, s) = stats(&pair);
    let flipped = *flipped.borrow();
    assert!(flipped.0 > 10 && flipped.1 > 100, "{flipped:?}");
    assert_eq!((c.key_updates, s.key_updates), (0, 0));
    assert_eq!(
        (c.forged_dropped, s.forged_dropped),
        (before.0 + flipped.0, before.1 + flipped.1)
    );
}
