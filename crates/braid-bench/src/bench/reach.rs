//! `braid bench reach`: braid's rendezvous relays and hole punching in the
//! NAT lab ([`crate::lab`], root), with this program as users run it:
//! `braid relay --serve` on the relay hosts, `braid recv --relay` behind
//! one NAT, `braid send --relay` behind the other, each a process of its
//! own in its machine's namespace.
//!
//! Three parts, every case once per round in an order rotated per round:
//! the NAT pairs (does a direct path open, how soon, how soon does data
//! flow over the relays), capacity (goodput through one relay, two relays
//! on different links, the direct path with and without a relay beside
//! it) and failover (a relay killed, the direct path cut, a NAT rebinding,
//! each when 30 % of the file has arrived). `--croc` adds croc beside
//! braid, `--wormhole` magic-wormhole where croc runs in the topologies
//! beyond the NAT pairs ([`cases`]): one LAN, carrier-grade NATs, IPv6
//! only, UDP blocked, a rebinding on either side and a key-mode receiver
//! restarted. The report puts the verdicts first, then medians per case.

mod attempt;
mod cases;
mod croc;
mod flows;
pub(super) mod procs;
mod report;
mod report_more;
mod workdir;
mod wormhole;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use braid_link::LinkConfig;
use serde::Serialize;

use crate::lab::{self, Lab, LabConfig, Nat, Node, Topology};
pub use cases::{Expect, Program};
use procs::Procs;
use workdir::WorkDir;

/// The port every relay serves on.
const RELAY_PORT: u16 = 7000;
/// The port the receiver listens on when it is reached directly.
const DIRECT_PORT: u16 = 7000;
/// Failover events happen when this share of the file has arrived.
const EVENT_AT: f64 = 0.3;
/// How long a relay or receiver may take to say it is ready.
const READY_LIMIT: Duration = Duration::from_secs(10);

fn parse_size(s: &str) -> Result<u64, String> {
    braid_link::units::parse_size(s).map_err(|e| e.to_string())
}

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Needs root, iproute2, nftables (scripts/install-lab-deps.sh) and \
/dev/net/tun. The lab: site A (the sender) and site B (the receiver), each one host behind a NAT \
router on its own uplink, and relay hosts A and B, each on its own link to the public network; \
`braid bench lab` builds the same lab to look around in."
)]
pub struct ReachArgs {
    /// Rounds: each runs every case once, in an order rotated per round.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Bytes per transfer (e.g. 20MB).
    #[arg(long, default_value = "20MB", value_parser = parse_size)]
    size: u64,
    /// Only the cases with these names (comma-separated, e.g.
    /// "cone-cone,one relay"); all of the parts' cases by default.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    cases: Vec<String>,
    /// Parts to run (comma-separated); croc, and croc's cases in the
    /// others, only with --croc; magic-wormhole's cases only with
    /// --wormhole.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "pairs,capacity,failover,croc,lan,cgnat,ipv6,udp-blocked,rebinding,key-restart"
    )]
    parts: Vec<Part>,
    /// Each site's uplink to the public network: RATE:DELAY[:LOSS[:QUEUE]]
    /// (one-way delay; queue in packets or bytes).
    #[arg(long, default_value = "100mbit:10ms:0:400", value_parser = lab::parse_link)]
    uplink: LinkConfig,
    /// Each relay's link to the public network: RATE:DELAY[:LOSS[:QUEUE]].
    #[arg(long, default_value = "40mbit:5ms:0:250", value_parser = lab::parse_link)]
    relay_link: LinkConfig,
    /// Also run croc (this executable) with its own relay on relay host A,
    /// beside braid, on a clean, a lossy and a long uplink.
    #[arg(long, value_name = "PATH")]
    croc: Option<PathBuf>,
    /// Also run magic-wormhole (this executable; its directory must hold
    /// `twistd` with magic-wormhole's mailbox server and transit relay)
    /// with both servers on relay host A, where croc runs in the lan, cgnat
    /// and udp-blocked parts.
    #[arg(long, value_name = "PATH")]
    wormhole: Option<PathBuf>,
    /// A transfer without a verdict after this long counts as failed.
    #[arg(long, default_value = "90s", value_parser = braid::text::parse_timeout)]
    timeout: Duration,
    /// Seed of the links' randomness.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output directory: reach.md and reach.json.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// The report's file name, without .md and .json: another name keeps a
    /// run of some parts beside the full report.
    #[arg(long, default_value = "reach", value_parser = parse_report_name)]
    report_name: String,
}

