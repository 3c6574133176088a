//! croc beside braid in the lab: croc's own relay (`croc relay`) on relay
//! host A, croc's sender on site A's host and its receiver on site B's,
//! the same file and the same links; braid with `braid relay --serve` on
//! relay host A, once as users run it (a direct path where the NATs allow
//! one) and once with `--no-direct` (through the relay only, as croc).
//! Rounds alternate the order of the programs; each row is one condition of the
//! sender's uplink (clean, 1 % loss, 100 ms more delay).
//!
//! The time is wall time to verified receipt: from starting the side that
//! sets the transfer going (braid's sender, once its receiver waits;
//! croc's receiver, once croc's sender is in its relay's room, as croc
//! requires) to the receiver's exit with the file, whose BLAKE3 hash is
//! then checked against the original. croc runs as its notes for scripts
//! say: the secret in `CROC_SECRET`, a clean `CROC_CONFIG_DIR`, `--yes
//! --ignore-stdin --disable-clipboard`, `send --no-local` (no LAN
//! discovery), `--overwrite`; compression left on, as users have it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use braid_link::LinkConfig;
use serde::Serialize;

use super::procs::Procs;
use super::{Ctx, READY_LIMIT, RELAY_PORT};
use crate::bench::stats::median;
use crate::lab::{Lab, LabConfig, Nat, Node, RELAY};

/// croc's relay ports: the first for rendezvous, the rest for data (its
/// defaults).
const CROC_PORTS: &str = "9009,9010,9011,9012,9013";
const CROC_BASE_PORT: u16 = 9009;
/// croc's relay password (its `--pass`), the same on every side.
const CROC_PASS: &str = "braid-lab";
/// Both sites' NATs: the common home router.
const NATS: [Nat; 2] = [Nat::Restricted, Nat::Restricted];
/// The programs compared, in the order of odd rounds (even rounds reverse it).
const PROGRAMS: [&str; 3] = ["braid", "braid --no-direct", "croc"];

/// A croc executable that answered `--version`.
pub struct Croc {
    pub path: PathBuf,
    pub version: String,
}

