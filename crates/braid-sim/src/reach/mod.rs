//! Reach through NATs, in virtual time: two sites, each one host behind a
//! NAT box of a chosen kind ([`braid_link::Nat`]) on an uplink of its own,
//! and rendezvous relays on links of their own, as `braid bench reach`'s
//! lab has them. The receiver registers and the sender joins with the
//! core's own meeting ([`braid_proto::rendezvous::Client`]), the relays are
//! the core's [`Server`], and the session runs over every relay and
//! direct path the meeting finds, each end's datagrams sorted by the
//! core's `Endpoint`: the decisions the runtime makes, deterministic, so
//! the lab's NAT pairs, a rebinding, a relay killed and a direct path cut
//! run in `cargo test`.

mod cases;
mod host;
mod world;

pub use cases::{lab_cases, markdown, run_lab_cases, EVENT_AT};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use braid_link::{Link, LinkConfig, Nat, NatKind, QueueLimit};
use braid_proto::rendezvous::{Event, Role, Server, ServerConfig};
use braid_proto::Instant;

use host::Host;
use world::{HostAt, Relay, Site, World};

/// Something that happens to the network during a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Happening {
    /// Host `i`'s NAT forgets its mappings and takes a new public address.
    Rebinds(usize),
    /// The first relay dies.
    RelayDies,
    /// The core drops everything between the two sites.
    DirectCut,
}

/// When a [`Happening`] happens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    /// At this time from the start.
    At(Duration),
    /// Once the receiver has read this share of the transfer.
    Received(f64),
}

/// A run to make.
#[derive(Debug, Clone)]
pub struct ReachSetup {
    /// The sender's site's box, and the receiver's.
    pub nats: [NatKind; 2],
    /// Both hosts on one LAN behind the sender's site's box (the
    /// receiver's site is then empty).
    pub same_lan: bool,
    /// Each site's uplink (each way).
    pub uplink: LinkConfig,
    /// Each relay's link (each way).
    pub relay_link: LinkConfig,
    /// How many relays both ends use.
    pub relays: usize,
    /// When the sender starts (the receiver starts at once and waits).
    pub sender_starts: Duration,
    /// Bytes the sender sends; 0 runs the meeting alone.
    pub bytes: u64,
    /// What happens, and when.
    pub event: Option<(Happening, When)>,
    /// How long to run at most.
    pub until: Duration,
    /// Seeds the ends, the relays and the links.
    pub seed: u64,
}

impl ReachSetup {
    /// The lab's shape (`braid bench reach`'s defaults): 100 Mbit/s
    /// uplinks 10 ms from the core with 400-packet queues, relays on
    /// 40 Mbit/s links 5 ms from it with 250-packet queues, both relays
    /// given to both ends; the meeting alone.
    pub fn lab(nats: [NatKind; 2]) -> ReachSetup {
        let link = |mbit: u64, ms: u64, queue: u32| LinkConfig {
            rate: Some(braid_link::units::Rate::mbit(mbit)),
            delay: Duration::from_millis(ms),
            queue: QueueLimit::Packets(queue),
            ..LinkConfig::default()
        };
        ReachSetup {
            nats,
            same_lan: false,
            uplink: link(100, 10, 400),
            relay_link: link(40, 5, 250),
            relays: 2,
            sender_starts: Duration::from_millis(500),
            bytes: 0,
            event: None,
            until: Duration::from_secs(10),
            seed: 1,
        }
    }

    /// As [`ReachSetup::lab`], sending `bytes` (the lab sends 20 MB).
    pub fn transfer(nats: [NatKind; 2], bytes: u64) -> ReachSetup {
        ReachSetup {
            bytes,
            until: Duration::from_secs(60),
            ..ReachSetup::lab(nats)
        }
    }
}

