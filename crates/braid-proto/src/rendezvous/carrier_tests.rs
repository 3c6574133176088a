//! The fallback to TCP and the return to UDP, sans-IO: a relay and two
//! ends, each with a UDP address and a TCP address (a stream's source at
//! the relay), in virtual time; UDP between an end and the relay can be
//! blocked and unblocked.

use super::tests::addr;
use super::*;
use crate::Instant;
use std::net::SocketAddr;
use std::time::Duration;

struct End {
    udp: SocketAddr,
    tcp: SocketAddr,
    client: Client,
    events: Vec<(Instant, Event)>,
    /// UDP to and from the relay is dropped.
    udp_blocked: bool,
    /// What each carrier carried to the relay.
    sent: [usize; 2],
}

struct Net {
    now: Instant,
    relay: SocketAddr,
    server: Server,
    ends: Vec<End>,
}

impl Net {
    fn new() -> Net {
        Net {
            now: Instant::ZERO,
            relay: addr(super::tests::RELAY),
            server: Server::new(ServerConfig::default(), [9; 32]),
            ends: Vec::new(),
        }
    }

    fn add(&mut self, udp: &str, tcp: &str, role: Role, udp_blocked: bool) -> usize {
        let seed = [self.ends.len() as u8 + 1; 32];
        let h = code_handle("7-tcp-only");
        let client = Client::new(self.now, role, h, &[self.relay], true, seed);
        self.ends.push(End {
            udp: addr(udp),
            tcp: addr(tcp),
            client,
            events: Vec::new(),
            udp_blocked,
            sent: [0; 2],
        });
        self.ends.len() - 1
    }

    /// Delivers what the relay says to the ends, over the carrier the
    /// address it names belongs to.
    fn deliver_at_relay(&mut self, from: SocketAddr, bytes: &[u8]) {
        let mut replies = Vec::new();
        self.server.handle(self.now, from, bytes, &mut replies);
        for (to, reply) in replies {
            for e in &mut self.ends {
                if to == e.tcp {
                    e.client
                        .handle_via(self.now, self.relay, &reply, Carrier::Tcp);
                } else if to == e.udp && !e.udp_blocked {
                    e.client
                        .handle_via(self.now, self.relay, &reply, Carrier::Udp);
                }
            }
        }
    }

    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            for i in 0..self.ends.len() {
                while let Some((to, bytes, carrier)) =
                    self.ends[i].client.poll_transmit_on(self.now)
                {
                    // Punches between the ends are not this test's business.
                    if to != self.relay {
                        continue;
                    }
                    let e = &mut self.ends[i];
                    e.sent[carrier.index()] += 1;
                    let from = match carrier {
                        Carrier::Tcp => e.tcp,
                        Carrier::Udp if e.udp_blocked => continue,
                        Carrier::Udp => e.udp,
                    };
                    self.deliver_at_relay(from, &bytes);
                }
                let now = self.now;
                let e = &mut self.ends[i];
                while let Some(ev) = e.client.poll_event() {
                    e.events.push((now, ev));
                }
            }
            self.now += Duration::from_millis(1);
        }
    }

    fn carriers(&self, i: usize) -> Vec<(Instant, bool)> {
        let carrier = |(t, e): &(Instant, Event)| match e {
            Event::Carrier { tcp, .. } => Some((*t, *tcp)),
            _ => None,
        };
        self.ends[i].events.iter().filter_map(carrier).collect()
    }

    /// Where a data datagram from end `i`'s address on `carrier` goes.
    fn forward_from(&mut self, i: usize, carrier: Carrier) -> Option<SocketAddr> {
        let e = &self.ends[i];
        let from = if carrier == Carrier::Tcp {
            e.tcp
        } else {
            e.udp
        };
        self.server
            .handle(self.now, from, &[8u8; 100], &mut Vec::new())
    }
}

fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

#[test]
fn an_end_whose_udp_is_blocked_moves_to_tcp_after_three_seconds_and_is_paired_there() {
    let mut net = Net::new();
    let r = net.add("198.18.1.1:1000", "198.18.1.1:40000", Role::Register, true);
    let s = net.add("198.18.2.2:2000", "198.18.2.2:40001", Role::Join, false);
    net.run(Duration::from_millis(2900));
    assert!(net.carriers(r).is_empty());
    assert_eq!(net.ends[r].sent[Carrier::Tcp.index()], 0);
    net.run(Duration::from_millis(1100));
    assert_eq!(net.carriers(r), vec![(ms(3000), true)]);
    assert_eq!(net.ends[r].client.carrier(net.relay), Carrier::Tcp);
    assert!(net.ends[r].client.has_answered(net.relay));
    // The sender, whose UDP works, stays on UDP.
    assert!(net.carriers(s).is_empty());
    assert_eq!(net.server.stats().pairs, 1);
    assert_eq!(net.forward_from(s, Carrier::Udp), Some(net.ends[r].tcp));
    assert_eq!(net.forward_from(r, Carrier::Tcp), Some(net.ends[s].udp));
    // Probes over UDP go on, and are lost; nothing else changes.
    net.run(Duration::from_secs(10));
    assert_eq!(net.carriers(r).len(), 1);
    assert!(net.ends[r].sent[Carrier::Udp.index()] > 8);
    assert_eq!(net.server.stats().paired, 1);
}

