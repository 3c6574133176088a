//! `braid link`: runs a command behind the simulator's link model, in real
//! time, the way mahimahi's `mm-link` does: the command gets a network
//! namespace whose only route leads through the emulated link to the
//! outside end, whose address it finds in `$BRAID_LINK_HOST`.
//!
//! One thread moves every packet, through a hop of two lanes
//! ([`braid_netns::hop`], the NAT lab's too); this command adds the
//! path's scheduled events, the command's exit and its signals.

use std::fs::File;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use braid_link::{seeds, state_changes, EcnMode, LinkState};
use braid_netns::hop::{self, Lane, LaneStats};
use braid_netns::Namespace;
use braid_proto::Instant;
use clap::Args;

use crate::link_args::{describe_both, direction_counters, LinkArgs};

#[derive(Args)]
#[command(
    after_help = "The command runs in a network namespace of its own, as root; \
$BRAID_LINK_HOST is the outside end's address (run a server there, e.g. iperf3 -s, in another \
shell) and $BRAID_LINK_ADDR the command's own. Forward is the command's side to the outside \
(mahimahi's uplink), reverse the way back. Delay, jitter, loss, queue and ECN apply to each \
direction. Values use the syntax of scenario files (docs/scenarios.md); traces are mahimahi \
trace files. braid link exits with the command's exit status.

Example: braid link --rate 50mbit --delay 20ms --loss 1% -- sh -c 'iperf3 -c \"$BRAID_LINK_HOST\"'"
)]
pub struct LinkCmdArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Per-packet log of the forward direction (mahimahi-like: "ms + bytes"
    /// when a packet enters, "ms - bytes delay_ms" when it leaves, "ms d bytes
    /// reason" when it is dropped).
    #[arg(long, value_name = "FILE")]
    uplink_log: Option<PathBuf>,
    /// Per-packet log of the reverse direction.
    #[arg(long, value_name = "FILE")]
    downlink_log: Option<PathBuf>,
    /// Print nothing but the command's own output.
    #[arg(long, short)]
    quiet: bool,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// After the command exits, the link carries packets until it has been idle
/// this long (the far end's answers to its last packets are back), at most
/// until DRAIN_MAX.
const DRAIN_MIN: Duration = Duration::from_millis(100);
const DRAIN_MAX: Duration = Duration::from_secs(3);
/// How long an interrupted command has to exit before it is told again.
const SIGNAL_GRACE: Duration = Duration::from_secs(2);

/// Signal received by braid itself (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::Relaxed);
}

pub fn run(args: LinkCmdArgs) -> anyhow::Result<ExitCode> {
    let links = args.link.links()?;
    let (up, down) = (&links.forward, &links.reverse);
    if up.config.ecn == EcnMode::MbEcn {
        bail!("--ecn mbecn needs braid's header, which braid link does not look into; use threshold:K, or braid emulate");
    }
    let logs = [&args.uplink_log, &args.downlink_log].map(|p| {
        p.as_ref()
            .map(|p| File::create(p).with_context(|| format!("cannot write {}", p.display())))
            .transpose()
    });
    let [up_log, down_log] = logs;
    let (up_log, down_log) = (up_log?, down_log?);
    let description = describe_both(up, down, ["uplink", "downlink"]);
    // Both directions share the path's events, as in the simulator.
    let changes = state_changes(&up.config.events);

    let ns = Namespace::create()?;
    catch_signals();
    let origin = std::time::Instant::now();
    // The simulator's seeds for this path's links.
    let [up_seed, down_seed] = seeds::links(links.seed, links.path);
    let lane = |cfg, seed, log: Option<File>, name: &str| {
        let lane = Lane::new(cfg, seed);
        match log {
            Some(file) => lane.with_log(file, &format!("braid link {name}: {description}")),
            None => lane,
        }
    };
    let mut lanes = [
        lane(up.config.clone(), up_seed, up_log, "uplink"),
        lane(down.config.clone(), down_seed, down_log, "downlink"),
    ];
    if !args.quiet {
        eprintln!(
            "braid link: {} (outside, $BRAID_LINK_HOST) <-> {} (command): {description}",
            ns.host, ns.inner
        );
    }
    let mut child = ns
        .command(&args.command)
        .spawn()
        .with_context(|| format!("cannot run {}", args.command[0]))?;
    let status = forward_until_exit(&ns, &mut lanes, &mut child, origin, changes)?;
    for lane in &mut lanes {
        lane.finish();
    }
    if !args.quiet {
        eprintln!("braid link: uplink: {}", counters(&lanes[0].stats()));
        eprintln!("braid link: downlink: {}", counters(&lanes[1].stats()));
    }
    drop(ns);
    Ok(exit_code(status))
}