fn parse_report_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?}: letters, digits, - and _ only"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    Pairs,
    Capacity,
    Failover,
    Croc,
    /// Both hosts on one LAN behind one NAT.
    Lan,
    /// Carrier-grade NATs, shared and separate.
    Cgnat,
    /// IPv6 only.
    Ipv6,
    /// The sites' routers drop all UDP out.
    UdpBlocked,
    /// Either site's NAT rebinds mid-transfer.
    Rebinding,
    /// A key-mode receiver restarted after a transfer.
    KeyRestart,
}

/// What happens to a transfer under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The relay (0: A, 1: B) is killed (SIGKILL).
    KillRelay(usize),
    /// The core drops everything between the two sites.
    CutDirect,
    /// The site's NAT moves its mappings to its other public address.
    Rebind(usize),
}

fn relay_letter(i: usize) -> &'static str {
    ["A", "B"][i]
}

/// One setup, run once per round.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub part: Part,
    pub name: String,
    /// Site A's (the sender's) and site B's NAT.
    pub nat: [Nat; 2],
    /// The relays running and given to both sides (0: A, 1: B).
    pub relays: Vec<usize>,
    /// No relay: the receiver listens at a fixed port and the sender is
    /// given site B's public address (its NAT must be a cone).
    pub direct_only: bool,
    pub event: Option<Event>,
    /// How the lab is wired.
    pub topology: Topology,
    /// Which program makes the transfer.
    pub program: Program,
    /// What must happen.
    pub expect: Expect,
    /// The sites' routers drop all UDP out.
    pub block_udp: bool,
    /// The relays also listen on TCP (`braid relay --serve` does by default).
    pub relay_tcp: bool,
    /// Key mode: after a first transfer the receiver is restarted at once
    /// and a second sender comes.
    pub key_restart: bool,
}

impl Case {
    fn pair(&self) -> String {
        match self.topology {
            Topology::SameLan => format!("{} (one router)", self.nat[0]),
            Topology::Ipv6 => "v6 firewalls".into(),
            _ => format!("{}–{}", self.nat[0], self.nat[1]),
        }
    }

    fn relays_text(&self) -> String {
        if self.relays.is_empty() {
            return "none".into();
        }
        let names: Vec<&str> = self.relays.iter().map(|&r| relay_letter(r)).collect();
        names.join(" + ")
    }
}

/// The NAT pairs, sender's site first.
pub const PAIRS: [[Nat; 2]; 6] = [
    [Nat::Cone, Nat::Cone],
    [Nat::Cone, Nat::Symmetric],
    [Nat::Restricted, Nat::Restricted],
    [Nat::Restricted, Nat::Symmetric],
    [Nat::Symmetric, Nat::Symmetric],
    [Nat::Firewall, Nat::Cone],
];

fn cases(parts: &[Part]) -> Vec<Case> {
    let case = |part, name: &str, nat, relays: &[usize], direct_only, event| Case {
        direct_only,
        event,
        ..Case::new(part, name, nat, relays)
    };
    let (cone, sym, restricted) = (
        [Nat::Cone, Nat::Cone],
        [Nat::Symmetric, Nat::Symmetric],
        [Nat::Restricted, Nat::Restricted],
    );
    let mut out = Vec::new();
    if parts.contains(&Part::Pairs) {
        for nat in PAIRS {
            let name = format!("{}–{}", nat[0], nat[1]);
            out.push(case(Part::Pairs, &name, nat, &[0, 1], false, None));
        }
    }
    if parts.contains(&Part::Capacity) {
        out.extend([
            case(Part::Capacity, "one relay", sym, &[0], false, None),
            case(Part::Capacity, "two relays", sym, &[0, 1], false, None),
            case(Part::Capacity, "direct alone", cone, &[], true, None),
            case(Part::Capacity, "direct + relay", cone, &[0], false, None),
        ]);
    }
    if parts.contains(&Part::Failover) {
        out.extend([
            case(
                Part::Failover,
                "relay A killed, relay B left",
                sym,
                &[0, 1],
                false,
                Some(Event::KillRelay(0)),
            ),
            case(
                Part::Failover,
                "relay killed, direct path left",
                cone,
                &[0],
                false,
                Some(Event::KillRelay(0)),
            ),
            case(
                Part::Failover,
                "direct path cut, relay left",
                cone,
                &[0],
                false,
                Some(Event::CutDirect),
            ),
            case(
                Part::Failover,
                "site A's NAT rebinds",
                restricted,
                &[0],
                false,
                Some(Event::Rebind(0)),
            ),
        ]);
    }
    out.extend(cases::more(parts));
    out
}

