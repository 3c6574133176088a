//! croc beside braid in the lab: croc's own relay on relay host A, croc's
//! sender on site A's host and its receiver on site B's, the same file and
//! the same links; braid with relay A only, on the same NATs. Rounds
//! alternate the programs; each row is one uplink condition (clean, 1 %
//! loss, 100 ms more delay) applied to both sites' uplinks. The time is
//! wall time to verified receipt: from starting the side that sets the
//! transfer going (braid's sender; croc's receiver, as croc's sender must
//! wait for it) to the receiver's exit with the file, whose BLAKE3 hash
//! is then checked against the original.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use braid_link::LinkConfig;
use serde::Serialize;

use super::procs::Procs;
use super::{Ctx, READY_LIMIT, RELAY_PORT};
use crate::bench::stats::median;
use crate::lab::{Lab, LabConfig, Nat, Node, RELAY};

/// croc's relay ports: the first for rendezvous, the rest for data.
const CROC_PORTS: &str = "9009,9010,9011,9012,9013";
/// croc's relay password (its `--pass`), the same on every side.
const CROC_PASS: &str = "braid-lab";
/// Both sites' NATs: the common home router.
const NATS: [Nat; 2] = [Nat::Restricted, Nat::Restricted];

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

/// One condition of the uplinks.
#[derive(Clone, Debug, Serialize)]
pub struct CrocRow {
    pub condition: String,
    pub uplink: String,
    pub braid_runs: usize,
    pub braid_verified: usize,
    pub croc_runs: usize,
    pub croc_verified: usize,
    /// Medians of the verified runs, seconds.
    pub braid_s: Option<f64>,
    pub croc_s: Option<f64>,
    /// croc's time over braid's: how many times faster braid is.
    pub speedup: Option<f64>,
    /// braid's median share over the direct path.
    pub braid_direct_share: Option<f64>,
    pub runs: Vec<CrocRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CrocRun {
    pub round: u32,
    pub program: &'static str,
    pub verified: bool,
    pub wall_s: Option<f64>,
    pub direct_share: Option<f64>,
    pub error: Option<String>,
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
            uplink: [uplink.clone(), uplink.clone()],
            ..base.clone()
        };
        let lab = Lab::build(config)?;
        let mut runs = Vec::new();
        for round in 1..=rounds {
            // Alternate which goes first.
            let order: [&'static str; 2] = if round % 2 == 1 {
                ["braid", "croc"]
            } else {
                ["croc", "braid"]
            };
            for program in order {
                lab.forget_mappings()?;
                let result = match program {
                    "braid" => braid_once(ctx, &lab, round, &hash),
                    _ => croc_once(croc, ctx, &lab, round, &hash),
                };
                let run = match result {
                    Ok((wall, direct_share)) => CrocRun {
                        round,
                        program,
                        verified: true,
                        wall_s: Some(wall),
                        direct_share,
                        error: None,
                    },
                    Err(e) => CrocRun {
                        round,
                        program,
                        verified: false,
                        wall_s: None,
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
    let of = |p: &'static str| runs.iter().filter(move |r| r.program == p);
    let med = |p: &'static str| median(&mut of(p).filter_map(|r| r.wall_s).collect::<Vec<_>>());
    let (braid_s, croc_s) = (med("braid"), med("croc"));
    CrocRow {
        condition: name.to_owned(),
        uplink: crate::link_args::Direction {
            config: uplink.clone(),
            trace_file: None,
        }
        .describe(),
        braid_runs: of("braid").count(),
        braid_verified: of("braid").filter(|r| r.verified).count(),
        croc_runs: of("croc").count(),
        croc_verified: of("croc").filter(|r| r.verified).count(),
        braid_s,
        croc_s,
        speedup: croc_s.zip(braid_s).map(|(c, b)| c / b),
        braid_direct_share: median(
            &mut of("braid")
                .filter_map(|r| r.direct_share)
                .collect::<Vec<_>>(),
        ),
        runs,
    }
}

fn blake3_of(path: &Path) -> anyhow::Result<blake3::Hash> {
    let mut h = blake3::Hasher::new();
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize())
}

/// The one file in `dir`, once it is whole: checked against `want`.
fn check_received(dir: &Path, want: &blake3::Hash) -> anyhow::Result<()> {
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

fn fresh_dir(ctx: &Ctx, name: &str) -> anyhow::Result<PathBuf> {
    let dir = ctx.work.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// braid with relay A: wall time and the share sent directly.
fn braid_once(
    ctx: &Ctx,
    lab: &Lab,
    round: u32,
    want: &blake3::Hash,
) -> anyhow::Result<(f64, Option<f64>)> {
    let out = fresh_dir(ctx, &format!("croc-braid-{round}"))?;
    let code = format!("{}-amber-croc", 500 + round % 400);
    let relay = format!("{}:{RELAY_PORT}", RELAY[0]);
    let mut procs = Procs::default();
    let mut cmd = lab.command(Node::RelayA, &ctx.exe)?;
    cmd.args(["relay", "--serve", &relay]);
    procs
        .start("relay A", cmd)?
        .wait_for(READY_LIMIT, |l| l.text.starts_with("relay serving on "))?;
    let mut recv = lab.command(Node::HostB, &ctx.exe)?;
    recv.args([
        "recv", "--relay", &relay, "--code", &code, "--json", "--quiet", "--output",
    ])
    .arg(&out);
    procs
        .start("braid recv", recv)?
        .wait_for(READY_LIMIT, |l| l.text.contains("listening"))?;
    let mut send = lab.command(Node::HostA, &ctx.exe)?;
    send.arg("send")
        .arg(&ctx.input)
        .args(["--relay", &relay, "--code", &code, "--json", "--quiet"]);
    let started = Instant::now();
    procs.start("braid send", send)?;
    let receiver = procs.get("braid recv").expect("started");
    receiver.finish(ctx.timeout)?;
    let wall = started.elapsed().as_secs_f64();
    let (_, record) = receiver
        .json()
        .with_context(|| format!("the receiver printed no record: {}", receiver.said()))?;
    if record["outcome"] != "verified" {
        bail!("braid recv: {}", record["error"]["message"]);
    }
    check_received(&out, want)?;
    let sender = procs.get("braid send").expect("started");
    sender.finish(Duration::from_secs(5))?;
    let direct = sender.json().and_then(|(_, s)| super::direct_share(&s));
    Ok((wall, direct))
}

/// croc through its own relay on relay host A.
fn croc_once(
    croc: &Croc,
    ctx: &Ctx,
    lab: &Lab,
    round: u32,
    want: &blake3::Hash,
) -> anyhow::Result<(f64, Option<f64>)> {
    let out = fresh_dir(ctx, &format!("croc-croc-{round}"))?;
    // croc keeps settings under $HOME: one of its own per side.
    let home = fresh_dir(ctx, &format!("croc-home-{round}"))?;
    let code = format!("{}-braid-lab-croc", 1000 + round);
    let relay = format!("{}:9009", RELAY[0]);
    let mut procs = Procs::default();
    let mut cmd = lab.command(Node::RelayA, &croc.path)?;
    cmd.env("HOME", &home)
        .args(["--pass", CROC_PASS, "relay", "--ports", CROC_PORTS]);
    procs
        .start("croc relay", cmd)?
        .wait_for(READY_LIMIT, |l| l.text.contains("9009"))?;
    let mut send = lab.command(Node::HostA, &croc.path)?;
    send.env("HOME", &home)
        .env("CROC_SECRET", &code)
        .args([
            "--relay",
            &relay,
            "--pass",
            CROC_PASS,
            "--no-local",
            "send",
            "--no-local",
        ])
        .arg(&ctx.input);
    send.args(["--code", &code]);
    procs.start("croc send", send)?.wait_for(READY_LIMIT, |l| {
        l.text.contains(&code) || l.text.contains("Code is")
    })?;
    let mut recv = lab.command(Node::HostB, &croc.path)?;
    recv.env("HOME", &home)
        .env("CROC_SECRET", &code)
        .current_dir(&out)
        .args([
            "--yes",
            "--overwrite",
            "--relay",
            &relay,
            "--pass",
            CROC_PASS,
            "--out",
        ])
        .arg(&out);
    let started = Instant::now();
    let receiver = procs.start("croc receive", recv)?;
    let status = receiver.finish(ctx.timeout)?;
    let wall = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("croc's receiver failed ({status}): {}", receiver.said());
    }
    check_received(&out, want)?;
    Ok((wall, None))
}

/// One line for the report's summary.
pub fn summary_line(rows: &[CrocRow]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let parts: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.condition,
                r.speedup.map_or("—".into(), |s| format!("{s:.2}x"))
            )
        })
        .collect();
    Some(format!(
        "braid vs croc, wall time to verified receipt (croc's over braid's, > 1x: braid is faster): {}",
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
        "\n## braid next to croc\n\nSame file, same lab, both sites behind {}–{} NATs; croc \
         through its own relay (`croc relay`) on relay host A, braid with `braid relay --serve` \
         on relay host A (it may also open a direct path, as croc does not); rounds alternate \
         which goes first. Wall time from starting the side that sets the transfer going \
         (braid's sender; croc's receiver) to the receiver's exit, the file then checked \
         (BLAKE3). The condition is applied to both sites' uplinks.\n",
        NATS[0], NATS[1]
    );
    md.push_str("| condition | uplinks | braid s | croc s | croc / braid | braid share direct | verified braid / croc |\n|---|---|---|---|---|---|---|\n");
    let f = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.2}"));
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} of {} / {} of {} |",
            r.condition,
            r.uplink,
            f(r.braid_s),
            f(r.croc_s),
            r.speedup.map_or("—".into(), |s| format!("{s:.2}x")),
            r.braid_direct_share
                .map_or("—".into(), |d| format!("{:.0} %", d * 100.0)),
            r.braid_verified,
            r.braid_runs,
            r.croc_verified,
            r.croc_runs
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
    for f in failed {
        let _ = writeln!(md, "- {}", crate::text::escape(&f));
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
            ],
        );
        assert_eq!((row.braid_s, row.croc_s), (Some(3.0), Some(5.0)));
        assert_eq!(row.speedup, Some(5.0 / 3.0));
        assert_eq!((row.croc_runs, row.croc_verified), (2, 1));
        let mut md = String::new();
        markdown(&[row], &mut md);
        assert!(md.contains("| clean |"), "{md}");
        assert!(md.contains("1.67x"), "{md}");
    }
}
