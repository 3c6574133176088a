//! The report's verdicts and tables for the cases beyond two sites' NAT
//! pairs ([`super::cases`]): one LAN, carrier-grade NATs, IPv6 only, UDP
//! blocked, rebinding on either side, a key-mode receiver restarted.

use std::fmt::Write as _;

use super::cases::{LAN_CROC, LAN_DIRECT, LAN_RELAY, LAN_WORMHOLE};
use super::report::{fixed, percent, row, verified_or, Report, Summary, Verdict};
use super::{Case, Expect, Part, Program};

/// Goodput through the relay (both hosts on one LAN) over the direct
/// `--to` transfer on that LAN.
const LAN_RATIO: f64 = 0.9;

fn lan_verdicts(r: &Report, v: &mut Vec<Verdict>) {
    let (Some(relay), Some(direct)) = (r.by_name(LAN_RELAY), r.by_name(LAN_DIRECT)) else {
        return;
    };
    let ratio = relay
        .goodput_mbps
        .zip(direct.goodput_mbps)
        .map(|(a, b)| a / b);
    v.push(Verdict {
        target: format!(
            "same LAN: braid --relay goodput ≥ {LAN_RATIO}x braid --to the LAN address"
        ),
        measured: verified_or(ratio, |x| {
            format!(
                "{x:.2}x ({} vs {} Mbit/s; wall {} vs {} s; direct path in {} of {} runs)",
                fixed(relay.goodput_mbps, 1),
                fixed(direct.goodput_mbps, 1),
                fixed(relay.wall_s, 2),
                fixed(direct.wall_s, 2),
                relay.direct_validated,
                relay.runs
            )
        }),
        met: Some(ratio.is_some_and(|x| x >= LAN_RATIO)),
    });
    for (name, program) in [(LAN_CROC, "croc"), (LAN_WORMHOLE, "magic-wormhole")] {
        let Some(other) = r.by_name(name) else {
            continue;
        };
        let ratio = other.wall_s.zip(relay.wall_s).map(|(o, b)| o / b);
        v.push(Verdict {
            target: format!(
                "same LAN: braid --relay faster than {program} (wall time to verified receipt)"
            ),
            measured: verified_or(ratio, |x| {
                format!(
                    "{program} / braid {x:.2}x ({} vs {} s)",
                    fixed(other.wall_s, 2),
                    fixed(relay.wall_s, 2)
                )
            }),
            met: Some(ratio.is_some_and(|x| x > 1.0)),
        });
    }
}

fn direct_text(s: &Summary) -> String {
    format!(
        "{} of {} verified; direct path in {} of {} runs{}",
        s.verified,
        s.runs,
        s.direct_validated,
        s.runs,
        s.validated_ms
            .map_or(String::new(), |m| format!(" (median {m:.0} ms)"))
    )
}

/// The new parts' verdicts; `relay_mbit` is a relay link's rate, where known.
pub fn verdicts(r: &Report, relay_mbit: Option<f64>) -> Vec<Verdict> {
    let mut v = Vec::new();
    lan_verdicts(r, &mut v);
    topology_verdicts(r, &mut v);
    for s in r.part(Part::UdpBlocked) {
        let case = r.cases.iter().find(|c| c.name == s.case).expect("its case");
        let (target, met) = udp_blocked_target(s, case, relay_mbit);
        v.push(Verdict {
            target,
            measured: udp_blocked_measured(s, case, relay_mbit),
            met,
        });
    }
    restart_verdicts(r, &mut v);
    v
}

/// Carrier-grade NATs (whether a direct path opens, no target) and IPv6
/// only (every transfer verified).
fn topology_verdicts(r: &Report, v: &mut Vec<Verdict>) {
    for s in r.part(Part::Cgnat).filter(|s| s.program == Program::Braid) {
        v.push(Verdict {
            target: format!("{}: does a direct path open (no target)", s.case),
            measured: direct_text(s),
            met: None,
        });
    }
    for s in r.part(Part::Ipv6) {
        v.push(Verdict {
            target: format!(
                "{}: every transfer verified, without --listen or --bind",
                s.case
            ),
            measured: direct_text(s),
            met: Some(s.verified == s.runs),
        });
    }
}

/// With UDP blocked, the target depends on what the case expects: braid
/// fails fast and says why, or a program that falls back to TCP gets through.
fn udp_blocked_target(s: &Summary, case: &Case, relay_mbit: Option<f64>) -> (String, Option<bool>) {
    match case.expect {
        Expect::Fails {
            code,
            exit,
            within_s,
        } => (
            format!(
                "{}: both ends fail with {code} (exit {exit}) within {within_s:.0} s, every run",
                s.case
            ),
            Some(s.as_expected == s.runs),
        ),
        Expect::Verified if s.program == Program::Croc => (
            format!("{}: croc reaches its relay over TCP (no target)", s.case),
            None,
        ),
        Expect::Verified if s.program == Program::Wormhole => (
            format!(
                "{}: magic-wormhole reaches its servers over TCP (no target)",
                s.case
            ),
            None,
        ),
        Expect::Verified => match relay_mbit {
            Some(cap) => (
                format!(
                    "{}: every transfer verified over TCP, goodput ≥ 80 % of the relay's link",
                    s.case
                ),
                Some(s.verified == s.runs && s.goodput_mbps.is_some_and(|g| g >= 0.8 * cap)),
            ),
            None => (
                format!("{}: every transfer verified", s.case),
                Some(s.verified == s.runs),
            ),
        },
    }
}

