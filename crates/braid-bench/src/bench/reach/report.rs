//! reach.md and reach.json: the verdicts first, then medians per case.

use std::fmt::Write as _;

use braid_link::units::Rate;
use braid_link::LinkConfig;
use serde::Serialize;

use super::croc::CrocRow;
use super::{Case, Part, ReachArgs, Run};
use crate::bench::stats::median;
use crate::lab::LabConfig;

/// The direct path must be validated within one round trip plus this.
const DIRECT_SLACK_MS: f64 = 300.0;
/// ... in at least this share of runs.
const DIRECT_SHARE: f64 = 0.95;
/// Data must flow over the relays within this, where no direct path opens.
const TO_DATA_S: f64 = 2.0;
/// Goodput through relays, of their links' rates.
const RELAY_SHARE: f64 = 0.9;

/// Medians of one case.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub case: String,
    pub part: Part,
    pub pair: String,
    pub relays: String,
    pub runs: usize,
    pub verified: usize,
    /// Runs whose sender validated a direct path.
    pub direct_validated: usize,
    /// ... within one round trip + 300 ms of pairing.
    pub direct_in_time: usize,
    pub validated_ms: Option<f64>,
    pub to_data_s: Option<f64>,
    pub to_data_s_worst: Option<f64>,
    pub goodput_mbps: Option<f64>,
    pub direct_share: Option<f64>,
    pub event_at_s: Option<f64>,
    pub wall_s: Option<f64>,
    /// Relay CPU seconds per GB forwarded (runs where it lived to the end).
    pub relay_cpu_s_per_gb: Option<f64>,
    pub relay_rss_peak_mb: Option<f64>,
    pub program: super::Program,
    /// How the lab was wired.
    pub topology: String,
    /// Runs that did what the case expects.
    pub as_expected: usize,
    /// After a rebinding: runs whose other side had an answered
    /// connection to the rebound site's new address.
    pub direct_back: usize,
    /// Expected failures: median time to fail of the sender and of the
    /// receiver, the worst of either, and the codes seen.
    pub fail_s: [Option<f64>; 2],
    pub fail_s_worst: Option<f64>,
    pub error_codes: Vec<String>,
    /// Key restart: the second sender's time to its verified record, from
    /// its start and from the receiver's restart.
    pub second_s: Option<f64>,
    pub second_total_s: Option<f64>,
    /// From starting the sender to its record, and the worst of the
    /// receiver's wall times.
    pub sender_s: Option<f64>,
    pub wall_s_worst: Option<f64>,
}

/// One target and how it fared; `met` is `None` when there is no target
/// (a figure shown for what it is) or nothing to judge it by.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
}

pub struct Report {
    pub cases: Vec<Case>,
    pub runs: Vec<Run>,
    pub summaries: Vec<Summary>,
    pub verdicts: Vec<Verdict>,
    pub notes: Vec<String>,
    pub lab: Vec<String>,
    pub size: u64,
    pub rounds: u32,
    pub direct_rtt_ms: f64,
    pub croc: Vec<CrocRow>,
    /// The report's file name (without .md and .json).
    pub name: String,
}

fn mbit(link: &LinkConfig) -> Option<f64> {
    match link.rate {
        Some(Rate::BitsPerSec(b)) if link.trace.is_none() => Some(b as f64 / 1e6),
        _ => None,
    }
}

fn describe(link: &LinkConfig) -> String {
    link.describe(None)
}

fn med(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    median(&mut v.into_iter().collect::<Vec<_>>())
}

/// A figure with `d` decimals, "—" for none.
pub(super) fn fixed(v: Option<f64>, d: usize) -> String {
    v.map_or("—".to_owned(), |v| format!("{v:.d$}"))
}

/// One row of a markdown table.
pub(super) fn row(md: &mut String, cells: impl IntoIterator<Item = String>) {
    let cells: Vec<String> = cells.into_iter().collect();
    let _ = writeln!(md, "| {} |", cells.join(" | "));
}

