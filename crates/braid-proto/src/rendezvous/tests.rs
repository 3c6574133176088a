//! The relay from an attacker's side: forged sources, squatting, floods,
//! third parties at the relay, and the bounds an operator sets.

use super::wire::{Message, Refusal, COOKIE_LEN, REQUEST_LEN};
use super::*;
use crate::Instant;
use std::net::SocketAddr;
use std::time::Duration;

type Replies = Vec<(SocketAddr, Vec<u8>)>;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn at(ms: u64) -> Instant {
    Instant::from_nanos(ms * 1_000_000)
}

/// Sends `m` from `from`, echoing a cookie if the relay asks for one;
/// returns the answers to the final request.
fn request(s: &mut Server, now: Instant, from: SocketAddr, m: Message) -> Replies {
    let mut replies = Vec::new();
    assert_eq!(s.handle(now, from, &m.encode(), &mut replies), None);
    let Some((_, first)) = replies.first() else {
        return replies;
    };
    let Some(Message::Cookie(cookie)) = Message::decode(first) else {
        return replies;
    };
    let m = match m {
        Message::Register { handle, token, .. } => Message::Register {
            handle,
            cookie,
            token,
        },
        Message::Join { handle, token, .. } => Message::Join {
            handle,
            cookie,
            token,
        },
        other => other,
    };
    let mut replies = Vec::new();
    s.handle(now, from, &m.encode(), &mut replies);
    replies
}

fn register(handle: Handle) -> Message {
    Message::Register {
        handle,
        cookie: [0; COOKIE_LEN],
        token: [0; 16],
    }
}

fn join(handle: Handle) -> Message {
    Message::Join {
        handle,
        cookie: [0; COOKIE_LEN],
        token: [0; 16],
    }
}

fn decode(r: &[u8]) -> Message {
    Message::decode(r).expect("a rendezvous message")
}

#[test]
fn two_peers_meet_learn_each_others_address_and_are_forwarded_both_ways() {
    let mut s = Server::new(ServerConfig::default(), [1; 32]);
    let (recv, send) = (addr("198.18.1.1:40000"), addr("198.18.2.1:50000"));
    let h = code_handle("417-amber-walrus");
    let r = request(&mut s, at(0), recv, register(h));
    assert_eq!(
        r,
        vec![(
            recv,
            Message::Registered {
                reflexive: recv,
                lifetime_s: 30
            }
            .encode()
        )]
    );
    let r = request(&mut s, at(10), send, join(h));
    assert_eq!(r.len(), 2);
    let (
        Message::Paired {
            reflexive: a,
            peer: pa,
            token: ta,
        },
        Message::Paired {
            reflexive: b,
            peer: pb,
            token: tb,
        },
    ) = (decode(&r[0].1), decode(&r[1].1))
    else {
        panic!("{r:?}")
    };
    assert_eq!((r[0].0, a, pa), (send, send, recv));
    assert_eq!((r[1].0, b, pb), (recv, recv, send));
    assert_eq!(ta, tb);
    let mut none = Vec::new();
    assert_eq!(s.handle(at(20), send, &[8u8; 1400], &mut none), Some(recv));
    assert_eq!(s.handle(at(21), recv, &[8u8; 60], &mut none), Some(send));
    assert!(none.is_empty());
    assert_eq!(s.stats().forwarded_bytes, 1460);
}

#[test]
fn nothing_is_kept_for_an_address_that_has_not_echoed_a_cookie() {
    let mut s = Server::new(ServerConfig::default(), [2; 32]);
    let (mut sent, mut answered) = (0, 0);
    for i in 0..5_000u32 {
        let from = SocketAddr::from(([198, 18, (i >> 8) as u8, i as u8], 1000 + (i % 7) as u16));
        for m in [register([i as u8; 32]), join([i as u8; 32])] {
            let bytes = m.encode();
            let mut replies = Vec::new();
            s.handle(at(u64::from(i)), from, &bytes, &mut replies);
            sent += bytes.len();
            for (to, r) in &replies {
                assert_eq!(*to, from, "answers go only to the source");
                assert!(matches!(decode(r), Message::Cookie(_)));
                answered += r.len();
            }
        }
    }
    assert_eq!(s.stats().registrations, 0);
    assert_eq!(s.stats().pairs, 0);
    assert!(answered * 2 < sent, "answered {answered} bytes for {sent}");
}

#[test]
fn a_cookie_works_only_for_its_own_address_and_for_a_short_time() {
    let mut s = Server::new(ServerConfig::default(), [3; 32]);
    let (a, b) = (addr("198.18.0.5:1"), addr("198.18.0.6:1"));
    let mut replies = Vec::new();
    s.handle(at(0), a, &register([9; 32]).encode(), &mut replies);
    let Message::Cookie(cookie) = decode(&replies[0].1) else {
        panic!()
    };
    let with_cookie = Message::Register {
        handle: [9; 32],
        cookie,
        token: [0; 16],
    }
    .encode();
    for (when, from) in [(at(0), b), (at(60_000), a)] {
        let mut replies = Vec::new();
        s.handle(when, from, &with_cookie, &mut replies);
        assert!(matches!(decode(&replies[0].1), Message::Cookie(_)));
    }
    assert_eq!(s.stats().registrations, 0);
}

