//! A rendezvous relay and three honest ends meeting there, with attackers
//! on three more addresses sending fuzz bytes and altered copies of what
//! they saw (to the relay, to the ends, or as if from the relay). Nothing
//! panics; every answer the relay sends is to the requester or to an
//! address that proved it receives, and no larger than the padded request;
//! the relay forwards only between such addresses; its tables stay within
//! their bounds; and an honest end sends an attacker the relay did not pair
//! it with at most 3x the bytes the attacker sent it.

use braid_proto::rendezvous::wire::{Message, REQUEST_LEN};
use braid_proto::rendezvous::{Client, Role, Server, ServerConfig, ServerStats};
use braid_proto::Instant;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

const HONEST: usize = 3;

struct Net {
    now: Instant,
    relay: SocketAddr,
    server: Server,
    addrs: Vec<SocketAddr>,
    ends: Vec<Client>,
    /// Addresses the relay sent a sealed answer to: they proved they receive.
    proved: HashSet<SocketAddr>,
    /// Everything sent so far, for the attackers to replay.
    seen: Vec<(SocketAddr, Vec<u8>)>,
    /// Bytes each attacker sent to honest ends, and received from them.
    to_ends: HashMap<SocketAddr, usize>,
    from_ends: HashMap<SocketAddr, usize>,
}

/// Input: repeated records of `source (1) | time step (1) | length (1) |
/// bytes` (the step and length are taken modulo small bounds). A record
/// whose first byte is odd replays a datagram seen before, altered by its
/// bytes; otherwise its bytes are sent as they are. Returns the relay's
/// counters at the end.
pub fn rendezvous(data: &[u8]) -> ServerStats {
    let cfg = ServerConfig {
        max_registrations: 4,
        max_pairs: 2,
        max_per_host: 2,
        ..ServerConfig::default()
    };
    let relay: SocketAddr = ([198, 51, 100, 9], 7000).into();
    let addrs: Vec<SocketAddr> = (0..6)
        .map(|i| SocketAddr::from(([198, 18, 0, i], 1000 + u16::from(i))))
        .collect();
    let handles = [[1u8; 32], [1u8; 32], [2u8; 32]];
    let roles = [Role::Register, Role::Join, Role::Join];
    let ends = (0..HONEST)
        .map(|i| {
            Client::new(
                Instant::ZERO,
                roles[i],
                handles[i],
                &[relay],
                i != 2,
                [i as u8; 32],
            )
        })
        .collect();
    let mut net = Net {
        now: Instant::ZERO,
        relay,
        server: Server::new(cfg, [3; 32]),
        addrs,
        ends,
        proved: HashSet::new(),
        seen: Vec::new(),
        to_ends: HashMap::new(),
        from_ends: HashMap::new(),
    };
    let mut rest = data;
    while let [src, step, len, tail @ ..] = rest {
        // Mostly short steps, sometimes past a cookie's or a pair's life.
        let ms = if *step == 0xff {
            40_000
        } else {
            u64::from(step % 32) * 10
        };
        net.now += Duration::from_millis(ms);
        let n = usize::from(len % 48).min(tail.len());
        let (body, next) = tail.split_at(n);
        rest = next;
        let attacker = net.addrs[HONEST + usize::from(*src / 2) % HONEST];
        let bytes = if src % 2 == 1 {
            altered(&net.seen, body)
        } else {
            body.to_vec()
        };
        // To the relay, to an honest end, or to an end as if from the relay.
        let byte = |i: usize| body.get(i).copied().unwrap_or(0);
        match byte(3) % 3 {
            0 => net.deliver(attacker, relay, bytes),
            1 => net.deliver(attacker, net.addrs[usize::from(byte(4)) % HONEST], bytes),
            _ => net.deliver(relay, net.addrs[usize::from(byte(4)) % HONEST], bytes),
        }
        net.run_ends();
        net.server.expire(net.now);
        let s = net.server.stats();
        assert!(s.registrations <= 4 && s.pairs <= 2, "{s:?}");
    }
    // An attacker the relay paired with an end is punched as a peer.
    for (a, &sent) in net
        .from_ends
        .iter()
        .filter(|(a, _)| !net.proved.contains(a))
    {
        let got = net.to_ends.get(a).copied().unwrap_or(0);
        assert!(sent <= 3 * got.max(1), "{a} sent {got}, was sent {sent}");
    }
    net.server.stats()
}

/// A datagram seen before, with some bytes flipped.
fn altered(seen: &[(SocketAddr, Vec<u8>)], body: &[u8]) -> Vec<u8> {
    let Some((_, d)) =
        seen.get(usize::from(body.first().copied().unwrap_or(0)) % seen.len().max(1))
    else {
        return body.to_vec();
    };
    let mut d = d.clone();
    for pair in body.get(1..).unwrap_or_default().chunks(2) {
        if let ([at, x], false) = (pair, d.is_empty()) {
            let i = usize::from(*at) % d.len();
            d[i] ^= x;
        }
    }
    d
}

impl Net {
    fn deliver(&mut self, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) {
        let mut queue = vec![(from, to, bytes)];
        while let Some((from, to, bytes)) = queue.pop() {
            self.seen.push((to, bytes.clone()));
            if self.seen.len() > 256 {
                self.seen.remove(0);
            }
            if to == self.relay {
                queue.extend(self.relay_gets(from, bytes));
            } else if let Some(i) = self.addrs[..HONEST].iter().position(|&a| a == to) {
                if !self.addrs[..HONEST].contains(&from) && from != self.relay {
                    *self.to_ends.entry(from).or_default() += bytes.len();
                }
                self.ends[i].handle(self.now, from, &bytes);
            }
        }
    }

    fn relay_gets(
        &mut self,
        from: SocketAddr,
        bytes: Vec<u8>,
    ) -> Vec<(SocketAddr, SocketAddr, Vec<u8>)> {
        let mut replies = Vec::new();
        let forward = self.server.handle(self.now, from, &bytes, &mut replies);
        let answered: usize = replies.iter().map(|(_, r)| r.len()).sum();
        if !replies.is_empty() {
            assert!(answered <= bytes.len(), "amplified");
            assert_eq!(bytes.len(), REQUEST_LEN, "answered an unpadded request");
        }
        for (to, r) in &replies {
            assert!(
                *to == from || self.proved.contains(to),
                "answered a stranger"
            );
            if matches!(Message::decode(r), Some(Message::Sealed(_))) {
                self.proved.insert(*to);
            }
        }
        let mut out: Vec<_> = replies
            .into_iter()
            .map(|(to, r)| (self.relay, to, r))
            .collect();
        if let Some(to) = forward {
            assert!(self.proved.contains(&from) && self.proved.contains(&to) && to != from);
            out.push((self.relay, to, bytes));
        }
        out
    }

    /// Each honest end sends what it has, and a data datagram through the relay.
    fn run_ends(&mut self) {
        for i in 0..HONEST {
            let from = self.addrs[i];
            while let Some((to, bytes)) = self.ends[i].poll_transmit(self.now) {
                if !self.addrs[..HONEST].contains(&to) && to != self.relay {
                    *self.from_ends.entry(to).or_default() += bytes.len();
                }
                self.deliver(from, to, bytes);
            }
            while self.ends[i].poll_event().is_some() {}
            self.deliver(from, self.relay, vec![8; 100]);
        }
    }
}
