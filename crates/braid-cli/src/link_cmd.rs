//! `braid link`: runs a command behind the simulator's link model, in real
//! time, the way mahimahi's `mm-link` does: the command gets a network
//! namespace whose only route leads through the emulated link to the
//! outside end, whose address it finds in `$BRAID_LINK_HOST`.
//!
//! One thread moves every packet: it reads what is waiting on both TUN
//! devices, offers each packet to its direction's [`Link`] at the moment it
//! was read, and writes it to the other device at the arrival time the link
//! computed, sleeping in between with nanosecond timeouts.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use braid_link::{
    seeds, state_changes, DropReason, EcnMode, InFlight, Link, LinkConfig, LinkState, LinkStats,
    Offer,
};
use braid_proto::{Ecn, Instant};
use clap::Args;

use crate::link_args::{describe_both, link_counters, LinkArgs};
use braid_netns::{Namespace, Tun};

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

/// Packets read from one device per turn, so a flood one way cannot starve
/// deliveries the other way.
const READ_BATCH: usize = 256;
/// Longest sleep: how soon the command's exit and signals are noticed.
const MAX_WAIT: Duration = Duration::from_millis(20);
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
        bail!("--ecn mbecn needs braid's header, which braid link does not look into; use threshold:K, or braid relay");
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
    let mut lanes = [
        Lane::new(up.config.clone(), up_seed, up_log, &description, "uplink"),
        Lane::new(
            down.config.clone(),
            down_seed,
            down_log,
            &description,
            "downlink",
        ),
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
        eprintln!("braid link: uplink: {}", lanes[0].counters());
        eprintln!("braid link: downlink: {}", lanes[1].counters());
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
        // Sleeps end when asked, not up to 50 us later.
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
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
    let mut buf = vec![0u8; 65_536];
    let mut told: Option<std::time::Instant> = None;
    let mut exited = None;
    // Last time a packet was read or waiting in the link.
    let mut busy = std::time::Instant::now();
    let status = loop {
        let now = link_now(origin);
        while let Some(&(_, state)) = changes.peek().filter(|c| Instant::ZERO + c.0 <= now) {
            changes.next();
            for lane in lanes.iter_mut() {
                lane.link.set_state(now, state);
            }
        }
        // Uplink: read inside, write outside; downlink the other way.
        for (lane, from, to) in [(0, &ns.inside, &ns.outside), (1, &ns.outside, &ns.inside)] {
            lanes[lane].deliver(link_now(origin), to);
            for _ in 0..READ_BATCH {
                match from.recv(&mut buf)? {
                    Some(n) => {
                        busy = std::time::Instant::now();
                        lanes[lane].offer(now, &mut buf[..n]);
                    }
                    None => break,
                }
            }
        }
        if exited.is_none() {
            exited = child.try_wait()?.map(|st| (st, std::time::Instant::now()));
        }
        if let Some((status, at)) = exited {
            // Packets still in the link (a FIN, the last ACKs) are delivered
            // before the namespace goes, so the far end sees a clean close.
            if lanes.iter().any(|l| l.due().is_some()) {
                busy = std::time::Instant::now();
            }
            let quiet = busy.elapsed() >= DRAIN_MIN;
            if quiet || at.elapsed() >= DRAIN_MAX || SIGNAL.load(Ordering::Relaxed) != 0 {
                break status;
            }
        }
        let sig = SIGNAL.load(Ordering::Relaxed);
        // A terminal's Ctrl-C reaches the command too; anything else (or a
        // command that ignores it) is passed on, and then repeated.
        if sig != 0 && told.is_none_or(|t| t.elapsed() > SIGNAL_GRACE) {
            if told.is_some() || sig != libc::SIGINT {
                // SAFETY: kill with a pid we spawned and a valid signal.
                unsafe { libc::kill(child.id() as libc::pid_t, sig) };
            }
            told = Some(std::time::Instant::now());
        }
        let next_change = changes.peek().map(|c| Instant::ZERO + c.0);
        let due = lanes.iter().filter_map(Lane::due).chain(next_change).min();
        let wait = due.map_or(MAX_WAIT, |at| {
            Duration::from_nanos(at.as_nanos().saturating_sub(link_now(origin).as_nanos()))
                .min(MAX_WAIT)
        });
        braid_netns::wait_readable(&[&ns.inside, &ns.outside], wait);
    };
    Ok(status)
}

