//! The NAT lab: two sites, each one host behind a NAT router, and two
//! relay hosts, all on an emulated public network, in network namespaces
//! of their own (root). `braid bench reach` runs braid's rendezvous relay,
//! hole punching and transfers in it; `braid bench lab` builds it and
//! leaves it to you (`ip netns exec braid-lab-<pid>-host-a ...`).
//!
//! ```text
//!   host-a 192.0.2.2                                  host-b 198.51.100.2
//!     | veth (TEST-NET-1)                    (TEST-NET-2) veth |
//!   router-a  NAT kind A                        NAT kind B  router-b
//!     | wan 198.18.11.2 (.3 after a rebind)    198.18.12.2 (.3) |
//!     | hop "site-a" (uplink)                 hop "site-b" (uplink) |
//!     +------------------------- core ---------------------------+
//!                 | hop "relay-a"        | hop "relay-b"
//!              relay-a 198.18.1.10    relay-b 198.18.2.10
//! ```
//!
//! The public network is in 198.18.0.0/15 (RFC 2544's benchmarking range),
//! the sites' private networks are TEST-NET-1 and TEST-NET-2: no address of
//! the lab is anyone's real one. Each public hop is a pair of TUN devices
//! joined by the link model ([`hop`]); the sites' own networks are veth
//! pairs. The NAT kinds are nftables rulesets ([`nat`]). Nothing is done
//! in the namespace braid was started in: every device is made inside the
//! lab's namespaces, and removing them (on drop, on SIGINT/SIGTERM/SIGHUP,
//! or by the next lab after a kill -9) removes everything. Other wirings
//! (one LAN, carrier-grade NATs, IPv6 only) are in [`topology`] and [`v6`].

pub mod hop;
pub mod nat;
pub use braid_netns::ns;
pub mod topology;
pub mod v6;

use std::io::{BufRead, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, ExitCode};
use std::sync::{Mutex, Once};
use std::time::Duration;

use anyhow::{bail, Context};
use braid_link::units::{parse_duration, parse_probability, Rate};
use braid_link::{LinkConfig, QueueLimit};

use braid_netns::Tun;
use hop::Hop;
pub use nat::Nat;
pub use topology::Topology;

/// A machine of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Core,
    RelayA,
    RelayB,
    RouterA,
    RouterB,
    HostA,
    HostB,
    /// Carrier-grade NATs, in [`Topology::Cgnat`] only.
    CgnatA,
    CgnatB,
}

impl Node {
    pub const ALL: [Node; 7] = [
        Node::Core,
        Node::RelayA,
        Node::RelayB,
        Node::RouterA,
        Node::RouterB,
        Node::HostA,
        Node::HostB,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Node::Core => "core",
            Node::RelayA => "relay-a",
            Node::RelayB => "relay-b",
            Node::RouterA => "router-a",
            Node::RouterB => "router-b",
            Node::HostA => "host-a",
            Node::HostB => "host-b",
            Node::CgnatA => "cgnat-a",
            Node::CgnatB => "cgnat-b",
        }
    }

    pub fn relay(i: usize) -> Node {
        [Node::RelayA, Node::RelayB][i]
    }

    pub fn host(site: usize) -> Node {
        [Node::HostA, Node::HostB][site]
    }

    fn router(site: usize) -> Node {
        [Node::RouterA, Node::RouterB][site]
    }

    pub fn cgnat(i: usize) -> Node {
        [Node::CgnatA, Node::CgnatB][i]
    }
}