impl Summary {
    /// The cells that open a table of cases between two sites: case,
    /// NATs, relays, runs and how many were verified (or survived).
    pub(super) fn lead(&self) -> [String; 5] {
        [
            self.case.clone(),
            self.pair.clone(),
            self.relays.clone(),
            self.runs.to_string(),
            self.verified.to_string(),
        ]
    }
}

/// A share as a whole percentage, "—" for none.
pub(super) fn percent(v: Option<f64>) -> String {
    v.map_or("—".into(), |d| format!("{:.0} %", d * 100.0))
}

fn summarise(index: usize, case: &Case, runs: &[Run], direct_limit_ms: f64) -> Summary {
    let of: Vec<&Run> = runs.iter().filter(|r| r.case == index).collect();
    let validated: Vec<f64> = of.iter().filter_map(|r| r.validated_ms).collect();
    let alive: Vec<_> = of
        .iter()
        .flat_map(|r| &r.relays)
        .filter(|u| !u.killed)
        .collect();
    Summary {
        case: case.name.clone(),
        part: case.part,
        pair: case.pair(),
        relays: case.relays_text(),
        runs: of.len(),
        verified: of.iter().filter(|r| r.verified).count(),
        direct_validated: validated.len(),
        direct_in_time: validated.iter().filter(|&&v| v <= direct_limit_ms).count(),
        validated_ms: med(validated.iter().copied()),
        to_data_s: med(of.iter().filter_map(|r| r.to_data_s)),
        to_data_s_worst: of
            .iter()
            .filter_map(|r| r.to_data_s)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
        goodput_mbps: med(of
            .iter()
            .filter(|r| r.verified)
            .filter_map(|r| r.goodput_mbps)),
        direct_share: med(of.iter().filter_map(|r| r.direct_share)),
        event_at_s: med(of.iter().filter_map(|r| r.event_at_s)),
        wall_s: med(of.iter().filter(|r| r.verified).filter_map(|r| r.wall_s)),
        relay_cpu_s_per_gb: med(alive.iter().filter_map(|u| {
            let gb = u.forwarded_bytes? as f64 / 1e9;
            (gb > 0.0).then(|| u.cpu_s / gb)
        })),
        relay_rss_peak_mb: alive
            .iter()
            .map(|u| u.rss_peak_bytes as f64 / 1e6)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
        program: case.program,
        topology: case.topology.describe().to_owned(),
        as_expected: of.iter().filter(|r| r.as_expected).count(),
        direct_back: of
            .iter()
            .filter(|r| r.direct_after_event == Some(true))
            .count(),
        fail_s: [0, 1].map(|i| med(of.iter().filter_map(|r| r.fail_s.as_ref()?[i]))),
        fail_s_worst: of
            .iter()
            .filter_map(|r| r.fail_s.as_ref())
            .flat_map(|f| f.iter().flatten().copied())
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
        error_codes: error_codes(&of),
        second_s: med(of.iter().filter_map(|r| r.second_s)),
        second_total_s: med(of.iter().filter_map(|r| r.second_total_s)),
        sender_s: med(of.iter().filter(|r| r.verified).filter_map(|r| r.sender_s)),
        wall_s_worst: of
            .iter()
            .filter(|r| r.verified)
            .filter_map(|r| r.wall_s)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
    }
}

