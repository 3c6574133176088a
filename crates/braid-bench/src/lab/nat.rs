//! The sites' routers: what kind of NAT each is (RFC 4787's terms), the
//! nftables ruleset that makes it one, and the conntrack flush that makes
//! a mapping rebind.
//!
//! Linux's NAT maps a flow's source port to itself when it can (the tuple
//! is unique), so one host behind an SNAT keeps its port for every peer:
//! endpoint-independent mapping. Conntrack lets in only the replies of a
//! flow: address-and-port-dependent filtering. `fully-random` draws a new
//! port for each flow: address-and-port-dependent mapping ("symmetric").
//! Forwarding every other UDP datagram that reaches the public address to
//! the site's host, at the same port, makes the filtering
//! endpoint-independent ("full cone").

use std::fmt::Write as _;
use std::io;
use std::net::Ipv4Addr;

use serde::Serialize;

/// What a site's router does to the site's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Nat {
    /// Endpoint-independent mapping (the port kept) and endpoint-independent
    /// filtering: anyone may send to the mapped port ("full cone").
    Cone,
    /// Endpoint-independent mapping, address-and-port-dependent filtering:
    /// Linux's own masquerade, most home routers.
    Restricted,
    /// A new random port for each destination (address-and-port-dependent
    /// mapping), and the filtering of the above.
    Symmetric,
    /// No NAT; UDP only to and from the relays.
    Firewall,
    /// No NAT and no filtering: the router only routes (a host directly
    /// inside a carrier-grade NAT).
    None,
}

impl Nat {
    pub const ALL: [Nat; 5] = [
        Nat::Cone,
        Nat::Restricted,
        Nat::Symmetric,
        Nat::Firewall,
        Nat::None,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Nat::Cone => "cone",
            Nat::Restricted => "restricted",
            Nat::Symmetric => "symmetric",
            Nat::Firewall => "firewall",
            Nat::None => "none",
        }
    }

    /// Whether the site's host is seen from outside at another address.
    pub fn translates(self) -> bool {
        !matches!(self, Nat::Firewall | Nat::None)
    }
}

impl std::str::FromStr for Nat {
    type Err = String;
    fn from_str(s: &str) -> Result<Nat, String> {
        Nat::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| format!("{s:?}: expected cone, restricted, symmetric, firewall or none"))
    }
}

impl std::fmt::Display for Nat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The interface names inside a router's namespace.
pub const WAN: &str = "wan";

/// The name of the lab's table in every namespace that has one.
const TABLE: &str = "braid_lab";

/// A site's router as the ruleset needs it.
#[derive(Clone, Debug)]
pub struct Router {
    pub kind: Nat,
    /// The site's one host.
    pub host: Ipv4Addr,
    /// The site's private network, e.g. "192.0.2.0/24".
    pub lan: String,
    /// The public address the host's flows leave with now.
    pub public: Ipv4Addr,
    /// The relays' addresses (a firewall lets UDP through to them only).
    pub relays: Vec<Ipv4Addr>,
    /// Whether it drops all UDP its site sends out (a network that lets
    /// only TCP through).
    pub block_udp: bool,
}

/// `nft -f` input that replaces the table in one transaction.
fn replace(body: &str) -> String {
    replace_in("ip", body)
}

/// The same for another family ("ip6").
pub(super) fn replace_in(family: &str, body: &str) -> String {
    format!(
        "table {family} {TABLE}\ndelete table {family} {TABLE}\ntable {family} {TABLE} {{\n{body}}}\n"
    )
}

/// A chain, before every other, that drops the UDP a site sends out.
pub(super) fn block_udp_chain() -> String {
    format!(
        "  chain block_udp {{\n    type filter hook forward priority -1; policy accept;\n    \
         oifname \"{WAN}\" meta l4proto udp drop\n  }}\n"
    )
}

fn set(addrs: &[Ipv4Addr]) -> String {
    let list: Vec<String> = addrs.iter().map(Ipv4Addr::to_string).collect();
    format!("{{ {} }}", list.join(", "))
}