#[test]
fn every_answer_is_smaller_than_the_request_that_caused_it() {
    let mut s = Server::new(ServerConfig::default(), [4; 32]);
    let h = key_handle(&crate::Keypair::generate([5; 32]).public());
    let recv = addr("198.18.1.1:1");
    for (i, (from, m)) in [
        (recv, register(h)),
        (addr("198.18.2.2:2"), join(h)),
        (addr("198.18.3.3:3"), join(h)),
        (addr("198.18.4.4:4"), join([0; 32])),
    ]
    .into_iter()
    .enumerate()
    {
        let r = request(&mut s, at(i as u64), from, m);
        let total: usize = r.iter().map(|(_, b)| b.len()).sum();
        assert!(total <= REQUEST_LEN, "{total} bytes answered");
    }
}

#[test]
fn a_paired_handle_cannot_be_joined_or_taken_by_a_third_party() {
    let mut s = Server::new(ServerConfig::default(), [6; 32]);
    let h = code_handle("5-acid-acorn");
    let (recv, send, mallory) = (
        addr("198.18.1.1:1"),
        addr("198.18.2.2:2"),
        addr("203.0.113.9:9"),
    );
    request(&mut s, at(0), recv, register(h));
    request(&mut s, at(1), send, join(h));
    for m in [join(h), register(h)] {
        let r = request(&mut s, at(2), mallory, m);
        assert_eq!(decode(&r[0].1), Message::Refused(Refusal::Busy));
    }
    // Mallory's datagrams go nowhere; the pair's still go to each other.
    let mut none = Vec::new();
    assert_eq!(s.handle(at(3), mallory, &[8u8; 100], &mut none), None);
    assert_eq!(s.handle(at(3), send, &[8u8; 100], &mut none), Some(recv));
    // Nobody can join a handle nobody registered.
    let r = request(&mut s, at(4), mallory, join([7; 32]));
    assert_eq!(decode(&r[0].1), Message::Refused(Refusal::Unknown));
    // Answers and punches sent to the relay are dropped, not forwarded.
    let punch = Message::Punch {
        token: [0; 16],
        answer: false,
    };
    assert_eq!(s.handle(at(5), send, &punch.encode(), &mut none), None);
    assert!(none.is_empty());
}

#[test]
fn registrations_and_pairs_are_bounded_and_lapse() {
    let cfg = ServerConfig {
        max_registrations: 10,
        max_pairs: 3,
        ..ServerConfig::default()
    };
    let mut s = Server::new(cfg, [7; 32]);
    for i in 0..20u8 {
        let r = request(
            &mut s,
            at(0),
            addr(&format!("198.18.1.{i}:1")),
            register([i; 32]),
        );
        let want_full = i >= 10;
        assert_eq!(
            decode(&r[0].1) == Message::Refused(Refusal::Full),
            want_full,
            "registration {i}"
        );
    }
    for i in 0..5u8 {
        let r = request(
            &mut s,
            at(1),
            addr(&format!("198.18.2.{i}:1")),
            join([i; 32]),
        );
        let got = decode(&r[0].1);
        if i < 3 {
            assert!(matches!(got, Message::Paired { .. }), "{got:?}");
        } else {
            assert_eq!(got, Message::Refused(Refusal::Full));
        }
    }
    assert_eq!((s.stats().registrations, s.stats().pairs), (10, 3));
    // 31 s later the unpaired registrations lapsed and the idle pairs ended.
    s.expire(at(31_000));
    assert_eq!((s.stats().registrations, s.stats().pairs), (3, 0));
    s.expire(at(62_000));
    assert_eq!(s.stats().registrations, 0);
}

#[test]
fn a_pair_is_held_to_its_rate_and_quota() {
    let cfg = ServerConfig {
        pair_rate: Some(1_000_000),
        pair_quota: Some(2_000_000),
        ..ServerConfig::default()
    };
    let mut s = Server::new(cfg, [8; 32]);
    let (recv, send) = (addr("198.18.1.1:1"), addr("198.18.2.2:2"));
    request(&mut s, at(0), recv, register([1; 32]));
    request(&mut s, at(0), send, join([1; 32]));
    // Offered at 10 MB/s for one second: about 1 MB/s (plus the burst) goes.
    let mut forwarded = 0u64;
    for i in 0..10_000u64 {
        let now = Instant::from_nanos(i * 100_000);
        if s.handle(now, send, &[8u8; 1000], &mut Vec::new()).is_some() {
            forwarded += 1000;
        }
    }
    assert!(
        (1_000_000..1_200_000).contains(&forwarded),
        "forwarded {forwarded} bytes"
    );
    // Past the quota the pair ends.
    let mut now = at(1_000);
    while s.stats().pairs == 1 {
        now += Duration::from_millis(1);
        s.handle(now, recv, &[8u8; 1000], &mut Vec::new());
        assert!(now < at(5_000), "the quota never ended the pair");
    }
    assert_eq!(s.handle(now, send, &[8u8; 10], &mut Vec::new()), None);
}