/// The relays' addresses.
pub const RELAY: [Ipv4Addr; 2] = [Ipv4Addr::new(198, 18, 1, 10), Ipv4Addr::new(198, 18, 2, 10)];
const RELAY_NET: [&str; 2] = ["198.18.1.0/24", "198.18.2.0/24"];
const RELAY_CORE: [&str; 2] = ["198.18.1.1/24", "198.18.2.1/24"];
/// Each site's public addresses: the first, and the one a rebind moves to.
pub const PUBLIC: [[Ipv4Addr; 2]; 2] = [
    [Ipv4Addr::new(198, 18, 11, 2), Ipv4Addr::new(198, 18, 11, 3)],
    [Ipv4Addr::new(198, 18, 12, 2), Ipv4Addr::new(198, 18, 12, 3)],
];
const UPLINK_NET: [&str; 2] = ["198.18.11.0/24", "198.18.12.0/24"];
const UPLINK_CORE: [&str; 2] = ["198.18.11.1/24", "198.18.12.1/24"];
/// Each site's host.
pub const HOST: [Ipv4Addr; 2] = [Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(198, 51, 100, 2)];
const GATEWAY: [Ipv4Addr; 2] = [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(198, 51, 100, 1)];
const LAN: [&str; 2] = ["192.0.2.0/24", "198.51.100.0/24"];

/// The hops, in the order of [`LabConfig`]'s links.
pub const HOPS: [&str; 4] = ["site-a", "site-b", "relay-a", "relay-b"];

/// What to build.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Each site's router.
    pub nat: [Nat; 2],
    /// Each site's uplink, router to core (both directions alike).
    pub uplink: [LinkConfig; 2],
    /// Each relay's link to the core.
    pub relay_link: [LinkConfig; 2],
    /// Seed of the links' randomness.
    pub seed: u64,
    /// How the machines are joined.
    pub topology: Topology,
}

impl LabConfig {
    /// The round trip of the direct path between the two hosts, from the
    /// uplinks' delays.
    pub fn direct_rtt(&self) -> Duration {
        2 * (self.uplink[0].delay + self.uplink[1].delay)
    }
}

/// A hop's link from `RATE:DELAY[:LOSS[:QUEUE]]`: a rate ("100mbit", or
/// "unlimited"), a one-way delay, a loss probability and a queue in
/// packets or bytes, each direction alike.
pub fn parse_link(spec: &str) -> Result<LinkConfig, String> {
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() < 2 || parts.len() > 4 {
        return Err(format!(
            "{spec:?}: expected RATE:DELAY[:LOSS[:QUEUE]], e.g. 100mbit:10ms or unlimited:0ms:1%"
        ));
    }
    let rate = match parts[0] {
        "unlimited" => None,
        r => Some(r.parse::<Rate>().map_err(|e| format!("{spec:?}: {e}"))?),
    };
    let mut link = LinkConfig {
        rate,
        delay: parse_duration(parts[1]).map_err(|e| format!("{spec:?}: {e}"))?,
        ..LinkConfig::default()
    };
    if let Some(l) = parts.get(2) {
        link.loss = parse_probability(l).map_err(|e| format!("{spec:?}: {e}"))?;
    }
    if let Some(q) = parts.get(3) {
        link.queue = q
            .parse::<QueueLimit>()
            .map_err(|e| format!("{spec:?}: {e}"))?;
    }
    link.validate().map_err(|e| format!("{spec:?}: {e}"))?;
    Ok(link)
}

/// Namespaces and temporary directories to remove if a signal ends us.
static LIVE: Mutex<(Vec<String>, Vec<std::path::PathBuf>)> = Mutex::new((Vec::new(), Vec::new()));
static SIGNALS: Once = Once::new();

/// From now on, SIGINT, SIGTERM and SIGHUP remove the lab and end the
/// process with 128 + the signal (its children, started with
/// [`ns::command`], die with it). Call it first thing on the main thread:
/// threads started later inherit the blocked signals, a thread started
/// earlier would take the default action instead.
pub fn guard_signals() {
    SIGNALS.call_once(|| {
        // SAFETY: sigset functions on a local set; pthread_sigmask on this
        // thread; sigwait on the signal thread, which owns its copy.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            let _ = std::thread::Builder::new()
                .name("lab signals".into())
                .spawn(move || {
                    let mut sig = 0;
                    libc::sigwait(&set, &mut sig);
                    let (names, dirs) =
                        std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
                    for n in &names {
                        ns::del(n);
                    }
                    for d in &dirs {
                        let _ = std::fs::remove_dir_all(d);
                    }
                    eprintln!("braid: stopped by signal {sig}; the lab is removed");
                    std::process::exit(128 + sig);
                });
        }
    });
}

