//! A relay and the ends that meet there, in a small network of instant
//! links in virtual time; the attacks are in `attack_tests.rs`.

use super::wire::{Message, REQUEST_LEN};
use super::*;
use crate::Instant;
use std::net::SocketAddr;
use std::time::Duration;

pub(super) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub(super) const RELAY: &str = "198.51.100.9:7000";

/// A datagram on the wire.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub from: SocketAddr,
    pub to: SocketAddr,
    pub bytes: Vec<u8>,
}

/// One end: its current address, its meeting, what it found and when.
pub(super) struct End {
    pub addr: SocketAddr,
    pub client: Client,
    pub events: Vec<(Instant, Event)>,
}

/// A relay and ends joined by instant links; every datagram is kept in
/// `wire`, as a sniffer on every link would see it.
pub(super) struct Net {
    pub now: Instant,
    pub relay: SocketAddr,
    pub server: Server,
    pub ends: Vec<End>,
    pub wire: Vec<Seen>,
    /// Datagrams to these addresses (an attacker's) are kept here, undelivered.
    pub outsiders: Vec<SocketAddr>,
}

impl Net {
    pub fn new(cfg: ServerConfig) -> Net {
        Net {
            now: Instant::ZERO,
            relay: addr(RELAY),
            server: Server::new(cfg, [7; 32]),
            ends: Vec::new(),
            wire: Vec::new(),
            outsiders: Vec::new(),
        }
    }

    /// A new end at `at`, meeting under `handle`.
    pub fn add(&mut self, at: &str, role: Role, handle: Handle, direct: bool) -> usize {
        let seed = [self.ends.len() as u8 + 1; 32];
        let relays = [self.relay];
        let client = Client::new(self.now, role, handle, &relays, direct, seed);
        self.ends.push(End {
            addr: addr(at),
            client,
            events: Vec::new(),
        });
        self.ends.len() - 1
    }

    /// Delivers `bytes` from `from` to `to`, and everything it causes.
    /// Every relay answer is checked to be no larger than its request.
    pub fn send(&mut self, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) {
        let mut queue = vec![(from, to, bytes)];
        while let Some((from, to, bytes)) = queue.pop() {
            self.wire.push(Seen {
                from,
                to,
                bytes: bytes.clone(),
            });
            if to == self.relay {
                let mut replies = Vec::new();
                let forward = self.server.handle(self.now, from, &bytes, &mut replies);
                let answered: usize = replies.iter().map(|(_, r)| r.len()).sum();
                assert!(
                    answered <= bytes.len(),
                    "{answered} bytes for {}",
                    bytes.len()
                );
                assert!(replies.is_empty() || bytes.len() == REQUEST_LEN);
                queue.extend(replies.into_iter().map(|(to, r)| (self.relay, to, r)));
                if let Some(to) = forward {
                    queue.push((self.relay, to, bytes));
                }
            } else if let Some(e) = self.ends.iter_mut().find(|e| e.addr == to) {
                if is_rendezvous(&bytes) {
                    e.client.handle(self.now, from, &bytes);
                }
            }
        }
    }

    /// Runs every end for `d`, in 1 ms steps.
    pub fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.step();
            self.now += Duration::from_millis(1);
            if self.now.as_nanos().is_multiple_of(1_000_000_000) {
                self.server.expire(self.now);
            }
        }
    }

    fn step(&mut self) {
        for i in 0..self.ends.len() {
            while let Some((to, bytes)) = self.ends[i].client.poll_transmit(self.now) {
                let from = self.ends[i].addr;
                if self.outsiders.contains(&to) {
                    self.wire.push(Seen { from, to, bytes });
                    continue;
                }
                self.send(from, to, bytes);
            }
            let now = self.now;
            let e = &mut self.ends[i];
            while let Some(ev) = e.client.poll_event() {
                e.events.push((now, ev));
            }
        }
    }

    /// When end `i` was first paired with a peer seen at `peer`.
    pub fn paired_with(&self, i: usize, peer: Option<SocketAddr>) -> Option<Instant> {
        self.ends[i].events.iter().find_map(|(t, e)| match e {
            Event::Paired { peer: p, .. } if *p == peer => Some(*t),
            _ => None,
        })
    }

    pub fn reachable(&self, i: usize) -> Vec<SocketAddr> {
        let reach = |(_, e): &(Instant, Event)| match e {
            Event::Reachable(a) => Some(*a),
            _ => None,
        };
        self.ends[i].events.iter().filter_map(reach).collect()
    }

    pub fn refusals(&self, i: usize) -> Vec<Refusal> {
        let refused = |(_, e): &(Instant, Event)| match e {
            Event::Refused { why, .. } => Some(*why),
            _ => None,
        };
        self.ends[i].events.iter().filter_map(refused).collect()
    }

    /// A data datagram from end `i` through the relay: where it went.
    pub fn forward_from(&mut self, i: usize) -> Option<SocketAddr> {
        let from = self.ends[i].addr;
        self.server
            .handle(self.now, from, &[8u8; 100], &mut Vec::new())
    }
}