/// The distinct "sender's code / receiver's code" of expected failures.
fn error_codes(of: &[&Run]) -> Vec<String> {
    let mut v: Vec<String> = of
        .iter()
        .filter_map(|r| r.error_codes.as_ref())
        .map(|[s, r]| {
            let c = |c: &Option<String>| c.clone().unwrap_or_else(|| "none".into());
            format!("{} / {}", c(s), c(r))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

impl Report {
    pub fn new(
        cases: &[Case],
        runs: &[Run],
        lab: &LabConfig,
        args: &ReachArgs,
        croc: Vec<CrocRow>,
    ) -> Report {
        let direct_rtt_ms = lab.direct_rtt().as_secs_f64() * 1e3;
        let limit = direct_rtt_ms + DIRECT_SLACK_MS;
        let summaries: Vec<Summary> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| summarise(i, c, runs, limit))
            .collect();
        let relay_rtt = 2.0
            * (lab.uplink[0].delay + lab.uplink[1].delay + 2 * lab.relay_link[0].delay)
                .as_secs_f64()
            * 1e3;
        let mut report = Report {
            cases: cases.to_vec(),
            runs: runs.to_vec(),
            summaries,
            verdicts: Vec::new(),
            notes: Vec::new(),
            lab: vec![
                format!(
                    "site uplinks (site A sends, site B receives): {}",
                    describe(&lab.uplink[0])
                ),
                format!("relay links (relay A, relay B): {}", describe(&lab.relay_link[0])),
                format!(
                    "round trips: {direct_rtt_ms:.0} ms direct between the sites, {relay_rtt:.0} ms through a relay"
                ),
            ],
            size: args.size,
            rounds: args.rounds,
            direct_rtt_ms,
            croc,
            name: args.report_name.clone(),
        };
        report.judge(lab);
        report
    }

    pub(super) fn by_name(&self, name: &str) -> Option<&Summary> {
        self.summaries.iter().find(|s| s.case == name && s.runs > 0)
    }

    fn judge(&mut self, lab: &LabConfig) {
        let relay_mbit = mbit(&lab.relay_link[0]);
        let mut v = self.pair_verdicts();
        v.extend(self.failed_verdict());
        v.extend(self.relay_verdicts(relay_mbit));
        v.extend(self.failover_verdicts());
        v.extend(super::report_more::verdicts(self, relay_mbit));
        self.verdicts = v;
        if let Some(note) = self.relay_cost() {
            self.notes.push(note);
        }
    }

    /// The NAT pairs' targets: cone pairs find the direct path in time,
    /// symmetric pairs reach data over the relays in time.
    fn pair_verdicts(&self) -> Vec<Verdict> {
        let limit = self.direct_rtt_ms + DIRECT_SLACK_MS;
        let mut v = Vec::new();
        for pair in ["cone–cone", "cone–symmetric"] {
            if let Some(s) = self.by_name(pair) {
                let share = s.direct_in_time as f64 / s.runs as f64;
                v.push(Verdict {
                    target: format!(
                        "{pair}: direct path validated within 1 RTT + 300 ms ({limit:.0} ms) in ≥ {:.0} % of runs",
                        DIRECT_SHARE * 100.0
                    ),
                    measured: format!(
                        "{:.0} % ({} of {}); median {}",
                        share * 100.0,
                        s.direct_in_time,
                        s.runs,
                        s.validated_ms.map_or("—".into(), |m| format!("{m:.0} ms"))
                    ),
                    met: Some(share >= DIRECT_SHARE),
                });
            }
        }
        if let Some(s) = self.by_name("symmetric–symmetric") {
            let all = self
                .runs
                .iter()
                .filter(|r| self.cases[r.case].name == s.case)
                .all(|r| r.to_data_s.is_some_and(|t| t <= TO_DATA_S));
            v.push(Verdict {
                target: format!(
                    "symmetric–symmetric: data flows over the relays within {TO_DATA_S:.0} s of starting the sender, every run"
                ),
                measured: match (s.to_data_s, s.to_data_s_worst) {
                    (Some(m), Some(w)) => format!("median {m:.2} s, worst {w:.2} s"),
                    _ => "no session opened".into(),
                },
                met: Some(all),
            });
        }
        v
    }

    /// No transfer of the NAT pairs or the capacity cases may fail.
    fn failed_verdict(&self) -> Option<Verdict> {
        let judged: Vec<&Run> = self
            .runs
            .iter()
            .filter(|r| matches!(self.cases[r.case].part, Part::Pairs | Part::Capacity))
            .collect();
        if judged.is_empty() {
            return None;
        }
        let failed = judged.iter().filter(|r| !r.verified).count();
        Some(Verdict {
            target: "transfers that failed (NAT pairs and capacity): 0".into(),
            measured: format!("{failed} of {}", judged.len()),
            met: Some(failed == 0),
        })
    }

    /// Capacity: goodput through one and two relays against their links'
    /// rates, and a relay beside the direct path against the direct path
    /// alone.
    fn relay_verdicts(&self, relay_mbit: Option<f64>) -> Vec<Verdict> {
        let mut v = Vec::new();
        for (name, links) in [("one relay", 1.0), ("two relays", 2.0)] {
            let (Some(s), Some(cap)) = (self.by_name(name), relay_mbit) else {
                continue;
            };
            let cap = cap * links;
            let what = if links > 1.0 {
                "two relays on different links: goodput of the sum of their links' rates"
            } else {
                "one relay: goodput of its link's rate"
            };
            v.push(Verdict {
                target: format!("{what} ≥ {:.0} %", RELAY_SHARE * 100.0),
                measured: verified_or(s.goodput_mbps, |g| {
                    format!("{:.1} % ({g:.1} of {cap:.0} Mbit/s)", g / cap * 100.0)
                }),
                met: Some(s.goodput_mbps.is_some_and(|g| g >= RELAY_SHARE * cap)),
            });
        }
        if let (Some(alone), Some(both)) =
            (self.by_name("direct alone"), self.by_name("direct + relay"))
        {
            let ratio = both
                .goodput_mbps
                .zip(alone.goodput_mbps)
                .map(|(b, a)| b / a);
            v.push(Verdict {
                target: "direct + relay vs direct alone: goodput ≥ 1x".into(),
                measured: verified_or(ratio, |r| {
                    format!(
                        "{r:.2}x ({:.1} vs {:.1} Mbit/s)",
                        both.goodput_mbps.unwrap_or(0.0),
                        alone.goodput_mbps.unwrap_or(0.0)
                    )
                }),
                met: Some(ratio.is_some_and(|r| r >= 1.0)),
            });
        }
        v
    }

    /// Failover: every transfer survives its event (a rebinding here has no
    /// target; the rebinding part judges it).
    fn failover_verdicts(&self) -> Vec<Verdict> {
        self.summaries
            .iter()
            .filter(|s| s.part == Part::Failover && s.runs > 0)
            .map(|s| {
                let case = self
                    .cases
                    .iter()
                    .find(|c| c.name == s.case)
                    .expect("its case");
                let targeted = !matches!(case.event, Some(super::Event::Rebind(_)));
                Verdict {
                    target: format!(
                        "{}: the transfer survives{}",
                        s.case,
                        if targeted { "" } else { " (no target)" }
                    ),
                    measured: format!("{} of {} verified", s.verified, s.runs),
                    met: targeted.then_some(s.verified == s.runs),
                }
            })
            .collect()
    }

    /// Relay cost, for what it is: CPU per GB forwarded and peak memory of
    /// the relays that lived through their runs.
    fn relay_cost(&self) -> Option<String> {
        let alive: Vec<&super::RelayUse> = self
            .runs
            .iter()
            .flat_map(|r| &r.relays)
            .filter(|u| !u.killed)
            .collect();
        let per_gb = med(alive.iter().filter_map(|u| {
            let gb = u.forwarded_bytes? as f64 / 1e9;
            (gb > 0.01).then(|| u.cpu_s / gb)
        }))?;
        let rss = alive.iter().map(|u| u.rss_peak_bytes).max()?;
        let carried: Vec<_> = alive
            .iter()
            .filter(|u| u.forwarded_bytes.is_some_and(|b| b > 10_000_000))
            .collect();
        let own = carried.iter().all(|u| u.counted_by_relay);
        Some(format!(
            "relay cost: {per_gb:.2} CPU s per GB forwarded (median over {} relay runs that carried over 10 MB; {}), peak RSS {:.1} MB at most",
            carried.len(),
            if own {
                "bytes as the relays counted them"
            } else {
                "bytes estimated from the sender's connections through each relay, the relay's own count being unreadable"
            },
            rss as f64 / 1e6
        ))
    }

    pub fn markdown(&self) -> String {
        let mut md = String::from("# Reach: NAT traversal and relays in the lab\n\n");
        self.verdicts_markdown(&mut md);
        self.method_markdown(&mut md);
        self.pairs_markdown(&mut md);
        self.capacity_markdown(&mut md);
        self.failover_markdown(&mut md);
        self.failures_markdown(&mut md);
        super::report_more::markdown(self, &mut md);
        super::croc::markdown(&self.croc, &mut md);
        md
    }

    /// The verdict line, the table of targets and the notes.
    fn verdicts_markdown(&self, md: &mut String) {
        let judged: Vec<&Verdict> = self.verdicts.iter().filter(|v| v.met.is_some()).collect();
        let met = judged.iter().filter(|v| v.met == Some(true)).count();
        if !judged.is_empty() {
            let _ = writeln!(md, "**Verdict: {met} of {} targets met.**\n", judged.len());
        }
        if !self.verdicts.is_empty() {
            md.push_str("| target | measured | |\n|---|---|---|\n");
            for v in &self.verdicts {
                let mark = match v.met {
                    Some(true) => "✓",
                    Some(false) => "✗",
                    None => "—",
                };
                let _ = writeln!(md, "| {} | {} | {mark} |", v.target, v.measured);
            }
            md.push('\n');
        }
        for n in &self.notes {
            let _ = writeln!(md, "- {n}");
        }
        if let Some(line) = super::croc::summary_line(&self.croc) {
            let _ = writeln!(md, "- {line}");
        }
    }

    /// How the figures were taken: the command, what each run starts, what
    /// each column measures, and the lab.
    fn method_markdown(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n```sh\n{}\n```\n\n{} per transfer, {} rounds, cases rotated each round, medians \
             (every run in [{name}.json]({name}.json)). Each run starts its relays (`braid relay \
             --serve`), the receiver (`braid recv --relay ... --code`) on site B's host and the \
             sender (`braid send --relay ...`) on site A's, each a process in its machine's \
             network namespace. Validated = the sender's `reach.direct.validated_ms`, from the \
             first pairing to the direct connection's first acknowledgement. To data = from \
             starting the sender to its session being open (when its record arrived, less its \
             `duration_s`). Goodput = the sender's, from the handshake to the receiver's verdict.\n",
            crate::bench::command_line(),
            braid::text::size(self.size),
            self.rounds,
            name = self.name,
        );
        md.push_str("The lab (`braid bench lab` builds the same one):\n\n");
        for l in &self.lab {
            let _ = writeln!(md, "- {l}");
        }
        md.push_str(
            "- NATs (nftables): cone = endpoint-independent mapping and filtering; restricted = \
             endpoint-independent mapping, address-and-port-dependent filtering (Linux's \
             masquerade); symmetric = a random port per destination; firewall = no NAT, UDP only \
             to and from the relays. Site A's NAT is named first.\n",
        );
    }

    /// The medians of one part's cases that ran.
    pub(super) fn part(&self, p: Part) -> impl Iterator<Item = &Summary> {
        self.summaries
            .iter()
            .filter(move |s| s.part == p && s.runs > 0)
    }

    fn pairs_markdown(&self, md: &mut String) {
        if self.part(Part::Pairs).next().is_none() {
            return;
        }
        md.push_str("\n## NAT pairs (relays A and B given to both sides)\n\n");
        md.push_str("| pair | runs | verified | direct validated | within 1 RTT + 300 ms | validated ms | to data s (median / worst) | share direct | goodput Mbit/s |\n|---|---|---|---|---|---|---|---|---|\n");
        for s in self.part(Part::Pairs) {
            let to_data = format!(
                "{} / {}",
                fixed(s.to_data_s, 2),
                fixed(s.to_data_s_worst, 2)
            );
            let cells = [
                s.case.clone(),
                s.runs.to_string(),
                s.verified.to_string(),
                s.direct_validated.to_string(),
                s.direct_in_time.to_string(),
                fixed(s.validated_ms, 0),
                to_data,
                percent(s.direct_share),
                fixed(s.goodput_mbps, 1),
            ];
            row(md, cells);
        }
    }

    fn capacity_markdown(&self, md: &mut String) {
        if self.part(Part::Capacity).next().is_none() {
            return;
        }
        md.push_str("\n## Capacity\n\n| case | NATs | relays | runs | verified | goodput Mbit/s | share direct | relay CPU s/GB | relay peak RSS MB |\n|---|---|---|---|---|---|---|---|---|\n");
        for s in self.part(Part::Capacity) {
            let more = [
                fixed(s.goodput_mbps, 1),
                percent(s.direct_share),
                fixed(s.relay_cpu_s_per_gb, 2),
                fixed(s.relay_rss_peak_mb, 1),
            ];
            row(md, s.lead().into_iter().chain(more));
        }
    }

    fn failover_markdown(&self, md: &mut String) {
        if self.part(Part::Failover).next().is_none() {
            return;
        }
        let _ = writeln!(
            md,
            "\n## Failover (the event when {:.0} % of the file has arrived)\n\n| case | NATs | relays | runs | survived | event at s | goodput Mbit/s | share direct |\n|---|---|---|---|---|---|---|---|",
            super::EVENT_AT * 100.0
        );
        for s in self.part(Part::Failover) {
            let more = [
                fixed(s.event_at_s, 2),
                fixed(s.goodput_mbps, 1),
                percent(s.direct_share),
            ];
            row(md, s.lead().into_iter().chain(more));
        }
    }

    /// Every run's error, with its round and case.
    fn failures_markdown(&self, md: &mut String) {
        let failures: Vec<String> = self
            .runs
            .iter()
            .filter_map(|r| {
                let e = r.error.as_ref()?;
                Some(format!(
                    "round {}, {}: {e}",
                    r.round, self.cases[r.case].name
                ))
            })
            .collect();
        if !failures.is_empty() {
            md.push_str("\n## Runs that failed\n\n");
            for f in failures {
                let _ = writeln!(md, "- {}", braid::text::escape(&f));
            }
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "size": self.size,
            "rounds": self.rounds,
            "lab": self.lab,
            "direct_rtt_ms": self.direct_rtt_ms,
            "verdicts": self.verdicts,
            "notes": self.notes,
            "cases": self.cases,
            "medians": self.summaries,
            "runs": self.runs,
            "croc": self.croc,
        })
    }
}