/// What a UDP-blocked case measured: how its ends failed, or how its
/// transfers went.
fn udp_blocked_measured(s: &Summary, case: &Case, relay_mbit: Option<f64>) -> String {
    match case.expect {
        Expect::Fails { .. } => format!(
            "{} of {}; sender {} s, receiver {} s, worst {} s; codes (sender / receiver) {}",
            s.as_expected,
            s.runs,
            fixed(s.fail_s[0], 2),
            fixed(s.fail_s[1], 2),
            fixed(s.fail_s_worst, 2),
            s.error_codes.join(", ")
        ),
        Expect::Verified => format!(
            "{} of {} verified; wall {} s; goodput {} Mbit/s{}",
            s.verified,
            s.runs,
            fixed(s.wall_s, 2),
            fixed(s.goodput_mbps, 1),
            match (relay_mbit, s.goodput_mbps) {
                (Some(cap), Some(g)) if s.program == Program::Braid => {
                    format!(" ({:.0} % of {cap:.0})", g / cap * 100.0)
                }
                _ => String::new(),
            }
        ),
    }
}

/// After a rebinding or a receiver's restart: does the transfer go on.
fn restart_verdicts(r: &Report, v: &mut Vec<Verdict>) {
    for s in r.part(Part::Rebinding) {
        v.push(Verdict {
            target: format!(
                "{}: survives, and the direct path comes back (no target)",
                s.case
            ),
            measured: format!(
                "{} of {} survived; direct path back in {} of {}",
                s.verified, s.runs, s.direct_back, s.runs
            ),
            met: None,
        });
    }
    for s in r.part(Part::KeyRestart) {
        v.push(Verdict {
            target: format!("{}: the second sender completes, every run", s.case),
            measured: format!(
                "{} of {}; the second sender's time to completion {} s ({} s from the restart)",
                s.verified,
                s.runs,
                fixed(s.second_s, 2),
                fixed(s.second_total_s, 2)
            ),
            met: Some(s.verified == s.runs),
        });
    }
}

fn topology_table(r: &Report, md: &mut String) {
    let parts = [Part::Lan, Part::Cgnat, Part::Ipv6];
    if !parts.iter().any(|&p| r.part(p).next().is_some()) {
        return;
    }
    md.push_str(
        "\n## One LAN, carrier-grade NATs, IPv6 only\n\nWall = from starting the side that sets \
         the transfer going (braid's sender; croc's receiver, once croc's sender is in its \
         relay's room; magic-wormhole's receiver, once its sender is connected to the mailbox \
         server) to the receiver's verified file. braid --to dials the receiver's LAN \
         address with no relay. croc runs with its LAN discovery where both hosts share a LAN. \
         magic-wormhole (`wormhole send --code` and `wormhole receive --accept-file`) meets \
         through its mailbox server on relay host A and offers a direct TCP connection beside \
         its transit relay there; its share direct is 100 % when the receiver says the data \
         came straight from the sender, 0 % through the transit relay. Validated ms and share \
         direct otherwise as in the tables above.\n\n\
         | case | lab | NATs | program | runs | verified | direct validated | validated ms | share direct | goodput Mbit/s | wall s |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in parts.iter().flat_map(|&p| r.part(p)) {
        let cells = [
            s.case.clone(),
            s.topology.clone(),
            s.pair.clone(),
            s.program.label().to_string(),
            s.runs.to_string(),
            s.verified.to_string(),
            s.direct_validated.to_string(),
            fixed(s.validated_ms, 0),
            percent(s.direct_share),
            fixed(s.goodput_mbps, 1),
            fixed(s.wall_s, 2),
        ];
        row(md, cells);
    }
}

fn blocked_table(r: &Report, md: &mut String) {
    if r.part(Part::UdpBlocked).next().is_none() {
        return;
    }
    md.push_str(
        "\n## UDP blocked (the sites' routers drop all UDP out)\n\nBoth braid ends start at \
         once; braid's ends reach the relay over TCP after 3 s of UDP silence, as croc and \
         magic-wormhole do throughout.\n\n\
         | case | runs | as expected | verified | sender fails after s | receiver fails after s | codes (sender / receiver) | wall s |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for s in r.part(Part::UdpBlocked) {
        let codes = if s.error_codes.is_empty() {
            "—".into()
        } else {
            s.error_codes.join(", ")
        };
        let cells = [
            s.case.clone(),
            s.runs.to_string(),
            s.as_expected.to_string(),
            s.verified.to_string(),
            fixed(s.fail_s[0], 2),
            fixed(s.fail_s[1], 2),
            codes,
            fixed(s.wall_s, 2),
        ];
        row(md, cells);
    }
}