#[test]
fn two_ends_meet_learn_each_others_address_punch_through_and_are_forwarded() {
    let mut net = Net::new(ServerConfig::default());
    let h = code_handle("417-amber-walrus");
    let (r, s) = (
        net.add("198.18.1.1:1000", Role::Register, h, true),
        net.add("198.18.2.2:2000", Role::Join, h, true),
    );
    net.run(Duration::from_millis(500));
    let (ra, sa) = (net.ends[r].addr, net.ends[s].addr);
    assert!(net.ends[r]
        .events
        .iter()
        .any(|(_, e)| matches!(e, Event::Registered { reflexive, .. } if *reflexive == ra)));
    assert!(net.paired_with(r, Some(sa)).is_some());
    assert!(net.paired_with(s, Some(ra)).is_some());
    assert_eq!(net.reachable(r), vec![sa]);
    assert_eq!(net.reachable(s), vec![ra]);
    assert_eq!(net.forward_from(s), Some(ra));
    assert_eq!(net.forward_from(r), Some(sa));
    // Refreshes keep both (a pair idle for 30 s ends, and the sender's
    // next refresh makes it again).
    net.run(Duration::from_secs(20));
    assert_eq!(net.server.stats().pairs, 1);
    assert_eq!(net.server.stats().paired, 1);
}

#[test]
fn nothing_is_kept_for_an_address_that_has_not_echoed_a_cookie() {
    let mut net = Net::new(ServerConfig::default());
    let mut c = Client::new(
        Instant::ZERO,
        Role::Register,
        [1; 32],
        &[net.relay],
        true,
        [1; 32],
    );
    let (_, first) = c.poll_transmit(Instant::ZERO).unwrap();
    for i in 0..1000u32 {
        let forged = SocketAddr::from((std::net::Ipv4Addr::from(0xc612_0000 + i), 9));
        let mut replies = Vec::new();
        net.server.handle(net.now, forged, &first, &mut replies);
        assert_eq!(replies.len(), 1);
        assert!(matches!(
            Message::decode(&replies[0].1),
            Some(Message::Cookie { .. })
        ));
    }
    let s = net.server.stats();
    assert_eq!((s.registrations, s.pairs, s.cookies), (0, 0, 1000));
}

#[test]
fn a_cookie_works_only_for_its_own_address_and_for_a_short_time() {
    let mut net = Net::new(ServerConfig::default());
    let r = net.add("198.18.1.1:1000", Role::Register, [1; 32], true);
    net.run(Duration::from_millis(10));
    assert_eq!(net.server.stats().registrations, 1);
    // The registered request, with its cookie, from another address or later.
    let with_cookie = net
        .wire
        .iter()
        .rev()
        .find(|w| w.to == net.relay)
        .unwrap()
        .bytes
        .clone();
    let _ = r;
    for (from, later) in [(addr("198.18.9.9:1"), 0), (addr("198.18.1.1:1000"), 20)] {
        let mut replies = Vec::new();
        let now = net.now + Duration::from_secs(later);
        net.server.handle(now, from, &with_cookie, &mut replies);
        assert!(matches!(
            Message::decode(&replies[0].1),
            Some(Message::Cookie { .. })
        ));
    }
}