/// A verdict's measurement, or what it says when no transfer verified.
pub(super) fn verified_or(figure: Option<f64>, say: impl FnOnce(f64) -> String) -> String {
    figure.map_or("no transfer verified".into(), say)
}

#[cfg(test)]
mod tests {
    use super::super::{cases, RelayUse};
    use super::*;
    use crate::lab::Nat;
    use std::time::Duration;

    fn lab() -> LabConfig {
        LabConfig {
            nat: [Nat::Cone; 2],
            uplink: std::array::from_fn(|_| crate::lab::parse_link("100mbit:10ms").unwrap()),
            relay_link: std::array::from_fn(|_| crate::lab::parse_link("40mbit:5ms").unwrap()),
            seed: 1,
            topology: crate::lab::Topology::Sites,
        }
    }

    fn run(
        case: usize,
        round: u32,
        verified: bool,
        goodput: f64,
        validated_ms: Option<f64>,
    ) -> Run {
        Run {
            round,
            case,
            verified,
            goodput_mbps: Some(goodput),
            validated_ms,
            to_data_s: Some(0.5),
            relays: vec![RelayUse {
                relay: 0,
                cpu_s: 0.2,
                rss_peak_bytes: 8_000_000,
                forwarded_bytes: Some(20_000_000),
                counted_by_relay: true,
                killed: false,
            }],
            ..Run::default()
        }
    }

