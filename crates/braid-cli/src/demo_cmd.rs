//! `braid demo`: a receiver, one link emulator per path and a sender of a
//! generated stream, all in this process on loopback, so anyone can watch
//! braid split one transfer over very different paths.

use crate::manifest::Manifest;
use crate::plot::Recorder;
use crate::progress::Progress;
use crate::side::Side;
use crate::summary::Ended;
use crate::transfer::{self, Outcome, Output, Source};
use anyhow::{bail, Context as _};
use braid::{
    Emulator, EmulatorConfig, Listener, Monitor, PathSpec, Security, Session, SessionConfig,
    SessionStats,
};
use braid_link::units::{format_duration, parse_duration, parse_probability, parse_size};
use braid_link::LinkConfig;
use braid_link::QueueLimit;
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct DemoArgs {
    /// An emulated path as RATE:RTT[:LOSS[:QUEUE]], e.g. 40mbit:20ms or
    /// 10mbit:80ms:1%:500 (loss on the data direction, queue in packets or
    /// bytes); repeat for more paths.
    #[arg(long = "path", value_name = "SPEC", default_values = ["40mbit:20ms", "10mbit:80ms:1%"])]
    paths: Vec<String>,
    /// Bytes to send.
    #[arg(long, default_value = "100MB", value_parser = parse_bytes)]
    size: u64,
    /// Congestion controller (aimd, bbr, cubic, mbecn, ncp) [default: bbr].
    #[arg(long)]
    cc: Option<braid_proto::cc::Algorithm>,
    /// Seed of the emulated links' randomness (loss, jitter).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No live progress.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    observe: crate::observe::ObserveArgs,
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// One emulated path.
struct PathPlan {
    spec: String,
    link: LinkConfig,
    /// Bits per second the path carries after loss.
    capacity_bps: f64,
}

fn parse_path(spec: &str) -> anyhow::Result<PathPlan> {
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() < 2 || parts.len() > 4 {
        bail!("path {spec:?}: expected RATE:RTT[:LOSS[:QUEUE]], e.g. 40mbit:20ms:1%");
    }
    let rate: braid_link::units::Rate =
        parts[0].parse().with_context(|| format!("path {spec:?}"))?;
    let bps = match rate {
        braid_link::units::Rate::BitsPerSec(b) if b > 0 => b as f64,
        _ => bail!("path {spec:?}: the rate must be a positive bit rate, e.g. 40mbit"),
    };
    let rtt = parse_duration(parts[1]).with_context(|| format!("path {spec:?}"))?;
    let loss = match parts.get(2) {
        Some(l) => parse_probability(l).with_context(|| format!("path {spec:?}"))?,
        None => 0.0,
    };
    let mut link = LinkConfig::new(rate, rtt / 2);
    // Wi-Fi's and LTE's packets, not loopback's 16 KiB datagrams.
    link.mtu = Some(braid_link::ETHERNET_MTU);
    if let Some(q) = parts.get(3) {
        link.queue = q
            .parse::<QueueLimit>()
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("path {spec:?}"))?;
    }
    link.loss = loss;
    link.validate().with_context(|| format!("path {spec:?}"))?;
    Ok(PathPlan {
        spec: format!(
            "{} {} RTT{}",
            rate,
            format_duration(rtt),
            if loss > 0.0 {
                format!(" {}% loss", loss * 100.0)
            } else {
                String::new()
            }
        ),
        link,
        capacity_bps: bps * (1.0 - loss),
    })
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let plans = args
        .paths
        .iter()
        .map(|p| parse_path(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if plans.len() > 255 {
        bail!("at most 255 paths");
    }
    crate::plot::ready(args.observe.plot.as_deref())?;
    crate::block_on(demo(args, plans))?
}

async fn demo(args: DemoArgs, plans: Vec<PathPlan>) -> anyhow::Result<ExitCode> {
    let localhost: SocketAddr = ([127, 0, 0, 1], 0).into();
    // Sealed, as a real transfer: the receiver's key, pinned by the sender.
    let key = braid::random_keypair();
    let pinned = Security::pinned(key.public());
    let mut server_cfg = SessionConfig {
        security: Security::server(key),
        ..SessionConfig::default()
    };
    args.observe.configure(&mut server_cfg);
    let listener = Listener::bind(localhost, server_cfg)?;
    let emulators = start_emulators(&args, &plans, localhost, listener.local_addr())?;
    let capacity: f64 = plans.iter().map(|p| p.capacity_bps).sum();
    announce(&args, &plans, &emulators, capacity);
    let receiver = spawn_receiver(listener, args.observe.clone());

    let mut cfg = SessionConfig {
        security: pinned,
        ..SessionConfig::default()
    };
    if let Some(cc) = &args.cc {
        cfg.cc = *cc;
    }
    args.observe.configure(&mut cfg);
    let paths: Vec<PathSpec> = emulators
        .iter()
        .map(|r| PathSpec::to(r.local_addr()))
        .collect();
    let mut session = braid::connect(&paths, cfg).await?;
    let recording = args.observe.record(&session, "send", "braid demo (sender)");
    // The sender's view: the paths' windows and shares are its own.
    let recorder = Recorder::start(args.observe.plot.as_deref(), &session, Side::Send);
    let manifest = Manifest::single("demo.bin", Some(args.size));
    let result = match send_watched(&args, &plans, &mut session, &manifest).await {
        Ok(r) => r,
        Err((what, status)) => {
            eprintln!("braid: demo {what}");
            return Ok(ExitCode::from(status));
        }
    };
    crate::linger(&session).await;
    recording.finish(&session).await;
    if let Some(r) = recorder {
        let mut report = crate::summary::Report::new(Side::Send);
        report.observe(&session);
        report.describe(&manifest);
        r.write(&report).await;
    }
    print_sender_end(&session, &result, args.size);
    if let Ok(Ok(end)) = receiver.await {
        print_receiver_end(end);
    }
    print_emulator_stats(&emulators);
    Ok(verdict(result, capacity))
}

/// One emulator per path between the sender and `listener`, each with its
/// own seed so that the paths lose independently.
fn start_emulators(
    args: &DemoArgs,
    plans: &[PathPlan],
    localhost: SocketAddr,
    listener: SocketAddr,
) -> anyhow::Result<Vec<Emulator>> {
    let mut emulators = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let mut cfg = EmulatorConfig::new(localhost, listener, plan.link.clone());
        // Loss on the data direction only, as in the simulator's paths.
        cfg.reverse.loss = 0.0;
        cfg.seed = braid_link::seeds::demo_relay(args.seed, i);
        emulators.push(Emulator::start(cfg)?);
    }
    Ok(emulators)
}

/// Tells, before the transfer starts, what is sent over which paths.
fn announce(args: &DemoArgs, plans: &[PathPlan], emulators: &[Emulator], capacity: f64) {
    eprintln!(
        "braid demo: {} over {} emulated path{} on loopback ({:.1} Mbit/s after loss in total)",
        braid_link::units::format_size(args.size),
        plans.len(),
        if plans.len() == 1 { "" } else { "s" },
        capacity / 1e6
    );
    for (i, (plan, emulator)) in plans.iter().zip(emulators).enumerate() {
        eprintln!(
            "  path {i}: emulated at {} — {}",
            emulator.local_addr(),
            plan.spec
        );
    }
}

/// How the receiver's side of the demo ended: what it got, its session's
/// counters and its configuration.
type ReceiverEnd = (anyhow::Result<Outcome>, SessionStats, SessionConfig);

/// The receiving side, discarding what it gets: the demo measures the
/// transport, not the disk.
fn spawn_receiver(
    listener: Listener,
    observe: crate::observe::ObserveArgs,
) -> tokio::task::JoinHandle<anyhow::Result<ReceiverEnd>> {
    tokio::spawn(async move {
        let mut session = listener.accept().await?;
        let recording = observe.record(&session, "recv", "braid demo (receiver)");
        let result =
            transfer::receive(&mut session, &Output::Discard, false, &Progress::disabled()).await;
        if result.is_ok() {
            transfer::verdict_acknowledged(&mut session).await;
        } else {
            crate::linger(&session).await;
        }
        recording.finish(&session).await;
        let config = session.config();
        anyhow::Ok((result, session.stats(), config))
    })
}

/// Sends the generated content while showing its progress; `Err` when
/// interrupted, with what to say and the exit status.
async fn send_watched(
    args: &DemoArgs,
    plans: &[PathPlan],
    session: &mut Session,
    manifest: &Manifest,
) -> Result<anyhow::Result<Outcome>, (&'static str, u8)> {
    let wanted = !args.quiet && std::io::stderr().is_terminal();
    // The live view by default: the demo is there to see braid work.
    let view = || crate::live::Setup {
        side: Side::Send,
        title: "braid demo".into(),
        notes: plans.iter().map(|p| p.spec.clone()).collect(),
        relays: Vec::new(),
    };
    let live = Progress::live_view(
        wanted && args.observe.live.unwrap_or(true),
        Some(args.size),
        view,
    );
    let lines_wanted = wanted && live.is_none();
    let multi = MultiProgress::with_draw_target(if lines_wanted {
        ProgressDrawTarget::stderr_with_hz(8)
    } else {
        ProgressDrawTarget::hidden()
    });
    let progress =
        live.unwrap_or_else(|| Progress::in_multi(&multi, lines_wanted, Some(args.size), "demo"));
    let lines = if progress.is_live() {
        progress.watch(session.monitor(), Side::Send)
    } else {
        let segment_size = u64::from(session.config().segment_size.max(1));
        Some(path_lines(&multi, plans, session.monitor(), segment_size))
    };
    let source = Source::Once(Box::new(Generated::new(args.size)));
    let mut start = 0;
    let interrupted = tokio::select! {
        r = transfer::send(session, manifest, source, &progress, &mut start) => Ok(r),
        // Handled, so that the live view gives the terminal back.
        stop = crate::interrupted() => Err(stop),
    };
    if let Some(l) = lines {
        l.abort();
    }
    progress.finish();
    let _ = multi.clear();
    interrupted
}

/// The sender's summary of its end of the transfer.
fn print_sender_end(session: &Session, result: &anyhow::Result<Outcome>, size: u64) {
    let config = session.config();
    let (delivered, elapsed, error) = match result {
        Ok(o) => (o.bytes, o.elapsed, None),
        Err(e) => (0, Duration::ZERO, Some(format!("{e:#}"))),
    };
    let sent = Ended {
        side: Side::Send,
        cc: config.cc.name().to_owned(),
        stats: session.stats(),
        segment_size: config.segment_size,
        bytes: size,
        delivered,
        verified: result.is_ok(),
        duration_s: elapsed.as_secs_f64(),
        error,
    };
    eprint!("\n{}", sent.summary());
}

/// The receiver's summary of its end of the transfer.
fn print_receiver_end((result, stats, config): ReceiverEnd) {
    let (bytes, secs, error) = match &result {
        Ok(o) => (o.bytes, o.elapsed.as_secs_f64(), None),
        Err(e) => (stats.bytes_received, 0.0, Some(format!("{e:#}"))),
    };
    let received = Ended {
        side: Side::Recv,
        cc: config.cc.name().to_owned(),
        stats,
        segment_size: config.segment_size,
        bytes,
        delivered: bytes,
        verified: result.is_ok(),
        duration_s: secs,
        error,
    };
    eprint!("\n{}", received.summary());
}

/// What each emulated path did to the datagrams it carried.
fn print_emulator_stats(emulators: &[Emulator]) {
    for (i, r) in emulators.iter().enumerate() {
        let s = r.stats();
        eprintln!(
            "  path {i}: forwarded {} datagrams, dropped {} by loss and {} by the queue",
            s.forward.link.delivered, s.forward.link.dropped_loss, s.forward.link.dropped_queue
        );
    }
}

/// The demo's one-line result: the goodput against what the paths can carry.
fn verdict(result: anyhow::Result<Outcome>, capacity: f64) -> ExitCode {
    match result {
        Ok(o) => {
            let goodput = o.bytes as f64 * 8.0 / o.elapsed.as_secs_f64();
            println!(
                "demo: {} in {:.2} s = {:.1} Mbit/s goodput, {:.1} % of the {:.1} Mbit/s the paths carry after loss; verified (BLAKE3 {})",
                braid_link::units::format_size(o.bytes),
                o.elapsed.as_secs_f64(),
                goodput / 1e6,
                goodput * 100.0 / capacity,
                capacity / 1e6,
                &o.hash.to_hex()[..16]
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("braid: demo transfer failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// One live line per path: its goodput, window (packets of `segment_size` bytes) and sRTT.
fn path_lines(
    multi: &MultiProgress,
    plans: &[PathPlan],
    monitor: Monitor,
    segment_size: u64,
) -> tokio::task::JoinHandle<()> {
    let style = ProgressStyle::with_template("  {prefix:>8} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let bars: Vec<ProgressBar> = plans
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let b = multi.add(ProgressBar::new_spinner());
            b.set_style(style.clone());
            b.set_prefix(format!("path {i}"));
            b
        })
        .collect();
    let specs: Vec<String> = plans.iter().map(|p| p.spec.clone()).collect();
    tokio::spawn(async move {
        let mut last = vec![0u64; bars.len()];
        let tick = Duration::from_millis(500);
        loop {
            tokio::time::sleep(tick).await;
            let stats = monitor.stats();
            for (id, p) in &stats.paths {
                let i = id.index();
                let (Some(bar), Some(spec)) = (bars.get(i), specs.get(i)) else {
                    continue;
                };
                let rate = (p.stream_bytes_acked - last[i]) as f64 * 8.0 / tick.as_secs_f64();
                last[i] = p.stream_bytes_acked;
                bar.set_message(format!(
                    "{:>6.1} Mbit/s  window {:>5} pkts  sRTT {:>6.1} ms  lost {:>5}   [{spec}]",
                    rate / 1e6,
                    p.window / segment_size,
                    p.srtt.as_secs_f64() * 1e3,
                    p.lost_packets
                ));
            }
        }
    })
}

/// A deterministic pseudo-random stream (BLAKE3 in XOF mode) of `len` bytes.
struct Generated {
    xof: blake3::OutputReader,
    remaining: u64,
}

impl Generated {
    fn new(len: u64) -> Generated {
        Generated {
            xof: blake3::Hasher::new().update(b"braid demo").finalize_xof(),
            remaining: len,
        }
    }
}

impl std::io::Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.remaining) as usize;
        self.xof.fill(&mut buf[..n]);
        self.remaining -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_specs() {
        let p = parse_path("10mbit:80ms:1%:500").unwrap();
        assert_eq!(p.link.delay, Duration::from_millis(40));
        assert_eq!(p.link.loss, 0.01);
        assert_eq!(p.link.queue, QueueLimit::Packets(500));
        assert!((p.capacity_bps - 9.9e6).abs() < 1.0);
        assert!(parse_path("40mbit").is_err());
        assert!(parse_path("40mbit:20ms:150%").is_err());
        assert!(parse_path("fast:20ms").is_err());
    }
}