#[test]
fn an_end_on_tcp_moves_back_to_udp_once_udp_answers_and_keeps_its_pair() {
    let mut net = Net::new();
    let r = net.add("198.18.1.1:1000", "198.18.1.1:40000", Role::Register, false);
    let s = net.add("198.18.2.2:2000", "198.18.2.2:40001", Role::Join, true);
    net.run(Duration::from_secs(5));
    assert_eq!(net.carriers(s), vec![(ms(3000), true)]);
    assert_eq!(net.forward_from(r, Carrier::Udp), Some(net.ends[s].tcp));
    let rebound = net.server.stats().rebound;
    // UDP comes back: within a probe interval and a cookie's round trip
    // the sender is on UDP, and the relay forwards there, in the same pair.
    net.ends[s].udp_blocked = false;
    let back_at = net.now;
    net.run(UDP_PROBE + Duration::from_millis(100));
    let changes = net.carriers(s);
    assert_eq!(changes.len(), 2, "{changes:?}");
    let (t, tcp) = changes[1];
    assert!(!tcp);
    assert!(t <= back_at + UDP_PROBE, "back at {t:?}");
    assert_eq!(net.ends[s].client.carrier(net.relay), Carrier::Udp);
    assert_eq!(net.forward_from(r, Carrier::Udp), Some(net.ends[s].udp));
    assert_eq!(net.forward_from(s, Carrier::Udp), Some(net.ends[r].udp));
    assert_eq!(net.server.stats().paired, 1, "the same pair");
    assert!(net.server.stats().rebound > rebound);
    // Nothing more goes over TCP, and it stays on UDP.
    let tcp_sent = net.ends[s].sent[Carrier::Tcp.index()];
    net.run(Duration::from_secs(10));
    assert_eq!(net.ends[s].sent[Carrier::Tcp.index()], tcp_sent);
    assert_eq!(net.carriers(s).len(), 2);
}

#[test]
fn udp_blocked_mid_session_moves_a_paired_end_to_tcp_in_the_same_pair() {
    let mut net = Net::new();
    let r = net.add("198.18.1.1:1000", "198.18.1.1:40000", Role::Register, false);
    let s = net.add("198.18.2.2:2000", "198.18.2.2:40001", Role::Join, false);
    net.run(Duration::from_secs(3));
    assert_eq!(net.forward_from(r, Carrier::Udp), Some(net.ends[s].udp));
    net.ends[s].udp_blocked = true;
    let blocked_at = net.now;
    net.run(Duration::from_secs(8));
    let changes = net.carriers(s);
    assert_eq!(changes.len(), 1, "{changes:?}");
    // One refresh unanswered, the next (2 s later) too, then 3 s of silence.
    assert!(changes[0].0 <= blocked_at + REFRESH + TCP_AFTER);
    assert_eq!(net.forward_from(r, Carrier::Udp), Some(net.ends[s].tcp));
    assert_eq!(net.server.stats().paired, 1);
    assert!(net.carriers(r).is_empty());
}

#[test]
fn tcp_only_says_so_before_anything_is_sent_and_never_probes_udp() {
    let mut net = Net::new();
    let r = net.add("198.18.1.1:1000", "198.18.1.1:40000", Role::Register, false);
    let s = net.add("198.18.2.2:2000", "198.18.2.2:40001", Role::Join, false);
    net.ends[s].client.use_tcp_only();
    assert_eq!(
        net.ends[s].client.poll_event(),
        Some(Event::Carrier {
            relay: net.relay,
            tcp: true
        })
    );
    net.run(Duration::from_secs(10));
    assert_eq!(net.ends[s].sent[Carrier::Udp.index()], 0);
    assert!(net.ends[s].sent[Carrier::Tcp.index()] > 2);
    assert_eq!(net.forward_from(r, Carrier::Udp), Some(net.ends[s].tcp));
    assert!(net.carriers(s).is_empty(), "no change after the first");
    assert!(net.carriers(r).is_empty());
}

#[test]
fn a_relay_that_answers_over_udp_is_never_left() {
    let mut net = Net::new();
    let r = net.add("198.18.1.1:1000", "198.18.1.1:40000", Role::Register, false);
    let s = net.add("198.18.2.2:2000", "198.18.2.2:40001", Role::Join, false);
    net.run(Duration::from_secs(60));
    assert!(net.carriers(r).is_empty());
    assert!(net.carriers(s).is_empty());
    assert_eq!(net.ends[r].sent[Carrier::Tcp.index()], 0);
}
