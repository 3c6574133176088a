//! `braid bench transfers`: the real CLI on loopback, as users run it. A
//! receiver, an optional `braid relay` and a sender are separate processes
//! of this binary; every case (protection × route) runs once per round in
//! an order rotated each round, so a noisy neighbour spreads over all of
//! them; the report gives medians of goodput and of each process's CPU
//! seconds per GB, and each case's ratio to the first.
//!
//! With `--mtu`, every process runs in a network namespace of its own whose
//! loopback has that MTU (see [`braid_netns::Loopback`]), and kernel TCP
//! (`braid-bench tcp-send` to `tcp-recv`, [`crate::tcp_file`]) takes its
//! turn in the same rounds as a case of its own.

use super::transfers_report::{markdown, summarise, Setting};
use anyhow::{bail, Context};
use braid_netns::Loopback;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

fn parse_size(s: &str) -> Result<u64, String> {
    braid_link::units::parse_size(s).map_err(|e| e.to_string())
}

#[derive(clap::Args, Debug)]
pub struct TransfersArgs {
    /// Bytes per transfer (e.g. 300MB, 1GiB).
    #[arg(long, default_value = "300MB", value_parser = parse_size)]
    size: u64,
    /// Rounds: each runs every case once, in an order rotated per round.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Protection to compare (comma-separated): sealed (a pinned key, as
    /// users run it) and insecure.
    #[arg(long, value_delimiter = ',', default_value = "sealed,insecure")]
    kinds: Vec<Protection>,
    /// Route (repeatable): `direct`, or `relay` through one `braid relay`,
    /// optionally with its link flags after a colon, e.g.
    /// "relay:--rate 50mbit --delay 20ms --loss 1%".
    #[arg(long = "via", default_value = "direct")]
    via: Vec<Via>,
    /// Where the receiver writes: `file` (a file, fsynced) or `null` (its
    /// standard output to /dev/null); BLAKE3-verified either way.
    #[arg(long, value_enum, default_value_t = Sink::File)]
    sink: Sink,
    /// Run each case twice, the second time with both sides writing a
    /// qlog (`--qlog`), to show what recording costs.
    #[arg(long)]
    qlog: bool,
    /// Run the receiver, relay and sender in a network namespace of their
    /// own whose loopback has this MTU, e.g. 1500 as on Ethernet (the
    /// host's loopback has 65536, where braid finds 16 KiB datagrams), with
    /// kernel TCP beside braid in the same rounds. Needs root and
    /// iproute2's `ip`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1280..=65536))]
    mtu: Option<u32>,
    /// Output directory: transfers.md and transfers.json.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(super) enum Protection {
    Sealed,
    Insecure,
    /// Kernel TCP, not braid (with `--mtu`).
    #[value(skip)]
    Tcp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(super) enum Sink {
    File,
    Null,
}

/// A route: straight to the receiver, or through a relay with these flags.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) enum Via {
    Direct,
    Relay(Vec<String>),
}

impl std::str::FromStr for Via {
    type Err = String;
    fn from_str(s: &str) -> Result<Via, String> {
        match s.split_once(':') {
            None if s == "direct" => Ok(Via::Direct),
            None if s == "relay" => Ok(Via::Relay(Vec::new())),
            Some(("relay", flags)) => Ok(Via::Relay(
                flags.split_whitespace().map(str::to_owned).collect(),
            )),
            _ => Err(format!(
                "{s:?}: expected direct, relay or relay:FLAGS (e.g. \"relay:--rate 50mbit\")"
            )),
        }
    }
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Via::Direct => f.write_str("direct"),
            Via::Relay(flags) if flags.is_empty() => f.write_str("relay"),
            Via::Relay(flags) => write!(f, "relay {}", flags.join(" ")),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Case {
    pub kind: Protection,
    pub via: String,
    /// Both sides write a qlog.
    pub qlog: bool,
    #[serde(skip)]
    pub route: Via,
}

impl Case {
    pub fn name(&self) -> String {
        let kind = match self.kind {
            Protection::Sealed => "sealed",
            Protection::Insecure => "insecure",
            Protection::Tcp => return "kernel TCP".to_owned(),
        };
        let qlog = if self.qlog { ", qlog" } else { "" };
        format!("{kind}, {}{qlog}", self.via)
    }
}

/// One transfer's figures.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Run {
    pub round: u32,
    pub case: usize,
    pub goodput_mbps: f64,
    pub duration_s: f64,
    pub sender_cpu_s_per_gb: f64,
    pub receiver_cpu_s_per_gb: f64,
    pub relay_cpu_s_per_gb: Option<f64>,
}

