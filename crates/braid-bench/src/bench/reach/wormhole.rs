//! magic-wormhole beside braid in a case's lab, where croc runs (one LAN,
//! a shared carrier-grade NAT, UDP blocked): its two servers on relay host
//! A, where croc's relay runs (the mailbox server, `twistd -n
//! wormhole-mailbox`, for the meeting; the transit relay, `twistd -n
//! transitrelay`, for the data when no direct connection opens), its
//! sender on site A's host and its receiver on site B's.
//!
//! Both ends run as users run them, given the lab's servers (`--relay-url
//! ws://RELAY:4000/v1 --transit-helper tcp:RELAY:4001`) and the code:
//! `send --code CODE FILE` and `receive --accept-file -o DIR CODE`, each
//! offering a direct connection (its own addresses) beside the transit
//! relay; only the progress bar is hidden. The time is wall time to
//! verified receipt, as croc's: from starting the receiver, once the
//! sender is connected to the mailbox server, to the receiver's exit with
//! the file, whose BLAKE3 hash is then checked against the original. The
//! receiver says which way the data came ("Receiving (->relay:..." or
//! straight to the sender's address): that is the run's share direct.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};

use super::croc::{self, Timing};
use super::procs::{Line, Procs};
use super::{prepare, Case, Ctx, Run, READY_LIMIT};
use crate::lab::{Lab, Node, RELAY};

/// The mailbox server's port and the transit relay's (their defaults).
const MAILBOX_PORT: u16 = 4000;
const TRANSIT_PORT: u16 = 4001;

/// A magic-wormhole executable that answered `--version`, and the
/// `twistd` beside it that serves its mailbox server and transit relay.
pub struct Wormhole {
    pub path: PathBuf,
    pub twistd: PathBuf,
}