/// Removes `dir` too if a signal ends us (see [`guard_signals`]).
pub fn remove_on_signal(dir: &std::path::Path) {
    if let Ok(mut l) = LIVE.lock() {
        l.1.push(dir.to_owned());
    }
}

/// Checks what the lab needs, saying what is missing.
pub fn check_prerequisites() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the NAT lab needs root to create network namespaces, TUN devices and NAT rules; run it with sudo");
    }
    for (tool, hint) in [
        ("ip", "iproute2's `ip` (apt install iproute2)"),
        ("nft", "nftables' `nft` (scripts/install-lab-deps.sh)"),
    ] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok();
        if !found {
            bail!("the NAT lab needs {hint}");
        }
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!("the NAT lab needs /dev/net/tun (modprobe tun)");
    }
    Ok(())
}

/// A built lab; removed on drop.
pub struct Lab {
    pub config: LabConfig,
    pid: u32,
    names: Vec<String>,
    hops: Vec<Hop>,
    routers: [nat::Router; 2],
    /// Whether each site has moved to its second public address.
    rebound: [bool; 2],
    cut: bool,
}

impl Lab {
    /// Builds the lab (root); a half-built one is removed on failure.
    pub fn build(config: LabConfig) -> anyhow::Result<Lab> {
        check_prerequisites()?;
        ns::remove_stale();
        let pid = std::process::id();
        let routers = [0, 1].map(|s| nat::Router {
            kind: config.nat[s],
            host: HOST[s],
            lan: LAN[s].to_owned(),
            public: match config.topology.cgnat_of(s) {
                Some(_) => topology::CGNAT_INSIDE[s][0],
                None => PUBLIC[s][0],
            },
            relays: RELAY.to_vec(),
            block_udp: false,
        });
        let mut lab = Lab {
            config,
            pid,
            names: Vec::new(),
            hops: Vec::new(),
            routers,
            rebound: [false; 2],
            cut: false,
        };
        lab.wire().context("cannot build the NAT lab")?;
        Ok(lab)
    }

    /// The namespace of `node`.
    pub fn ns(&self, node: Node) -> String {
        ns::name(self.pid, node.name())
    }