/// The router's whole ruleset.
pub fn router_rules(r: &Router) -> String {
    let mut b = if r.block_udp {
        block_udp_chain()
    } else {
        String::new()
    };
    if r.kind == Nat::None {
        return replace(&b);
    }
    if r.kind == Nat::Firewall {
        let relays = set(&r.relays);
        let _ = writeln!(
            b,
            "  chain forward {{\n    type filter hook forward priority filter; policy accept;\n    \
             meta l4proto udp ip saddr != {relays} ip daddr != {relays} drop\n  }}"
        );
        return replace(&b);
    }
    let (host, lan, public) = (r.host, &r.lan, r.public);
    let _ = writeln!(
        b,
        "  chain prerouting {{\n    type nat hook prerouting priority dstnat; policy accept;"
    );
    if r.kind == Nat::Cone {
        let _ = writeln!(
            b,
            "    iifname \"{WAN}\" ip daddr {public} meta l4proto udp dnat ip to {host}"
        );
    }
    let random = if r.kind == Nat::Symmetric {
        " fully-random"
    } else {
        ""
    };
    let _ = writeln!(
        b,
        "  }}\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    \
         oifname \"{WAN}\" ip saddr {lan} snat ip to {public}{random}\n  }}"
    );
    // A NAT answers nothing itself (no "port unreachable" to a peer's
    // early punch) and lets in only what its state allows.
    for (chain, hook) in [("input", "input"), ("forward", "forward")] {
        let _ = writeln!(
            b,
            "  chain {chain} {{\n    type filter hook {hook} priority filter; policy accept;\n    \
             iifname \"{WAN}\" ct state established,related accept"
        );
        if hook == "forward" {
            let _ = writeln!(b, "    iifname \"{WAN}\" ct status dnat accept");
        }
        let _ = writeln!(b, "    iifname \"{WAN}\" drop\n  }}");
    }
    replace(&b)
}

/// The core's ruleset: forwards everything, unless the direct path between
/// the sites is cut (`sites` are each site's networks, public and private).
pub fn core_rules(cut: bool, sites: [&[&str]; 2]) -> String {
    let mut b = String::from(
        "  chain forward {\n    type filter hook forward priority filter; policy accept;\n",
    );
    if cut {
        let [a, c] = sites.map(|nets| format!("{{ {} }}", nets.join(", ")));
        let _ = writeln!(b, "    ip saddr {a} ip daddr {c} drop");
        let _ = writeln!(b, "    ip saddr {c} ip daddr {a} drop");
    }
    b.push_str("  }\n");
    replace(&b)
}

/// Forgets every connection tracked in the calling thread's namespace, as
/// `conntrack -F` does (one ctnetlink request, no conntrack-tools needed):
/// the next datagram of each flow is mapped afresh.
pub fn flush_conntrack() -> io::Result<()> {
    // SAFETY: plain socket calls on a descriptor owned here and closed on
    // every path; the buffers outlive the calls.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_NETFILTER,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = flush_on(fd);
        libc::close(fd);
        result
    }
}

/// nfnetlink subsystem of conntrack, and its "delete" message: with no
/// attributes it deletes every entry (linux/netfilter/nfnetlink_conntrack.h).
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;

unsafe fn flush_on(fd: libc::c_int) -> io::Result<()> {
    let msg = flush_request();
    let mut to: libc::sockaddr_nl = std::mem::zeroed();
    to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    let sent = libc::sendto(
        fd,
        msg.as_ptr().cast(),
        msg.len(),
        0,
        (&raw const to).cast(),
        std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
    );
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 512];
    let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    ack(&buf[..n as usize])
}