/// What a run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReachOutcome {
    /// When the sender was first paired, in ms from its start.
    pub paired_ms: Option<f64>,
    /// Relays that paired the sender.
    pub relays_paired: usize,
    /// When the sender and the receiver first found each other directly
    /// (a punch answered), in ms from the sender's pairing.
    pub direct_ms: [Option<f64>; 2],
    /// When the sender's first direct connection first heard the
    /// receiver, in ms from the sender's pairing (the lab's "validated").
    pub validated_ms: Option<f64>,
    /// When the sender found the receiver directly again, in ms from the
    /// event.
    pub direct_again_ms: Option<f64>,
    /// Relay moves of an end (NAT rebindings followed).
    pub rebound: u64,
    /// Whether the receiver read every byte, each as sent.
    pub verified: bool,
    /// From starting the sender to its session being established, in s.
    pub to_data_s: Option<f64>,
    /// Of the stream bytes acknowledged, the share the sender's direct
    /// connections carried.
    pub share_direct: Option<f64>,
    /// Stream bytes over the time from the sender's handshake to the
    /// receiver reading the last one, in Mbit/s.
    pub goodput_mbps: Option<f64>,
    /// When the event happened, in s from the sender's start.
    pub event_s: Option<f64>,
}

/// Every pair of the lab's NAT kinds, then a rebinding and a relay killed,
/// as a markdown table: the meeting alone.
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
            cell(o.direct_again_ms),
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
        event: Some((Happening::Rebinds(1), When::At(Duration::from_secs(3)))),
        ..ReachSetup::lab([NatKind::Restricted, NatKind::Restricted])
    };
    row(rebind, "receiver's NAT rebinds at 3 s");
    let killed = ReachSetup {
        seed,
        event: Some((Happening::RelayDies, When::At(Duration::ZERO))),
        ..ReachSetup::lab([NatKind::Symmetric, NatKind::Symmetric])
    };
    row(killed, "one of two relays dead");
    out
}

fn ms(t: Instant) -> f64 {
    t.as_nanos() as f64 / 1e6
}

/// Runs `s`.
pub fn run_reach(s: &ReachSetup) -> ReachOutcome {
    let mut w = build(s);
    let mut event_at = None;
    let end = Instant::ZERO + s.until;
    while let Some(now) = w.next_at().filter(|&t| t <= end) {
        if event_at.is_none() && due(s, &w, now) {
            let (what, _) = s.event.expect("due");
            happen(&mut w, what);
            event_at = Some(now);
        }
        w.step(now);
        let receiver = &w.hosts[1].host;
        if s.bytes > 0 && receiver.received_at.is_some() {
            break;
        }
    }
    outcome(s, &w, event_at)
}

/// Whether the setup's event is due at `now`.
fn due(s: &ReachSetup, w: &World, now: Instant) -> bool {
    match s.event {
        Some((_, When::At(t))) => now >= Instant::ZERO + t,
        Some((_, When::Received(share))) => {
            let t = &w.hosts[1].host.transfer;
            t.total > 0 && t.read as f64 >= share * t.total as f64
        }
        None => false,
    }
}

fn happen(w: &mut World, what: Happening) {
    match what {
        Happening::Rebinds(i) => {
            // As the lab's routers: a new public address (.2 and .3 in
            // turn), every mapping forgotten.
            let nat = &mut w.sites[w.hosts[i].site].nat;
            let IpAddr::V4(ip) = nat.public_ip() else {
                return nat.rebind();
            };
            let [a, b, c, d] = ip.octets();
            nat.renumber(IpAddr::V4(Ipv4Addr::new(a, b, c, d ^ 1)));
        }
        Happening::RelayDies => w.relays[0].alive = false,
        Happening::DirectCut => w.direct_cut = true,
    }
}

