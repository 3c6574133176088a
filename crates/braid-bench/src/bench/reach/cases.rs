//! The cases beyond two sites' NAT pairs: both hosts on one LAN, sites
//! behind carrier-grade NATs, IPv6 only, UDP blocked, a rebinding on
//! either side, and a key-mode receiver restarted; croc and
//! magic-wormhole beside braid where they run.

use serde::Serialize;

use super::{Case, Event, Part};
use crate::lab::{Nat, Topology};

/// Which program makes a case's transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Program {
    /// `braid send` and `braid recv`, as the case says.
    #[default]
    Braid,
    /// croc through its own relay on relay host A (`--croc` only).
    Croc,
    /// magic-wormhole through its mailbox server and transit relay on
    /// relay host A (`--wormhole` only).
    Wormhole,
}

impl Program {
    /// Its name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Program::Braid => "braid",
            Program::Croc => "croc",
            Program::Wormhole => "magic-wormhole",
        }
    }
}

/// What a case must do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The file arrives, verified by both sides.
    #[default]
    Verified,
    /// Both ends fail within `within_s` of their start, each with error
    /// `code` and exit status `exit`.
    Fails {
        code: &'static str,
        exit: i32,
        within_s: f64,
    },
}

/// What UDP blocked must do: complete, through the relay over TCP.
pub const UDP_BLOCKED: Expect = Expect::Verified;

/// What UDP blocked must do when the relay does not listen on TCP: fail
/// fast, naming the cause.
pub const UDP_BLOCKED_NO_TCP: Expect = Expect::Fails {
    code: "no_relay",
    exit: 3,
    within_s: 10.0,
};

impl Case {
    /// A braid transfer through `relays` between the two sites.
    pub fn new(part: Part, name: &str, nat: [Nat; 2], relays: &[usize]) -> Case {
        Case {
            part,
            name: name.to_owned(),
            nat,
            relays: relays.to_vec(),
            direct_only: false,
            event: None,
            topology: Topology::Sites,
            program: Program::Braid,
            expect: Expect::Verified,
            block_udp: false,
            relay_tcp: true,
            key_restart: false,
        }
    }

    fn on(mut self, topology: Topology) -> Case {
        self.topology = topology;
        self
    }

    fn by(mut self, program: Program) -> Case {
        self.program = program;
        self
    }
}

/// Names of the same-LAN cases, which the report compares.
pub const LAN_RELAY: &str = "same LAN, braid --relay";
pub const LAN_DIRECT: &str = "same LAN, braid --to LAN address";
pub const LAN_CROC: &str = "same LAN, croc";
pub const LAN_WORMHOLE: &str = "same LAN, magic-wormhole";

const RESTRICTED: [Nat; 2] = [Nat::Restricted, Nat::Restricted];

fn cgnat(shared: bool, home_nat: bool) -> Topology {
    Topology::Cgnat { shared, home_nat }
}

/// The cases of the parts beyond pairs, capacity, failover and croc.
pub fn more(parts: &[Part]) -> Vec<Case> {
    let mut out = Vec::new();
    let has = |p| parts.contains(&p);
    if has(Part::Lan) {
        out.extend(lan_cases());
    }
    if has(Part::Cgnat) {
        out.extend(cgnat_cases());
    }
    if has(Part::Ipv6) {
        let v6 = Case::new(Part::Ipv6, "IPv6 only", RESTRICTED, &[0]).on(Topology::Ipv6);
        out.push(v6);
    }
    if has(Part::UdpBlocked) {
        out.extend(udp_blocked_cases());
    }
    if has(Part::Rebinding) {
        for (site, name) in [
            (0, "site A's NAT rebinds (sender)"),
            (1, "site B's NAT rebinds (receiver)"),
        ] {
            out.push(Case {
                event: Some(Event::Rebind(site)),
                ..Case::new(Part::Rebinding, name, RESTRICTED, &[0])
            });
        }
    }
    if has(Part::KeyRestart) {
        out.push(Case {
            key_restart: true,
            ..Case::new(
                Part::KeyRestart,
                "key-mode receiver restarted",
                RESTRICTED,
                &[0],
            )
        });
    }
    out
}