fn link_now(origin: std::time::Instant) -> Instant {
    Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
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

/// One direction: its link, the packets it has yet to deliver, its log.
struct Lane {
    link: Link,
    /// Packets with the time they entered the link.
    pending: InFlight<(Instant, Box<[u8]>)>,
    sent: u64,
    dropped_in_flight: u64,
    overflow: u64,
    write_errors: u64,
    log: Option<BufWriter<File>>,
}

impl Lane {
    fn new(cfg: LinkConfig, seed: u64, log: Option<File>, description: &str, name: &str) -> Lane {
        let mut log = log.map(BufWriter::new);
        if let Some(w) = &mut log {
            let base = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let _ = writeln!(w, "# braid link {name}: {description}");
            let _ = writeln!(w, "# base timestamp: {base}");
        }
        Lane {
            link: Link::new(cfg, seed),
            pending: InFlight::default(),
            sent: 0,
            dropped_in_flight: 0,
            overflow: 0,
            write_errors: 0,
            log,
        }
    }

    /// Offers an IP packet read at `now`; queues it for its arrival time.
    fn offer(&mut self, now: Instant, packet: &mut [u8]) {
        let size = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        self.log(now, format_args!("+ {size}"));
        let offer = self.link.offer(now, size, ip_ecn(packet), 0);
        let Offer::Deliver {
            at,
            ecn,
            duplicate_at,
            ..
        } = offer
        else {
            if let Offer::Dropped(why) = offer {
                let why = match why {
                    DropReason::Down => "down",
                    DropReason::Loss => "loss",
                    DropReason::Queue => "queue",
                    DropReason::TooBig => "mtu",
                };
                self.log(now, format_args!("d {size} {why}"));
            }
            return;
        };
        set_ip_ecn(packet, ecn);
        for at in duplicate_at.into_iter().chain([at]) {
            let held = (now, packet.to_vec().into_boxed_slice());
            if self.pending.push(at, packet.len(), held).is_err() {
                self.overflow += 1;
            }
        }
    }

    fn due(&self) -> Option<Instant> {
        self.pending.next_at()
    }

    /// Writes every packet whose arrival time has come.
    fn deliver(&mut self, now: Instant, to: &Tun) {
        while let Some((at, (entered, packet))) = self.pending.pop_due(now) {
            // As in the simulator and the relay, a link that is down at the
            // arrival time loses what was in flight.
            if !self.link.is_up() {
                self.dropped_in_flight += 1;
                self.log(at, format_args!("d {} in-flight", packet.len()));
                continue;
            }
            match to.send(&packet) {
                Ok(()) => self.sent += 1,
                Err(_) => self.write_errors += 1,
            }
            // At the link's arrival time: ours is later by the wake-up latency.
            let delay_ms = (at.as_nanos() - entered.as_nanos()) / 1_000_000;
            self.log(at, format_args!("- {} {delay_ms}", packet.len()));
        }
    }

    fn log(&mut self, at: Instant, what: std::fmt::Arguments) {
        if let Some(w) = &mut self.log {
            let _ = writeln!(w, "{} {what}", at.as_nanos() / 1_000_000);
        }
    }

    fn finish(&mut self) {
        if let Some(w) = &mut self.log {
            let _ = w.flush();
        }
    }

    fn counters(&self) -> String {
        let l: LinkStats = self.link.stats();
        let mut s = format!("{}, sent {}", link_counters(&l), self.sent);
        if self.dropped_in_flight > 0 {
            s += &format!(
                ", {} lost in flight when the link went down",
                self.dropped_in_flight
            );
        }
        if self.overflow > 0 {
            s += &format!(", {} dropped for lack of memory", self.overflow);
        }
        if self.write_errors > 0 {
            s += &format!(", {} write errors", self.write_errors);
        }
        s
    }
}

/// The ECN codepoint of an IPv4 or IPv6 packet.
fn ip_ecn(packet: &[u8]) -> Ecn {
    match (packet.first().map(|b| b >> 4), packet.get(1)) {
        (Some(4), Some(&tos)) => Ecn::from_bits(tos),
        (Some(6), Some(&b)) => Ecn::from_bits(b >> 4),
        _ => Ecn::NotEct,
    }
}

/// Sets the ECN codepoint of an IPv4 (with its header checksum) or IPv6 packet.
fn set_ip_ecn(packet: &mut [u8], ecn: Ecn) {
    if ip_ecn(packet) == ecn {
        return;
    }
    let bits = ecn.to_bits();
    match packet.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            if ihl < 20 || packet.len() < ihl {
                return;
            }
            packet[1] = (packet[1] & !0b11) | bits;
            packet[10] = 0;
            packet[11] = 0;
            let sum = packet[..ihl]
                .chunks_exact(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum::<u32>();
            let folded = (sum & 0xffff) + (sum >> 16);
            let folded = (folded & 0xffff) + (folded >> 16);
            packet[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
        }
        Some(6) if packet.len() > 1 => packet[1] = (packet[1] & 0xcf) | (bits << 4),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20-byte IPv4 header with a valid checksum (RFC 1071's example host).
    fn ipv4() -> Vec<u8> {
        let mut p = vec![
            0x45, 0x02, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0, 100, 64, 0, 2, 100,
            64, 0, 1,
        ];
        set_ip_ecn(&mut p, Ecn::NotEct);
        set_ip_ecn(&mut p, Ecn::Ect0);
        p
    }

    fn checksum_ok(h: &[u8]) -> bool {
        let sum: u32 = h
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        (folded & 0xffff) + (folded >> 16) == 0xffff
    }

    #[test]
    fn ce_marks_keep_ipv4_headers_valid() {
        let mut p = ipv4();
        assert!(checksum_ok(&p));
        assert_eq!(ip_ecn(&p), Ecn::Ect0);
        set_ip_ecn(&mut p, Ecn::Ce);
        assert_eq!(ip_ecn(&p), Ecn::Ce);
        assert_eq!(p[1] >> 2, 0, "DSCP untouched");
        assert!(checksum_ok(&p));
    }

    #[test]
    fn ce_marks_ipv6_traffic_class() {
        let mut p = vec![0x6a, 0x80, 0, 0, 0, 8, 17, 64];
        assert_eq!(ip_ecn(&p), Ecn::NotEct);
        p[1] |= 0b10 << 4;
        assert_eq!(ip_ecn(&p), Ecn::Ect0);
        set_ip_ecn(&mut p, Ecn::Ce);
        assert_eq!(ip_ecn(&p), Ecn::Ce);
        assert_eq!(
            (p[0], p[1] & 0xcf),
            (0x6a, 0x80),
            "version, DSCP and flow label untouched"
        );
    }
}