/// The cases named in `names` (all for none); a name may be typed with a
/// plain hyphen for the dash ("cone-cone").
fn select(all: Vec<Case>, names: &[String]) -> anyhow::Result<Vec<Case>> {
    if names.is_empty() {
        return Ok(all);
    }
    let norm = |n: &str| n.trim().replace('–', "-");
    for n in names {
        if !all.iter().any(|c| norm(&c.name) == norm(n)) {
            let known: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
            bail!(
                "no case {n:?} in these parts; they are: {}",
                known.join(", ")
            );
        }
    }
    Ok(all
        .into_iter()
        .filter(|c| names.iter().any(|n| norm(n) == norm(&c.name)))
        .collect())
}

/// A relay's part in one run.
#[derive(Clone, Debug, Serialize)]
pub struct RelayUse {
    pub relay: usize,
    /// CPU seconds (user and system) of its whole life.
    pub cpu_s: f64,
    pub rss_peak_bytes: u64,
    /// Bytes it forwarded, as its counters say (or, if they say nothing
    /// readable, the stream bytes the sender's connections through it
    /// carried).
    pub forwarded_bytes: Option<u64>,
    /// Whether [`RelayUse::forwarded_bytes`] is the relay's own count.
    pub counted_by_relay: bool,
    pub killed: bool,
}

/// One transfer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Run {
    pub round: u32,
    pub case: usize,
    /// Both sides verified the same BLAKE3 hash.
    pub verified: bool,
    pub error: Option<String>,
    /// The sender's goodput (handshake to the receiver's verdict).
    pub goodput_mbps: Option<f64>,
    /// From starting the sender to the receiver's exit with the file (its
    /// record).
    pub wall_s: Option<f64>,
    /// From starting the sender to its record.
    pub sender_s: Option<f64>,
    /// From the sender's start to its session being open (data can flow):
    /// when its record arrived less its `duration_s`.
    pub to_data_s: Option<f64>,
    /// The sender's `reach.direct.validated_ms`.
    pub validated_ms: Option<f64>,
    /// The sender's `reach.relays[].paired_ms`.
    pub paired_ms: Vec<f64>,
    /// Of the stream, the share the sender's direct connections carried.
    pub direct_share: Option<f64>,
    /// When the event happened, from the sender's start.
    pub event_at_s: Option<f64>,
    pub relays: Vec<RelayUse>,
    /// After a rebinding: whether the other side's record has an answered
    /// connection to the rebound site's new public address.
    pub direct_after_event: Option<bool>,
    /// A case expected to fail: the sender's and the receiver's error
    /// codes, exit statuses and times to fail (from their start).
    pub error_codes: Option<[Option<String>; 2]>,
    pub exit_codes: Option<[Option<i32>; 2]>,
    pub fail_s: Option<[Option<f64>; 2]>,
    /// Whether the run did what its case expects (verified, or failed as
    /// it should).
    pub as_expected: bool,
    /// Key restart: from starting the second sender to its verified end,
    /// and from restarting the receiver to it.
    pub second_s: Option<f64>,
    pub second_total_s: Option<f64>,
}

/// What every run needs.
struct Ctx {
    exe: PathBuf,
    work: PathBuf,
    input: PathBuf,
    size: u64,
    timeout: Duration,
    croc: Option<croc::Croc>,
    wormhole: Option<wormhole::Wormhole>,
}

