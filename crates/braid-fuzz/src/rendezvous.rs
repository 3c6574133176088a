//! The rendezvous relay and a hole puncher fed datagrams from a handful of
//! addresses: nothing panics, every answer is to the sender or to an
//! address that proved it receives, their bytes never exceed the
//! request's, and the tables stay within their bounds.

use braid_proto::rendezvous::wire::{Message, REQUEST_LEN};
use braid_proto::rendezvous::{Puncher, Server, ServerConfig, ServerStats};
use braid_proto::Instant;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

/// Input: repeated records of `source (1) | time step (1) | length (1) |
/// bytes` (the step and length are taken modulo small bounds); a record whose first byte is odd is made a well-formed request
/// from its bytes, so that the fuzzer reaches pairing without learning the
/// cookie MAC. Returns the relay's counters at the end.
pub fn rendezvous(data: &[u8]) -> ServerStats {
    let cfg = ServerConfig {
        max_registrations: 4,
        max_pairs: 2,
        ..ServerConfig::default()
    };
    let mut server = Server::new(cfg, [3; 32]);
    let mut puncher = Puncher::default();
    let addrs: Vec<SocketAddr> = (0..6)
        .map(|i| SocketAddr::from(([198, 18, 0, i], 1000 + u16::from(i))))
        .collect();
    // Addresses that sent a request with a cookie the relay accepted.
    let mut proved: HashSet<SocketAddr> = HashSet::new();
    let mut cookies = std::collections::HashMap::new();
    let mut now = Instant::ZERO;
    let mut rest = data;
    while let [src, step, len, tail @ ..] = rest {
        let from = addrs[usize::from(*src / 2) % addrs.len()];
        // Mostly short steps, sometimes past a cookie's or a pair's life.
        let ms = if *step == 0xff {
            40_000
        } else {
            u64::from(step % 32) * 10
        };
        now += Duration::from_millis(ms);
        let n = usize::from(len % 48).min(tail.len());
        let (body, next) = tail.split_at(n);
        rest = next;
        let datagram = if src % 2 == 1 {
            request(body, cookies.get(&from).copied())
        } else {
            body.to_vec()
        };
        let mut replies = Vec::new();
        let forward = server.handle(now, from, &datagram, &mut replies);
        let answered: usize = replies.iter().map(|(_, r)| r.len()).sum();
        if !replies.is_empty() {
            assert!(answered <= datagram.len().max(REQUEST_LEN), "amplified");
            assert!(
                datagram.len() >= REQUEST_LEN,
                "answered an unpadded request"
            );
        }
        for (to, r) in &replies {
            assert!(*to == from || proved.contains(to), "answered a stranger");
            match Message::decode(r) {
                Some(Message::Cookie(c)) => {
                    cookies.insert(from, c);
                }
                Some(Message::Registered { .. } | Message::Paired { .. }) => {
                    proved.insert(*to);
                }
                _ => {}
            }
        }
        if let Some(to) = forward {
            assert!(proved.contains(&from) && proved.contains(&to) && to != from);
        }
        if let Some(Message::Punch { token, answer }) = Message::decode(&datagram) {
            puncher.handle(now, from, token, answer);
        }
        if let Some(Message::Paired { peer, token, .. }) =
            replies.first().and_then(|(_, r)| Message::decode(r))
        {
            puncher.add_peer(now, peer, token);
        }
        while puncher.poll_transmit(now).is_some() {}
        while puncher.poll_reachable().is_some() {}
        server.expire(now);
        let s = server.stats();
        assert!(s.registrations <= 4 && s.pairs <= 2, "{s:?}");
    }
    server.stats()
}

/// A request made from fuzz bytes: REGISTER or JOIN, a handle from the
/// first bytes (few distinct ones, so pairs form), the cookie the relay
/// gave this address if any, and a token.
fn request(
    body: &[u8],
    cookie: Option<[u8; braid_proto::rendezvous::wire::COOKIE_LEN]>,
) -> Vec<u8> {
    let byte = |i: usize| body.get(i).copied().unwrap_or(0);
    let handle = [byte(0) % 3; 32];
    let cookie = cookie.unwrap_or([0; braid_proto::rendezvous::wire::COOKIE_LEN]);
    let token = [byte(2) % 2; 16];
    let m = if byte(1) % 2 == 0 {
        Message::Register {
            handle,
            cookie,
            token,
        }
    } else {
        Message::Join {
            handle,
            cookie,
            token,
        }
    };
    m.encode()
}