fn outcome(s: &ReachSetup, w: &World, event_at: Option<Instant>) -> ReachOutcome {
    let sender = &w.hosts[0].host;
    let receiver = &w.hosts[1].host;
    let found = |host: &Host, after: Instant| {
        host.events.iter().find_map(|(t, e)| match e {
            Event::Reachable(_) if *t >= after => Some(ms(*t)),
            _ => None,
        })
    };
    let (first_paired, relays_paired) = sender.pairings();
    let start = Instant::ZERO + s.sender_starts;
    let since_paired = |host: &Host| Some(found(host, first_paired?)? - ms(first_paired?));
    let session = sender.session();
    let direct = |id| {
        session
            .and_then(|s| s.remote(id))
            .is_some_and(|r| !sender.is_relay(r))
    };
    let validated_ms = sender
        .first_heard
        .iter()
        .filter(|((_, id), _)| direct(*id))
        .map(|(_, t)| *t)
        .min()
        .and_then(|t| Some(ms(t) - ms(first_paired?)));
    let (mut acked, mut acked_direct) = (0u64, 0u64);
    if let Some(s) = session {
        for (id, p) in s.stats().paths {
            acked += p.stream_bytes_acked;
            if direct(id) {
                acked_direct += p.stream_bytes_acked;
            }
        }
    }
    let goodput_mbps = match (sender.established_at, receiver.received_at) {
        (Some(a), Some(b)) if b > a => Some(s.bytes as f64 * 8.0 / (ms(b) - ms(a)) / 1e3),
        _ => None,
    };
    ReachOutcome {
        paired_ms: first_paired.map(|p| ms(p) - ms(start)),
        relays_paired: relays_paired.len(),
        direct_ms: [since_paired(sender), since_paired(receiver)],
        validated_ms,
        direct_again_ms: event_at.and_then(|t| Some(found(sender, t)? - ms(t))),
        rebound: w.relays.iter().map(|r| r.server.stats().rebound).sum(),
        verified: s.bytes > 0 && receiver.transfer.read_intact(),
        to_data_s: sender.established_at.map(|t| (ms(t) - ms(start)) / 1e3),
        share_direct: (acked > 0).then(|| acked_direct as f64 / acked as f64),
        goodput_mbps,
        event_s: event_at.map(|t| (ms(t) - ms(start)) / 1e3),
    }
}

/// The lab's network, its relays and its two ends, as `s` says.
fn build(s: &ReachSetup) -> World {
    let seed_of = |k: u8| {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&s.seed.to_be_bytes());
        seed[8] = k;
        seed
    };
    let link_seed = |k: u64| s.seed.wrapping_mul(64).wrapping_add(k);
    let relays: Vec<Relay> = (0..s.relays)
        .map(|i| Relay {
            addr: SocketAddr::from(([198, 18, 1 + i as u8, 10], 7000)),
            server: Server::new(ServerConfig::default(), seed_of(i as u8)),
            alive: true,
            up: Link::new(s.relay_link.clone(), link_seed(2 * i as u64)),
            down: Link::new(s.relay_link.clone(), link_seed(2 * i as u64 + 1)),
        })
        .collect();
    let relay_addrs: Vec<SocketAddr> = relays.iter().map(|r| r.addr).collect();
    let relay_ips: Vec<IpAddr> = relay_addrs.iter().map(|a| a.ip()).collect();
    let code = "417-amber-walrus";
    let content = (s.seed ^ 0x0062_7261_6964, s.bytes);
    let sites = (0..2)
        .map(|i| {
            let public = IpAddr::V4(Ipv4Addr::new(198, 18, 11 + i as u8, 2));
            let k = 16 + 2 * i as u64;
            Site {
                nat: Nat::new(s.nats[i], public, &relay_ips),
                up: Link::new(s.uplink.clone(), link_seed(k)),
                down: Link::new(s.uplink.clone(), link_seed(k + 1)),
            }
        })
        .collect();
    let hosts = (0..2)
        .map(|i| {
            let role = if i == 0 { Role::Join } else { Role::Register };
            let site = if s.same_lan { 0 } else { i };
            let public = IpAddr::V4(Ipv4Addr::new(198, 18, 11 + site as u8, 2));
            let inside = match (s.nats[site], s.same_lan) {
                (NatKind::Firewall, false) => SocketAddr::new(public, 5000),
                (_, true) => SocketAddr::from(([192, 0, 2, 2 + i as u8], 5000)),
                (_, false) => SocketAddr::from(([192, 0, 2 + i as u8, 2], 5000)),
            };
            let start = Instant::ZERO
                + if i == 0 {
                    s.sender_starts
                } else {
                    Duration::ZERO
                };
            let mut host = Host::new(
                role,
                start,
                &relay_addrs,
                code,
                content,
                seed_of(10 + i as u8),
            );
            host.offer_candidates(&[inside]);
            HostAt {
                site,
                inside,
                lan: Link::new(lan_link(), link_seed(32 + i as u64)),
                host,
            }
        })
        .collect();
    World::new(relays, sites, hosts)
}

