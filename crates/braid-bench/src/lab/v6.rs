//! The lab in IPv6 only ([`super::Topology::Ipv6`]): the same machines and
//! hops as the two sites, with addresses from the documentation prefix
//! 2001:db8::/32 and none of IPv4. Nothing is translated; each site's
//! router is the stateful firewall of a home router (RFC 6092): what its
//! site sent lets the replies in, nothing else comes in.

use std::net::Ipv6Addr;

use super::{nat, ns, Lab, Node, HOPS};

/// The relays' addresses.
pub const RELAY6: [Ipv6Addr; 2] = [
    Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x10),
    Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x10),
];
const RELAY_CORE6: [&str; 2] = ["2001:db8:1::1/64", "2001:db8:2::1/64"];
/// Each site's router's address on its uplink, and the core's there.
const WAN6: [&str; 2] = ["2001:db8:11::2/64", "2001:db8:12::2/64"];
const UPLINK_CORE6: [&str; 2] = ["2001:db8:11::1/64", "2001:db8:12::1/64"];
/// Each site's LAN, its router and its host there.
const LAN6: [&str; 2] = ["2001:db8:a::/64", "2001:db8:b::/64"];
const GATEWAY6: [&str; 2] = ["2001:db8:a::1", "2001:db8:b::1"];
pub const HOST6: [Ipv6Addr; 2] = [
    Ipv6Addr::new(0x2001, 0xdb8, 0xa, 0, 0, 0, 0, 2),
    Ipv6Addr::new(0x2001, 0xdb8, 0xb, 0, 0, 0, 0, 2),
];

/// Sysctls of every namespace before its devices are made: IPv6 on,
/// addresses usable at once (no duplicate address detection).
pub(super) fn prepare(name: &str) -> anyhow::Result<()> {
    for key in ["all", "default"] {
        ns::sysctl(name, &format!("net/ipv6/conf/{key}/disable_ipv6"), "0")?;
        ns::sysctl(name, &format!("net/ipv6/conf/{key}/accept_dad"), "0")?;
    }
    Ok(())
}

/// A site router's ruleset: a stateful firewall, dropping all UDP out
/// with `block_udp`.
pub(super) fn firewall_rules(block_udp: bool) -> String {
    let mut b = if block_udp {
        nat::block_udp_chain()
    } else {
        String::new()
    };
    b.push_str(&format!(
        "  chain forward {{\n    type filter hook forward priority filter; policy accept;\n    \
         iifname \"{wan}\" ct state established,related accept\n    \
         iifname \"{wan}\" meta l4proto ipv6-icmp accept\n    \
         iifname \"{wan}\" drop\n  }}\n",
        wan = nat::WAN
    ));
    nat::replace_in("ip6", &b)
}

impl Lab {
    /// Wires the lab in IPv6 only.
    pub(super) fn wire_v6(&mut self) -> anyhow::Result<()> {
        let core = self.ns(Node::Core);
        for n in [Node::Core, Node::RouterA, Node::RouterB] {
            ns::sysctl(&self.ns(n), "net/ipv6/conf/all/forwarding", "1")?;
        }
        let seeds = |i: u64| braid_link::seeds::links(self.config.seed, i as usize);
        for s in 0..2 {
            let router = self.ns(Node::router(s));
            let link = self.config.uplink[s].clone();
            let hop = self.hop(
                HOPS[s],
                (&router, nat::WAN, &[WAN6[s].to_owned()]),
                (&core, HOPS[s], UPLINK_CORE6[s]),
                link,
                seeds(s as u64),
            )?;
            self.hops.push(hop);
            ns::ip(&[
                "-n",
                &router,
                "-6",
                "route",
                "add",
                "default",
                "dev",
                nat::WAN,
            ])?;
            ns::ip(&["-n", &core, "-6", "route", "add", LAN6[s], "dev", HOPS[s]])?;
            self.wire_lan6(s)?;
        }
        for r in 0..2 {
            let relay = self.ns(Node::relay(r));
            let link = self.config.relay_link[r].clone();
            let hop = self.hop(
                HOPS[2 + r],
                (&relay, "up", &[format!("{}/64", RELAY6[r])]),
                (&core, HOPS[2 + r], RELAY_CORE6[r]),
                link,
                seeds(2 + r as u64),
            )?;
            self.hops.push(hop);
            ns::ip(&["-n", &relay, "-6", "route", "add", "default", "dev", "up"])?;
        }
        for s in 0..2 {
            self.apply_router(s)?;
        }
        Ok(())
    }

    fn wire_lan6(&self, s: usize) -> anyhow::Result<()> {
        let (router, host) = (self.ns(Node::router(s)), self.ns(Node::host(s)));
        ns::ip(&[
            "-n", &router, "link", "add", "lan", "type", "veth", "peer", "name", "eth0", "netns",
            &host,
        ])?;
        let gw = format!("{}/64", GATEWAY6[s]);
        ns::ip(&["-n", &router, "addr", "add", &gw, "dev", "lan"])?;
        ns::ip(&["-n", &router, "link", "set", "dev", "lan", "up"])?;
        let addr = format!("{}/64", HOST6[s]);
        ns::ip(&["-n", &host, "addr", "add", &addr, "dev", "eth0"])?;
        ns::ip(&["-n", &host, "link", "set", "dev", "eth0", "up"])?;
        ns::ip(&[
            "-n",
            &host,
            "-6",
            "route",
            "add",
            "default",
            "via",
            GATEWAY6[s],
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v6_router_lets_in_only_replies_and_can_block_udp() {
        let open = firewall_rules(false);
        assert!(open.starts_with("table ip6 braid_lab\ndelete table ip6 braid_lab\n"));
        assert!(open.contains("iifname \"wan\" ct state established,related accept"));
        assert!(open.contains("iifname \"wan\" drop"));
        assert!(!open.contains("udp drop"));
        assert!(firewall_rules(true).contains("oifname \"wan\" meta l4proto udp drop"));
        assert_eq!(open.matches('{').count(), open.matches('}').count());
    }
}
