//! No number from the peer is taken on trust: ACKs of packets never sent or
//! deliberately skipped, cumulative points past what was sent, and stream
//! data that breaks flow control each end the session with a violation.
//!
//! The pairs run unprotected so that the test can speak as the peer: these
//! are the attacks a malicious peer (not a third party) can make.

mod common;

use braid_proto::wire::{clear_datagram, AckFrame, Frame, Header};
use braid_proto::{PathId, SessionConfig, SessionError, Violation};
use common::{Pair, MS};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// An unprotected pair whose client is sending, and the largest packet
/// number the client has sent on path 0.
fn sending_pair() -> (Pair, Rc<Cell<u64>>) {
    let mut pair = Pair::new(
        SessionConfig::insecure(),
        SessionConfig::insecure(),
        10 * MS,
    );
    let largest = Rc::new(Cell::new(0));
    let seen = largest.clone();
    pair.drop = Box::new(move |to_server, _, d| {
        if to_server {
            let (h, _) = Header::decode(d).unwrap();
            seen.set(seen.get().max(h.packet_number));
        }
        false
    });
    let data = vec![7u8; 4 << 20];
    pair.client.write(&data);
    pair.drive_until(Duration::from_secs(1), |p| p.received.len() > 2 << 20);
    assert!(pair.client.error().is_none());
    (pair, largest)
}

/// An unprotected datagram of session 42, path 0, with `frames`.
fn datagram(packet_number: u64, frames: &[Frame<'_>]) -> Vec<u8> {
    clear_datagram(42, PathId(0), packet_number, frames)
}

/// A packet number far ahead of any the pair has used, yet within the
/// half of the 32-bit window a truncated number is read as ahead in.
const FRESH: u64 = 1 << 30;

/// Delivers `frames` to the client as if the server had sent them.
fn as_server(pair: &mut Pair, frames: &[Frame<'_>]) {
    let d = datagram(FRESH, frames);
    pair.seq += 1;
    pair.in_flight
        .insert((pair.now, pair.seq), (false, PathId(0), d));
    pair.drive_until(Duration::from_secs(30), |p| p.client.error().is_some());
}

fn ack(ranges: Vec<(u64, u64)>, cumulative: u64, fin: bool) -> Frame<'static> {
    Frame::Ack(AckFrame {
        ranges,
        ack_delay_us: 0,
        cumulative,
        fin,
        max_data: 1 << 30,
        ce_count: 0,
        rx_timestamp_us: 0,
        rx_times: Vec::new(),
        short_headers: false,
    })
}

#[test]
fn acknowledging_everything_sent_is_caught_by_a_skipped_number() {
    let (mut pair, largest) = sending_pair();
    assert!(largest.get() > 1000, "{}", largest.get());
    as_server(&mut pair, &[ack(vec![(0, largest.get())], 0, false)]);
    assert_eq!(
        pair.client.error(),
        Some(&SessionError::Protocol(Violation::AckSkipped))
    );
}

#[test]
fn acknowledging_a_packet_never_sent_is_a_violation() {
    let (mut pair, largest) = sending_pair();
    let ahead = largest.get() + 1000;
    as_server(&mut pair, &[ack(vec![(ahead, ahead)], 0, false)]);
    assert_eq!(
        pair.client.error(),
        Some(&SessionError::Protocol(Violation::AckNeverSent))
    );
}

#[test]
fn a_cumulative_point_or_fin_never_sent_is_a_violation() {
    for (cumulative, fin) in [(1 << 30, false), (0, true)] {
        let (mut pair, _) = sending_pair();
        as_server(&mut pair, &[ack(Vec::new(), cumulative, fin)]);
        assert_eq!(
            pair.client.error(),
            Some(&SessionError::Protocol(Violation::AckDataNeverSent)),
            "cumulative {cumulative}, fin {fin}"
        );
    }
}

/// A client that scatters one-byte pieces over the server's window: the
/// server refuses it once the pieces outnumber what an honest sender makes.
#[test]
fn a_flood_of_one_byte_pieces_ends_the_session() {
    let mut pair = common::greeted_pair();
    for i in 0..20_000u64 {
        // A STREAM frame ends its datagram: one piece each.
        let piece = Frame::Stream {
            offset: 100 + 2 * i,
            fin: false,
            data: b"x",
        };
        let d = datagram(FRESH + i, &[piece]);
        pair.seq += 1;
        pair.in_flight
            .insert((pair.now, pair.seq), (true, PathId(0), d));
        pair.step();
        if pair.server().error().is_some() {
            break;
        }
    }
    assert_eq!(
        pair.server().error(),
        Some(&SessionError::Protocol(Violation::TooFragmented))
    );
}

/// A copy of an ACK (PATH_ACK, see `session::ack_copy`) is checked as the
/// ACK it copies is.
#[test]
fn a_copied_ack_of_a_packet_never_sent_is_a_violation() {
    let (mut pair, largest) = sending_pair();
    let ahead = largest.get() + 1000;
    let Frame::Ack(copy) = ack(vec![(ahead, ahead)], 0, false) else {
        unreachable!()
    };
    as_server(
        &mut pair,
        &[Frame::PathAck {
            path: PathId(0),
            ack: copy,
        }],
    );
    assert_eq!(
        pair.client.error(),
        Some(&SessionError::Protocol(Violation::AckNeverSent))
    );
}

/// A copy naming a connection the session does not have acknowledges
/// nothing and ends nothing.
#[test]
fn a_copied_ack_for_an_unknown_connection_is_ignored() {
    let (mut pair, largest) = sending_pair();
    let Frame::Ack(copy) = ack(vec![(0, largest.get() + 1000)], 1 << 30, true) else {
        unreachable!()
    };
    as_server(
        &mut pair,
        &[Frame::PathAck {
            path: PathId(7),
            ack: copy,
        }],
    );
    // Taken as an ACK of path 0, its cumulative point and FIN, never
    // sent, would be a violation.
    assert!(pair.client.error().is_none(), "{:?}", pair.client.error());
}