#[test]
fn a_lost_first_answer_is_repeated_and_a_lapsed_registration_can_be_taken() {
    let mut net = Net::new(ServerConfig::default());
    let r = net.add("198.18.1.1:1000", Role::Register, [1; 32], true);
    // The relay's keyed answer is lost: the end asks again with the same
    // hello and the relay repeats it.
    net.outsiders.push(net.ends[r].addr);
    net.run(Duration::from_millis(300));
    net.outsiders.clear();
    net.run(Duration::from_millis(600));
    assert_eq!(net.server.stats().registrations, 1);
    assert!(net.ends[r]
        .events
        .iter()
        .any(|(_, e)| matches!(e, Event::Registered { .. })));
    // Another address takes the handle only once it lapsed.
    let other = net.add("198.18.3.3:3", Role::Register, [1; 32], true);
    net.run(Duration::from_millis(500));
    assert_eq!(net.refusals(other).first(), Some(&Refusal::Busy));
    net.ends.swap_remove(r);
    net.run(Duration::from_secs(35));
    assert!(net.ends[0]
        .events
        .iter()
        .any(|(_, e)| matches!(e, Event::Registered { .. })));
}

#[test]
fn an_end_whose_nat_rebound_is_followed_and_its_peer_punches_the_new_address() {
    let mut net = Net::new(ServerConfig::default());
    let h = [4; 32];
    let (r, s) = (
        net.add("198.18.1.1:1000", Role::Register, h, true),
        net.add("198.18.2.2:2000", Role::Join, h, true),
    );
    net.run(Duration::from_millis(500));
    let moved = addr("198.18.1.1:1777");
    net.ends[r].addr = moved;
    net.ends[s].client.refresh(net.now);
    net.run(Duration::from_secs(3));
    assert_eq!(net.server.stats().rebound, 1);
    assert_eq!(net.forward_from(s), Some(moved));
    assert!(net.paired_with(s, Some(moved)).is_some());
    assert!(net.reachable(s).contains(&moved));
}

#[test]
fn a_sender_whose_connection_stopped_being_answered_asks_its_relays_at_once() {
    let mut net = Net::new(ServerConfig::default());
    let h = [4; 32];
    net.add("198.18.1.1:1000", Role::Register, h, true);
    let s = net.add("198.18.2.2:2000", Role::Join, h, true);
    net.run(Duration::from_millis(500));
    let now = net.now;
    let c = &mut net.ends[s].client;
    while c.poll_transmit(now).is_some() {}
    c.connections_answered(now, true);
    assert!(
        c.poll_transmit(now).is_none(),
        "all answered: the next refresh is later"
    );
    c.connections_answered(now, false);
    let (to, _) = c.poll_transmit(now).expect("a request at once");
    assert_eq!(to, net.relay);
}

#[test]
fn a_released_pair_ends_and_the_receiver_waits_for_the_next_sender() {
    let mut net = Net::new(ServerConfig::default());
    let h = [5; 32];
    let (r, _) = (
        net.add("198.18.1.1:1000", Role::Register, h, true),
        net.add("198.18.2.2:2000", Role::Join, h, true),
    );
    net.run(Duration::from_millis(500));
    net.ends[r].client.release(net.now);
    net.run(Duration::from_millis(100));
    let st = net.server.stats();
    assert_eq!((st.pairs, st.released, st.registrations), (0, 1, 1));
    let next = net.add("198.18.3.3:3000", Role::Join, h, true);
    net.run(Duration::from_millis(500));
    assert!(net.paired_with(next, Some(net.ends[r].addr)).is_some());
}