/// Both hosts on one LAN: through relay A, directly with `--to`, and croc
/// and magic-wormhole beside them.
fn lan_cases() -> [Case; 4] {
    let lan = |name| Case::new(Part::Lan, name, RESTRICTED, &[0]).on(Topology::SameLan);
    let direct = Case {
        direct_only: true,
        relays: Vec::new(),
        ..lan(LAN_DIRECT)
    };
    [
        lan(LAN_RELAY),
        direct,
        lan(LAN_CROC).by(Program::Croc),
        lan(LAN_WORMHOLE).by(Program::Wormhole),
    ]
}

/// Carrier-grade NATs: shared or separate, with or without home NATs
/// under them, and croc and magic-wormhole behind a shared one.
fn cgnat_cases() -> [Case; 5] {
    let cg = |name, topology, nat| Case::new(Part::Cgnat, name, nat, &[0]).on(topology);
    let open = [Nat::None, Nat::None];
    [
        cg(
            "home NATs behind one shared CGNAT",
            cgnat(true, true),
            RESTRICTED,
        ),
        cg(
            "home NATs behind separate CGNATs",
            cgnat(false, true),
            RESTRICTED,
        ),
        cg("hosts directly inside one CGNAT", cgnat(true, false), open),
        cg("shared CGNAT, croc", cgnat(true, true), RESTRICTED).by(Program::Croc),
        cg(
            "shared CGNAT, magic-wormhole",
            cgnat(true, true),
            RESTRICTED,
        )
        .by(Program::Wormhole),
    ]
}

/// UDP blocked at the sites' routers: braid over the relay's TCP, braid
/// with a relay that has none (it must fail, and say why), croc and
/// magic-wormhole.
fn udp_blocked_cases() -> [Case; 4] {
    let blocked = |name| Case {
        block_udp: true,
        ..Case::new(Part::UdpBlocked, name, RESTRICTED, &[0])
    };
    [
        Case {
            expect: UDP_BLOCKED,
            ..blocked("UDP blocked, braid")
        },
        Case {
            expect: UDP_BLOCKED_NO_TCP,
            relay_tcp: false,
            ..blocked("UDP blocked, braid, relay without TCP")
        },
        blocked("UDP blocked, croc").by(Program::Croc),
        blocked("UDP blocked, magic-wormhole").by(Program::Wormhole),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_new_part_has_its_cases() {
        let all = more(&[
            Part::Lan,
            Part::Cgnat,
            Part::Ipv6,
            Part::UdpBlocked,
            Part::Rebinding,
            Part::KeyRestart,
        ]);
        assert_eq!(all.len(), 4 + 5 + 1 + 4 + 2 + 1);
        let names: std::collections::HashSet<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), all.len(), "names are unique");
        let direct = all.iter().find(|c| c.name == LAN_DIRECT).unwrap();
        assert!(direct.direct_only && direct.relays.is_empty());
        assert_eq!(direct.topology, Topology::SameLan);
        let blocked = all.iter().find(|c| c.name == "UDP blocked, braid").unwrap();
        assert!(blocked.block_udp && blocked.relay_tcp);
        assert_eq!(blocked.expect, UDP_BLOCKED);
        let no_tcp = all
            .iter()
            .find(|c| c.name == "UDP blocked, braid, relay without TCP")
            .unwrap();
        assert!(no_tcp.block_udp && !no_tcp.relay_tcp);
        assert_eq!(no_tcp.expect, UDP_BLOCKED_NO_TCP);
        let others: Vec<&Case> = all.iter().filter(|c| c.program != Program::Braid).collect();
        assert!(others
            .iter()
            .all(|c| c.expect == Expect::Verified && c.topology != Topology::Ipv6));
        // magic-wormhole runs wherever croc does, and only there.
        let of = |p| -> Vec<Part> {
            others
                .iter()
                .filter(|c| c.program == p)
                .map(|c| c.part)
                .collect()
        };
        assert_eq!(
            of(Program::Croc),
            [Part::Lan, Part::Cgnat, Part::UdpBlocked]
        );
        assert_eq!(of(Program::Wormhole), of(Program::Croc));
        assert!(more(&[Part::Pairs]).is_empty());
    }
}