    /// `program` to run on `node`; it dies with this process.
    pub fn command(
        &self,
        node: Node,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> anyhow::Result<Command> {
        ns::command(&self.ns(node), program)
    }

    /// The address `site`'s host is seen at from outside now (its own for a
    /// firewall).
    pub fn public(&self, site: usize) -> Ipv4Addr {
        if let Some(c) = self.config.topology.cgnat_of(site) {
            return PUBLIC[c][0];
        }
        if self.routers[site].kind.translates() {
            self.routers[site].public
        } else {
            HOST[site]
        }
    }

    /// `site`'s host's own address.
    pub fn host_addr(&self, site: usize) -> IpAddr {
        match self.config.topology {
            Topology::SameLan => topology::SAME_LAN_HOST[site].into(),
            Topology::Ipv6 => v6::HOST6[site].into(),
            _ => HOST[site].into(),
        }
    }

    /// Relay `r`'s address and `port`, in the lab's family.
    pub fn relay_addr(&self, r: usize, port: u16) -> SocketAddr {
        match self.config.topology {
            Topology::Ipv6 => SocketAddr::new(v6::RELAY6[r].into(), port),
            _ => SocketAddr::new(RELAY[r].into(), port),
        }
    }

    /// Makes `site`'s router drop (or pass again) all UDP its site sends
    /// out.
    pub fn block_udp(&mut self, site: usize, block: bool) -> anyhow::Result<()> {
        if self.routers[site].block_udp != block {
            self.routers[site].block_udp = block;
            self.apply_router(site)?;
        }
        Ok(())
    }

    pub fn nat(&self, site: usize) -> Nat {
        self.routers[site].kind
    }

    fn wire(&mut self) -> anyhow::Result<()> {
        let v6 = self.config.topology == Topology::Ipv6;
        for node in self.config.topology.nodes() {
            let name = self.ns(node);
            ns::add(&name)?;
            self.names.push(name.clone());
            if let Ok(mut l) = LIVE.lock() {
                l.0.push(name.clone());
            }
            if v6 {
                v6::prepare(&name)?;
                continue;
            }
            // Only IPv4 in the lab: no router solicitations on the hops.
            for key in ["all", "default"] {
                let _ = ns::sysctl(&name, &format!("net/ipv6/conf/{key}/disable_ipv6"), "1");
            }
        }
        if v6 {
            return self.wire_v6();
        }
        for n in [Node::Core, Node::RouterA, Node::RouterB] {
            ns::sysctl(&self.ns(n), "net/ipv4/ip_forward", "1")?;
        }
        self.wire_cgnats()?;
        for s in 0..2 {
            self.wire_uplink(s)?;
            match self.config.topology {
                Topology::SameLan if s == 0 => self.wire_same_lan()?,
                Topology::SameLan => {}
                _ => self.wire_lan(s)?,
            }
        }
        self.wire_relays()?;
        for s in 0..2 {
            self.apply_router(s)?;
        }
        self.apply_cgnats()?;
        self.apply_core()
    }

    /// A site's uplink: its router to the core (or to its CGNAT).
    fn wire_uplink(&mut self, s: usize) -> anyhow::Result<()> {
        let seeds = braid_link::seeds::links(self.config.seed, s);
        let router = self.ns(Node::router(s));
        let wan = self.wan_addrs(s).map(|a| format!("{a}/24"));
        let (far, far_addr) = self.uplink_far_end(s);
        let link = self.config.uplink[s].clone();
        let hop = self.hop(
            HOPS[s],
            (&router, nat::WAN, &wan),
            (&far, HOPS[s], far_addr),
            link,
            seeds,
        )?;
        self.hops.push(hop);
        ns::ip(&["-n", &router, "route", "add", "default", "dev", nat::WAN])?;
        if self.config.topology.cgnat_of(s).is_some() {
            return self.route_lan_at_cgnat(s);
        }
        // The site's private network, reached through its router (whose
        // rules let in only what its NAT kind allows).
        ns::ip(&["-n", &far, "route", "add", LAN[s], "dev", HOPS[s]])
    }

    /// A site's host on a veth to its router.
    fn wire_lan(&mut self, s: usize) -> anyhow::Result<()> {
        let router = self.ns(Node::router(s));
        let host = self.ns(Node::host(s));
        ns::ip(&[
            "-n", &router, "link", "add", "lan", "type", "veth", "peer", "name", "eth0", "netns",
            &host,
        ])?;
        ns::ip(&[
            "-n",
            &router,
            "addr",
            "add",
            &format!("{}/24", GATEWAY[s]),
            "dev",
            "lan",
        ])?;
        ns::ip(&["-n", &router, "link", "set", "dev", "lan", "up"])?;
        ns::ip(&[
            "-n",
            &host,
            "addr",
            "add",
            &format!("{}/24", HOST[s]),
            "dev",
            "eth0",
        ])?;
        ns::ip(&["-n", &host, "link", "set", "dev", "eth0", "up"])?;
        ns::ip(&[
            "-n",
            &host,
            "route",
            "add",
            "default",
            "via",
            &GATEWAY[s].to_string(),
        ])?;
        Ok(())
    }

    /// The relays' links.
    fn wire_relays(&mut self) -> anyhow::Result<()> {
        let core = self.ns(Node::Core);
        let seeds = |i: u64| braid_link::seeds::links(self.config.seed, i as usize);
        for r in 0..2 {
            let relay = self.ns(Node::relay(r));
            let addr = [format!("{}/24", RELAY[r])];
            let link = self.config.relay_link[r].clone();
            let hop = self.hop(
                HOPS[2 + r],
                (&relay, "up", &addr),
                (&core, HOPS[2 + r], RELAY_CORE[r]),
                link,
                seeds(2 + r as u64),
            )?;
            self.hops.push(hop);
            ns::ip(&["-n", &relay, "route", "add", "default", "dev", "up"])?;
        }
        debug_assert!(RELAY_NET.iter().all(|n| n.ends_with("/24")));
        Ok(())
    }

    /// A hop between a node's device (its addresses) and the core's.
    fn hop(
        &self,
        name: &str,
        (node_ns, node_dev, node_addrs): (&str, &str, &[String]),
        (core_ns, core_dev, core_addr): (&str, &str, &str),
        link: LinkConfig,
        seeds: [u64; 2],
    ) -> anyhow::Result<Hop> {
        let node_tun = ns::within(node_ns, || Tun::create(node_dev))??;
        let core_tun = ns::within(core_ns, || Tun::create(core_dev))??;
        for a in node_addrs {
            ns::ip(&["-n", node_ns, "addr", "add", a, "dev", node_dev])?;
        }
        ns::ip(&["-n", node_ns, "link", "set", "dev", node_dev, "up"])?;
        ns::ip(&["-n", core_ns, "addr", "add", core_addr, "dev", core_dev])?;
        ns::ip(&["-n", core_ns, "link", "set", "dev", core_dev, "up"])?;
        Hop::start(name, node_tun, core_tun, link.clone(), link, seeds)
    }

    fn apply_router(&self, site: usize) -> anyhow::Result<()> {
        let rules = match self.config.topology {
            Topology::Ipv6 => v6::firewall_rules(self.routers[site].block_udp),
            _ => nat::router_rules(&self.routers[site]),
        };
        ns::run(&self.ns(Node::router(site)), "nft", &["-f", "-"], &rules)
    }

    fn apply_core(&self) -> anyhow::Result<()> {
        let sites = [0, 1].map(|s| [UPLINK_NET[s], LAN[s]]);
        let rules = nat::core_rules(self.cut, [&sites[0], &sites[1]]);
        ns::run(&self.ns(Node::Core), "nft", &["-f", "-"], &rules)
    }

    fn flush(&self, site: usize) -> anyhow::Result<()> {
        self.flush_node(Node::router(site))
    }

    fn flush_node(&self, node: Node) -> anyhow::Result<()> {
        if self.config.topology == Topology::Ipv6 {
            // Nothing is translated; each run's ports are new anyway.
            return Ok(());
        }
        ns::within(&self.ns(node), nat::flush_conntrack)?
            .context("cannot flush the router's connection tracking")
    }

    /// Makes `site`'s router a NAT of `kind`, forgetting its mappings.
    pub fn set_nat(&mut self, site: usize, kind: Nat) -> anyhow::Result<()> {
        self.routers[site].kind = kind;
        self.apply_router(site)?;
        self.flush(site)
    }

    /// Forgets both routers' mappings (between runs: each starts afresh).
    pub fn forget_mappings(&self) -> anyhow::Result<()> {
        self.flush(0)?;
        self.flush(1)?;
        for c in self.config.topology.cgnats() {
            self.flush_node(Node::cgnat(c))?;
        }
        Ok(())
    }

    /// Moves `site`'s mappings to its other public address, as a NAT that
    /// lost its state and came back with another address does: the
    /// connection tracking is flushed, so every flow, the ones under way
    /// included, leaves from the new address from its next datagram (with
    /// the same port, or a new random one for a symmetric NAT), and what
    /// peers send to the old address is dropped.
    pub fn rebind(&mut self, site: usize) -> anyhow::Result<Ipv4Addr> {
        if !self.routers[site].kind.translates() {
            bail!("site {} has no NAT to rebind", site_name(site));
        }
        self.rebound[site] = !self.rebound[site];
        self.routers[site].public = self.wan_addrs(site)[usize::from(self.rebound[site])];
        self.apply_router(site)?;
        self.flush(site)?;
        Ok(self.routers[site].public)
    }

    /// Cuts (or restores) the direct path between the sites: the core
    /// drops what one site sends the other; relayed traffic passes.
    pub fn cut_direct(&mut self, cut: bool) -> anyhow::Result<()> {
        self.cut = cut;
        self.apply_core()
    }

    /// Takes a hop (one of [`HOPS`]) down or up: it loses everything.
    pub fn set_hop_up(&self, name: &str, up: bool) -> anyhow::Result<()> {
        let hop = self
            .hops
            .iter()
            .find(|h| h.name == name)
            .with_context(|| format!("no hop {name:?}; the hops are {}", HOPS.join(", ")))?;
        hop.set_up(up);
        Ok(())
    }

    /// The lab as JSON: namespaces, addresses, NAT kinds.
    pub fn describe(&self) -> serde_json::Value {
        let nodes: serde_json::Map<String, serde_json::Value> = (self.config.topology.nodes())
            .iter()
            .map(|&n| (n.name().to_owned(), self.ns(n).into()))
            .collect();
        let relays = [0, 1].map(|r| self.relay_addr(r, 0).ip().to_string());
        let hosts = [0, 1].map(|s| self.host_addr(s).to_string());
        serde_json::json!({
            "namespaces": nodes,
            "topology": self.config.topology,
            "relays": relays,
            "hosts": hosts,
            "public": [self.public(0).to_string(), self.public(1).to_string()],
            "nat": [self.nat(0), self.nat(1)],
            "direct_rtt_ms": self.config.direct_rtt().as_secs_f64() * 1e3,
        })
    }
}

pub(crate) fn site_name(site: usize) -> &'static str {
    ["a", "b"][site]
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Threads first: their TUN devices keep the namespaces alive.
        self.hops.clear();
        for n in &self.names {
            ns::del(n);
        }
        if let Ok(mut l) = LIVE.lock() {
            l.0.retain(|n| !self.names.contains(n));
        }
    }
}

