//! The relay and the meeting from an attacker's side: one host flooding
//! the tables, squatting a handle, an observer that sees every datagram,
//! forged answers, and what each may make an honest end send.

use super::tests::{addr, Net, Seen};
use super::wire::{Message, Request, Sealed, COOKIE_LEN, HELLO_LEN, KEYED_LEN, MAC_LEN};
use super::*;
use crate::Instant;
use std::net::SocketAddr;
use std::time::Duration;

/// A well-formed request from an attacker's own socket, with the cookie
/// the relay gave it.
fn request(
    net: &mut Net,
    from: SocketAddr,
    handle: Handle,
    register: bool,
    hello: u8,
) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut req = Request {
        register,
        handle,
        cookie: [0; COOKIE_LEN],
        nonce: 1,
        flags: 0,
        hello: hello_of(hello),
        candidates: Vec::new(),
        proof: [0; MAC_LEN],
    };
    let mut replies = Vec::new();
    net.server
        .handle(net.now, from, &req.encode(), &mut replies);
    if let Some(Message::Cookie { cookie, .. }) =
        replies.first().and_then(|(_, r)| Message::decode(r))
    {
        req.cookie = cookie;
        replies.clear();
        net.server
            .handle(net.now, from, &req.encode(), &mut replies);
    }
    replies
}

/// A valid Noise NN first message (a client's hello), one per `seed`.
fn hello_of(seed: u8) -> [u8; HELLO_LEN] {
    let c = Client::new(
        Instant::ZERO,
        Role::Join,
        [0; 32],
        &[addr("192.0.2.1:1")],
        true,
        [seed; 32],
    );
    let mut c = c;
    let (_, bytes) = c.poll_transmit(Instant::ZERO).unwrap();
    let Some(Message::Request(r)) = Message::decode(&bytes) else {
        unreachable!()
    };
    r.hello
}

fn sealed_ok(replies: &[(SocketAddr, Vec<u8>)]) -> bool {
    replies
        .iter()
        .any(|(_, r)| matches!(Message::decode(r), Some(Message::Sealed(_))))
}

#[test]
fn one_host_takes_at_most_its_share_of_code_numbers_and_of_the_table() {
    let mut net = Net::new(ServerConfig::default());
    // Every code number from one host (any port), then 10,500 more handles.
    let mut held = 0;
    for n in 0..1000u32 {
        let from = SocketAddr::from(([203, 0, 113, 66], 1000 + n as u16));
        let h = code_handle(&format!("{n}-x-y"));
        held += usize::from(sealed_ok(&request(&mut net, from, h, true, 1)));
    }
    for n in 0..10_500u32 {
        let from = addr("203.0.113.66:9");
        let mut h = [0u8; 32];
        h[..4].copy_from_slice(&n.to_be_bytes());
        held += usize::from(sealed_ok(&request(&mut net, from, h, true, 1)));
    }
    assert_eq!(held, ServerConfig::default().max_per_host);
    // A real receiver with a number the flood tried registers, and its
    // sender pairs with it.
    let h = code_handle("417-amber-walrus");
    let r = net.add("198.18.1.1:1000", Role::Register, h, true);
    let s = net.add("198.18.2.2:2000", Role::Join, h, true);
    net.run(Duration::from_millis(500));
    assert!(net.paired_with(s, Some(net.ends[r].addr)).is_some());
    assert!(net.refusals(r).is_empty());
}