/// What every run of a bench shares.
pub(super) struct Bench {
    /// The braid binary the transfers run.
    exe: PathBuf,
    /// This program, for kernel TCP's `tcp-send` and `tcp-recv`.
    own: PathBuf,
    work: tempfile::TempDir,
    input: PathBuf,
    key: PathBuf,
    sink: Sink,
    size: u64,
    /// The namespace the processes run in (`--mtu`); none: this one's.
    netns: Option<Loopback>,
}

impl Bench {
    /// braid, to run where the bench's processes run.
    pub fn command(&self) -> anyhow::Result<Command> {
        self.command_of(&self.exe)
    }

    /// This program, to run where the bench's processes run.
    pub fn own_command(&self) -> anyhow::Result<Command> {
        self.command_of(&self.own)
    }

    fn command_of(&self, program: &Path) -> anyhow::Result<Command> {
        match &self.netns {
            Some(ns) => ns.command(program),
            None => Ok(Command::new(program)),
        }
    }

    pub fn input(&self) -> &Path {
        &self.input
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

/// The cases of a run, in their first round's order.
fn cases(args: &TransfersArgs) -> Vec<Case> {
    let mut cases: Vec<Case> = args
        .kinds
        .iter()
        .flat_map(|&kind| {
            args.via.iter().map(move |v| Case {
                kind,
                via: v.to_string(),
                qlog: false,
                route: v.clone(),
            })
        })
        .flat_map(|c| {
            let recorded = args.qlog.then(|| Case {
                qlog: true,
                ..c.clone()
            });
            std::iter::once(c).chain(recorded)
        })
        .collect();
    if args.mtu.is_some() {
        cases.push(Case {
            kind: Protection::Tcp,
            via: Via::Direct.to_string(),
            qlog: false,
            route: Via::Direct,
        });
    }
    cases
}

fn setup(args: &TransfersArgs) -> anyhow::Result<Bench> {
    // First, so that a run without root fails before any work.
    let netns = match args.mtu {
        Some(mtu) => Some(Loopback::create("braid bench transfers --mtu", mtu)?),
        None => None,
    };
    let exe = crate::braid_exe()?;
    let own = crate::own_exe()?;
    let work = tempfile::tempdir().context("cannot make a working directory")?;
    let input = work.path().join("in.bin");
    super::real::write_content(&input, args.size)?;
    let key = work.path().join("recv.key");
    let made = Command::new(&exe)
        .args(["keygen", "-o"])
        .arg(&key)
        .output()
        .context("cannot run braid keygen")?;
    anyhow::ensure!(made.status.success(), "braid keygen failed");
    Ok(Bench {
        exe,
        own,
        work,
        input,
        key,
        sink: args.sink,
        size: args.size,
        netns,
    })
}

pub fn run(args: TransfersArgs) -> anyhow::Result<ExitCode> {
    let bench = setup(&args)?;
    let cases = cases(&args);
    eprintln!(
        "{} per transfer, {} rounds of {} cases, rotated{}",
        braid::text::size(args.size),
        args.rounds,
        cases.len(),
        args.mtu
            .map_or(String::new(), |m| format!(", loopback MTU {m}"))
    );
    let runs = rounds(&bench, &cases, args.rounds)?;
    let summaries = summarise(&cases, &runs);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mtu = match args.mtu {
        Some(m) => m,
        None => host_loopback_mtu()?,
    };
    let command = super::command_line();
    let md = markdown(
        &summaries,
        &Setting {
            size: args.size,
            rounds: args.rounds,
            sink: args.sink,
            mtu,
            namespace: args.mtu.is_some(),
            command: &command,
        },
    );
    print!("{md}");
    std::fs::write(args.out.join("transfers.md"), &md)?;
    let json = serde_json::json!({
        "size": args.size,
        "rounds": args.rounds,
        "sink": args.sink,
        "mtu": mtu,
        "namespace": args.mtu.is_some(),
        "cases": cases,
        "runs": runs,
        "medians": summaries,
    });
    std::fs::write(
        args.out.join("transfers.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The host's loopback MTU, which the processes have without `--mtu`.
fn host_loopback_mtu() -> anyhow::Result<u32> {
    let text = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .context("cannot read the loopback's MTU")?;
    text.trim()
        .parse()
        .with_context(|| format!("the loopback's MTU: {text:?}"))
}

/// Every case once per round, in an order rotated each round.
fn rounds(bench: &Bench, cases: &[Case], rounds: u32) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    for round in 0..rounds {
        for i in 0..cases.len() {
            let c = (i + round as usize) % cases.len();
            let run = match cases[c].kind {
                Protection::Tcp => super::transfers_tcp::transfer(bench),
                _ => transfer(bench, &cases[c]),
            }
            .with_context(|| format!("round {}, {}", round + 1, cases[c].name()))?;
            eprintln!(
                "round {}  {:<40} {:>8.0} Mbit/s  CPU s/GB sender {:.2} receiver {:.2}{}",
                round + 1,
                cases[c].name(),
                run.goodput_mbps,
                run.sender_cpu_s_per_gb,
                run.receiver_cpu_s_per_gb,
                run.relay_cpu_s_per_gb
                    .map_or(String::new(), |r| format!(" relay {r:.2}"))
            );
            runs.push(Run {
                round: round + 1,
                case: c,
                ..run
            });
        }
    }
    Ok(runs)
}

/// The receiver's and the sender's command lines for `case`, the receiver
/// listening on `listen` (the sender's `--to` is left to the route).
fn commands(bench: &Bench, case: &Case, listen: &str) -> anyhow::Result<(Command, Command)> {
    let (work, input, key) = (bench.work.path(), &bench.input, &bench.key);
    let mut recv = bench.command()?;
    recv.args(["recv", "--listen", listen, "--quiet"]);
    match bench.sink {
        Sink::File => recv
            .arg("--output")
            .arg(work.join("out.bin"))
            .args(["--overwrite", "--json"]),
        // Its stdout is the file: no record (the sender's says whether
        // the receiver verified).
        Sink::Null => recv.args(["--output", "-"]),
    };
    let mut send = bench.command()?;
    send.arg("send").arg(input).args(["--quiet", "--json"]);
    let qlog = work.join("qlog");
    if case.qlog {
        // Each run's files replace the last's: the disk holds one run.
        let _ = std::fs::remove_dir_all(&qlog);
        recv.arg("--qlog").arg(&qlog);
        send.arg("--qlog").arg(&qlog);
    }
    match case.kind {
        Protection::Sealed => {
            recv.arg("--key").arg(key);
            send.arg("--peer").arg(key.with_extension("key.pub"));
        }
        Protection::Insecure => {
            recv.arg("--insecure");
            send.arg("--insecure");
        }
        Protection::Tcp => bail!("kernel TCP is not braid"),
    }
    Ok((recv, send))
}

/// One transfer of `case`: receiver, relay if any, sender; CPU of each.
fn transfer(bench: &Bench, case: &Case) -> anyhow::Result<Run> {
    let (sink, size) = (bench.sink, bench.size);
    let port = super::real::free_udp_port()?;
    let listen = format!("127.0.0.1:{port}");
    let (mut recv, mut send) = commands(bench, case, &listen)?;
    let recv_out = match sink {
        Sink::File => Stdio::piped(),
        Sink::Null => Stdio::null(),
    };
    // Killed, and reaped, if the run ends early.
    let mut procs = Procs::default();
    let recv = procs.start("braid recv", recv.stdout(recv_out).stderr(Stdio::piped()))?;
    said(recv.stderr.take(), "listening on ", "braid recv")?;
    let mut to = listen.clone();
    let mut relay = false;
    if let Via::Relay(flags) = &case.route {
        let rport = super::real::free_udp_port()?;
        to = format!("127.0.0.1:{rport}");
        let mut cmd = bench.command()?;
        cmd.args(["emulate", "--listen", &to, "--to", &listen])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = procs.start("braid emulate", &mut cmd)?;
        said(child.stdout.take(), "emulating ", "braid emulate")?;
        relay = true;
    }
    let mut send = send
        .args(["--to", &to])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start braid send")?;
    let (sent, send_cpu) = output_and_cpu(&mut send)?;
    // A failed sender leaves the receiver waiting: `procs` ends it.
    let s: serde_json::Value = serde_json::from_slice(&sent.stdout).with_context(|| {
        format!(
            "the sender printed no record: {}",
            String::from_utf8_lossy(&sent.stderr)
        )
    })?;
    if s["outcome"] != "verified" {
        bail!("the transfer failed: {}", s["error"]["message"]);
    }
    let (received, recv_cpu) = output_and_cpu(&mut procs.take(0))?;
    let relay_cpu = if relay {
        let mut r = procs.take(0);
        // SAFETY: the pid of a child not yet reaped.
        unsafe { libc::kill(r.id() as libc::pid_t, libc::SIGINT) };
        Some(output_and_cpu(&mut r)?.1)
    } else {
        None
    };
    if sink == Sink::File {
        let r: serde_json::Value =
            serde_json::from_slice(&received.stdout).context("the receiver printed no record")?;
        anyhow::ensure!(
            r["outcome"] == "verified" && r["blake3"] == s["blake3"],
            "the receiver's record does not match the sender's"
        );
    }
    let gb = size as f64 / 1e9;
    Ok(Run {
        round: 0,
        case: 0,
        goodput_mbps: s["goodput_mbps"].as_f64().context("no goodput")?,
        duration_s: s["duration_s"].as_f64().context("no duration")?,
        sender_cpu_s_per_gb: send_cpu.as_secs_f64() / gb,
        receiver_cpu_s_per_gb: recv_cpu.as_secs_f64() / gb,
        relay_cpu_s_per_gb: relay_cpu.map(|c| c.as_secs_f64() / gb),
    })
}

/// Waits until `from` (a child's output) has a line starting with
/// `prefix`, then keeps draining it so the child never blocks; fails with
/// what it said instead if it ends or takes 10 s.
pub(super) fn said(
    from: Option<impl Read + Send + 'static>,
    prefix: &str,
    who: &str,
) -> anyhow::Result<()> {
    let from = from.context("no output to read")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        if line.starts_with(prefix) {
            std::thread::spawn(move || while rx.recv().is_ok() {});
            return Ok(());
        }
        lines.push(line);
    }
    bail!("{who} did not start: {}", lines.join("; "))
}

/// The receiver and relay of one run: killed and reaped if the run ends
/// before they are taken to be waited for.
#[derive(Default)]
pub(super) struct Procs(Vec<Child>);

impl Procs {
    pub fn start(&mut self, what: &str, cmd: &mut Command) -> anyhow::Result<&mut Child> {
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        self.0.push(child);
        Ok(self.0.last_mut().expect("just pushed"))
    }

    /// The `i`th still running, no longer ended by `Drop`.
    pub fn take(&mut self, i: usize) -> Child {
        self.0.remove(i)
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What a child printed, once it exited, and the CPU time (user and
/// system) it used, from the kernel's accounting of the reaped process.
pub(super) fn output_and_cpu(
    child: &mut Child,
) -> anyhow::Result<(std::process::Output, Duration)> {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let err_reader = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = e.read_to_end(&mut v);
            v
        })
    });
    if let Some(mut o) = child.stdout.take() {
        o.read_to_end(&mut stdout)?;
    }
    if let Some(t) = err_reader {
        stderr = t.join().unwrap_or_default();
    }
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid, with pointers to live locals;
    // the child is reaped here and never waited for again.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot wait for a child");
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    use std::os::unix::process::ExitStatusExt;
    Ok((
        std::process::Output {
            status: std::process::ExitStatus::from_raw(status),
            stdout,
            stderr,
        },
        tv(usage.ru_utime) + tv(usage.ru_stime),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn routes_parse() {
        assert_eq!("direct".parse::<Via>(), Ok(Via::Direct));
        assert_eq!("relay".parse::<Via>(), Ok(Via::Relay(vec![])));
        assert_eq!(
            "relay:--rate 50mbit --loss 1%".parse::<Via>(),
            Ok(Via::Relay(vec![
                "--rate".into(),
                "50mbit".into(),
                "--loss".into(),
                "1%".into()
            ]))
        );
        assert!("tunnel".parse::<Via>().is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: TransfersArgs,
    }

    fn parse(argv: &[&str]) -> Result<TransfersArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("transfers").chain(argv.iter().copied()))
            .map(|c| c.args)
    }

    /// `--mtu` adds kernel TCP as a case of its own, after braid's; it
    /// cannot be asked for with `--kinds`, and the MTU has bounds.
    #[test]
    fn an_mtu_brings_kernel_tcp_in() {
        let names = |a: &TransfersArgs| cases(a).iter().map(Case::name).collect::<Vec<_>>();
        let plain = parse(&[]).unwrap();
        assert_eq!(plain.mtu, None);
        assert_eq!(names(&plain), ["sealed, direct", "insecure, direct"]);
        let mtu = parse(&["--mtu", "1500", "--via", "direct", "--via", "relay"]).unwrap();
        assert_eq!(mtu.mtu, Some(1500));
        assert_eq!(
            names(&mtu),
            [
                "sealed, direct",
                "sealed, relay",
                "insecure, direct",
                "insecure, relay",
                "kernel TCP"
            ]
        );
        assert!(parse(&["--kinds", "tcp"]).is_err());
        assert!(parse(&["--mtu", "1000"]).is_err());
        assert!(parse(&["--mtu", "70000"]).is_err());
    }
}