pub fn run(args: ReachArgs) -> anyhow::Result<ExitCode> {
    lab::guard_signals();
    lab::check_prerequisites()?;
    let croc = args.croc.as_deref().map(croc::Croc::find).transpose()?;
    let wormhole = args.wormhole.as_deref().map(wormhole::Wormhole::find);
    let wormhole = wormhole.transpose()?;
    let exe = crate::braid_exe()?;
    let work = WorkDir::create()?;
    lab::remove_on_signal(work.path());
    let input = work.path().join("reach.bin");
    super::real::write_content(&input, args.size)?;
    let ctx = Ctx {
        exe,
        work: work.path().to_owned(),
        input,
        size: args.size,
        timeout: args.timeout,
        croc,
        wormhole,
    };
    let config = LabConfig {
        nat: [Nat::Cone; 2],
        uplink: [args.uplink.clone(), args.uplink.clone()],
        relay_link: [args.relay_link.clone(), args.relay_link.clone()],
        seed: args.seed,
        topology: Topology::Sites,
    };
    let mut all = cases(&args.parts);
    all.retain(|c| match c.program {
        Program::Braid => true,
        Program::Croc => ctx.croc.is_some(),
        Program::Wormhole => ctx.wormhole.is_some(),
    });
    let cases = select(all, &args.cases)?;
    let mut runs = Vec::new();
    if !cases.is_empty() {
        eprintln!(
            "braid bench reach: {} per transfer, {} rounds of {} cases, rotated",
            braid::text::size(args.size),
            args.rounds,
            cases.len()
        );
        let mut lab: Option<Lab> = None;
        for round in 1..=args.rounds {
            for i in 0..cases.len() {
                let c = (i + round as usize - 1) % cases.len();
                let lab = lab_for(&mut lab, &config, cases[c].topology)?;
                let run = transfer(&ctx, lab, &cases[c], round, c);
                eprintln!("{}", progress_line(&cases[c], &run));
                runs.push(run);
            }
        }
    }
    let croc_rows = match &ctx.croc {
        Some(c) if args.parts.contains(&Part::Croc) => croc::run(c, &ctx, &config, args.rounds)?,
        _ => Vec::new(),
    };
    let report = report::Report::new(&cases, &runs, &config, &args, croc_rows);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let md = report.markdown();
    print!("{md}");
    let name = &args.report_name;
    std::fs::write(args.out.join(format!("{name}.md")), &md)?;
    std::fs::write(
        args.out.join(format!("{name}.json")),
        serde_json::to_string_pretty(&report.json())? + "\n",
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The lab wired as `topology` wants: the one there, or a new one (the
/// old one removed first: the namespaces' names are the same).
fn lab_for<'a>(
    lab: &'a mut Option<Lab>,
    base: &LabConfig,
    topology: Topology,
) -> anyhow::Result<&'a mut Lab> {
    if lab.as_ref().map(|l| l.config.topology) != Some(topology) {
        *lab = None;
        *lab = Some(Lab::build(LabConfig {
            topology,
            ..base.clone()
        })?);
    }
    Ok(lab.as_mut().expect("just built"))
}

fn progress_line(case: &Case, run: &Run) -> String {
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0} ms"));
    let mut s = format!(
        "round {}  {:<34} {:<18} goodput {:>6}  direct {:>8}  to data {:>6}",
        run.round,
        case.name,
        match (run.verified, run.as_expected) {
            (true, _) => "verified",
            (false, true) => "failed as expected",
            (false, false) => "FAILED",
        },
        run.goodput_mbps.map_or("-".into(), |g| format!("{g:.1}")),
        ms(run.validated_ms),
        run.to_data_s.map_or("-".into(), |t| format!("{t:.2} s")),
    );
    if let Some(e) = &run.error {
        s += &format!("  ({e})");
    }
    s
}