#[test]
fn refusals_are_counted_by_cause() {
    let cfg = ServerConfig {
        max_registrations: 2,
        max_per_host: 1,
        ..ServerConfig::default()
    };
    let mut net = Net::new(cfg);
    let (a, b, c) = (
        addr("198.18.1.1:1"),
        addr("198.18.2.2:2"),
        addr("198.18.3.3:3"),
    );
    let refused = |replies: &[(SocketAddr, Vec<u8>)]| match Message::decode(&replies[0].1) {
        Some(Message::Refused { why, .. }) => Some(why),
        _ => None,
    };
    // Nobody waits under [1; 32] yet.
    assert_eq!(
        refused(&request(&mut net, a, [1; 32], false, 1)),
        Some(Refusal::Unknown)
    );
    assert!(sealed_ok(&request(&mut net, a, [1; 32], true, 1)));
    // Host a holds its one registration.
    assert_eq!(
        refused(&request(&mut net, a, [2; 32], true, 2)),
        Some(Refusal::Full)
    );
    // a holds [1; 32].
    assert_eq!(
        refused(&request(&mut net, b, [1; 32], true, 3)),
        Some(Refusal::Busy)
    );
    assert!(sealed_ok(&request(&mut net, b, [2; 32], true, 4)));
    // The relay holds its two registrations.
    assert_eq!(
        refused(&request(&mut net, c, [3; 32], true, 5)),
        Some(Refusal::Full)
    );
    let s = net.server.stats();
    let by = Refusals {
        unknown: 1,
        busy: 1,
        host_full: 1,
        relay_full: 1,
    };
    assert_eq!((s.refused, s.refused_by), (4, by));
}

#[test]
fn a_squatter_that_joins_first_delays_the_real_sender_by_at_most_two_seconds() {
    let mut net = Net::new(ServerConfig::default());
    let h = key_handle(&crate::Keypair::generate([3; 32]).public());
    let r = net.add("198.18.1.1:1000", Role::Register, h, true);
    net.run(Duration::from_millis(50));
    // Mallory joins first and keeps the pair busy with a datagram every
    // 5 s through it (the receiver drops them: they open nothing).
    let mallory = addr("203.0.113.66:4000");
    assert!(sealed_ok(&request(&mut net, mallory, h, false, 9)));
    let start = net.now;
    let s = net.add("198.18.2.2:2000", Role::Join, h, true);
    let mut answered = false;
    for _ in 0..40 {
        if (net.now.as_nanos() / 1_000_000).is_multiple_of(5_000) {
            net.server
                .handle(net.now, mallory, &[1u8; 43], &mut Vec::new());
        }
        // Mallory asks again and again, from her own host.
        request(&mut net, mallory, h, false, 9);
        net.run(Duration::from_millis(100));
        if !answered && net.paired_with(s, Some(net.ends[r].addr)).is_some() {
            // The receiver answers the real sender's handshake.
            answered = net.forward_from(r) == Some(net.ends[s].addr);
        }
    }
    assert!(answered);
    let paired = net
        .paired_with(s, Some(net.ends[r].addr))
        .expect("the real sender was paired");
    assert!(
        paired.saturating_duration_since(start) <= Duration::from_secs(2),
        "delayed {:?}",
        paired.saturating_duration_since(start)
    );
    // Once the receiver answered through the pair, nobody can take it.
    let again = request(&mut net, addr("203.0.113.77:1"), h, false, 10);
    assert!(matches!(
        Message::decode(&again[0].1),
        Some(Message::Refused {
            why: Refusal::Busy,
            ..
        })
    ));
    assert_eq!(net.server.stats().replaced, 1);
}

#[test]
fn with_no_direct_the_peer_is_never_told_our_address() {
    let mut net = Net::new(ServerConfig::default());
    let h = [6; 32];
    let r = net.add("198.18.1.1:1000", Role::Register, h, false);
    net.run(Duration::from_millis(50));
    let squatter = net.add("203.0.113.66:4000", Role::Join, h, true);
    net.run(Duration::from_millis(500));
    assert!(net.paired_with(squatter, None).is_some());
    // Nothing on the wire to her carries the receiver's address, in any form.
    let ip = [198u8, 18, 1, 1];
    let to_her: Vec<&Seen> = net
        .wire
        .iter()
        .filter(|w| w.to == net.ends[squatter].addr)
        .collect();
    assert!(!to_her.is_empty());
    assert!(to_her.iter().all(|w| !w.bytes.windows(4).any(|x| x == ip)));
    assert!(net.reachable(r).is_empty());
}