impl Wormhole {
    pub fn find(path: &Path) -> anyhow::Result<Wormhole> {
        let out = Command::new(path)
            .arg("--version")
            .output()
            .with_context(|| format!("cannot run magic-wormhole at {}", path.display()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || !version.contains("magic-wormhole") {
            bail!(
                "{} --version did not say it is magic-wormhole",
                path.display()
            );
        }
        // Absolute paths: the children run them from their namespaces.
        let path = std::fs::canonicalize(path)?;
        let twistd = path.with_file_name("twistd");
        let plugins = Command::new(&twistd)
            .arg("--help")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if !(plugins.contains("wormhole-mailbox") && plugins.contains("transitrelay")) {
            bail!(
                "{} does not serve magic-wormhole's mailbox server and transit relay: install \
                 magic-wormhole-mailbox-server and magic-wormhole-transit-relay beside \
                 magic-wormhole (its pip; scripts/install-lab-deps.sh --wormhole)",
                twistd.display()
            );
        }
        eprintln!(
            "magic-wormhole: {} ({version}), its servers by {}",
            path.display(),
            twistd.display()
        );
        Ok(Wormhole { path, twistd })
    }

    /// `twistd -n PLUGIN --port tcp:PORT:interface=RELAY ARGS` on relay
    /// host A, in `dir` (no pid file, its log on its output).
    fn server(&self, lab: &Lab, dir: &Path, plugin: &str, port: u16) -> anyhow::Result<Command> {
        let mut c = lab.command(Node::RelayA, &self.twistd)?;
        c.current_dir(dir)
            .env("PYTHONUNBUFFERED", "1")
            .args(["-n", "--pidfile=", plugin, "--port"])
            .arg(format!("tcp:{port}:interface={}", RELAY[0]));
        Ok(c)
    }

    /// `wormhole --relay-url ... --transit-helper ... ARGS` on `node`.
    fn client(&self, lab: &Lab, node: Node, args: &[&str]) -> anyhow::Result<Command> {
        let mut c = lab.command(node, &self.path)?;
        c.env("PYTHONUNBUFFERED", "1")
            .arg("--relay-url")
            .arg(format!("ws://{}:{MAILBOX_PORT}/v1", RELAY[0]))
            .arg("--transit-helper")
            .arg(format!("tcp:{}:{TRANSIT_PORT}", RELAY[0]))
            .args(args);
        Ok(c)
    }
}

/// magic-wormhole in the case's lab.
pub(super) fn flow(ctx: &Ctx, lab: &mut Lab, case: &Case, run: &mut Run) -> anyhow::Result<()> {
    let wormhole = ctx
        .wormhole
        .as_ref()
        .context("magic-wormhole's cases need --wormhole")?;
    let (out, code) = prepare(ctx, lab, case, run)?;
    let want = croc::blake3_of(&ctx.input)?;
    let t = once(wormhole, ctx, lab, &code, &out, &want)?;
    run.wall_s = Some(t.wall_s);
    run.direct_share = t.direct_share;
    run.verified = true;
    Ok(())
}

/// Starts the mailbox server and the transit relay, each once it listens.
fn start_servers(wh: &Wormhole, ctx: &Ctx, lab: &Lab, procs: &mut Procs) -> anyhow::Result<()> {
    let dir = croc::fresh_dir(ctx, "wormhole-servers")?;
    let mut mailbox = wh.server(lab, &dir, "wormhole-mailbox", MAILBOX_PORT)?;
    mailbox.arg("--channel-db").arg(dir.join("mailbox.sqlite"));
    let transit = wh.server(lab, &dir, "transitrelay", TRANSIT_PORT)?;
    for (name, cmd, port) in [
        ("wormhole mailbox", mailbox, MAILBOX_PORT),
        ("wormhole transit relay", transit, TRANSIT_PORT),
    ] {
        let p = procs.start(name, cmd)?;
        let pid = p.pid();
        croc::until(READY_LIMIT, &format!("the {name} did not listen"), || {
            has_exited(pid) || croc::has_tcp(pid, port, false, "0A")
        })?;
        if p.exited() {
            p.finish(READY_LIMIT)?;
            bail!("the {name} ended: {}", p.said());
        }
    }
    Ok(())
}

/// Whether `pid` is gone or a zombie (its server failed to start).
fn has_exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// One transfer through the servers on relay host A, into `out`.
fn once(
    wh: &Wormhole,
    ctx: &Ctx,
    lab: &Lab,
    code: &str,
    out: &Path,
    want: &blake3::Hash,
) -> anyhow::Result<Timing> {
    let mut procs = Procs::default();
    start_servers(wh, ctx, lab, &mut procs)?;
    let input = ctx.input.to_str().context("the file's path is not UTF-8")?;
    let send = wh.client(
        lab,
        Node::HostA,
        &["send", "--hide-progress", "--code", code, input],
    )?;
    let first = Instant::now();
    let pid = procs.start("wormhole send", send)?.pid();
    // As croc's: the receiver comes once the sender is there to meet.
    let met = croc::until(READY_LIMIT, "", || {
        has_exited(pid) || croc::has_tcp(pid, MAILBOX_PORT, true, "01")
    });
    let sender = procs.get("wormhole send").expect("started");
    if met.is_err() || sender.exited() {
        sender.drain();
        bail!(
            "magic-wormhole's sender did not reach its mailbox server within {} s: {}",
            READY_LIMIT.as_secs(),
            sender.said()
        );
    }
    let out_dir = out.to_str().context("the output path is not UTF-8")?;
    let recv = wh.client(
        lab,
        Node::HostB,
        &[
            "receive",
            "--hide-progress",
            "--accept-file",
            "-o",
            out_dir,
            code,
        ],
    )?;
    let started = Instant::now();
    let receiver = procs.start("wormhole receive", recv)?;
    let status = receiver.finish(ctx.timeout)?;
    let (wall_s, total_s) = (
        started.elapsed().as_secs_f64(),
        first.elapsed().as_secs_f64(),
    );
    if !status.success() {
        bail!(
            "magic-wormhole's receiver failed ({status}): {}",
            receiver.said()
        );
    }
    let direct_share = direct_share(&receiver.seen);
    croc::check_received(out, want)?;
    Ok(Timing {
        wall_s,
        total_s,
        direct_share,
    })
}

/// 1 if the receiver says the data came straight from the sender, 0 if
/// through the transit relay ("Receiving (->relay:tcp:..)..").
fn direct_share(lines: &[Line]) -> Option<f64> {
    let line = lines.iter().find(|l| l.text.starts_with("Receiving (->"))?;
    Some(if line.text.contains("(->relay:") {
        0.0
    } else {
        1.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(texts: &[&str]) -> Vec<Line> {
        texts
            .iter()
            .map(|t| Line {
                at: Instant::now(),
                stderr: true,
                text: (*t).to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_receivers_words_say_which_way_the_data_came() {
        let said =
            |t: &str| direct_share(&lines(&["Receiving file (20.0 MB) into: 'reach.bin'", t]));
        assert_eq!(said("Receiving (->tcp:192.168.7.11:41237).."), Some(1.0));
        assert_eq!(
            said("Receiving (->relay:tcp:198.18.1.10:4001).."),
            Some(0.0)
        );
        assert_eq!(said("Received file written to: /tmp/x"), None);
    }
}