impl Croc {
    pub fn find(path: &Path) -> anyhow::Result<Croc> {
        let out = std::process::Command::new(path)
            .arg("--version")
            .output()
            .with_context(|| format!("cannot run croc at {}", path.display()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || !version.contains("croc") {
            bail!("{} --version did not say it is croc", path.display());
        }
        // An absolute path: the children run it from their namespaces.
        let path = std::fs::canonicalize(path)?;
        Ok(Croc { path, version })
    }
}

/// One program under one condition.
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    pub program: &'static str,
    pub runs: usize,
    pub verified: usize,
    /// Medians of the verified runs, seconds.
    pub wall_s: Option<f64>,
    pub total_s: Option<f64>,
    /// Median share of the stream over a direct path (braid only).
    pub direct_share: Option<f64>,
}

/// One condition of the uplinks.
#[derive(Clone, Debug, Serialize)]
pub struct CrocRow {
    pub condition: String,
    pub uplink: String,
    /// One per program, in [`PROGRAMS`]' order.
    pub columns: Vec<Column>,
    /// croc's time over braid's (as users run each): how many times
    /// faster braid is.
    pub croc_over_braid: Option<f64>,
    /// croc's time over braid's through the relay only.
    pub croc_over_braid_relayed: Option<f64>,
    pub runs: Vec<CrocRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CrocRun {
    pub round: u32,
    pub program: &'static str,
    pub verified: bool,
    /// From starting the side that sets the transfer going to the
    /// receiver's exit with the file.
    pub wall_s: Option<f64>,
    /// From starting the first of the two sides.
    pub total_s: Option<f64>,
    pub direct_share: Option<f64>,
    pub error: Option<String>,
}

/// What one verified transfer took.
pub(super) struct Timing {
    pub wall_s: f64,
    pub total_s: f64,
    pub direct_share: Option<f64>,
}

/// The three conditions, from the lab's uplink.
fn conditions(base: &LinkConfig) -> Vec<(&'static str, LinkConfig)> {
    let lossy = LinkConfig {
        loss: 0.01,
        ..base.clone()
    };
    let long = LinkConfig {
        delay: base.delay + Duration::from_millis(100),
        ..base.clone()
    };
    vec![
        ("clean", base.clone()),
        ("1 % loss", lossy),
        ("100 ms delay", long),
    ]
}

pub fn run(croc: &Croc, ctx: &Ctx, base: &LabConfig, rounds: u32) -> anyhow::Result<Vec<CrocRow>> {
    eprintln!(
        "croc: {} ({}), {rounds} rounds per condition",
        croc.path.display(),
        croc.version
    );
    let hash = blake3_of(&ctx.input)?;
    let mut rows = Vec::new();
    for (name, uplink) in conditions(&base.uplink[0]) {
        let config = LabConfig {
            nat: NATS,
            uplink: [uplink.clone(), base.uplink[1].clone()],
            ..base.clone()
        };
        let lab = Lab::build(config)?;
        let mut runs = Vec::new();
        for round in 1..=rounds {
            let mut order = PROGRAMS;
            if round % 2 == 0 {
                order.reverse();
            }
            for program in order {
                lab.forget_mappings()?;
                let result = match program {
                    "croc" => croc_once(croc, ctx, &lab, round, &hash, false),
                    _ => braid_once(ctx, &lab, round, &hash, program.ends_with("--no-direct")),
                };
                let run = match result {
                    Ok(t) => CrocRun {
                        round,
                        program,
                        verified: true,
                        wall_s: Some(t.wall_s),
                        total_s: Some(t.total_s),
                        direct_share: t.direct_share,
                        error: None,
                    },
                    Err(e) => CrocRun {
                        round,
                        program,
                        verified: false,
                        wall_s: None,
                        total_s: None,
                        direct_share: None,
                        error: Some(format!("{e:#}")),
                    },
                };
                eprintln!(
                    "croc comparison, {name}, round {round}: {program} {}",
                    match (&run.wall_s, &run.error) {
                        (Some(w), _) => format!("{w:.2} s"),
                        (_, Some(e)) => format!("FAILED ({e})"),
                        _ => String::new(),
                    }
                );
                runs.push(run);
            }
        }
        rows.push(row(name, &uplink, runs));
    }
    Ok(rows)
}

fn row(name: &str, uplink: &LinkConfig, runs: Vec<CrocRun>) -> CrocRow {
    let columns: Vec<Column> = PROGRAMS
        .iter()
        .map(|&program| {
            let of: Vec<&CrocRun> = runs.iter().filter(|r| r.program == program).collect();
            let med = |f: &dyn Fn(&CrocRun) -> Option<f64>| {
                median(&mut of.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            Column {
                program,
                runs: of.len(),
                verified: of.iter().filter(|r| r.verified).count(),
                wall_s: med(&|r| r.wall_s),
                total_s: med(&|r| r.total_s),
                direct_share: med(&|r| r.direct_share),
            }
        })
        .collect();
    let wall = |i: usize| columns[i].wall_s;
    let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
    CrocRow {
        condition: name.to_owned(),
        uplink: uplink.describe(None),
        croc_over_braid: ratio(wall(2), wall(0)),
        croc_over_braid_relayed: ratio(wall(2), wall(1)),
        columns,
        runs,
    }
}

pub(super) fn blake3_of(path: &Path) -> anyhow::Result<blake3::Hash> {
    let mut h = blake3::Hasher::new();
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize())
}

/// The one file in `dir`, once it is whole: checked against `want`.
pub(super) fn check_received(dir: &Path, want: &blake3::Hash) -> anyhow::Result<()> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    let [file] = files.as_slice() else {
        bail!("{} files received, not 1", files.len());
    };
    if blake3_of(file)? != *want {
        bail!("the received file does not match (BLAKE3)");
    }
    Ok(())
}

pub(super) fn fresh_dir(ctx: &Ctx, name: &str) -> anyhow::Result<PathBuf> {
    let dir = ctx.work.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// braid with relay A (through it only, with `no_direct`).
fn braid_once(
    ctx: &Ctx,
    lab: &Lab,
    round: u32,
    want: &blake3::Hash,
    no_direct: bool,
) -> anyhow::Result<Timing> {
    let out = fresh_dir(ctx, &format!("croc-braid-{round}"))?;
    let code = format!("{}-amber-croc", 500 + round % 400);
    let relay = format!("{}:{RELAY_PORT}", RELAY[0]);
    let direct: &[&str] = if no_direct { &["--no-direct"] } else { &[] };
    let mut procs = Procs::default();
    let mut cmd = lab.command(Node::RelayA, &ctx.exe)?;
    cmd.args(["relay", "--serve", &relay]);
    procs
        .start("relay A", cmd)?
        .wait_for(READY_LIMIT, |l| l.text.starts_with("relay serving on "))?;
    let mut recv = lab.command(Node::HostB, &ctx.exe)?;
    recv.args([
        "recv", "--relay", &relay, "--code", &code, "--json", "--quiet",
    ])
    .args(direct)
    .arg("--output")
    .arg(&out);
    let first = Instant::now();
    procs.start_receiver(recv)?;
    let mut send = lab.command(Node::HostA, &ctx.exe)?;
    send.arg("send")
        .arg(&ctx.input)
        .args(["--relay", &relay, "--code", &code, "--json", "--quiet"])
        .args(direct);
    let started = Instant::now();
    procs.start("braid send", send)?;
    let receiver = procs.get("braid recv").expect("started");
    receiver.finish(ctx.timeout)?;
    let (wall_s, total_s) = (
        started.elapsed().as_secs_f64(),
        first.elapsed().as_secs_f64(),
    );
    let (_, record) = receiver
        .json()
        .with_context(|| format!("the receiver printed no record: {}", receiver.said()))?;
    if record["outcome"] != "verified" {
        bail!("braid recv: {}", record["error"]["message"]);
    }
    check_received(&out, want)?;
    let sender = procs.get("braid send").expect("started");
    sender.finish(Duration::from_secs(5))?;
    Ok(Timing {
        wall_s,
        total_s,
        direct_share: sender.json().and_then(|(_, s)| super::direct_share(&s)),
    })
}

/// The TCP sockets of `pid`'s network namespace, from /proc/<pid>/net/tcp:
/// whether one is in `state` (hex, "0A" listening, "01" established) with
/// `port` as its local (or, with `remote`, its remote) port.
pub(super) fn has_tcp(pid: u32, port: u16, remote: bool, state: &str) -> bool {
    let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")) else {
        return false;
    };
    tcp_table_has(&table, port, remote, state)
}

fn tcp_table_has(table: &str, port: u16, remote: bool, state: &str) -> bool {
    let want = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[if remote { 2 } else { 1 }].ends_with(&want) && f[3] == state
    })
}