/// A gigabit Ethernet hop between two hosts of one LAN.
fn lan_link() -> LinkConfig {
    LinkConfig {
        rate: Some(braid_link::units::Rate::mbit(1000)),
        delay: Duration::from_micros(100),
        queue: QueueLimit::Packets(1000),
        ..LinkConfig::default()
    }
}

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
            event: Some((Happening::Rebinds(1), When::At(Duration::from_secs(3)))),
            ..ReachSetup::lab([Restricted, Restricted])
        });
        assert!(out.rebound >= 1, "{out:?}");
        // The receiver's next refresh (every 2 s) shows the relay its new
        // port, then both ends punch again.
        let again = out.direct_again_ms.expect("a direct path again");
        assert!(again <= 2_200.0, "{out:?}");
    }

    #[test]
    fn with_one_relay_dead_the_other_still_pairs_the_two_ends() {
        let out = run_reach(&ReachSetup {
            event: Some((Happening::RelayDies, When::At(Duration::ZERO))),
            ..ReachSetup::lab([Symmetric, Symmetric])
        });
        assert_eq!(out.relays_paired, 1, "{out:?}");
        assert!(out.paired_ms.is_some());
    }

    #[test]
    fn a_session_goes_direct_where_a_punch_gets_through_and_over_the_relays_elsewhere() {
        for (nats, direct) in [([Cone, Cone], true), ([Symmetric, Symmetric], false)] {
            let out = run_reach(&ReachSetup::transfer(nats, 4_000_000));
            assert!(out.verified, "{nats:?}: {out:?}");
            assert_eq!(out.validated_ms.is_some(), direct, "{nats:?}: {out:?}");
            let share = out.share_direct.expect("bytes were acknowledged");
            if direct {
                assert!(share > 0.3, "{nats:?}: {out:?}");
            } else {
                assert_eq!(share, 0.0, "{nats:?}: {out:?}");
            }
        }
    }

    #[test]
    fn a_transfer_survives_each_of_the_labs_failovers() {
        for (name, setup) in lab_cases(4_000_000)
            .into_iter()
            .filter(|(_, s)| s.event.is_some())
        {
            let out = run_reach(&setup);
            assert!(out.verified, "{name}: {out:?}");
            assert!(out.event_s.is_some(), "{name}: the event never came");
        }
        // The direct path comes back after the sender's NAT rebinds.
        let (_, rebind) = lab_cases(4_000_000)
            .into_iter()
            .find(|(n, _)| n.contains("rebinds"))
            .expect("a rebinding case");
        let out = run_reach(&rebind);
        assert!(out.direct_again_ms.is_some(), "{out:?}");
    }

    #[test]
    fn two_hosts_on_one_lan_find_each_other_there_and_not_through_the_internet() {
        for nat in [Restricted, Symmetric] {
            let out = run_reach(&ReachSetup {
                same_lan: true,
                ..ReachSetup::transfer([nat, nat], 4_000_000)
            });
            assert!(out.verified, "{nat:?}: {out:?}");
            // The LAN answers first: one LAN round trip after pairing.
            let direct = out.direct_ms[0].expect("a direct path");
            assert!(direct < 5.0, "{nat:?}: {out:?}");
            let share = out.share_direct.expect("bytes were acknowledged");
            assert!(share > 0.8, "{nat:?}: {out:?}");
            // Faster than the 100 Mbit/s uplink the relays are reached by.
            assert!(out.goodput_mbps.unwrap() > 150.0, "{nat:?}: {out:?}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_meeting() {
        let s = ReachSetup::lab([Cone, Restricted]);
        assert_eq!(run_reach(&s), run_reach(&s));
    }
}
