//! The runs that are not one sender and one receiver meeting once: a case
//! that must fail (both ends, naming the cause), a key-mode receiver
//! restarted between two senders, and croc in a case's lab.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::procs::{Proc, Procs};
use super::{croc, prepare, start_relays, Case, Ctx, Expect, Run, READY_LIMIT};
use crate::lab::{Lab, Node, Topology};

/// How long a restarted receiver may take to be registered again.
const RESTART_LIMIT: Duration = Duration::from_secs(40);

/// croc in the case's lab; as users run it, its LAN discovery on where
/// both hosts share a LAN.
pub(super) fn croc(ctx: &Ctx, lab: &mut Lab, case: &Case, run: &mut Run) -> anyhow::Result<()> {
    let croc = ctx.croc.as_ref().context("croc's cases need --croc")?;
    prepare(ctx, lab, case, run)?;
    let want = croc::blake3_of(&ctx.input)?;
    let local = case.topology == Topology::SameLan;
    let t = croc::croc_once(croc, ctx, lab, run.round, &want, local)?;
    run.wall_s = Some(t.wall_s);
    run.verified = true;
    Ok(())
}

fn recv_cmd(ctx: &Ctx, lab: &Lab, relays: &[String], out: &Path) -> anyhow::Result<Command> {
    let mut c = lab.command(Node::HostB, &ctx.exe)?;
    c.args(["recv", "--json", "--quiet"])
        .args(relays)
        .arg("--output")
        .arg(out);
    Ok(c)
}

fn send_cmd(ctx: &Ctx, lab: &Lab, relays: &[String]) -> anyhow::Result<Command> {
    let mut c = lab.command(Node::HostA, &ctx.exe)?;
    c.arg("send")
        .arg(&ctx.input)
        .args(["--json", "--quiet"])
        .args(relays);
    Ok(c)
}