/// One transfer of `case`; a failure of any kind is the run's error.
fn transfer(ctx: &Ctx, lab: &mut Lab, case: &Case, round: u32, ci: usize) -> Run {
    let mut run = Run {
        round,
        case: ci,
        ..Run::default()
    };
    let result = match (case.program, case.expect) {
        (Program::Croc, _) => flows::croc(ctx, lab, case, &mut run),
        (Program::Wormhole, _) => wormhole::flow(ctx, lab, case, &mut run),
        (_, Expect::Fails { .. }) => flows::expect_failure(ctx, lab, case, &mut run),
        _ if case.key_restart => flows::key_restart(ctx, lab, case, &mut run),
        _ => attempt::attempt(ctx, lab, case, &mut run),
    };
    if let Err(e) = result {
        run.verified = false;
        run.error = Some(format!("{e:#}"));
    }
    if case.expect == Expect::Verified {
        run.as_expected = run.verified;
    }
    run
}

fn relay_name(r: usize) -> String {
    format!("relay {}", relay_letter(r))
}

/// Sets the lab up for `case` (NATs, UDP, the direct path, no mappings
/// left from the last run) and makes the run's output directory and code.
fn prepare(ctx: &Ctx, lab: &mut Lab, case: &Case, run: &Run) -> anyhow::Result<(PathBuf, String)> {
    if lab.config.topology != Topology::Ipv6 {
        lab.cut_direct(false)?;
    }
    for site in 0..2 {
        lab.block_udp(site, case.block_udp)?;
        lab.set_nat(site, case.nat[site])?;
    }
    lab.forget_mappings()?;
    let out = ctx.work.join(format!("recv-{}-{}", run.round, run.case));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)?;
    let code = format!(
        "{}-amber-walrus",
        (run.round as usize * 41 + run.case) % 1000
    );
    Ok((out, code))
}

/// Starts the case's relays, each once it serves; the `--relay` options
/// that name them.
fn start_relays(
    ctx: &Ctx,
    lab: &Lab,
    case: &Case,
    procs: &mut Procs,
    wait: bool,
) -> anyhow::Result<Vec<String>> {
    let mut relay_args = Vec::new();
    for &r in &case.relays {
        let addr = lab.relay_addr(r, RELAY_PORT).to_string();
        let mut cmd = lab.command(Node::relay(r), &ctx.exe)?;
        cmd.args(["relay", "--serve", &addr]);
        if !case.relay_tcp {
            cmd.arg("--no-tcp");
        }
        let p = procs.start(&relay_name(r), cmd)?;
        if wait {
            p.wait_for(READY_LIMIT, |l| l.text.starts_with("relay serving on "))?;
        }
        relay_args.extend(["--relay".to_owned(), addr]);
    }
    Ok(relay_args)
}

/// Of the stream, the share a sender's record says its direct connections
/// carried; `None` for a record that does not say which connection went
/// which way.
pub fn direct_share(sent: &serde_json::Value) -> Option<f64> {
    let conns = sent["connections"].as_array()?;
    if !conns.iter().any(|c| c["via"].is_string()) {
        return None;
    }
    Some(
        conns
            .iter()
            .filter(|c| c["via"] == "direct")
            .filter_map(|c| c["share"].as_f64())
            .fold(0.0, |a, b| a + b),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_has_its_cases_and_pairs_come_first() {
        let all = cases(&[Part::Pairs, Part::Capacity, Part::Failover]);
        assert_eq!(all.len(), PAIRS.len() + 4 + 4);
        assert_eq!(all[0].name, "cone–cone");
        assert!(all
            .iter()
            .filter(|c| c.part == Part::Pairs)
            .all(|c| c.relays == [0, 1]));
        // Reaching the receiver without a relay needs a cone in front of it.
        for c in &all {
            assert!(!c.direct_only || c.nat[1] == Nat::Cone, "{}", c.name);
            assert_eq!(c.event.is_some(), c.part == Part::Failover, "{}", c.name);
        }
        assert_eq!(cases(&[Part::Failover]).len(), 4);
        let picked = select(all.clone(), &["cone-cone".into(), "one relay".into()]).unwrap();
        let names: Vec<&str> = picked.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cone–cone", "one relay"]);
        assert_eq!(select(all.clone(), &[]).unwrap().len(), all.len());
        assert!(select(all, &["cone-firewall".into()]).is_err());
    }
}