/// nlmsghdr (16 bytes) + nfgenmsg (4 bytes), native byte order but for
/// nfgenmsg's big-endian resource id.
fn flush_request() -> [u8; 20] {
    let mut m = [0u8; 20];
    m[0..4].copy_from_slice(&20u32.to_ne_bytes());
    let kind = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    m[6..8].copy_from_slice(&flags.to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes());
    m[16] = libc::AF_INET as u8;
    m
}

/// The kernel's answer: an NLMSG_ERROR whose error is 0, or the errno.
fn ack(reply: &[u8]) -> io::Result<()> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "no netlink acknowledgement");
    if reply.len() < 20 {
        return Err(bad());
    }
    let kind = u16::from_ne_bytes([reply[4], reply[5]]);
    if kind != libc::NLMSG_ERROR as u16 {
        return Err(bad());
    }
    match i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]) {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(-e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(kind: Nat) -> Router {
        Router {
            kind,
            host: Ipv4Addr::new(192, 0, 2, 2),
            lan: "192.0.2.0/24".into(),
            public: Ipv4Addr::new(198, 18, 11, 2),
            relays: vec![Ipv4Addr::new(198, 18, 1, 10), Ipv4Addr::new(198, 18, 2, 10)],
            block_udp: false,
        }
    }

    #[test]
    fn each_kind_gets_its_own_mapping_and_filtering() {
        let cone = router_rules(&router(Nat::Cone));
        assert!(cone.contains("ip daddr 198.18.11.2 meta l4proto udp dnat ip to 192.0.2.2"));
        assert!(cone.contains("snat ip to 198.18.11.2\n"));
        let restricted = router_rules(&router(Nat::Restricted));
        assert!(!restricted.contains("dnat ip to"));
        assert!(restricted.contains("snat ip to 198.18.11.2\n"));
        assert!(restricted.contains("iifname \"wan\" drop"));
        let symmetric = router_rules(&router(Nat::Symmetric));
        assert!(symmetric.contains("snat ip to 198.18.11.2 fully-random"));
        let firewall = router_rules(&router(Nat::Firewall));
        assert!(!firewall.contains("snat"));
        assert!(firewall.contains(
            "ip saddr != { 198.18.1.10, 198.18.2.10 } ip daddr != { 198.18.1.10, 198.18.2.10 } drop"
        ));
        assert!(!cone.contains("block_udp"));
        let none = router_rules(&router(Nat::None));
        assert!(!none.contains("snat") && !none.contains("drop"), "{none}");
        let blocked = router_rules(&Router {
            block_udp: true,
            ..router(Nat::Restricted)
        });
        assert!(blocked.contains("oifname \"wan\" meta l4proto udp drop"));
        assert!(blocked.contains("snat ip to 198.18.11.2\n"));
        for rules in [cone, restricted, symmetric, firewall, none, blocked] {
            assert!(rules.starts_with("table ip braid_lab\ndelete table ip braid_lab\n"));
            assert_eq!(rules.matches('{').count(), rules.matches('}').count());
        }
    }

    #[test]
    fn a_cut_drops_only_site_to_site() {
        let sites: [&[&str]; 2] = [&["198.18.11.0/24"], &["198.18.12.0/24"]];
        assert!(!core_rules(false, sites).contains("drop"));
        let cut = core_rules(true, sites);
        assert!(cut.contains("ip saddr { 198.18.11.0/24 } ip daddr { 198.18.12.0/24 } drop"));
        assert!(cut.contains("ip saddr { 198.18.12.0/24 } ip daddr { 198.18.11.0/24 } drop"));
    }

    #[test]
    fn the_flush_request_is_a_ctnetlink_delete_asking_for_an_ack() {
        let m = flush_request();
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 20);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 0x0102);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), 0x0005);
        assert_eq!(m[16], 2, "AF_INET");
        let mut ok = [0u8; 36];
        ok[4..6].copy_from_slice(&2u16.to_ne_bytes());
        assert!(ack(&ok).is_ok());
        ok[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(ack(&ok).unwrap_err().raw_os_error(), Some(1));
        assert!(ack(&[0; 8]).is_err());
    }
}