/// Both ends started at once; each must fail as the case expects.
pub(super) fn expect_failure(
    ctx: &Ctx,
    lab: &mut Lab,
    case: &Case,
    run: &mut Run,
) -> anyhow::Result<()> {
    let Expect::Fails {
        code,
        exit,
        within_s,
    } = case.expect
    else {
        bail!("{} is not expected to fail", case.name);
    };
    let (out, words) = prepare(ctx, lab, case, run)?;
    let mut procs = Procs::default();
    let relays = start_relays(ctx, lab, case, &mut procs, true)?;
    let mut recv = recv_cmd(ctx, lab, &relays, &out)?;
    recv.args(["--code", &words]);
    let mut send = send_cmd(ctx, lab, &relays)?;
    send.args(["--code", &words]);
    let started = Instant::now();
    procs.start("braid send", send)?;
    procs.start("braid recv", recv)?;
    let names = ["braid send", "braid recv"];
    let limit = Duration::from_secs_f64(within_s) + Duration::from_secs(10);
    let mut ended: [Option<f64>; 2] = [None; 2];
    while ended.iter().any(Option::is_none) && started.elapsed() < limit {
        for (i, name) in names.iter().enumerate() {
            let p = procs.get(name).expect("started");
            p.drain();
            if ended[i].is_none() && p.exited() {
                ended[i] = Some(started.elapsed().as_secs_f64());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut codes: [Option<String>; 2] = [None, None];
    let mut exits: [Option<i32>; 2] = [None; 2];
    for (i, name) in names.iter().enumerate() {
        let p = procs.get(name).expect("started");
        let Ok(status) = p.finish(Duration::from_millis(200)) else {
            continue;
        };
        exits[i] = status.code();
        codes[i] = p
            .json()
            .and_then(|(_, r)| r["error"]["code"].as_str().map(str::to_owned));
        run.verified |= i == 0 && p.json().is_some_and(|(_, r)| r["outcome"] == "verified");
    }
    run.fail_s = Some(ended);
    run.error_codes = Some(codes.clone());
    run.exit_codes = Some(exits);
    let as_wanted = |i: usize| {
        codes[i].as_deref() == Some(code)
            && exits[i] == Some(exit)
            && ended[i].is_some_and(|t| t <= within_s)
    };
    run.as_expected = as_wanted(0) && as_wanted(1);
    if !run.as_expected {
        let said: Vec<String> = names
            .iter()
            .map(|n| format!("{n}: {}", procs.get(n).map_or(String::new(), |p| p.said())))
            .collect();
        bail!(
            "expected both to fail with {code} (exit {exit}) within {within_s} s; got codes {codes:?}, exits {exits:?}, after {ended:?} s; {}",
            said.join("; ")
        );
    }
    Ok(())
}

/// A receiver's record, checked against the sender's.
fn check_pair(sender: &Proc, receiver: &mut Proc, which: &str) -> anyhow::Result<()> {
    let (_, sent) = sender
        .json()
        .with_context(|| format!("the {which} sender printed no record: {}", sender.said()))?;
    if sent["outcome"] != "verified" {
        bail!("the {which} sender failed: {}", sent["error"]["message"]);
    }
    receiver.finish(Duration::from_secs(15))?;
    let (_, got) = receiver
        .json()
        .with_context(|| format!("the {which} receiver printed no record"))?;
    if got["outcome"] != "verified" || got["blake3"] != sent["blake3"] {
        bail!(
            "the {which} receiver's record does not match: {}",
            got["error"]["message"]
        );
    }
    Ok(())
}

/// The lab's key pair for key mode, made once per bench run.
fn key_pair(ctx: &Ctx) -> anyhow::Result<(PathBuf, PathBuf)> {
    let key = ctx.work.join("lab.key");
    let public = ctx.work.join("lab.key.pub");
    if !public.exists() {
        let st = Command::new(&ctx.exe)
            .arg("keygen")
            .arg("--output")
            .arg(&key)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        if !st.success() {
            bail!("braid keygen failed ({st})");
        }
    }
    Ok((key, public))
}

/// A key-mode receiver takes one transfer, is restarted at once, and a
/// second sender comes: its time to its verified record is the figure.
pub(super) fn key_restart(
    ctx: &Ctx,
    lab: &mut Lab,
    case: &Case,
    run: &mut Run,
) -> anyhow::Result<()> {
    let (out, _) = prepare(ctx, lab, case, run)?;
    let (key, public) = key_pair(ctx)?;
    let mut procs = Procs::default();
    let relays = start_relays(ctx, lab, case, &mut procs, true)?;
    let receiver = |dir: &Path| -> anyhow::Result<Command> {
        let mut c = recv_cmd(ctx, lab, &relays, dir)?;
        c.arg("--key").arg(&key);
        Ok(c)
    };
    let sender = || -> anyhow::Result<Command> {
        let mut c = send_cmd(ctx, lab, &relays)?;
        c.arg("--peer").arg(&public);
        Ok(c)
    };
    let (first, second) = (out.join("first"), out.join("second"));
    std::fs::create_dir_all(&first)?;
    std::fs::create_dir_all(&second)?;
    procs
        .start("braid recv", receiver(&first)?)?
        .wait_for(READY_LIMIT, |l| l.text.contains("listening"))?;
    procs.start("braid send", sender()?)?.finish(ctx.timeout)?;
    let (s1, r1) = two(&mut procs.0, "braid send", "braid recv");
    check_pair(s1, r1, "first")?;
    let restarted = Instant::now();
    procs
        .start("braid recv 2", receiver(&second)?)?
        .wait_for(RESTART_LIMIT, |l| l.text.contains("listening"))?;
    let started = Instant::now();
    procs
        .start("braid send 2", sender()?)?
        .finish(ctx.timeout)?;
    let (s2, r2) = two(&mut procs.0, "braid send 2", "braid recv 2");
    if let Some((at, sent)) = s2.json() {
        run.second_s = Some((at - started).as_secs_f64());
        run.second_total_s = Some((at - restarted).as_secs_f64());
        run.goodput_mbps = sent["goodput_mbps"].as_f64();
    }
    check_pair(s2, r2, "second")?;
    run.verified = true;
    Ok(())
}

/// Two programs of a run by name, both mutable.
fn two<'a>(procs: &'a mut [Proc], a: &str, b: &str) -> (&'a mut Proc, &'a mut Proc) {
    let i = procs.iter().position(|p| p.name == a).expect("started");
    let j = procs.iter().position(|p| p.name == b).expect("started");
    assert_ne!(i, j);
    if i < j {
        let (x, y) = procs.split_at_mut(j);
        (&mut x[i], &mut y[0])
    } else {
        let (x, y) = procs.split_at_mut(i);
        (&mut y[0], &mut x[j])
    }
}