#[test]
fn a_pair_whose_session_ended_is_released_and_one_without_a_session_is_kept() {
    let mut net = Net::new(ServerConfig::default());
    let h = [6; 32];
    let r = net.add("198.18.1.1:1000", Role::Register, h, true);
    net.add("198.18.2.2:2000", Role::Join, h, true);
    net.run(Duration::from_millis(500));
    let relay = net.relay;
    // No session yet: nothing to release.
    net.ends[r].client.session_via(net.now, relay, false);
    net.run(Duration::from_millis(100));
    assert_eq!(net.server.stats().pairs, 1);
    net.ends[r].client.session_via(net.now, relay, true);
    net.run(Duration::from_millis(100));
    net.ends[r].client.session_via(net.now, relay, false);
    net.run(Duration::from_millis(100));
    let st = net.server.stats();
    assert_eq!((st.pairs, st.released, st.registrations), (0, 1, 1));
}

#[test]
fn an_end_that_leaves_frees_its_handle_at_once() {
    let mut net = Net::new(ServerConfig::default());
    let h = [6; 32];
    let r = net.add("198.18.1.1:1000", Role::Register, h, true);
    net.add("198.18.2.2:2000", Role::Join, h, true);
    net.run(Duration::from_millis(500));
    net.ends[r].client.leave(net.now);
    net.run(Duration::from_millis(100));
    assert_eq!(net.ends[r].client.poll_timeout(), None, "asks nothing more");
    let st = net.server.stats();
    assert_eq!((st.pairs, st.registrations), (0, 0));
    // A new receiver takes the handle from another port at once.
    let next = net.add("198.18.1.1:1001", Role::Register, h, true);
    net.run(Duration::from_millis(100));
    assert!(net.refusals(next).is_empty());
    assert_eq!(net.server.stats().registrations, 1);
}

/// A code receiver that wrong guesses ended leaves saying so: senders
/// that come while its registration would have lasted are told the code
/// is spent, not that nobody waits; a new receiver takes the handle at
/// once all the same, and is paired as usual.
#[test]
fn a_spent_code_is_told_to_later_joiners_until_it_lapses() {
    let mut net = Net::new(ServerConfig::default());
    let h = [7; 32];
    let r = net.add("198.18.1.1:1000", Role::Register, h, true);
    net.run(Duration::from_millis(300));
    net.ends[r].client.leave_spent(net.now);
    net.run(Duration::from_millis(100));
    let late = net.add("198.18.2.2:2000", Role::Join, h, true);
    net.run(Duration::from_millis(300));
    assert!(
        net.refusals(late).iter().all(|&w| w == Refusal::Spent) && !net.refusals(late).is_empty(),
        "{:?}",
        net.refusals(late)
    );
    assert_eq!(net.server.stats().pairs, 0);
    // Another spent code, whose number a new receiver takes at once.
    let h2 = [8; 32];
    let r2 = net.add("198.18.1.1:1002", Role::Register, h2, true);
    net.run(Duration::from_millis(300));
    net.ends[r2].client.leave_spent(net.now);
    net.run(Duration::from_millis(100));
    let next = net.add("198.18.1.1:1001", Role::Register, h2, true);
    net.run(Duration::from_millis(300));
    assert!(net.refusals(next).is_empty());
    net.add("198.18.4.4:4000", Role::Join, h2, true);
    net.run(Duration::from_millis(300));
    assert_eq!(net.server.stats().pairs, 1, "the new receiver is paired");
    // The first one lapses as a registration does.
    net.run(ServerConfig::default().registration_lifetime);
    let later = net.add("198.18.3.3:3000", Role::Join, h, true);
    net.run(Duration::from_millis(300));
    let said = net.refusals(later);
    assert!(
        !said.is_empty() && said.iter().all(|&w| w == Refusal::Unknown),
        "{said:?}"
    );
}

