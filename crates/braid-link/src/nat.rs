//! A NAT box (or a firewall) between one site and the internet, sans-IO,
//! in RFC 4787's terms, as the simulator's part of a network: datagrams
//! leaving the site get a public source address (a mapping), and datagrams
//! arriving at a public address reach the site only if the box's filtering
//! lets them. The four kinds are the lab's (`braid bench lab`), which makes
//! them of Linux's NAT with nftables:
//!
//! - **cone**: endpoint-independent mapping (the inside port kept) and
//!   endpoint-independent filtering: anyone may send to a mapped port;
//! - **restricted**: endpoint-independent mapping, address-and-port-
//!   dependent filtering (only replies of a flow come in): Linux's own
//!   masquerade, most home routers;
//! - **symmetric**: a new port per destination (address-and-port-dependent
//!   mapping), filtered as restricted;
//! - **firewall**: no translation; UDP only to and from allowed addresses.
//!
//! A mapping unused for [`Nat::timeout`] lapses; [`Nat::rebind`] forgets
//! them all and moves to fresh ports, as a conntrack flush or a router
//! that restarted does. The table is bounded.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use braid_proto::Instant;

/// What kind of box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// Endpoint-independent mapping and filtering.
    Cone,
    /// Endpoint-independent mapping, address-and-port-dependent filtering.
    Restricted,
    /// Address-and-port-dependent mapping and filtering.
    Symmetric,
    /// No translation; only the allowed addresses, both ways.
    Firewall,
}

impl NatKind {
    /// Every kind, in the lab's order.
    pub const ALL: [NatKind; 4] = [
        NatKind::Cone,
        NatKind::Restricted,
        NatKind::Symmetric,
        NatKind::Firewall,
    ];

    /// The lab's name for it.
    pub fn name(self) -> &'static str {
        match self {
            NatKind::Cone => "cone",
            NatKind::Restricted => "restricted",
            NatKind::Symmetric => "symmetric",
            NatKind::Firewall => "firewall",
        }
    }
}

/// Mappings a box holds at once; a full table maps nothing new.
const MAX_MAPPINGS: usize = 4096;

#[derive(Debug, Clone)]
struct Mapping {
    inside: SocketAddr,
    /// The destination it was made for (symmetric), or `None` (any).
    dest: Option<SocketAddr>,
    public: SocketAddr,
    /// Destinations this mapping sent to: their replies pass the filter.
    contacted: Vec<SocketAddr>,
    last: Instant,
}

/// One site's NAT box or firewall.
#[derive(Debug, Clone)]
pub struct Nat {
    kind: NatKind,
    public_ip: IpAddr,
    /// The firewall's allowed peers.
    allowed: Vec<IpAddr>,
    timeout: Duration,
    mappings: Vec<Mapping>,
    by_public: HashMap<SocketAddr, usize>,
    next_port: u16,
    /// Whether a new mapping keeps the inside port when it is free (not
    /// symmetric, and not since a rebind).
    keeps_ports: bool,
}

impl Nat {
    /// A box of `kind` whose public address is `public_ip`. `allowed`
    /// lists the only addresses a firewall lets UDP through to and from.
    pub fn new(kind: NatKind, public_ip: IpAddr, allowed: &[IpAddr]) -> Nat {
        Nat {
            kind,
            public_ip,
            allowed: allowed.to_vec(),
            timeout: Duration::from_secs(120),
            mappings: Vec::new(),
            by_public: HashMap::new(),
            next_port: 20_000,
            keeps_ports: kind != NatKind::Symmetric,
        }
    }

    /// The kind of box.
    pub fn kind(&self) -> NatKind {
        self.kind
    }

    /// Its public address.
    pub fn public_ip(&self) -> IpAddr {
        self.public_ip
    }

    /// How long an unused mapping lasts (RFC 4787 REQ-5 asks for 2 min).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A datagram from `inside` to `to` leaves the site: the source address
    /// it leaves with, or `None` if the box drops it.
    pub fn outbound(
        &mut self,
        now: Instant,
        inside: SocketAddr,
        to: SocketAddr,
    ) -> Option<SocketAddr> {
        if self.kind == NatKind::Firewall {
            return self.allowed.contains(&to.ip()).then_some(inside);
        }
        self.expire(now);
        let dest = (self.kind == NatKind::Symmetric).then_some(to);
        let i = match self
            .mappings
            .iter()
            .position(|m| m.inside == inside && m.dest == dest)
        {
            Some(i) => i,
            None => self.map(now, inside, dest)?,
        };
        let m = &mut self.mappings[i];
        m.last = now;
        if !m.contacted.contains(&to) && m.contacted.len() < 64 {
            m.contacted.push(to);
        }
        Some(m.public)
    }