/// Polls `ready` every 20 ms for up to `limit`.
pub(super) fn until(limit: Duration, what: &str, ready: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while !ready() {
        if Instant::now() > deadline {
            bail!("{what} within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// croc through its own relay on relay host A; with `local`, as users run
/// it, its sender also offers itself on the LAN (croc's discovery).
pub(super) fn croc_once(
    croc: &Croc,
    ctx: &Ctx,
    lab: &Lab,
    round: u32,
    want: &blake3::Hash,
    local: bool,
) -> anyhow::Result<Timing> {
    let out = fresh_dir(ctx, &format!("croc-out-{round}"))?;
    let config = fresh_dir(ctx, &format!("croc-config-{round}"))?;
    // The first 4 characters pick the relay's room.
    let secret = format!("{:04}-braid-lab-croc", 1000 + round % 9000);
    let relay = format!("{}:{CROC_BASE_PORT}", RELAY[0]);
    let croc_cmd = |node| -> anyhow::Result<std::process::Command> {
        let mut c = lab.command(node, &croc.path)?;
        c.env("CROC_CONFIG_DIR", &config)
            .env("CROC_SECRET", &secret)
            .env("HOME", &config);
        Ok(c)
    };
    let mut procs = Procs::default();
    let mut cmd = croc_cmd(Node::RelayA)?;
    cmd.args([
        "--pass",
        CROC_PASS,
        "relay",
        "--host",
        &RELAY[0].to_string(),
        "--ports",
        CROC_PORTS,
    ]);
    let pid = procs.start("croc relay", cmd)?.pid();
    until(READY_LIMIT, "croc's relay did not listen", || {
        has_tcp(pid, CROC_BASE_PORT, false, "0A")
    })?;
    let mut send = croc_cmd(Node::HostA)?;
    send.args([
        "--relay",
        &relay,
        "--pass",
        CROC_PASS,
        "--yes",
        "--ignore-stdin",
        "--disable-clipboard",
        "send",
    ])
    .args(if local { None } else { Some("--no-local") })
    .arg(&ctx.input);
    let first = Instant::now();
    let pid = procs.start("croc send", send)?.pid();
    // croc's receiver fails unless the sender is in the room first.
    until(READY_LIMIT, "croc's sender did not reach its relay", || {
        has_tcp(pid, CROC_BASE_PORT, true, "01")
    })?;
    let mut recv = croc_cmd(Node::HostB)?;
    recv.args([
        "--relay",
        &relay,
        "--pass",
        CROC_PASS,
        "--yes",
        "--overwrite",
        "--out",
    ])
    .arg(&out);
    let started = Instant::now();
    let receiver = procs.start("croc receive", recv)?;
    let status = receiver.finish(ctx.timeout)?;
    let (wall_s, total_s) = (
        started.elapsed().as_secs_f64(),
        first.elapsed().as_secs_f64(),
    );
    if !status.success() {
        bail!("croc's receiver failed ({status}): {}", receiver.said());
    }
    check_received(&out, want)?;
    Ok(Timing {
        wall_s,
        total_s,
        direct_share: None,
    })
}

/// One line for the report's summary.
pub fn summary_line(rows: &[CrocRow]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let x = |v: Option<f64>| v.map_or("—".into(), |s| format!("{s:.2}x"));
    let parts: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} ({} through the relay only)",
                r.condition,
                x(r.croc_over_braid),
                x(r.croc_over_braid_relayed)
            )
        })
        .collect();
    Some(format!(
        "croc's wall time to verified receipt over braid's (above 1x, braid is faster): {}",
        parts.join(", ")
    ))
}

