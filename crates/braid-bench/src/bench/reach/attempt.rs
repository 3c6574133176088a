//! One braid transfer of a case, start to verdict: the relays, the
//! receiver and the sender in their namespaces, the case's event when
//! enough of the file has arrived, then the records both ends print.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use super::procs::{self, Procs};
use super::{
    direct_share, prepare, relay_name, start_relays, Case, Ctx, Event, RelayUse, Run, DIRECT_PORT,
    EVENT_AT,
};
use crate::lab::{Lab, Node, Topology};

/// A transfer under way: what its steps pass on to the next.
struct Transfer {
    /// The receiver's output directory.
    out: PathBuf,
    procs: Procs,
    /// When the sender was started.
    started: Instant,
    /// The case's event, until it has happened.
    event: Option<Event>,
}

pub(super) fn attempt(ctx: &Ctx, lab: &mut Lab, case: &Case, run: &mut Run) -> anyhow::Result<()> {
    let mut t = start(ctx, lab, case, run)?;
    t.watch(ctx, lab, run)?;
    let sender = t.procs.get("braid send").expect("started");
    sender.finish(Duration::from_secs(5))?;
    let (said_at, sent) = sender
        .json()
        .with_context(|| format!("the sender printed no record: {}", sender.said()))?;
    let sent_ok = sent["outcome"] == "verified";
    let receiver = t.procs.get("braid recv").expect("started");
    // A failed sender's receiver may wait for ever: a moment only.
    let limit = Duration::from_secs(if sent_ok { 15 } else { 1 });
    let got = receiver.finish(limit).ok().and_then(|_| receiver.json());
    // The receiver's record marks its end with the file; the sender may
    // linger after its own.
    let ended = got.as_ref().map_or_else(Instant::now, |(at, _)| *at);
    run.wall_s = Some((ended - t.started).as_secs_f64());
    run.sender_s = Some((said_at - t.started).as_secs_f64());
    for &r in &case.relays {
        if let Some(p) = t.procs.get(&relay_name(r)) {
            if !p.exited() {
                run.relays
                    .push(stop_relay(p, r, lab.relay_addr(r, 0).ip(), &sent)?);
            }
        }
    }
    record_figures(run, t.started, said_at, &sent);
    if let Some(Event::Rebind(site)) = case.event {
        let other = if site == 1 {
            Some(&sent)
        } else {
            got.as_ref().map(|(_, g)| g)
        };
        run.direct_after_event = other.map(|r| answered_at(r, lab.public(site).into()));
    }
    verdict(t.event, &sent, got)?;
    run.verified = true;
    Ok(())
}

/// Sets the lab up and starts the relays, then the receiver once they
/// serve, then the sender once it listens.
fn start(ctx: &Ctx, lab: &mut Lab, case: &Case, run: &Run) -> anyhow::Result<Transfer> {
    let (out, code) = prepare(ctx, lab, case, run)?;
    let mut procs = Procs::default();
    let relay_args = start_relays(ctx, lab, case, &mut procs, true)?;
    let mut recv = lab.command(Node::HostB, &ctx.exe)?;
    recv.args(["recv", "--code", &code, "--json", "--quiet", "--output"])
        .arg(&out);
    if case.direct_only {
        recv.args(["--listen", &format!("0.0.0.0:{DIRECT_PORT}")]);
    } else {
        recv.args(&relay_args);
    }
    procs.start_receiver(recv)?;
    let mut send = lab.command(Node::HostA, &ctx.exe)?;
    send.arg("send")
        .arg(&ctx.input)
        .args(["--code", &code, "--json", "--quiet"]);
    if case.direct_only {
        send.args(["--to", &direct_target(lab).to_string()]);
    } else {
        send.args(&relay_args);
    }
    let started = Instant::now();
    procs.start("braid send", send)?;
    Ok(Transfer {
        out,
        procs,
        started,
        event: case.event,
    })
}

