//! How the lab's machines are joined, beside the two sites of the module
//! doc: both hosts on one LAN behind one router, the sites behind
//! carrier-grade NATs, and a world of IPv6 only ([`super::v6`]).
//!
//! ```text
//!   same LAN                        CGNAT (shared; separate: one per site)
//!   host-a 192.0.2.2  host-b .3       host-a        host-b      (home NATs, or
//!        \\ bridge "lan" /               |             |           routers that
//!         router-a  NAT kind A         router-a      router-b     only route)
//!           | hop "site-a"          100.64.1.2    100.64.2.2
//!          core   (router-b: no host)    hop site-a \\ / hop site-b
//!                                          cgnat-a  masquerade, 198.18.11.2
//!                                            | veth (unshaped)
//!                                          core
//! ```
//!
//! A carrier-grade NAT is Linux's masquerade (endpoint-independent mapping,
//! address-and-port-dependent filtering) from 100.64.0.0/10 (RFC 6598's
//! shared address space) and the sites' LANs to its public address. It
//! does not hairpin: a datagram from one inside address to the CGNAT's
//! public address matches no mapping (those are keyed by the peer outside)
//! and is delivered to the CGNAT itself, which has no socket there.

use std::net::Ipv4Addr;

use serde::Serialize;

use super::{nat, ns, Lab, Node, GATEWAY, HOPS, LAN, PUBLIC, UPLINK_CORE};

/// How the lab is wired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// Two sites, each one host behind a router of its own.
    #[default]
    Sites,
    /// Both hosts on site A's LAN, behind its router; site B's router has
    /// no host.
    SameLan,
    /// Each site's router has its WAN in 100.64.0.0/10 behind a
    /// carrier-grade NAT: one for both sites (`shared`) or one each.
    /// Without `home_nat` the routers only route, so the hosts sit
    /// directly inside the CGNAT.
    Cgnat { shared: bool, home_nat: bool },
    /// IPv6 only: no IPv4 address anywhere; the routers are stateful
    /// firewalls (what went out lets its replies in) and translate nothing.
    Ipv6,
}

impl Topology {
    pub fn describe(self) -> &'static str {
        match self {
            Topology::Sites => "two sites",
            Topology::SameLan => "one LAN behind one NAT",
            Topology::Cgnat {
                shared: true,
                home_nat: true,
            } => "home NATs behind one shared CGNAT",
            Topology::Cgnat {
                shared: false,
                home_nat: true,
            } => "home NATs, each behind its own CGNAT",
            Topology::Cgnat {
                shared: true,
                home_nat: false,
            } => "both hosts directly inside one CGNAT",
            Topology::Cgnat {
                shared: false,
                home_nat: false,
            } => "each host directly inside its own CGNAT",
            Topology::Ipv6 => "IPv6 only, stateful firewalls",
        }
    }

    /// The CGNAT (0: cgnat-a, 1: cgnat-b) behind which `site` sits.
    pub fn cgnat_of(self, site: usize) -> Option<usize> {
        match self {
            Topology::Cgnat { shared: true, .. } => Some(0),
            Topology::Cgnat { shared: false, .. } => Some(site),
            _ => None,
        }
    }

    /// The CGNATs this topology has.
    pub fn cgnats(self) -> Vec<usize> {
        match self {
            Topology::Cgnat { shared: true, .. } => vec![0],
            Topology::Cgnat { shared: false, .. } => vec![0, 1],
            _ => Vec::new(),
        }
    }

    /// The machines of the lab.
    pub fn nodes(self) -> Vec<Node> {
        let mut v = Node::ALL.to_vec();
        v.extend(self.cgnats().into_iter().map(Node::cgnat));
        v
    }
}

/// A site router's WAN addresses behind a CGNAT (the first, and the one a
/// rebind moves to), and the CGNAT's side of that hop.
pub const CGNAT_INSIDE: [[Ipv4Addr; 2]; 2] = [
    [Ipv4Addr::new(100, 64, 1, 2), Ipv4Addr::new(100, 64, 1, 3)],
    [Ipv4Addr::new(100, 64, 2, 2), Ipv4Addr::new(100, 64, 2, 3)],
];
const CGNAT_INSIDE_GW: [&str; 2] = ["100.64.1.1/24", "100.64.2.1/24"];
/// What a CGNAT translates: the shared address space and, for hosts
/// directly inside it, the sites' LANs.
const CGNAT_SOURCES: &str = "{ 100.64.0.0/10, 192.0.2.0/24, 198.51.100.0/24 }";
/// Each host's address on the one LAN.
pub const SAME_LAN_HOST: [Ipv4Addr; 2] = [Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(192, 0, 2, 3)];

/// A CGNAT's ruleset: a restricted NAT (Linux's masquerade) of everything
/// inside to its public address.
pub(super) fn cgnat_router(c: usize, block_udp: bool) -> nat::Router {
    nat::Router {
        kind: nat::Nat::Restricted,
        host: CGNAT_INSIDE[c][0],
        lan: CGNAT_SOURCES.to_owned(),
        public: PUBLIC[c][0],
        relays: super::RELAY.to_vec(),
        block_udp,
    }
}