pub fn markdown(rows: &[CrocRow], md: &mut String) {
    use std::fmt::Write as _;
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## braid next to croc\n\nThe same file through the same lab, both sites behind \
         {}–{} NATs. croc (compression on, as users have it) goes through its own relay \
         (`croc relay`) on relay host A; braid through `braid relay --serve` on relay host A, as \
         users run it (it punches a direct path where the NATs allow, as here) and with \
         `--no-direct` (the relay only, like croc). Rounds alternate the order. Wall time from \
         starting the side that sets the transfer going (braid's sender once its receiver \
         waits; croc's receiver once croc's sender is in its relay's room, which croc \
         requires) to the receiver's exit, the file then checked (BLAKE3); total adds the wait \
         for the first side (croc's sender hashes the file before it joins). The condition is \
         that of site A's uplink (the sender's); site B's stays clean. Medians of verified runs, in seconds.\n",
        NATS[0], NATS[1]
    );
    md.push_str("| condition | sender's uplink | braid | braid --no-direct | croc | croc / braid | croc / braid --no-direct | total braid / --no-direct / croc | braid share direct | verified |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let f = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.2}"));
    let x = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.2}x"));
    for r in rows {
        let c = &r.columns;
        let verified: Vec<String> = c
            .iter()
            .map(|c| format!("{} of {}", c.verified, c.runs))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} |",
            r.condition,
            r.uplink,
            f(c[0].wall_s),
            f(c[1].wall_s),
            f(c[2].wall_s),
            x(r.croc_over_braid),
            x(r.croc_over_braid_relayed),
            f(c[0].total_s),
            f(c[1].total_s),
            f(c[2].total_s),
            c[0].direct_share
                .map_or("—".into(), |d| format!("{:.0} %", d * 100.0)),
            verified.join(" / ")
        );
    }
    let failed: Vec<String> = rows
        .iter()
        .flat_map(|r| r.runs.iter().map(move |x| (r, x)))
        .filter_map(|(r, x)| {
            Some(format!(
                "{}, round {}, {}: {}",
                r.condition,
                x.round,
                x.program,
                x.error.as_ref()?
            ))
        })
        .collect();
    if !failed.is_empty() {
        md.push('\n');
    }
    for f in failed {
        let _ = writeln!(md, "- {}", braid::text::escape(&f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_change_only_what_they_say() {
        let base = crate::lab::parse_link("100mbit:10ms").unwrap();
        let c = conditions(&base);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].1, base);
        assert_eq!((c[1].1.loss, c[1].1.delay), (0.01, base.delay));
        assert_eq!(c[2].1.delay, Duration::from_millis(110));
        assert_eq!(c[2].1.rate, base.rate);
    }

    #[test]
    fn a_row_compares_medians_of_verified_runs() {
        let r = |program, wall: Option<f64>| CrocRun {
            round: 1,
            program,
            verified: wall.is_some(),
            wall_s: wall,
            total_s: wall.map(|w| w + 0.5),
            direct_share: None,
            error: wall.is_none().then(|| "failed".to_owned()),
        };
        let base = crate::lab::parse_link("100mbit:10ms").unwrap();
        let row = row(
            "clean",
            &base,
            vec![
                r("braid", Some(2.0)),
                r("croc", Some(5.0)),
                r("braid", Some(4.0)),
                r("croc", None),
                r("braid --no-direct", Some(4.0)),
            ],
        );
        assert_eq!(row.columns[0].wall_s, Some(3.0));
        assert_eq!(row.columns[2].wall_s, Some(5.0));
        assert_eq!((row.columns[2].runs, row.columns[2].verified), (2, 1));
        assert_eq!(row.croc_over_braid, Some(5.0 / 3.0));
        assert_eq!(row.croc_over_braid_relayed, Some(1.25));
        let mut md = String::new();
        markdown(&[row], &mut md);
        assert!(md.contains("| clean |"), "{md}");
        assert!(md.contains("| 1.67x | 1.25x |"), "{md}");
        assert!(md.contains("- clean, round 1, croc: failed"), "{md}");
    }

    #[test]
    fn tcp_tables_are_read_by_port_and_state() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n   \
            0: 0A0112C6:2331 00000000:0000 0A 00000000:00000000\n   \
            1: 020B12C6:9C40 0A0112C6:2331 01 00000000:00000000\n";
        assert!(tcp_table_has(table, 9009, false, "0A"));
        assert!(!tcp_table_has(table, 9009, false, "01"));
        assert!(tcp_table_has(table, 9009, true, "01"));
        assert!(!tcp_table_has(table, 9010, true, "01"));
    }
}