    /// A datagram from `from` arrives at `public`: the inside address it
    /// goes on to, or `None` if the box drops it.
    pub fn inbound(
        &mut self,
        now: Instant,
        from: SocketAddr,
        public: SocketAddr,
    ) -> Option<SocketAddr> {
        if self.kind == NatKind::Firewall {
            return self.allowed.contains(&from.ip()).then_some(public);
        }
        self.expire(now);
        let &i = self.by_public.get(&public)?;
        let m = &mut self.mappings[i];
        let passes = match self.kind {
            NatKind::Cone => true,
            _ => m.contacted.contains(&from),
        };
        if passes {
            m.last = now;
        }
        passes.then_some(m.inside)
    }

    /// Forgets every mapping and takes a new public address, as a home
    /// router whose provider gave it another (the lab's rebinding).
    pub fn renumber(&mut self, public_ip: IpAddr) {
        self.public_ip = public_ip;
        self.rebind();
    }

    /// Forgets every mapping: the next datagram out gets a new port.
    pub fn rebind(&mut self) {
        self.mappings.clear();
        self.by_public.clear();
        self.keeps_ports = false;
    }

    fn map(&mut self, now: Instant, inside: SocketAddr, dest: Option<SocketAddr>) -> Option<usize> {
        if self.mappings.len() >= MAX_MAPPINGS {
            return None;
        }
        // Linux keeps the inside port when it is free, unless told to
        // draw one (symmetric); a rebound box draws a new one.
        let keep = self.keeps_ports
            && !self
                .by_public
                .contains_key(&SocketAddr::new(self.public_ip, inside.port()));
        let port = if keep {
            inside.port()
        } else {
            self.fresh_port()
        };
        let public = SocketAddr::new(self.public_ip, port);
        self.mappings.push(Mapping {
            inside,
            dest,
            public,
            contacted: Vec::new(),
            last: now,
        });
        self.by_public.insert(public, self.mappings.len() - 1);
        Some(self.mappings.len() - 1)
    }

    fn fresh_port(&mut self) -> u16 {
        loop {
            self.next_port = self.next_port.wrapping_add(1).max(20_001);
            let candidate = SocketAddr::new(self.public_ip, self.next_port);
            if !self.by_public.contains_key(&candidate) {
                return self.next_port;
            }
        }
    }

    fn expire(&mut self, now: Instant) {
        let timeout = self.timeout;
        let before = self.mappings.len();
        self.mappings
            .retain(|m| now.saturating_duration_since(m.last) < timeout);
        if self.mappings.len() != before {
            self.by_public = self
                .mappings
                .iter()
                .enumerate()
                .map(|(i, m)| (m.public, i))
                .collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const PUBLIC: &str = "203.0.113.1";

    fn nat(kind: NatKind) -> Nat {
        Nat::new(
            kind,
            PUBLIC.parse().unwrap(),
            &["198.51.100.9".parse().unwrap()],
        )
    }

    #[test]
    fn each_kind_maps_and_filters_as_rfc_4787_names_it() {
        let (host, relay, peer, stranger) = (
            a("10.0.0.2:5000"),
            a("198.51.100.9:7000"),
            a("198.18.2.2:6000"),
            a("198.18.9.9:1"),
        );
        let t = Instant::ZERO;
        for kind in NatKind::ALL {
            let mut n = nat(kind);
            let to_relay = n.outbound(t, host, relay);
            let to_peer = n.outbound(t, host, peer);
            match kind {
                NatKind::Cone | NatKind::Restricted => {
                    assert_eq!(to_relay, Some(a("203.0.113.1:5000")), "{kind:?}");
                    assert_eq!(to_peer, to_relay, "{kind:?}: one mapping for all");
                }
                NatKind::Symmetric => {
                    assert_ne!(to_peer, to_relay, "a port per destination");
                }
                NatKind::Firewall => {
                    assert_eq!((to_relay, to_peer), (Some(host), None));
                }
            }
            let public = to_relay.unwrap();
            assert_eq!(
                n.inbound(t, relay, public),
                Some(host),
                "{kind:?}: the reply"
            );
            let stranger_in = n.inbound(t, stranger, public);
            assert_eq!(stranger_in.is_some(), kind == NatKind::Cone, "{kind:?}");
        }
    }

    #[test]
    fn a_rebind_moves_to_a_new_port_and_mappings_lapse() {
        let (host, relay) = (a("10.0.0.2:5000"), a("198.51.100.9:7000"));
        let mut n = nat(NatKind::Restricted);
        let first = n.outbound(Instant::ZERO, host, relay).unwrap();
        n.rebind();
        let second = n.outbound(Instant::ZERO, host, relay).unwrap();
        assert_ne!(first, second);
        assert_eq!(n.inbound(Instant::ZERO, relay, first), None);
        let later = Instant::ZERO + n.timeout() + Duration::from_secs(1);
        assert_eq!(n.inbound(later, relay, second), None, "lapsed");
    }
}
