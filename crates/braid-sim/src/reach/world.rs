//! The lab's network in virtual time: sites, each a NAT box on an uplink
//! of its own with one host behind it (or both hosts, on one LAN), relays
//! on links of their own, all joined at an internet core. Every hop is a
//! [`Link`] each way; a datagram is an event at each hop it reaches, so
//! each link is offered its datagrams in time order.

use std::net::SocketAddr;

use braid_link::{Link, Nat, Offer, IP_UDP_OVERHEAD};
use braid_proto::rendezvous::Server;
use braid_proto::{Ecn, Instant};

use super::host::{Host, Outgoing};
use crate::queue::EventQueue;

/// A rendezvous relay on its link.
pub(super) struct Relay {
    pub addr: SocketAddr,
    pub server: Server,
    pub alive: bool,
    /// Relay to core, and core to relay.
    pub up: Link,
    pub down: Link,
}

/// A site: a NAT box on its uplink.
pub(super) struct Site {
    pub nat: Nat,
    /// Site to core, and core to site.
    pub up: Link,
    pub down: Link,
}

/// A host on a site's LAN.
pub(super) struct HostAt {
    pub site: usize,
    pub inside: SocketAddr,
    /// Its link to the other hosts of its LAN.
    pub lan: Link,
    pub host: Host,
}

/// Where a datagram in flight arrives next.
#[derive(Debug, Clone, Copy)]
enum Leg {
    Core,
    Relay(usize),
    Site(usize),
    Host(usize),
}

#[derive(Debug)]
struct Flight {
    leg: Leg,
    from: SocketAddr,
    to: SocketAddr,
    ecn: Ecn,
    bytes: Vec<u8>,
}

pub(super) struct World {
    pub now: Instant,
    pub relays: Vec<Relay>,
    pub sites: Vec<Site>,
    pub hosts: Vec<HostAt>,
    /// The core drops whatever goes between the two sites.
    pub direct_cut: bool,
    queue: EventQueue<Flight>,
    out: Vec<Outgoing>,
    /// When the relays next let lapsed registrations go.
    next_expiry: Instant,
}

impl World {
    pub fn new(relays: Vec<Relay>, sites: Vec<Site>, hosts: Vec<HostAt>) -> World {
        World {
            now: Instant::ZERO,
            relays,
            sites,
            hosts,
            direct_cut: false,
            queue: EventQueue::new(),
            out: Vec::new(),
            next_expiry: Instant::ZERO,
        }
    }

    /// When something next happens: a datagram reaches a hop, or a host's
    /// timer fires.
    pub fn next_at(&self) -> Option<Instant> {
        self.hosts
            .iter()
            .filter_map(|h| h.host.poll_timeout())
            .chain(self.queue.next_at())
            .min()
    }

    /// Runs everything due at `now`.
    pub fn step(&mut self, now: Instant) {
        self.now = now;
        while self.queue.next_at().is_some_and(|t| t <= now) {
            let (_, f) = self.queue.pop().expect("one is due");
            self.arrive(f);
        }
        if now >= self.next_expiry {
            self.next_expiry = now + std::time::Duration::from_secs(1);
            for r in &mut self.relays {
                r.server.expire(now);
            }
        }
        for i in 0..self.hosts.len() {
            let h = &mut self.hosts[i];
            h.host.handle_timeout(now);
            h.host.service(now, &mut self.out);
            self.send_all(i);
        }
    }

    /// Sends what host `i` queued in `out`.
    fn send_all(&mut self, i: usize) {
        let mut out = std::mem::take(&mut self.out);
        for (to, ecn, bytes) in out.drain(..) {
            self.leave_host(i, to, ecn, bytes);
        }
        self.out = out;
    }

    /// To another host of its LAN, or through its site's box and up the
    /// site's link.
    fn leave_host(&mut self, i: usize, to: SocketAddr, ecn: Ecn, bytes: Vec<u8>) {
        let now = self.now;
        let (site, inside) = (self.hosts[i].site, self.hosts[i].inside);
        let neighbour = self
            .hosts
            .iter()
            .position(|h| h.site == site && h.inside == to);
        if let Some(k) = neighbour {
            let flight = Flight {
                leg: Leg::Host(k),
                from: inside,
                to,
                ecn,
                bytes,
            };
            return Self::offer(&mut self.queue, &mut self.hosts[i].lan, now, flight);
        }
        let s = &mut self.sites[site];
        let Some(from) = s.nat.outbound(now, inside, to) else {
            return;
        };
        let flight = Flight {
            leg: Leg::Core,
            from,
            to,
            ecn,
            bytes,
        };
        Self::offer(&mut self.queue, &mut s.up, now, flight);
    }

    /// Offers `f` to `link` at `now`; what it delivers arrives at `f.leg`.
    fn offer(queue: &mut EventQueue<Flight>, link: &mut Link, now: Instant, f: Flight) {
        let size = f.bytes.len() as u32 + IP_UDP_OVERHEAD;
        if let Offer::Deliver { at, ecn, .. } = link.offer(now, size, f.ecn, 0) {
            queue.push(at, Flight { ecn, ..f });
        }
    }

    fn site_of(&self, to: SocketAddr) -> Option<usize> {
        self.sites.iter().position(|s| s.nat.public_ip() == to.ip())
    }

    fn arrive(&mut self, f: Flight) {
        let now = self.now;
        match f.leg {
            Leg::Core => {
                if let Some(r) = self.relays.iter().position(|r| r.addr == f.to) {
                    let f = Flight {
                        leg: Leg::Relay(r),
                        ..f
                    };
                    Self::offer(&mut self.queue, &mut self.relays[r].down, now, f);
                } else if let Some(s) = self.site_of(f.to) {
                    if self.direct_cut && self.site_of(f.from).is_some() {
                        return;
                    }
                    let f = Flight {
                        leg: Leg::Site(s),
                        ..f
                    };
                    Self::offer(&mut self.queue, &mut self.sites[s].down, now, f);
                }
            }
            Leg::Relay(r) => self.at_relay(r, f),
            Leg::Site(s) => {
                let Some(inside) = self.sites[s].nat.inbound(now, f.from, f.to) else {
                    return;
                };
                if let Some(h) = self
                    .hosts
                    .iter()
                    .position(|h| h.site == s && h.inside == inside)
                {
                    self.deliver(h, f);
                }
            }
            Leg::Host(h) => self.deliver(h, f),
        }
    }

    /// `f` reached host `h`'s socket.
    fn deliver(&mut self, h: usize, f: Flight) {
        let mut bytes = f.bytes;
        self.hosts[h]
            .host
            .receive(self.now, f.from, f.ecn, &mut bytes, &mut self.out);
        self.send_all(h);
    }

    fn at_relay(&mut self, r: usize, f: Flight) {
        let now = self.now;
        let relay = &mut self.relays[r];
        if !relay.alive {
            return;
        }
        let mut replies = Vec::new();
        let forward = relay.server.handle(now, f.from, &f.bytes, &mut replies);
        let from = relay.addr;
        for (to, bytes) in replies {
            let reply = Flight {
                leg: Leg::Core,
                from,
                to,
                ecn: Ecn::NotEct,
                bytes,
            };
            Self::offer(&mut self.queue, &mut relay.up, now, reply);
        }
        if let Some(to) = forward {
            let onward = Flight {
                leg: Leg::Core,
                from,
                to,
                ..f
            };
            Self::offer(&mut self.queue, &mut relay.up, now, onward);
        }
    }
}