impl Transfer {
    /// Waits for the sender to exit, making the event happen once enough
    /// of the file has arrived; an error past the time limit.
    fn watch(&mut self, ctx: &Ctx, lab: &mut Lab, run: &mut Run) -> anyhow::Result<()> {
        loop {
            let sender = self.procs.get("braid send").expect("started");
            sender.drain();
            if sender.exited() {
                return Ok(());
            }
            if self.started.elapsed() > ctx.timeout {
                bail!("no verdict within {} s", ctx.timeout.as_secs());
            }
            if let Some(ev) = self.event {
                if received(&self.out) as f64 >= ctx.size as f64 * EVENT_AT {
                    happen(lab, &mut self.procs, ev, run)?;
                    run.event_at_s = Some(self.started.elapsed().as_secs_f64());
                    self.event = None;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The sender's figures from its record.
fn record_figures(run: &mut Run, started: Instant, said_at: Instant, sent: &Value) {
    run.goodput_mbps = sent["goodput_mbps"].as_f64();
    if let Some(d) = sent["duration_s"].as_f64() {
        run.to_data_s = Some((said_at - started).as_secs_f64() - d);
    }
    run.validated_ms = sent["reach"]["direct"]["validated_ms"].as_f64();
    run.paired_ms = sent["reach"]["relays"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["paired_ms"].as_f64()).collect())
        .unwrap_or_default();
    run.direct_share = direct_share(sent);
}

/// Whether the transfer did what it should: its event happened, the sender
/// verified, and the receiver got the same file.
fn verdict(
    event_left: Option<Event>,
    sent: &Value,
    got: Option<(Instant, Value)>,
) -> anyhow::Result<()> {
    if event_left.is_some() {
        bail!(
            "the transfer ended before {:.0} % had arrived: nothing happened to it",
            EVENT_AT * 100.0
        );
    }
    if sent["outcome"] != "verified" {
        bail!("the sender failed: {}", sent["error"]["message"]);
    }
    let (_, got) = got.context("the receiver printed no record")?;
    if got["outcome"] != "verified" || got["blake3"] != sent["blake3"] {
        bail!(
            "the receiver's record does not match: {}",
            got["error"]["message"]
        );
    }
    Ok(())
}

/// Where the sender dials the receiver without a relay.
fn direct_target(lab: &Lab) -> SocketAddr {
    match lab.config.topology {
        Topology::SameLan => SocketAddr::new(lab.host_addr(1), DIRECT_PORT),
        _ => SocketAddr::new(lab.public(1).into(), DIRECT_PORT),
    }
}

/// Whether a record has an answered connection to `ip`.
fn answered_at(record: &serde_json::Value, ip: std::net::IpAddr) -> bool {
    record["connections"].as_array().is_some_and(|conns| {
        conns.iter().any(|c| {
            c["answered"] != false
                && c["remote"]
                    .as_str()
                    .and_then(|r| r.parse::<SocketAddr>().ok())
                    .is_some_and(|r| r.ip() == ip)
        })
    })
}

/// Bytes the receiver has written so far (its partial file included).
fn received(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn happen(lab: &mut Lab, procs: &mut Procs, event: Event, run: &mut Run) -> anyhow::Result<()> {
    match event {
        Event::KillRelay(r) => {
            let p = procs
                .get(&relay_name(r))
                .context("that relay is not running")?;
            let usage = procs::usage(p.pid())?;
            p.signal(libc::SIGKILL);
            run.relays.push(RelayUse {
                relay: r,
                cpu_s: usage.cpu_s,
                rss_peak_bytes: usage.rss_peak,
                forwarded_bytes: None,
                counted_by_relay: false,
                killed: true,
            });
        }
        Event::CutDirect => lab.cut_direct(true)?,
        Event::Rebind(site) => {
            lab.rebind(site)?;
        }
    }
    Ok(())
}

/// Reads a relay's CPU time and memory, then stops it (SIGTERM) and reads
/// the counters it prints.
fn stop_relay(
    p: &mut procs::Proc,
    r: usize,
    at: std::net::IpAddr,
    sent: &serde_json::Value,
) -> anyhow::Result<RelayUse> {
    let usage = procs::usage(p.pid())?;
    p.signal(libc::SIGTERM);
    p.finish(Duration::from_secs(5))?;
    let counted = p.seen.iter().rev().find_map(|l| forwarded_bytes(&l.text));
    // Otherwise: what the sender's connections through it carried.
    let estimate = || {
        let size = sent["size"].as_u64()? as f64;
        let share: f64 = sent["connections"]
            .as_array()?
            .iter()
            .filter(|c| {
                c["remote"]
                    .as_str()
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                    .is_some_and(|a| a.ip() == at)
            })
            .filter_map(|c| c["share"].as_f64())
            .sum();
        Some((share * size) as u64)
    };
    Ok(RelayUse {
        relay: r,
        cpu_s: usage.cpu_s,
        rss_peak_bytes: usage.rss_peak,
        forwarded_bytes: counted.or_else(estimate),
        counted_by_relay: counted.is_some(),
        killed: false,
    })
}

/// The bytes forwarded in a relay's closing counters: the first size
/// after "forwarded" ("forwarded 9120 datagrams, 12.3 MB; ..."), three
/// significant digits as `braid relay --serve` prints it.
fn forwarded_bytes(line: &str) -> Option<u64> {
    let (_, rest) = line.split_once("forwarded")?;
    let words: Vec<&str> = rest
        .split_whitespace()
        .map(|w| w.trim_end_matches([',', ';', '.']))
        .collect();
    words.windows(2).find_map(|w| {
        let unit = match w[1] {
            "bytes" => "B",
            u @ ("B" | "kB" | "MB" | "GB" | "TB") => u,
            _ => return None,
        };
        braid_link::units::parse_size(&format!("{}{unit}", w[0])).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relays_forwarded_bytes_are_read_from_its_counters() {
        let closing = "pairs: 1 made, 0 kept (until idle 30.0 s); registrations: 0 now; forwarded 15234 datagrams, \
                       20.1 MB; dropped 0 over a pair's limits, 3 from unpaired addresses";
        assert_eq!(forwarded_bytes(closing), Some(20_100_000));
        assert_eq!(
            forwarded_bytes("forwarded 2 datagrams, 512 B; dropped 0"),
            Some(512)
        );
        assert_eq!(forwarded_bytes("forwarded 1234 bytes"), Some(1234));
        assert_eq!(forwarded_bytes("forward: offered 10, delivered 10"), None);
        assert_eq!(forwarded_bytes("relay serving on 198.18.1.10:7000"), None);
    }
}
