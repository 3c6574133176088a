//! The meeting through NATs, in virtual time: two sites, each one host
//! behind a NAT box of a chosen kind ([`braid_link::Nat`]), and rendezvous
//! relays on the internet, every hop a [`braid_link::Link`]. The receiver
//! registers and the sender joins with the core's own
//! [`braid_proto::rendezvous::Client`], the relays are the core's
//! [`Server`]: the same decisions the runtime makes, deterministic, so the
//! NAT lab's pairs, a rebinding and a relay killed run in `cargo test`.
//!
//! What it measures is the meeting: when the relays paired the two ends,
//! and when each punch found the other (the sender's direct path opens
//! one relayed handshake and one direct round trip after that, as the
//! lab's `braid bench reach` measures it).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use braid_link::{Link, LinkConfig, Nat, NatKind, Offer};
use braid_proto::rendezvous::{Client, Event, Role, Server, ServerConfig};
use braid_proto::{Ecn, Instant};

/// A meeting to run.
#[derive(Debug, Clone)]
pub struct ReachSetup {
    /// The sender's site's box, and the receiver's.
    pub nats: [NatKind; 2],
    /// One-way delay between each site and the internet core.
    pub site_delay: Duration,
    /// One-way delay between a relay and the core.
    pub relay_delay: Duration,
    /// How many relays both ends use.
    pub relays: usize,
    /// When the sender starts (the receiver starts at once and waits).
    pub sender_starts: Duration,
    /// When the receiver's NAT forgets its mappings (a rebinding).
    pub rebind_at: Option<Duration>,
    /// When the first relay dies.
    pub relay_dies_at: Option<Duration>,
    /// How long to run.
    pub until: Duration,
    /// Seeds the ends, the relays and the links.
    pub seed: u64,
}

impl ReachSetup {
    /// The lab's shape: 20 ms from each site to the core, 5 ms to a relay.
    pub fn lab(nats: [NatKind; 2]) -> ReachSetup {
        ReachSetup {
            nats,
            site_delay: Duration::from_millis(20),
            relay_delay: Duration::from_millis(5),
            relays: 1,
            sender_starts: Duration::from_millis(500),
            rebind_at: None,
            relay_dies_at: None,
            until: Duration::from_secs(10),
            seed: 1,
        }
    }
}

/// What the meeting found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReachOutcome {
    /// When the sender was first paired, in ms from its start.
    pub paired_ms: Option<f64>,
    /// Relays that paired the sender.
    pub relays_paired: usize,
    /// When the sender and the receiver first found each other directly,
    /// in ms from the sender's pairing.
    pub direct_ms: [Option<f64>; 2],
    /// When the sender found the receiver directly again, in ms from a
    /// rebinding.
    pub direct_after_rebind_ms: Option<f64>,
    /// Relay moves of an end (NAT rebindings followed).
    pub rebound: u64,
}

/// Every pair of the lab's NAT kinds, then a rebinding and a relay killed,
/// as a markdown table.
pub fn matrix(seed: u64) -> String {
    let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.0}"));
    let mut out = String::from(
        "| sender's NAT | receiver's NAT | event | paired (ms after start) | direct (ms after pairing) | direct again (ms after the event) |\n|---|---|---|---|---|---|\n",
    );
    let mut row = |setup: ReachSetup, event: &str| {
        let o = run_reach(&setup);
        out.push_str(&format!(
            "| {} | {} | {event} | {} | {} | {} |\n",
            setup.nats[0].name(),
            setup.nats[1].name(),
            cell(o.paired_ms),
            cell(o.direct_ms[0]),
            cell(o.direct_after_rebind_ms),
        ));
    };
    for a in NatKind::ALL {
        for b in NatKind::ALL {
            row(
                ReachSetup {
                    seed,
                    ..ReachSetup::lab([a, b])
                },
                "—",
            );
        }
    }
    let rebind = ReachSetup {
        seed,
        rebind_at: Some(Duration::from_secs(3)),
        ..ReachSetup::lab([NatKind::Restricted, NatKind::Restricted])
    };
    row(rebind, "receiver's NAT rebinds at 3 s");
    let killed = ReachSetup {
        seed,
        relays: 2,
        relay_dies_at: Some(Duration::ZERO),
        ..ReachSetup::lab([NatKind::Symmetric, NatKind::Symmetric])
    };
    row(killed, "one of two relays dead");
    out
}

/// A datagram in flight: when it arrives, and from/to public addresses.
type Flight = Reverse<(Instant, u64, SocketAddr, SocketAddr, Vec<u8>)>;

struct World {
    now: Instant,
    relays: Vec<(SocketAddr, Server, bool)>,
    /// Per site: inside address, its box, its meeting, the link out and in.
    sites: Vec<Site>,
    queue: BinaryHeap<Flight>,
    seq: u64,
}