/// `braid bench lab`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Prints the lab (namespaces and addresses) as one line of JSON, then \
reads commands on stdin, one per line, and answers each with `ok` or `error: ...`: \
`nat a|b KIND`, `rebind a|b` (the site's NAT moves to its other public address), \
`cut` / `heal` (the direct path between the sites), `down HOP` / `up HOP` \
(site-a, site-b, relay-a, relay-b), `forget` (both NATs' mappings), `quit`. The lab is removed \
at the end of input, on `quit` and on Ctrl-C. Run programs in it with \
`ip netns exec braid-lab-<pid>-host-a COMMAND`."
)]
pub struct LabArgs {
    /// Site A's NAT.
    #[arg(long, default_value = "restricted")]
    pub a: Nat,
    /// Site B's NAT.
    #[arg(long, default_value = "restricted")]
    pub b: Nat,
    /// Each site's uplink: RATE:DELAY[:LOSS[:QUEUE]] (one-way delay).
    #[arg(long, default_value = "100mbit:10ms:0:400", value_parser = parse_link)]
    pub uplink: LinkConfig,
    /// Each relay's link to the core: RATE:DELAY[:LOSS[:QUEUE]].
    #[arg(long, default_value = "40mbit:5ms:0:250", value_parser = parse_link)]
    pub relay_link: LinkConfig,
    /// Seed of the links' randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How the machines are joined.
    #[arg(long, value_enum, default_value = "sites")]
    pub topology: TopologyArg,
}