    #[test]
    fn verdicts_follow_the_figures() {
        let cases = cases(&[Part::Pairs, Part::Capacity]);
        let idx = |n: &str| cases.iter().position(|c| c.name == n).unwrap();
        let cone = idx("cone–cone");
        let one = idx("one relay");
        let two = idx("two relays");
        // 40 ms direct RTT: the limit is 340 ms; one late run of 20 is 95 %.
        let mut runs: Vec<Run> = (1..=19)
            .map(|r| run(cone, r, true, 90.0, Some(100.0)))
            .collect();
        runs.push(run(cone, 20, true, 90.0, Some(341.0)));
        runs.push(run(one, 1, true, 36.5, None));
        runs.push(run(two, 1, false, 0.0, None));
        let args = <ReachArgs as clap::FromArgMatches>::from_arg_matches(
            &<ReachArgs as clap::Args>::augment_args(clap::Command::new("t"))
                .get_matches_from(["t"]),
        )
        .unwrap();
        let r = Report::new(&cases, &runs, &lab(), &args, Vec::new());
        let verdict = |start: &str| {
            r.verdicts
                .iter()
                .find(|v| v.target.starts_with(start))
                .unwrap_or_else(|| panic!("no verdict {start}: {:?}", r.verdicts))
        };
        assert_eq!(verdict("cone–cone").met, Some(true));
        assert!(verdict("cone–cone").measured.starts_with("95 % (19 of 20)"));
        assert_eq!(verdict("one relay").met, Some(true), "36.5 of 40 is 91 %");
        assert_eq!(verdict("two relays").met, Some(false));
        assert_eq!(verdict("transfers that failed").measured, "1 of 22");
        assert_eq!(verdict("transfers that failed").met, Some(false));
        // No runs, no verdict.
        assert!(r
            .verdicts
            .iter()
            .all(|v| !v.target.starts_with("symmetric–symmetric")));
        assert!(
            r.notes[0].starts_with("relay cost: 10.00 CPU s per GB"),
            "{}",
            r.notes[0]
        );
        let md = r.markdown();
        assert!(md.contains("**Verdict: 2 of 4 targets met.**"), "{md}");
        assert_eq!(
            r.direct_rtt_ms,
            Duration::from_millis(40).as_secs_f64() * 1e3
        );
    }