struct Site {
    inside: SocketAddr,
    nat: Nat,
    client: Client,
    up: Link,
    down: Link,
    events: Vec<(Instant, Event)>,
}

fn ms(t: Instant) -> f64 {
    t.as_nanos() as f64 / 1e6
}

/// Runs the meeting `s` describes.
pub fn run_reach(s: &ReachSetup) -> ReachOutcome {
    let mut w = World::new(s);
    let mut rebound_at = None;
    let end = Instant::ZERO + s.until;
    while w.now < end {
        if s.rebind_at.is_some_and(|t| Instant::ZERO + t == w.now) {
            w.sites[1].nat.rebind();
            rebound_at = Some(w.now);
        }
        if s.relay_dies_at.is_some_and(|t| Instant::ZERO + t == w.now) {
            w.relays[0].2 = false;
        }
        w.step();
        w.now += Duration::from_millis(1);
    }
    let found = |site: &Site, after: Instant| {
        site.events.iter().find_map(|(t, e)| match e {
            Event::Reachable(_) if *t >= after => Some(ms(*t)),
            _ => None,
        })
    };
    let sender = &w.sites[0];
    let paired: Vec<(Instant, SocketAddr)> = sender
        .events
        .iter()
        .filter_map(|(t, e)| match e {
            Event::Paired { relay, .. } => Some((*t, *relay)),
            _ => None,
        })
        .collect();
    let mut relays_paired: Vec<SocketAddr> = paired.iter().map(|p| p.1).collect();
    relays_paired.sort();
    relays_paired.dedup();
    let start = ms(Instant::ZERO + s.sender_starts);
    let paired_ms = paired.first().map(|p| ms(p.0));
    let since_paired = |site: &Site| Some(found(site, paired.first()?.0)? - paired_ms?);
    ReachOutcome {
        paired_ms: paired_ms.map(|p| p - start),
        relays_paired: relays_paired.len(),
        direct_ms: [since_paired(&w.sites[0]), since_paired(&w.sites[1])],
        direct_after_rebind_ms: rebound_at.and_then(|t| Some(found(&w.sites[0], t)? - ms(t))),
        rebound: w.relays.iter().map(|r| r.1.stats().rebound).sum(),
    }
}

impl World {
    fn new(s: &ReachSetup) -> World {
        let relays: Vec<(SocketAddr, Server, bool)> = (0..s.relays)
            .map(|i| {
                let addr = SocketAddr::from(([198, 51, 100, 9 + i as u8], 7000));
                let mut seed = [0u8; 32];
                seed[..8].copy_from_slice(&s.seed.to_be_bytes());
                seed[8] = i as u8;
                (addr, Server::new(ServerConfig::default(), seed), true)
            })
            .collect();
        let relay_addrs: Vec<SocketAddr> = relays.iter().map(|r| r.0).collect();
        let relay_ips: Vec<IpAddr> = relay_addrs.iter().map(|a| a.ip()).collect();
        let handle = [7u8; 32];
        let sites = (0..2)
            .map(|i| {
                let role = if i == 0 { Role::Join } else { Role::Register };
                let public = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1 + i as u8));
                let inside = if s.nats[i] == NatKind::Firewall {
                    SocketAddr::new(public, 5000)
                } else {
                    SocketAddr::from(([10, 0, 1 + i as u8, 2], 5000))
                };
                let mut seed = [0u8; 32];
                seed[..8].copy_from_slice(&s.seed.to_be_bytes());
                seed[8] = 10 + i as u8;
                let start = Instant::ZERO
                    + if i == 0 {
                        s.sender_starts
                    } else {
                        Duration::ZERO
                    };
                let client = Client::new(start, role, handle, &relay_addrs, true, seed);
                let link = |k: u64| {
                    let cfg = LinkConfig {
                        delay: s.site_delay,
                        ..LinkConfig::default()
                    };
                    Link::new(cfg, s.seed * 16 + k)
                };
                Site {
                    inside,
                    nat: Nat::new(s.nats[i], public, &relay_ips),
                    client,
                    up: link(2 * i as u64),
                    down: link(2 * i as u64 + 1),
                    events: Vec::new(),
                }
            })
            .collect();
        World {
            now: Instant::ZERO,
            relays,
            sites,
            queue: BinaryHeap::new(),
            seq: 0,
        }
    }

    fn step(&mut self) {
        while let Some(Reverse((at, ..))) = self.queue.peek() {
            if *at > self.now {
                break;
            }
            let Reverse((_, _, from, to, bytes)) = self.queue.pop().expect("peeked");
            self.arrive(from, to, bytes);
        }
        for i in 0..self.sites.len() {
            let now = self.now;
            while let Some((to, bytes)) = self.sites[i].client.poll_transmit(now) {
                self.leave_site(i, to, bytes);
            }
            let site = &mut self.sites[i];
            while let Some(e) = site.client.poll_event() {
                site.events.push((now, e));
            }
        }
        if self.now.as_nanos().is_multiple_of(1_000_000_000) {
            for r in &mut self.relays {
                r.1.expire(self.now);
            }
        }
    }

    /// Site `i`'s host sends: through its box and up its link.
    fn leave_site(&mut self, i: usize, to: SocketAddr, bytes: Vec<u8>) {
        let site = &mut self.sites[i];
        let Some(from) = site.nat.outbound(self.now, site.inside, to) else {
            return;
        };
        if let Offer::Deliver { at, .. } =
            site.up.offer(self.now, bytes.len() as u32, Ecn::NotEct, 0)
        {
            self.travel(at, from, to, bytes);
        }
    }

    /// Across the core: to a relay, or down a site's link.
    fn travel(&mut self, at: Instant, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) {
        if let Some(i) = self.sites.iter().position(|s| s.nat.public_ip() == to.ip()) {
            let site = &mut self.sites[i];
            let Offer::Deliver { at, .. } = site.down.offer(at, bytes.len() as u32, Ecn::NotEct, 0)
            else {
                return;
            };
            self.push(at, from, to, bytes);
        } else {
            self.push(at + RELAY_HOP, from, to, bytes);
        }
    }

    fn push(&mut self, at: Instant, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, from, to, bytes)));
    }

    fn arrive(&mut self, from: SocketAddr, to: SocketAddr, bytes: Vec<u8>) {
        if let Some(r) = self.relays.iter_mut().find(|r| r.0 == to) {
            if !r.2 {
                return;
            }
            let mut replies = Vec::new();
            let forward = r.1.handle(self.now, from, &bytes, &mut replies);
            let relay = r.0;
            let at = self.now + RELAY_HOP;
            for (dest, reply) in replies {
                self.travel(at, relay, dest, reply);
            }
            if let Some(dest) = forward {
                self.travel(at, relay, dest, bytes);
            }
            return;
        }
        let Some(site) = self.sites.iter_mut().find(|s| s.nat.public_ip() == to.ip()) else {
            return;
        };
        if site.nat.inbound(self.now, from, to).is_some() {
            site.client.handle(self.now, from, &bytes);
        }
    }
}