/// Catches the signals that end the command, to pass them on to it.
fn catch_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Moves packets through the two lanes, applying the path's state
/// `changes` when due, until the command has exited and the links drained.
fn forward_until_exit(
    ns: &Namespace,
    lanes: &mut [Lane; 2],
    child: &mut std::process::Child,
    origin: std::time::Instant,
    changes: Vec<(Duration, LinkState)>,
) -> anyhow::Result<std::process::ExitStatus> {
    let mut changes = changes.into_iter().peekable();
    let mut told: Option<std::time::Instant> = None;
    let mut exited = None;
    // Last time a packet was read or waiting in the link.
    let mut busy = std::time::Instant::now();
    // Uplink: read inside, write outside; downlink the other way.
    let ends = [&ns.inside, &ns.outside];
    let status = hop::forward(ends, lanes, origin, |turn| {
        while let Some(&(_, state)) = changes.peek().filter(|c| Instant::ZERO + c.0 <= turn.now) {
            changes.next();
            for lane in turn.lanes.iter_mut() {
                lane.set_state(turn.now, state);
            }
        }
        turn.wake_at = changes.peek().map(|c| Instant::ZERO + c.0);
        if turn.read {
            busy = std::time::Instant::now();
        }
        if exited.is_none() {
            match child.try_wait() {
                Ok(st) => exited = st.map(|st| (st, std::time::Instant::now())),
                Err(e) => return ControlFlow::Break(Err(e)),
            }
        }
        if let Some((status, at)) = exited {
            // Packets still in the link (a FIN, the last ACKs) are delivered
            // before the namespace goes, so the far end sees a clean close.
            if turn.lanes.iter().any(|l| l.due().is_some()) {
                busy = std::time::Instant::now();
            }
            let quiet = busy.elapsed() >= DRAIN_MIN;
            if quiet || at.elapsed() >= DRAIN_MAX || SIGNAL.load(Ordering::Relaxed) != 0 {
                return ControlFlow::Break(Ok(status));
            }
        }
        pass_on_signal(child, &mut told);
        ControlFlow::Continue(())
    })??;
    Ok(status)
}

/// Passes a signal braid received on to the command. A terminal's Ctrl-C
/// reaches the command too; anything else (or a command that ignores it)
/// is passed on, and then repeated.
fn pass_on_signal(child: &std::process::Child, told: &mut Option<std::time::Instant>) {
    let sig = SIGNAL.load(Ordering::Relaxed);
    if sig != 0 && told.is_none_or(|t| t.elapsed() > SIGNAL_GRACE) {
        if told.is_some() || sig != libc::SIGINT {
            // SAFETY: kill with a pid we spawned and a valid signal.
            unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        }
        *told = Some(std::time::Instant::now());
    }
}

/// The command's status as ours: its code, or 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// What a lane did, on one line.
fn counters(l: &LaneStats) -> String {
    let lost = [l.dropped_in_flight, l.dropped_overflow];
    direction_counters(&l.link, l.sent, lost, (l.write_errors, "write errors"))
}
