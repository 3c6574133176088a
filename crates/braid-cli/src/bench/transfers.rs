//! `braid bench transfers`: the real CLI on loopback, as users run it. A
//! receiver, an optional `braid relay` and a sender are separate processes
//! of this binary; every case (protection × route) runs once per round in
//! an order rotated each round, so a noisy neighbour spreads over all of
//! them; the report gives medians of goodput and of each process's CPU
//! seconds per GB, and each case's ratio to the first.

use super::stats::median;
use anyhow::{bail, Context};
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
    /// Output directory: transfers.md and transfers.json.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Protection {
    Sealed,
    Insecure,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Sink {
    File,
    Null,
}

/// A route: straight to the receiver, or through a relay with these flags.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
enum Via {
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
struct Case {
    kind: Protection,
    via: String,
    /// Both sides write a qlog.
    qlog: bool,
    #[serde(skip)]
    route: Via,
}

impl Case {
    fn name(&self) -> String {
        let kind = match self.kind {
            Protection::Sealed => "sealed",
            Protection::Insecure => "insecure",
        };
        let qlog = if self.qlog { ", qlog" } else { "" };
        format!("{kind}, {}{qlog}", self.via)
    }
}

/// One transfer's figures.
#[derive(Clone, Debug, Serialize)]
struct Run {
    round: u32,
    case: usize,
    goodput_mbps: f64,
    duration_s: f64,
    sender_cpu_s_per_gb: f64,
    receiver_cpu_s_per_gb: f64,
    relay_cpu_s_per_gb: Option<f64>,
}

/// Medians of one case.
#[derive(Clone, Debug, Serialize)]
struct Summary {
    case: String,
    runs: usize,
    goodput_mbps: f64,
    sender_cpu_s_per_gb: f64,
    receiver_cpu_s_per_gb: f64,
    relay_cpu_s_per_gb: Option<f64>,
    goodput_vs_first: f64,
    cpu_vs_first: f64,
}

pub fn run(args: TransfersArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find this program")?;
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
    let cases: Vec<Case> = args
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
    eprintln!(
        "{} per transfer, {} rounds of {} cases, rotated",
        crate::human::size(args.size),
        args.rounds,
        cases.len()
    );
    let mut runs = Vec::new();
    for round in 0..args.rounds {
        for i in 0..cases.len() {
            let c = (i + round as usize) % cases.len();
            let run = transfer(
                &exe,
                work.path(),
                &input,
                &key,
                &cases[c],
                args.sink,
                args.size,
            )
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
    let summaries = summarise(&cases, &runs);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let md = markdown(&summaries, &args);
    print!("{md}");
    std::fs::write(args.out.join("transfers.md"), &md)?;
    let json = serde_json::json!({
        "size": args.size,
        "rounds": args.rounds,
        "sink": args.sink,
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

/// One transfer of `case`: receiver, relay if any, sender; CPU of each.
fn transfer(
    exe: &Path,
    work: &Path,
    input: &Path,
    key: &Path,
    case: &Case,
    sink: Sink,
    size: u64,
) -> anyhow::Result<Run> {
    let port = super::real::free_udp_port()?;
    let listen = format!("127.0.0.1:{port}");
    let mut recv = Command::new(exe);
    recv.args(["recv", "--listen", &listen, "--quiet"]);
    match sink {
        Sink::File => recv
            .arg("--output")
            .arg(work.join("out.bin"))
            .args(["--overwrite", "--json"]),
        // Its stdout is the file: no record (the sender's says whether
        // the receiver verified).
        Sink::Null => recv.args(["--output", "-"]),
    };
    let mut send = Command::new(exe);
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
    }
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
        let mut cmd = Command::new(exe);
        cmd.args(["relay", "--listen", &to, "--to", &listen])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = procs.start("braid relay", &mut cmd)?;
        said(child.stdout.take(), "relay ", "braid relay")?;
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
fn said(from: Option<impl Read + Send + 'static>, prefix: &str, who: &str) -> anyhow::Result<()> {
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
struct Procs(Vec<Child>);

impl Procs {
    fn start(&mut self, what: &str, cmd: &mut Command) -> anyhow::Result<&mut Child> {
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        self.0.push(child);
        Ok(self.0.last_mut().expect("just pushed"))
    }

    /// The `i`th still running, no longer ended by `Drop`.
    fn take(&mut self, i: usize) -> Child {
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
fn output_and_cpu(child: &mut Child) -> anyhow::Result<(std::process::Output, Duration)> {
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

fn summarise(cases: &[Case], runs: &[Run]) -> Vec<Summary> {
    let of = |c: usize, f: &dyn Fn(&Run) -> Option<f64>| {
        let mut v: Vec<f64> = runs.iter().filter(|r| r.case == c).filter_map(f).collect();
        median(&mut v)
    };
    let mut out: Vec<Summary> = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let goodput = of(c, &|r| Some(r.goodput_mbps)).unwrap_or(0.0);
        let sender = of(c, &|r| Some(r.sender_cpu_s_per_gb)).unwrap_or(0.0);
        let receiver = of(c, &|r| Some(r.receiver_cpu_s_per_gb)).unwrap_or(0.0);
        let relay = of(c, &|r| r.relay_cpu_s_per_gb);
        let cpu = sender + receiver + relay.unwrap_or(0.0);
        let (g0, c0) = out.first().map_or((goodput, cpu), |f| {
            let c0 = f.sender_cpu_s_per_gb
                + f.receiver_cpu_s_per_gb
                + f.relay_cpu_s_per_gb.unwrap_or(0.0);
            (f.goodput_mbps, c0)
        });
        out.push(Summary {
            case: case.name(),
            runs: runs.iter().filter(|r| r.case == c).count(),
            goodput_mbps: goodput,
            sender_cpu_s_per_gb: sender,
            receiver_cpu_s_per_gb: receiver,
            relay_cpu_s_per_gb: relay,
            goodput_vs_first: goodput / g0.max(f64::MIN_POSITIVE),
            cpu_vs_first: cpu / c0.max(f64::MIN_POSITIVE),
        });
    }
    out
}

fn markdown(summaries: &[Summary], args: &TransfersArgs) -> String {
    use std::fmt::Write;
    let mut md = String::from("# Transfers on loopback: the CLI as users run it\n\n");
    let _ = writeln!(
        md,
        "{} per transfer, {} rounds, cases rotated each round, medians; the \
         receiver writes to {}; sealed means a pinned key. `runs` in \
         [transfers.json](transfers.json) has every run.\n",
        crate::human::size(args.size),
        args.rounds,
        match args.sink {
            Sink::File => "a file",
            Sink::Null => "/dev/null",
        }
    );
    let _ = writeln!(md, "```sh\n{}\n```\n", super::command_line());
    md.push_str(
        "| case | runs | goodput Mbit/s | CPU s/GB sender | CPU s/GB receiver | CPU s/GB relay | goodput vs first | CPU vs first |\n|---|---|---|---|---|---|---|---|\n",
    );
    for s in summaries {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {} | {:.2}x | {:.2}x |",
            s.case,
            s.runs,
            s.goodput_mbps,
            s.sender_cpu_s_per_gb,
            s.receiver_cpu_s_per_gb,
            s.relay_cpu_s_per_gb
                .map_or("—".to_owned(), |r| format!("{r:.2}")),
            s.goodput_vs_first,
            s.cpu_vs_first
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn medians_and_ratios_are_per_case() {
        let case = |kind, via: &str| Case {
            kind,
            via: via.into(),
            qlog: false,
            route: via.parse().unwrap(),
        };
        let cases = [
            case(Protection::Sealed, "direct"),
            case(Protection::Insecure, "direct"),
        ];
        let run = |case, goodput, cpu| Run {
            round: 1,
            case,
            goodput_mbps: goodput,
            duration_s: 1.0,
            sender_cpu_s_per_gb: cpu,
            receiver_cpu_s_per_gb: cpu,
            relay_cpu_s_per_gb: None,
        };
        let runs = [
            run(0, 100.0, 1.0),
            run(0, 300.0, 3.0),
            run(0, 200.0, 2.0),
            run(1, 400.0, 1.0),
        ];
        let s = summarise(&cases, &runs);
        assert_eq!((s[0].runs, s[0].goodput_mbps), (3, 200.0));
        assert_eq!(s[0].goodput_vs_first, 1.0);
        assert_eq!(s[1].goodput_vs_first, 2.0);
        assert_eq!(s[1].cpu_vs_first, 0.5);
    }
}