/// [`Topology`] on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TopologyArg {
    /// Two sites, each one host behind its own NAT router.
    Sites,
    /// Both hosts on one LAN behind site A's router.
    SameLan,
    /// Both sites' routers behind one carrier-grade NAT.
    SharedCgnat,
    /// Each site's router behind a carrier-grade NAT of its own.
    SeparateCgnats,
    /// Both hosts directly inside one carrier-grade NAT (no home NATs).
    InsideCgnat,
    /// IPv6 only; the routers are stateful firewalls.
    Ipv6,
}

impl From<TopologyArg> for Topology {
    fn from(t: TopologyArg) -> Topology {
        let cgnat = |shared, home_nat| Topology::Cgnat { shared, home_nat };
        match t {
            TopologyArg::Sites => Topology::Sites,
            TopologyArg::SameLan => Topology::SameLan,
            TopologyArg::SharedCgnat => cgnat(true, true),
            TopologyArg::SeparateCgnats => cgnat(false, true),
            TopologyArg::InsideCgnat => cgnat(true, false),
            TopologyArg::Ipv6 => Topology::Ipv6,
        }
    }
}

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    guard_signals();
    let mut lab = Lab::build(LabConfig {
        nat: [args.a, args.b],
        uplink: [args.uplink.clone(), args.uplink],
        relay_link: [args.relay_link.clone(), args.relay_link],
        seed: args.seed,
        topology: args.topology.into(),
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", lab.describe())?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"quit") {
            break;
        }
        let answer = match control(&mut lab, &words) {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("error: {e:#}"),
        };
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

fn control(lab: &mut Lab, words: &[&str]) -> anyhow::Result<()> {
    let site = |w: Option<&&str>| match w.copied() {
        Some("a") => Ok(0),
        Some("b") => Ok(1),
        _ => Err(anyhow::anyhow!("expected a site, a or b")),
    };
    match words {
        ["nat", s, kind] => lab.set_nat(site(Some(s))?, kind.parse().map_err(anyhow::Error::msg)?),
        ["rebind", s] => lab.rebind(site(Some(s))?).map(drop),
        ["cut"] => lab.cut_direct(true),
        ["heal"] => lab.cut_direct(false),
        ["down", hop] => lab.set_hop_up(hop, false),
        ["up", hop] => lab.set_hop_up(hop, true),
        ["forget"] => lab.forget_mappings(),
        [] => Ok(()),
        _ => bail!("unknown command; expected nat, rebind, cut, heal, down, up, forget or quit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_links_parse_with_the_units_of_scenario_files() {
        let l = parse_link("100mbit:10ms").unwrap();
        assert_eq!(l.rate, Some(Rate::mbit(100)));
        assert_eq!(l.delay, Duration::from_millis(10));
        assert_eq!(l.loss, 0.0);
        let l = parse_link("unlimited:50ms:1%:64KB").unwrap();
        assert_eq!(l.rate, None);
        assert_eq!(l.loss, 0.01);
        assert_eq!(l.queue, QueueLimit::Bytes(64_000));
        assert!(parse_link("100mbit").is_err());
        assert!(parse_link("0mbit:1ms").is_err());
        assert!(parse_link("1mbit:1ms:2").is_err());
    }

    #[test]
    fn the_direct_round_trip_crosses_both_uplinks_twice() {
        let link = |ms| LinkConfig {
            delay: Duration::from_millis(ms),
            ..LinkConfig::default()
        };
        let cfg = LabConfig {
            nat: [Nat::Cone; 2],
            uplink: [link(10), link(15)],
            relay_link: [link(1), link(1)],
            seed: 1,
            topology: Topology::Sites,
        };
        assert_eq!(cfg.direct_rtt(), Duration::from_millis(50));
    }
}
