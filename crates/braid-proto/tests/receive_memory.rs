//! What a peer can make the receiver hold: one window plus data it really
//! sent and the application read, whatever it reports or scatters.
//!
//! The pairs run unprotected so that the test can speak as the client:
//! these are the attacks an authenticated but malicious peer can make.

mod common;

use braid_proto::wire::{clear_datagram, Frame};
use braid_proto::{Instant, PathId, SessionConfig, SessionError, Violation};
use common::{greeted_pair, Pair, MS};
use std::time::Duration;

/// Packet numbers far ahead of any the pair has used, yet within the half
/// of the 32-bit window a truncated number is read as ahead in.
const FRESH: u64 = 1 << 30;

/// Delivers `frames` to the server as if the client had sent them, in one
/// datagram with packet number `FRESH + n`, now (after any timer due).
fn as_client(pair: &mut Pair, n: u64, frames: &[Frame<'_>]) {
    let d = clear_datagram(42, PathId(0), FRESH + n, frames);
    pair.seq += 1;
    let key = (pair.now, pair.seq);
    pair.in_flight.insert(key, (true, PathId(0), d));
    while pair.in_flight.contains_key(&key) && pair.step() {}
}

/// The server's current flow-control limit, as its ACKs tell the client.
fn limit(pair: &Pair) -> u64 {
    let s = pair.server().stats();
    s.bytes_received + s.recv_window
}

/// Thousands of BLOCKED reports at exactly the limit advertised, re-read
/// before every datagram, grow nothing: no data was delivered and read.
#[test]
fn blocked_reports_at_the_limit_do_not_grow_the_window() {
    let mut pair = greeted_pair();
    let window = pair.server().stats().recv_window;
    for n in 0..100 {
        let frames = vec![Frame::Blocked(limit(&pair)); 100];
        as_client(&mut pair, n, &frames);
        assert!(pair.server().error().is_none());
    }
    assert_eq!(pair.server().stats().recv_window, window);
}

/// A report of being blocked at a limit never advertised is a lie, and
/// ends the session.
#[test]
fn blocked_beyond_the_advertised_limit_is_a_violation() {
    for lie in [1 << 40, limit(&greeted_pair()) + 1] {
        let mut pair = greeted_pair();
        as_client(&mut pair, 0, &[Frame::Blocked(lie)]);
        assert_eq!(
            pair.server().error(),
            Some(&SessionError::Protocol(Violation::BlockedBeyondLimit)),
            "BLOCKED({lie})"
        );
    }
}

/// The attack in full: reports that would grow the window to its cap,
/// then one byte at the far end of whatever window there is. The server
/// holds about a byte, not the window.
#[test]
fn one_byte_at_the_end_of_the_window_holds_one_byte() {
    let mut pair = greeted_pair();
    for n in 0..20 {
        let frames = vec![Frame::Blocked(limit(&pair)); 20];
        as_client(&mut pair, n, &frames);
    }
    let end = limit(&pair);
    let byte = Frame::Stream {
        offset: end - 1,
        fin: false,
        data: b"x",
    };
    as_client(&mut pair, 100, &[byte]);
    let s = pair.server().stats();
    assert!(pair.server().error().is_none());
    assert!(
        s.recv_buffered < 1024,
        "{} bytes held for one at offset {}",
        s.recv_buffered,
        end - 1
    );
}

/// Packet-sized pieces scattered over the window, holes between them: the
/// memory held follows the bytes sent, not the offsets they name.
#[test]
fn scattered_pieces_hold_memory_for_their_bytes() {
    let mut pair = greeted_pair();
    let piece = [7u8; 1000];
    let stride = (limit(&pair) - 100_000) / 100;
    for n in 0..100 {
        let frame = Frame::Stream {
            offset: 100_000 + n * stride,
            fin: false,
            data: &piece,
        };
        as_client(&mut pair, n, &[frame]);
    }
    let s = pair.server().stats();
    assert!(pair.server().error().is_none());
    assert!(
        s.recv_buffered <= 2 * 100 * 1000,
        "{} bytes held for 100 000",
        s.recv_buffered
    );
}

/// An honest transfer on a long path still autotunes: the receive window
/// grows from a small start to its cap as the data is delivered and read,
/// about once per round trip, and the memory held stays within about two
/// windows.
#[test]
fn an_honest_transfer_still_grows_the_window() {
    let mut c = SessionConfig::insecure();
    c.recv_window = 256 << 10;
    c.max_window = 8 << 20;
    let mut pair = Pair::new(c.clone(), c, 50 * MS);
    let total = 32 << 20;
    let chunk = vec![3u8; 1 << 20];
    let mut written = 0;
    let mut most_held = 0;
    let mut full_at = None;
    while pair.received.len() < total && pair.now < Instant::ZERO + Duration::from_secs(60) {
        if written < total {
            written += pair
                .client
                .write(&chunk[..chunk.len().min(total - written)]);
        }
        if !pair.step() {
            break;
        }
        if let Some(s) = &pair.server {
            let s = s.stats();
            most_held = most_held.max(s.recv_buffered);
            if s.recv_window == 8 << 20 && full_at.is_none() {
                full_at = Some(pair.now);
            }
        }
    }
    assert_eq!(pair.received.len(), total);
    let full_at = full_at.expect("the window reaches its cap");
    eprintln!(
        "window full at {:?}, done at {:?}, most held {most_held}",
        full_at, pair.now
    );
    // Five doublings at a round trip (100 ms) each, with slow start.
    assert!(full_at < Instant::ZERO + Duration::from_secs(2));
    assert!(most_held <= 2 * (8 << 20) + 65536, "{most_held} bytes held");
}