#[test]
fn a_pair_is_held_to_its_rate_and_quota() {
    let cfg = ServerConfig {
        pair_rate: Some(1_000_000),
        pair_quota: Some(2_000_000),
        ..ServerConfig::default()
    };
    let mut net = Net::new(cfg);
    let (r, s) = (
        net.add("198.18.1.1:1", Role::Register, [1; 32], false),
        net.add("198.18.2.2:2", Role::Join, [1; 32], false),
    );
    net.run(Duration::from_millis(300));
    let (recv, send) = (net.ends[r].addr, net.ends[s].addr);
    let start = net.now;
    // Offered at 10 MB/s for one second: about 1 MB/s (plus the burst) goes.
    let mut forwarded = 0u64;
    for i in 0..10_000u64 {
        let now = start + Duration::from_nanos(i * 100_000);
        if net
            .server
            .handle(now, send, &[8u8; 1000], &mut Vec::new())
            .is_some()
        {
            forwarded += 1000;
        }
    }
    assert!(
        (1_000_000..1_200_000).contains(&forwarded),
        "forwarded {forwarded} bytes"
    );
    // Past the quota the pair ends.
    let mut now = start + Duration::from_secs(1);
    while net.server.stats().pairs == 1 {
        now += Duration::from_millis(1);
        net.server.handle(now, recv, &[8u8; 1000], &mut Vec::new());
        assert!(
            now < start + Duration::from_secs(5),
            "the quota never ended the pair"
        );
    }
    assert_eq!(
        net.server.handle(now, send, &[8u8; 10], &mut Vec::new()),
        None
    );
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
fn a_dual_stack_relay_reports_ipv4_clients_as_ipv4() {
    let mut net = Net::new(ServerConfig::default());
    let (r, s) = (
        net.add("[::ffff:198.18.1.1]:1000", Role::Register, [3; 32], true),
        net.add("[::ffff:198.18.2.2]:2000", Role::Join, [3; 32], true),
    );
    net.run(Duration::from_millis(300));
    let v4 = addr("198.18.1.1:1000");
    assert!(net.ends[r]
        .events
        .iter()
        .any(|(_, e)| matches!(e, Event::Registered { reflexive, .. } if *reflexive == v4)));
    assert!(net.paired_with(s, Some(v4)).is_some());
}

#[test]
fn a_relay_has_answered_only_once_an_answer_to_us_arrived() {
    let mut net = Net::new(ServerConfig::default());
    let silent = addr("203.0.113.5:7000");
    let me = addr("198.18.1.1:1000");
    let mut c = Client::new(
        Instant::ZERO,
        Role::Register,
        [1; 32],
        &[net.relay, silent],
        true,
        [1; 32],
    );
    // A refusal that echoes none of our nonces is no answer.
    let forged = Message::Refused {
        echo: 1,
        why: Refusal::Full,
    };
    assert!(!c.handle(Instant::ZERO, net.relay, &forged.encode()));
    assert!(!c.has_answered(net.relay) && !c.has_answered(silent));
    let mut now = Instant::ZERO;
    while now < Instant::ZERO + Duration::from_secs(1) {
        while let Some((to, bytes)) = c.poll_transmit(now) {
            let mut replies = Vec::new();
            if to == net.relay {
                net.server.handle(now, me, &bytes, &mut replies);
            }
            for (_, reply) in replies {
                c.handle(now, net.relay, &reply);
            }
        }
        now += Duration::from_millis(10);
    }
    assert!(c.has_answered(net.relay));
    // In either of its IPv4 forms; the silent relay never answered.
    assert!(c.has_answered(addr("[::ffff:198.51.100.9]:7000")));
    assert!(!c.has_answered(silent));
}

#[test]
fn only_local_addresses_a_peer_elsewhere_could_use_are_offered_at_most_four() {
    let sa = |s: &str| -> SocketAddr { s.parse().unwrap() };
    let local = [
        sa("127.0.0.1:4000"),
        sa("0.0.0.0:4000"),
        sa("169.254.3.4:4000"),
        sa("[fe80::1]:4000"),
        sa("[::1]:4000"),
        sa("224.0.0.1:4000"),
        sa("192.168.1.20:0"),
        sa("192.168.1.20:4000"),
        sa("[::ffff:192.168.1.20]:4000"),
        sa("10.0.0.5:4000"),
        sa("172.16.0.9:4000"),
        sa("[2001:db8::20]:4000"),
    ];
    assert_eq!(
        super::host_candidates(&local),
        vec![
            sa("192.168.1.20:4000"),
            sa("[2001:db8::20]:4000"),
            sa("10.0.0.5:4000"),
            sa("172.16.0.9:4000"),
        ]
    );
}