impl Lab {
    /// The far end of `site`'s uplink: the core, or its CGNAT (namespace,
    /// device address there).
    pub(super) fn uplink_far_end(&self, site: usize) -> (String, &'static str) {
        match self.config.topology.cgnat_of(site) {
            Some(c) => (self.ns(Node::cgnat(c)), CGNAT_INSIDE_GW[site]),
            None => (self.ns(Node::Core), UPLINK_CORE[site]),
        }
    }

    /// A site router's WAN addresses (first, after a rebind).
    pub(super) fn wan_addrs(&self, site: usize) -> [Ipv4Addr; 2] {
        match self.config.topology.cgnat_of(site) {
            Some(_) => CGNAT_INSIDE[site],
            None => PUBLIC[site],
        }
    }

    /// Each CGNAT: a veth to the core (unshaped: the carrier's network),
    /// its public addresses, routes back to the sites behind it.
    pub(super) fn wire_cgnats(&mut self) -> anyhow::Result<()> {
        let core = self.ns(Node::Core);
        for c in self.config.topology.cgnats() {
            let cg = self.ns(Node::cgnat(c));
            let dev = format!("cgnat-{}", super::site_name(c));
            ns::ip(&[
                "-n",
                &core,
                "link",
                "add",
                &dev,
                "type",
                "veth",
                "peer",
                "name",
                nat::WAN,
                "netns",
                &cg,
            ])?;
            ns::ip(&["-n", &core, "addr", "add", UPLINK_CORE[c], "dev", &dev])?;
            ns::ip(&["-n", &core, "link", "set", "dev", &dev, "up"])?;
            for a in PUBLIC[c] {
                let a = format!("{a}/24");
                ns::ip(&["-n", &cg, "addr", "add", &a, "dev", nat::WAN])?;
            }
            ns::ip(&["-n", &cg, "link", "set", "dev", nat::WAN, "up"])?;
            let gw = UPLINK_CORE[c].trim_end_matches("/24");
            ns::ip(&["-n", &cg, "route", "add", "default", "via", gw])?;
            ns::sysctl(&cg, "net/ipv4/ip_forward", "1")?;
        }
        Ok(())
    }

    /// Routes at the CGNAT to a site's LAN (hosts directly inside it).
    pub(super) fn route_lan_at_cgnat(&self, site: usize) -> anyhow::Result<()> {
        if let Some(c) = self.config.topology.cgnat_of(site) {
            let cg = self.ns(Node::cgnat(c));
            ns::ip(&["-n", &cg, "route", "add", LAN[site], "dev", HOPS[site]])?;
        }
        Ok(())
    }

    pub(super) fn apply_cgnats(&self) -> anyhow::Result<()> {
        for c in self.config.topology.cgnats() {
            let rules = nat::router_rules(&cgnat_router(c, false));
            ns::run(&self.ns(Node::cgnat(c)), "nft", &["-f", "-"], &rules)?;
        }
        Ok(())
    }

    /// Both hosts on a bridge at router A, each with a veth to it.
    pub(super) fn wire_same_lan(&mut self) -> anyhow::Result<()> {
        let router = self.ns(Node::RouterA);
        let gw = format!("{}/24", GATEWAY[0]);
        ns::ip(&["-n", &router, "link", "add", "lan", "type", "bridge"])?;
        ns::ip(&["-n", &router, "addr", "add", &gw, "dev", "lan"])?;
        ns::ip(&["-n", &router, "link", "set", "dev", "lan", "up"])?;
        for (s, own) in SAME_LAN_HOST.iter().enumerate() {
            let host = self.ns(Node::host(s));
            let port = format!("lan-{}", super::site_name(s));
            ns::ip(&[
                "-n", &router, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &host,
            ])?;
            ns::ip(&["-n", &router, "link", "set", "dev", &port, "master", "lan"])?;
            ns::ip(&["-n", &router, "link", "set", "dev", &port, "up"])?;
            let addr = format!("{own}/24");
            ns::ip(&["-n", &host, "addr", "add", &addr, "dev", "eth0"])?;
            ns::ip(&["-n", &host, "link", "set", "dev", "eth0", "up"])?;
            let gw = GATEWAY[0].to_string();
            ns::ip(&["-n", &host, "route", "add", "default", "via", &gw])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_topology_has_its_machines() {
        assert_eq!(Topology::Sites.nodes().len(), 7);
        assert_eq!(Topology::SameLan.nodes().len(), 7);
        let shared = Topology::Cgnat {
            shared: true,
            home_nat: true,
        };
        assert_eq!(shared.nodes().len(), 8);
        assert_eq!([shared.cgnat_of(0), shared.cgnat_of(1)], [Some(0), Some(0)]);
        let separate = Topology::Cgnat {
            shared: false,
            home_nat: true,
        };
        assert_eq!(separate.nodes().len(), 9);
        assert_eq!(separate.cgnat_of(1), Some(1));
        assert_eq!(Topology::Ipv6.cgnat_of(0), None);
    }

    #[test]
    fn a_cgnat_masquerades_the_shared_space_and_the_lans() {
        let rules = nat::router_rules(&cgnat_router(0, false));
        assert!(rules.contains(
            "ip saddr { 100.64.0.0/10, 192.0.2.0/24, 198.51.100.0/24 } snat ip to 198.18.11.2\n"
        ));
        assert!(!rules.contains("dnat ip to"), "no hairpin, no port forward");
    }
}
