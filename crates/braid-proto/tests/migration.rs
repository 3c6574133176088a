//! Where a server's connection sends, decided in the core (RFC 9000 §9.3):
//! a NAT rebinding moves the connection once the new address answers a
//! challenge; an attacker's copies from its own address, older or newer,
//! move nothing that the peer's own packets do not move back.

mod common;

use braid_proto::{Datagram, PathId, Session};
use common::{greeted_pair, Pair, MS};
use std::net::SocketAddr;

const P: PathId = PathId(0);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Every datagram the client sends next, in order.
fn from_client(pair: &mut Pair) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = pair.client.poll_transmit(pair.now, 1, &mut buf) {
        out.push(buf[..t.size].to_vec());
    }
    out
}

/// Hands `bytes` to the server as from `from`; returns where the core
/// says the connection now sends, if that changed.
fn to_server(pair: &mut Pair, from: SocketAddr, mut bytes: Vec<u8>) -> Option<SocketAddr> {
    let now = pair.now;
    let s: &mut Session = pair.server.as_mut().unwrap();
    s.handle_datagram_from(now, from, Datagram::new(now, P, &mut bytes))
        .moved_to
}

/// The server's next datagrams, each with where the core sends it.
fn from_server(pair: &mut Pair) -> Vec<(SocketAddr, Vec<u8>)> {
    let now = pair.now;
    let s = pair.server.as_mut().unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = s.poll_transmit(now, 1, &mut buf) {
        out.push((t.to.unwrap(), buf[..t.size].to_vec()));
    }
    out
}

fn to_client(pair: &mut Pair, mut bytes: Vec<u8>) {
    let now = pair.now;
    pair.client
        .handle_datagram(now, Datagram::new(now, P, &mut bytes));
}

fn setup() -> (Pair, SocketAddr) {
    let mut pair = greeted_pair();
    pair.in_flight.clear();
    let old = addr("198.18.0.1:4000");
    pair.server.as_mut().unwrap().set_remote(P, old);
    (pair, old)
}

#[test]
fn a_rebound_client_is_followed_once_its_new_address_answers() {
    let (mut pair, old) = setup();
    let new = addr("198.18.0.1:5555");
    pair.now += 10 * MS;
    pair.client.write(b"after the rebinding");
    let sent = from_client(&mut pair);
    assert!(!sent.is_empty());
    for d in sent {
        assert_eq!(to_server(&mut pair, new, d), None, "not before it answers");
    }
    // The server challenges the new address, and keeps sending to the old.
    let out = from_server(&mut pair);
    assert!(out.iter().any(|(to, _)| *to == new), "{out:?}");
    assert_eq!(pair.server().remote(P), Some(old));
    // The client answers from its new address.
    pair.now += 10 * MS;
    for (_, d) in out.into_iter().filter(|(to, _)| *to == new) {
        to_client(&mut pair, d);
    }
    let mut moved = None;
    for d in from_client(&mut pair) {
        moved = moved.or(to_server(&mut pair, new, d));
    }
    assert_eq!(moved, Some(new));
    assert_eq!(pair.server().remote(P), Some(new));
    // The old address is challenged in turn (it stays validated a while).
    let out = from_server(&mut pair);
    assert!(out.iter().any(|(to, _)| *to == old), "{out:?}");
}

#[test]
fn an_attackers_copies_from_its_own_address_move_nothing() {
    let (mut pair, old) = setup();
    let mallory = addr("203.0.113.66:1");
    pair.now += 10 * MS;
    pair.client.write(b"more");
    let sent = from_client(&mut pair);
    // The genuine datagrams arrive first; her copies, older, move nothing.
    for d in &sent {
        assert_eq!(to_server(&mut pair, old, d.clone()), None);
    }
    for d in &sent {
        assert_eq!(to_server(&mut pair, mallory, d.clone()), None);
    }
    assert!(from_server(&mut pair).iter().all(|(to, _)| *to != mallory));
    // Her copy racing ahead of a newer genuine one is challenged, but she
    // cannot answer; the client's next packet from its own address cancels it.
    pair.now += 10 * MS;
    pair.client.write(b"and more");
    let sent = from_client(&mut pair);
    assert_eq!(to_server(&mut pair, mallory, sent[0].clone()), None);
    assert_eq!(pair.server().candidate_address(P), Some(mallory));
    pair.client.write(b"and yet more");
    pair.now += 10 * MS;
    for d in from_client(&mut pair) {
        assert_eq!(to_server(&mut pair, old, d), None);
    }
    assert_eq!(pair.server().candidate_address(P), None);
    assert_eq!(pair.server().remote(P), Some(old));
}