pub fn markdown(r: &Report, md: &mut String) {
    topology_table(r, md);
    blocked_table(r, md);
    if r.part(Part::Rebinding).next().is_some() {
        let _ = writeln!(
            md,
            "\n## Rebinding (when {:.0} % of the file has arrived)\n\nDirect back = the other \
             side's record has an answered connection to the rebound site's new public address. \
             Sender s, receiver s = from starting the sender to each one's record (median; the \
             receiver's worst too).\n\n\
             | case | NATs | relays | runs | survived | event at s | direct back | goodput Mbit/s | share direct | sender s | receiver s (median / worst) |\n\
             |---|---|---|---|---|---|---|---|---|---|---|",
            super::EVENT_AT * 100.0
        );
        for s in r.part(Part::Rebinding) {
            let more = [
                fixed(s.event_at_s, 2),
                format!("{} of {}", s.direct_back, s.runs),
                fixed(s.goodput_mbps, 1),
                percent(s.direct_share),
                fixed(s.sender_s, 2),
                format!("{} / {}", fixed(s.wall_s, 2), fixed(s.wall_s_worst, 2)),
            ];
            row(md, s.lead().into_iter().chain(more));
        }
    }
    if r.part(Part::KeyRestart).next().is_some() {
        md.push_str(
            "\n## A key-mode receiver restarted\n\n`braid recv --relay ... --key` takes one \
             transfer from `braid send --peer`, is started again as soon as it exits, and a \
             second sender comes once it waits again. Time to completion = from starting the \
             second sender to its verified record.\n\n\
             | case | runs | verified | second sender s | from the restart s | goodput Mbit/s |\n\
             |---|---|---|---|---|---|\n",
        );
        for s in r.part(Part::KeyRestart) {
            let cells = [
                s.case.clone(),
                s.runs.to_string(),
                s.verified.to_string(),
                fixed(s.second_s, 2),
                fixed(s.second_total_s, 2),
                fixed(s.goodput_mbps, 1),
            ];
            row(md, cells);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{cases, ReachArgs, Run};
    use super::*;
    use crate::lab::{LabConfig, Nat, Topology};

    #[test]
    fn one_lan_compares_braid_with_croc_and_magic_wormhole() {
        let cases = cases(&[Part::Lan, Part::UdpBlocked]);
        let idx = |n: &str| cases.iter().position(|c| c.name == n).unwrap();
        let run = |name: &str, wall: f64, goodput: Option<f64>, direct: Option<f64>| Run {
            round: 1,
            case: idx(name),
            verified: true,
            as_expected: true,
            wall_s: Some(wall),
            goodput_mbps: goodput,
            direct_share: direct,
            ..Run::default()
        };
        let runs = [
            run(LAN_RELAY, 0.5, Some(500.0), Some(1.0)),
            run(LAN_DIRECT, 0.1, Some(3000.0), None),
            run(LAN_CROC, 1.5, None, None),
            run(LAN_WORMHOLE, 2.0, None, Some(1.0)),
            run("UDP blocked, magic-wormhole", 9.0, None, Some(0.0)),
        ];
        let lab = LabConfig {
            nat: [Nat::Cone; 2],
            uplink: std::array::from_fn(|_| crate::lab::parse_link("100mbit:10ms").unwrap()),
            relay_link: std::array::from_fn(|_| crate::lab::parse_link("40mbit:5ms").unwrap()),
            seed: 1,
            topology: Topology::Sites,
        };
        let args = <ReachArgs as clap::FromArgMatches>::from_arg_matches(
            &<ReachArgs as clap::Args>::augment_args(clap::Command::new("t"))
                .get_matches_from(["t"]),
        )
        .unwrap();
        let r = Report::new(&cases, &runs, &lab, &args, Vec::new());
        let verdict = |start: &str| {
            r.verdicts
                .iter()
                .find(|v| v.target.starts_with(start))
                .unwrap_or_else(|| panic!("no verdict {start}: {:?}", r.verdicts))
        };
        let croc = verdict("same LAN: braid --relay faster than croc");
        assert_eq!(croc.measured, "croc / braid 3.00x (1.50 vs 0.50 s)");
        let wormhole = verdict("same LAN: braid --relay faster than magic-wormhole");
        assert_eq!(
            wormhole.measured,
            "magic-wormhole / braid 4.00x (2.00 vs 0.50 s)"
        );
        assert_eq!(wormhole.met, Some(true));
        let blocked = verdict("UDP blocked, magic-wormhole: magic-wormhole reaches");
        assert_eq!(blocked.met, None);
        let md = r.markdown();
        assert!(
            md.contains("| same LAN, magic-wormhole | one LAN behind one NAT | restricted (one router) | magic-wormhole | 1 | 1 | 0 | — | 100 % | — | 2.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| UDP blocked, magic-wormhole | 1 | 1 | 1 |"),
            "{md}"
        );
    }
}