#[test]
fn an_observer_of_every_datagram_moves_no_end_and_learns_no_secret() {
    let mut net = Net::new(ServerConfig::default());
    let h = [7; 32];
    let (r, s) = (
        net.add("198.18.1.1:1000", Role::Register, h, true),
        net.add("198.18.2.2:2000", Role::Join, h, true),
    );
    net.run(Duration::from_secs(5));
    // The session runs through the relay both ways.
    assert_eq!(net.forward_from(s), Some(net.ends[r].addr));
    assert_eq!(net.forward_from(r), Some(net.ends[s].addr));
    // Eve, on path, replays everything she saw from her own address, as
    // sent and with a cookie for her address in place of the captured one.
    let eve = addr("203.0.113.5:5000");
    net.outsiders.push(eve);
    let mut own_cookie = [0u8; COOKIE_LEN];
    for round in 0..3 {
        let seen: Vec<Seen> = net.wire.clone();
        for w in seen.iter().filter(|w| w.from != eve) {
            let mut bytes = w.bytes.clone();
            if let Some(Message::Request(mut req)) = Message::decode(&bytes) {
                if round > 0 {
                    req.cookie = own_cookie;
                    bytes = req.encode();
                }
            }
            let to = if w.to == net.relay { net.relay } else { w.to };
            net.send(eve, to, bytes);
        }
        if let Some(c) = net
            .wire
            .iter()
            .rev()
            .find_map(|w| match Message::decode(&w.bytes) {
                Some(Message::Cookie { cookie, .. }) if w.to == eve => Some(cookie),
                _ => None,
            })
        {
            own_cookie = c;
        }
        net.run(Duration::from_secs(1));
    }
    let st = net.server.stats();
    assert_eq!(st.rebound, 0, "{st:?}");
    assert_eq!(net.forward_from(r), Some(net.ends[s].addr));
    assert_eq!(net.forward_from(s), Some(net.ends[r].addr));
    assert_eq!(
        net.server.handle(net.now, eve, &[1; 100], &mut Vec::new()),
        None
    );
    assert!(!net.reachable(r).contains(&eve) && !net.reachable(s).contains(&eve));
    // The pair's secret never crossed the wire in clear.
    let token = net.server.pair_token(&h).expect("paired");
    assert!(net
        .wire
        .iter()
        .all(|w| !w.bytes.windows(16).any(|x| x == token)));
}

#[test]
fn forged_answers_from_the_relays_address_are_not_believed() {
    let mut net = Net::new(ServerConfig::default());
    let h = [8; 32];
    let r = net.add("198.18.1.1:1000", Role::Register, h, true);
    net.run(Duration::from_millis(300));
    let victim = addr("192.0.2.99:53");
    net.outsiders.push(victim);
    let before = net.ends[r].events.len();
    let relay = net.relay;
    // Off path: she guesses nonces. On path: she echoes the real one but
    // cannot seal (nor key a client already keyed).
    let nonce = net
        .wire
        .iter()
        .rev()
        .find_map(|w| match Message::decode(&w.bytes) {
            Some(Message::Request(q)) if w.to == relay => Some(q.nonce),
            _ => None,
        })
        .unwrap();
    for echo in [1, 2, nonce] {
        for keyed in [None, Some([5; KEYED_LEN])] {
            let forged = Message::Sealed(Sealed {
                echo,
                counter: 9,
                keyed,
                body: vec![0; 70],
            });
            net.send(relay, net.ends[r].addr, forged.encode());
        }
        let refused = Message::Refused {
            echo,
            why: Refusal::Busy,
        };
        if echo != nonce {
            net.send(relay, net.ends[r].addr, refused.encode());
        }
    }
    net.run(Duration::from_secs(5));
    let believed: Vec<_> = net.ends[r].events[before..]
        .iter()
        .filter(|(_, e)| !matches!(e, Event::Registered { .. }))
        .collect();
    assert!(believed.is_empty(), "{believed:?}");
    assert!(net.wire.iter().all(|w| w.to != victim));
}