    /// Every part of the report, from fixed runs, renders byte for byte as
    /// it did (report_golden.md); REACH_GOLDEN_WRITE=PATH writes it anew.
    #[test]
    fn every_part_renders_as_before() {
        let cases = cases(<Part as clap::ValueEnum>::value_variants());
        let mut runs = Vec::new();
        for (i, _) in cases.iter().enumerate() {
            for round in 1..=3u32 {
                let mut r = run(
                    i,
                    round,
                    !(i + round as usize).is_multiple_of(4),
                    10.0 + i as f64 + f64::from(round),
                    Some(50.0 * f64::from(round)),
                );
                r.direct_share = Some(0.1 * f64::from(round));
                r.event_at_s = Some(1.5);
                r.wall_s = Some(3.0);
                r.sender_s = Some(2.5);
                r.paired_ms = vec![20.0, 30.0];
                r.as_expected = round != 2;
                r.direct_after_event = Some(round == 1);
                r.second_s = Some(1.0);
                r.second_total_s = Some(2.0);
                if round == 3 {
                    r.error = Some(format!("boom | {i}"));
                    r.error_codes = Some([Some("E1".into()), None]);
                    r.exit_codes = Some([Some(1), None]);
                    r.fail_s = Some([Some(0.5), None]);
                    r.to_data_s = None;
                }
                runs.push(r);
            }
        }
        let args = <ReachArgs as clap::FromArgMatches>::from_arg_matches(
            &<ReachArgs as clap::Args>::augment_args(clap::Command::new("t"))
                .get_matches_from(["t"]),
        )
        .unwrap();
        let r = Report::new(&cases, &runs, &lab(), &args, Vec::new());
        // The command line is the test binary's; the rest is fixed.
        let md: String = r
            .markdown()
            .lines()
            .filter(|l| !l.starts_with("braid bench"))
            .map(|l| format!("{l}\n"))
            .collect();
        if let Ok(path) = std::env::var("REACH_GOLDEN_WRITE") {
            std::fs::write(path, &md).unwrap();
        }
        assert!(md == include_str!("report_golden.md"), "the report changed");
    }
}