#[test]
fn a_lost_pairing_answer_is_repeated_and_a_lapsed_registration_can_be_taken() {
    let mut s = Server::new(ServerConfig::default(), [9; 32]);
    let (recv, send, other) = (
        addr("198.18.1.1:1"),
        addr("198.18.2.2:2"),
        addr("198.18.3.3:3"),
    );
    request(&mut s, at(0), recv, register([1; 32]));
    let first = request(&mut s, at(1), send, join([1; 32]));
    let again = request(&mut s, at(2), send, join([1; 32]));
    assert_eq!(again, vec![first[0].clone()]);
    // Another address takes an unpaired handle only once it lapsed.
    request(&mut s, at(3), other, register([2; 32]));
    let r = request(&mut s, at(4), recv, register([2; 32]));
    assert_eq!(decode(&r[0].1), Message::Refused(Refusal::Busy));
    let r = request(&mut s, at(40_000), recv, register([2; 32]));
    assert!(matches!(decode(&r[0].1), Message::Registered { .. }));
}

#[test]
fn handles_name_the_nameplate_only_and_differ_by_kind() {
    assert_eq!(
        code_handle("417-amber-walrus"),
        code_handle("417 Cobalt Comet")
    );
    assert_ne!(
        code_handle("417-amber-walrus"),
        code_handle("418-amber-walrus")
    );
    let k = crate::Keypair::generate([1; 32]).public();
    assert_ne!(key_handle(&k), code_handle("417-x-y"));
}

#[test]
fn an_end_whose_nat_rebound_moves_only_with_its_pairs_token() {
    let mut s = Server::new(ServerConfig::default(), [10; 32]);
    let h = code_handle("9-acid-acorn");
    let (recv, send) = (addr("198.18.1.1:1000"), addr("198.18.2.2:2000"));
    request(&mut s, at(0), recv, register(h));
    let r = request(&mut s, at(1), send, join(h));
    let Message::Paired { token, .. } = decode(&r[0].1) else {
        panic!()
    };
    // The sender's NAT gives it a new port; a stranger tries the same
    // move without the token, then with a wrong one.
    let (moved, mallory) = (addr("198.18.2.2:2001"), addr("203.0.113.7:7"));
    for (from, t) in [(mallory, [0; 16]), (mallory, [1; 16])] {
        let m = Message::Join {
            handle: h,
            cookie: [0; COOKIE_LEN],
            token: t,
        };
        let r = request(&mut s, at(2), from, m);
        assert_eq!(decode(&r[0].1), Message::Refused(Refusal::Busy));
    }
    let m = Message::Join {
        handle: h,
        cookie: [0; COOKIE_LEN],
        token,
    };
    let r = request(&mut s, at(3), moved, m);
    assert_eq!(
        decode(&r[0].1),
        Message::Paired {
            reflexive: moved,
            peer: recv,
            token
        }
    );
    // The receiver is told where the sender went, to punch it there.
    assert_eq!(r[1].0, recv);
    assert_eq!(
        decode(&r[1].1),
        Message::Paired {
            reflexive: recv,
            peer: moved,
            token
        }
    );
    assert_eq!(s.stats().rebound, 1);
    let mut none = Vec::new();
    assert_eq!(s.handle(at(4), recv, &[8; 100], &mut none), Some(moved));
    assert_eq!(s.handle(at(4), send, &[8; 100], &mut none), None);
    // The receiver moves too, by its refresh.
    let recv2 = addr("198.18.1.1:1001");
    let m = Message::Register {
        handle: h,
        cookie: [0; COOKIE_LEN],
        token,
    };
    request(&mut s, at(5), recv2, m);
    assert_eq!(s.handle(at(6), moved, &[8; 100], &mut none), Some(recv2));
}

#[test]
fn a_dual_stack_relay_reports_ipv4_clients_as_ipv4() {
    let mut s = Server::new(ServerConfig::default(), [11; 32]);
    let (recv, send) = (
        addr("[::ffff:198.18.1.1]:1000"),
        addr("[::ffff:198.18.2.2]:2000"),
    );
    let r = request(&mut s, at(0), recv, register([1; 32]));
    assert!(
        matches!(decode(&r[0].1), Message::Registered { reflexive, .. } if reflexive == addr("198.18.1.1:1000"))
    );
    let r = request(&mut s, at(1), send, join([1; 32]));
    let Message::Paired {
        reflexive, peer, ..
    } = decode(&r[0].1)
    else {
        panic!()
    };
    assert_eq!(
        (reflexive, peer),
        (addr("198.18.2.2:2000"), addr("198.18.1.1:1000"))
    );
    // Forwarding still uses the socket's own form.
    assert_eq!(s.handle(at(2), send, &[8; 50], &mut Vec::new()), Some(recv));
}