/// Between the core and a relay, one way.
const RELAY_HOP: Duration = Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;
    use NatKind::*;

    #[test]
    fn the_labs_nat_pairs_punch_through_where_a_mapping_can_be_learned() {
        for (a, b, direct) in [
            (Cone, Cone, true),
            (Cone, Symmetric, true),
            (Restricted, Restricted, true),
            (Restricted, Symmetric, false),
            (Symmetric, Symmetric, false),
            (Firewall, Cone, false),
        ] {
            let out = run_reach(&ReachSetup::lab([a, b]));
            let name = format!("{}–{}", a.name(), b.name());
            assert!(out.paired_ms.is_some(), "{name}: never paired");
            assert_eq!(out.direct_ms[0].is_some(), direct, "{name}: {out:?}");
            // Two round trips to the relay (the cookie, then the pairing).
            assert!(out.paired_ms.unwrap() <= 110.0, "{name}: {out:?}");
            if let Some(d) = out.direct_ms[0] {
                // A punch and its answer: one direct round trip, or two
                // when the peer's mapping is learnt from its punch.
                assert!(d <= 130.0, "{name}: direct {d} ms after pairing");
            }
        }
    }

    #[test]
    fn a_rebound_nat_is_followed_and_punched_again() {
        let out = run_reach(&ReachSetup {
            rebind_at: Some(Duration::from_secs(3)),
            ..ReachSetup::lab([Restricted, Restricted])
        });
        assert!(out.rebound >= 1, "{out:?}");
        // The receiver's next refresh (every 2 s) shows the relay its new
        // port, then both ends punch again.
        let again = out.direct_after_rebind_ms.expect("a direct path again");
        assert!(again <= 2_200.0, "{out:?}");
    }

    #[test]
    fn with_one_relay_dead_the_other_still_pairs_the_two_ends() {
        let out = run_reach(&ReachSetup {
            relays: 2,
            relay_dies_at: Some(Duration::ZERO),
            ..ReachSetup::lab([Symmetric, Symmetric])
        });
        assert_eq!(out.relays_paired, 1, "{out:?}");
        assert!(out.paired_ms.is_some());
    }

    #[test]
    fn the_same_seed_gives_the_same_meeting() {
        let s = ReachSetup::lab([Cone, Restricted]);
        assert_eq!(run_reach(&s), run_reach(&s));
    }
}
