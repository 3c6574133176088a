//! `braid bench real`: rows of the simulator's suites run for real through
//! `braid link`, kernel TCP (iperf3, cubic and bbr) and braid side by side,
//! kinds rotated each round, beside the simulator's figure for the same
//! scenario file and controller.
//!
//! Data flows from inside the link's namespace to the outside end, the
//! scenario's forward direction, as in the simulator. Goodput of braid and
//! of kernel TCP's file transfers ([`crate::tcp_file`]): the file's bytes
//! over the time from opening the connection to the receiver's answer that
//! it read them all, the simulator's definition too. iperf3's receiver
//! figure is beside them for reference: its clock starts after TCP's
//! handshake and stops with the path still full.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::LazyLock;
use std::time::Duration;

use anyhow::{bail, Context};
use braid_sim::Scenario;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::{plots, smoothed_rtt, stats};

mod report;
use report::markdown;

/// The default rows: the catchunks rows that matter on real links (100 ms
/// with queues of 300 and 1000, long RTTs, loss, queue, 12 Mbit/s with
/// loss), one of them on a link that delivers in 1 ms bursts, and a cellular
/// trace, relative to --suites-dir.
const DEFAULT_ROWS: &[&str] = &[
    "catchunks-delay/rtt-100ms.toml",
    "catchunks-longrtt/rtt-100ms.toml",
    "catchunks-longrtt/rtt-150ms.toml",
    "catchunks-longrtt/rtt-200ms.toml",
    "real/rtt-200ms-bursty.toml",
    "catchunks-longrtt/rtt-300ms.toml",
    "catchunks-longrtt/rtt-400ms.toml",
    "catchunks-loss/loss-1pct.toml",
    "catchunks-loss/loss-5pct.toml",
    "catchunks-queue/queue-20.toml",
    "catchunks-queue/queue-100.toml",
    "catchunks-loss/loss-1pct-12mbit.toml",
    "real/verizon-lte.toml",
];

/// Default for how long a run may take before it counts as failed ("did not
/// finish"): a minute is 2-6 times what the rows take at their rates; kernel
/// cubic needs ~2 min for 50 MB at 1 % loss and more at 5 %, and fails.
const RUN_LIMIT_S: u64 = 60;

/// Every kind, as the option's default text.
static DEFAULT_KINDS: LazyLock<String> = LazyLock::new(|| Kind::ALL.map(Kind::name).join(","));

#[derive(Args)]
pub struct RealArgs {
    /// Scenario files with one path and one flow (default: 11 catchunks rows
    /// (delay, long RTT, loss, queue), one bursty link and a cellular trace).
    rows: Vec<PathBuf>,
    /// Rounds; each runs every kind once per row, in rotated order.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Megabytes per transfer (default: each row's own size).
    #[arg(long, value_name = "MB")]
    mb: Option<u64>,
    /// What to run through each link.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_KINDS.as_str())]
    kinds: Vec<Kind>,
    /// braid's controller (the simulator's figure uses the same).
    #[arg(long, default_value = "bbr")]
    cc: braid_proto::cc::Algorithm,
    /// Output directory: real.md, real.json, plots/real-*.svg.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// Seconds a transfer may take before it counts as not finished.
    #[arg(long, value_name = "SECONDS", default_value_t = RUN_LIMIT_S,
          value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,
    /// Where the default rows are.
    #[arg(long, default_value = "scenarios")]
    suites_dir: PathBuf,
    /// Skip the PNG copy of the plot.
    #[arg(long)]
    no_png: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A file over kernel TCP with cubic, timed as braid's.
    TcpCubic,
    /// A file over kernel TCP with bbr, timed as braid's.
    TcpBbr,
    /// iperf3 -n with cubic, its own figure.
    Iperf3Cubic,
    /// iperf3 -n with bbr, its own figure.
    Iperf3Bbr,
    Braid,
}

impl Kind {
    /// Every kind, in the order a round runs them by default.
    const ALL: [Kind; 5] = [
        Kind::TcpCubic,
        Kind::TcpBbr,
        Kind::Iperf3Cubic,
        Kind::Iperf3Bbr,
        Kind::Braid,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::TcpCubic => "tcp-cubic",
            Kind::TcpBbr => "tcp-bbr",
            Kind::Iperf3Cubic => "iperf3-cubic",
            Kind::Iperf3Bbr => "iperf3-bbr",
            Kind::Braid => "braid",
        }
    }

    fn uses_iperf3(self) -> bool {
        matches!(self, Kind::Iperf3Cubic | Kind::Iperf3Bbr)
    }
}

/// One transfer through the link.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RealRun {
    round: u64,
    kind: Kind,
    goodput_mbps: Option<f64>,
    /// Retransmitted packets (braid) or segments (TCP) per packet sent, %.
    retransmit_pct: Option<f64>,
    /// 95th percentile of the smoothed RTT over time, ms (see
    /// [`smoothed_rtt`]); none for iperf3.
    #[serde(default)]
    rtt_p95_ms: Option<f64>,
    /// braid's: 95th percentile of its raw RTT samples (one per ACK), ms.
    #[serde(default)]
    rtt_p95_raw_ms: Option<f64>,
    error: Option<String>,
}

/// What one transfer measured.
struct Measured {
    goodput_mbps: f64,
    retransmit_pct: f64,
    rtt_p95_ms: Option<f64>,
    rtt_p95_raw_ms: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RealRow {
    file: String,
    link: String,
    bytes: u64,
    /// The simulator's goodput for this file with braid's controller.
    sim_mbps: f64,
    /// Its retransmitted share of packets, % (the data direction).
    #[serde(default)]
    sim_retransmit_pct: Option<f64>,
    /// Its 95th percentile of the smoothed RTT over time, ms.
    #[serde(default)]
    sim_rtt_p95_ms: Option<f64>,
    /// Its 95th percentile of the raw RTT samples, ms.
    #[serde(default)]
    sim_rtt_p95_raw_ms: Option<f64>,
    runs: Vec<RealRun>,
}

impl RealRow {
    /// Median goodput of `kind`'s successful runs.
    fn median(&self, kind: Kind) -> Option<f64> {
        self.median_of(kind, |r| r.goodput_mbps)
    }

    fn median_retransmits(&self, kind: Kind) -> Option<f64> {
        self.median_of(kind, |r| r.retransmit_pct)
    }

    fn median_rtt_p95(&self, kind: Kind) -> Option<f64> {
        self.median_of(kind, |r| r.rtt_p95_ms)
    }

    fn median_of(&self, kind: Kind, field: impl Fn(&RealRun) -> Option<f64>) -> Option<f64> {
        let mut v: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.kind == kind)
            .filter_map(field)
            .collect();
        stats::median(&mut v)
    }
}

/// A row of real.json, for the simulator report's summary: braid's median
/// over the better of kernel TCP cubic's and bbr's (file transfers).
pub struct KernelRatio {
    /// The scenario file's directory: the suite it belongs to.
    pub suite: String,
    pub ratio: f64,
}

/// What real.json at `path` says, row by row; empty when there is no
/// real.json or it cannot be read (the summary then says none).
pub fn kernel_ratios(path: &Path) -> Vec<KernelRatio> {
    #[derive(Deserialize)]
    struct RealJson {
        rows: Vec<RealRow>,
    }
    let Some(doc) = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<RealJson>(&t).ok())
    else {
        return Vec::new();
    };
    doc.rows
        .iter()
        .filter_map(|r| {
            let braid = r.median(Kind::Braid)?;
            let tcp = [Kind::TcpCubic, Kind::TcpBbr]
                .into_iter()
                .filter_map(|k| r.median(k))
                .reduce(f64::max)?;
            let suite = Path::new(&r.file)
                .parent()?
                .file_name()?
                .to_string_lossy()
                .into_owned();
            (tcp > 0.0).then(|| KernelRatio {
                suite,
                ratio: braid / tcp,
            })
        })
        .collect()
}

pub fn run(args: RealArgs) -> anyhow::Result<ExitCode> {
    let files: Vec<PathBuf> = if args.rows.is_empty() {
        DEFAULT_ROWS
            .iter()
            .map(|r| args.suites_dir.join(r))
            .collect()
    } else {
        args.rows.clone()
    };
    check_prerequisites(&args)?;
    let setup = Setup::new()?;
    let mut rows = Vec::new();
    for file in &files {
        rows.push(setup.measure_row(&args, file)?);
    }
    write_results(&args, &rows)
}

/// Refuses to start without what every kind of run needs: root for
/// `braid link`, iperf3 for its kinds.
fn check_prerequisites(args: &RealArgs) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("braid bench real runs braid link, which needs root (a network namespace and TUN devices); run it with sudo");
    }
    let needs_iperf3 = args.kinds.iter().any(|k| k.uses_iperf3());
    if needs_iperf3 && Command::new("iperf3").arg("-v").output().is_err() {
        bail!("braid bench real needs iperf3 for kernel TCP: run scripts/install-bench-deps.sh (apt-get install iperf3)");
    }
    Ok(())
}

/// What every row's runs share: the programs, a scratch directory and the
/// receiver's key.
struct Setup {
    braid: PathBuf,
    /// This program, for its `tcp-send`.
    bench: PathBuf,
    work: tempfile::TempDir,
    key: PathBuf,
    /// The receiver's public key, for the sender.
    peer: String,
}

impl Setup {
    fn new() -> anyhow::Result<Setup> {
        let braid = crate::braid_exe()?;
        let bench = crate::own_exe()?;
        let work = tempfile::tempdir().context("cannot make a temporary directory")?;
        let key = work.path().join("recv.key");
        let keygen = Command::new(&braid)
            .arg("keygen")
            .arg("-o")
            .arg(&key)
            .output()?;
        anyhow::ensure!(keygen.status.success(), "braid keygen failed");
        let peer = std::fs::read_to_string(work.path().join("recv.key.pub"))?
            .trim()
            .to_owned();
        Ok(Setup {
            braid,
            bench,
            work,
            key,
            peer,
        })
    }

    /// One scenario file: the simulator's figures, then every round of
    /// every kind through the link, kinds rotated each round.
    fn measure_row(&self, args: &RealArgs, file: &Path) -> anyhow::Result<RealRow> {
        let sc = row_scenario(args, file)?;
        let bytes = sc.flows[0].bytes;
        let sim = simulated_as_sent(sc.clone()).with_context(|| format!("{}", file.display()))?;
        let sim_mbps = sim.goodput_mbps;
        let input = self.work.path().join("in.bin");
        write_content(&input, bytes)?;
        let link = sc.paths[0].forward.describe(Some(file));
        eprintln!("{}: {link}; simulator {sim_mbps:.1} Mbit/s", file.display());
        let mut row = RealRow {
            file: file.display().to_string(),
            link,
            bytes,
            sim_mbps,
            sim_retransmit_pct: Some(sim.retransmit_pct),
            sim_rtt_p95_ms: sim.rtt_p95_ms,
            sim_rtt_p95_raw_ms: sim.rtt_p95_raw_ms,
            runs: Vec::new(),
        };
        for round in 1..=args.rounds {
            let n = args.kinds.len();
            for i in 0..n {
                let kind = args.kinds[(i + round as usize) % n];
                let ctx = RunContext {
                    braid: &self.braid,
                    bench: &self.bench,
                    scenario: file,
                    bytes,
                    input: &input,
                    key: &self.key,
                    peer: &self.peer,
                    cc: args.cc.name(),
                    limit: Duration::from_secs(args.limit),
                    plot_dir: &self.work.path().join("plot"),
                };
                let r = ctx.run(round, kind);
                eprintln!("  round {round} {:<9} {}", kind.name(), outcome(&r));
                row.runs.push(r);
            }
        }
        Ok(row)
    }
}

/// The row's scenario as the runs send it: one path and one flow, with the
/// size and the controller asked for.
fn row_scenario(args: &RealArgs, file: &Path) -> anyhow::Result<Scenario> {
    let mut sc =
        Scenario::from_file(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    anyhow::ensure!(
        sc.paths.len() == 1 && sc.flows.len() == 1,
        "{}: a real row has one path and one flow",
        file.display()
    );
    if let Some(mb) = args.mb {
        sc.flows[0].bytes = mb * 1_000_000;
    }
    sc.flows[0].session.cc = args.cc;
    Ok(sc)
}

/// A run's figures, or why it failed, for the progress lines.
fn outcome(r: &RealRun) -> String {
    match (&r.goodput_mbps, &r.error) {
        (Some(g), _) => format!(
            "{g:.1} Mbit/s, {:.2} % retransmitted, p95 RTT {}",
            r.retransmit_pct.unwrap_or(0.0),
            r.rtt_p95_ms.map_or("-".into(), |v| format!("{v:.0} ms"))
        ),
        (None, e) => format!("failed: {}", e.as_deref().unwrap_or("?")),
    }
}

/// real.json, real.md and the goodput chart in the output directory;
/// real.md also to stdout.
fn write_results(args: &RealArgs, rows: &[RealRow]) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let json = serde_json::json!({
        "rounds": args.rounds,
        "cc": args.cc.name(),
        "kinds": args.kinds,
        "rows": rows,
    });
    std::fs::write(
        args.out.join("real.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    let md = markdown(rows, args);
    std::fs::write(args.out.join("real.md"), &md)?;
    goodput_chart(args, rows)?;
    print!("{md}");
    eprintln!("braid bench real: {}", args.out.join("real.md").display());
    Ok(ExitCode::SUCCESS)
}

/// Each kind's median goodput per row, and the simulator's, as one chart.
fn goodput_chart(args: &RealArgs, rows: &[RealRow]) -> anyhow::Result<()> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = args
        .kinds
        .iter()
        .map(|&k| {
            let points = rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.median(k).map(|g| ((i + 1) as f64, g)))
                .collect();
            (k.name().to_owned(), points)
        })
        .collect();
    series.push((
        "braid, simulator".to_owned(),
        rows.iter()
            .enumerate()
            .map(|(i, r)| ((i + 1) as f64, r.sim_mbps))
            .collect(),
    ));
    plots::rows_chart(
        "Goodput through braid link (medians) and in the simulator",
        "goodput, Mbit/s",
        series,
        &args.out.join("plots"),
        "real-goodput",
        !args.no_png,
    )?;
    Ok(())
}

struct RunContext<'a> {
    braid: &'a Path,
    /// This program, for its `tcp-send`.
    bench: &'a Path,
    scenario: &'a Path,
    bytes: u64,
    input: &'a Path,
    key: &'a Path,
    peer: &'a str,
    cc: &'a str,
    limit: Duration,
    /// Where braid's sender writes its samples (`--plot`).
    plot_dir: &'a Path,
}

impl RunContext<'_> {
    fn run(&self, round: u64, kind: Kind) -> RealRun {
        let result = match kind {
            Kind::TcpCubic => self.tcp_file("cubic"),
            Kind::TcpBbr => self.tcp_file("bbr"),
            Kind::Iperf3Cubic => self.iperf3("cubic"),
            Kind::Iperf3Bbr => self.iperf3("bbr"),
            Kind::Braid => self.braid(),
        };
        match result {
            Ok(m) => RealRun {
                round,
                kind,
                goodput_mbps: Some(m.goodput_mbps),
                retransmit_pct: Some(m.retransmit_pct),
                rtt_p95_ms: m.rtt_p95_ms,
                rtt_p95_raw_ms: m.rtt_p95_raw_ms,
                error: None,
            },
            Err(e) => RealRun {
                round,
                kind,
                goodput_mbps: None,
                retransmit_pct: None,
                rtt_p95_ms: None,
                rtt_p95_raw_ms: None,
                error: Some(format!("{e:#}")),
            },
        }
    }

    /// `braid link --scenario ROW --quiet -- sh -c SCRIPT`, bounded in time.
    fn through_link(&self, script: &str) -> anyhow::Result<Vec<u8>> {
        let child = Command::new(self.braid)
            .arg("link")
            .arg("--scenario")
            .arg(self.scenario)
            .args(["--quiet", "--", "sh", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot run braid link")?;
        let out = wait_bounded(child, self.limit)?;
        if !out.status.success() {
            bail!(
                "{}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("exit status")
            );
        }
        Ok(out.stdout)
    }

    /// The row's file over kernel TCP, timed as braid's (see [`crate::tcp_file`]).
    fn tcp_file(&self, cc: &str) -> anyhow::Result<Measured> {
        let listener = std::net::TcpListener::bind("0.0.0.0:0")?;
        let port = listener.local_addr()?.port();
        // A little past the link's own limit, so that a sender finishing
        // just in time is not cut off here.
        let receiver =
            crate::tcp_file::receive_one(listener, self.bytes, self.limit + Duration::from_secs(5));
        let out = self.through_link(&format!(
            "exec {} tcp-send {} --to \"$BRAID_LINK_HOST:{port}\" --cc {cc}",
            sh_quote(self.bench),
            sh_quote(self.input),
        ));
        let received = receiver
            .join()
            .map_err(|_| anyhow::anyhow!("the TCP receiver panicked"))?;
        let out = out?;
        received?;
        let v: serde_json::Value =
            serde_json::from_slice(&out).context("braid-bench tcp-send printed no JSON")?;
        let goodput = v["goodput_mbps"].as_f64().context("no goodput")?;
        let segments = v["data_segments"].as_f64().unwrap_or(0.0);
        let retrans = v["retransmitted"].as_f64().unwrap_or(0.0);
        Ok(Measured {
            goodput_mbps: goodput,
            retransmit_pct: 100.0 * retrans / segments.max(1.0),
            rtt_p95_ms: v["rtt_p95_ms"].as_f64(),
            rtt_p95_raw_ms: None,
        })
    }

    fn iperf3(&self, cc: &str) -> anyhow::Result<Measured> {
        // A server of its own per run: one left busy by a run cut off at
        // the time limit cannot refuse the next.
        let port = free_tcp_port()?;
        let _server = iperf_server(port)?;
        let out = self.through_link(&format!(
            "exec iperf3 -c \"$BRAID_LINK_HOST\" -p {port} -n {} -C {cc} --json",
            self.bytes
        ))?;
        let v: serde_json::Value =
            serde_json::from_slice(&out).context("iperf3 printed no JSON")?;
        if let Some(e) = v["error"].as_str() {
            bail!("iperf3: {e}");
        }
        let end = &v["end"];
        let bps = end["sum_received"]["bits_per_second"]
            .as_f64()
            .context("no sum_received in iperf3's JSON")?;
        let retransmits = end["sum_sent"]["retransmits"].as_f64().unwrap_or(0.0);
        // Segments sent: bytes over the MSS a 1500-byte MTU gives (with timestamps).
        let segments = self.bytes as f64 / 1448.0;
        Ok(Measured {
            goodput_mbps: bps / 1e6,
            retransmit_pct: 100.0 * retransmits / segments,
            rtt_p95_ms: None,
            rtt_p95_raw_ms: None,
        })
    }

    fn braid(&self) -> anyhow::Result<Measured> {
        let port = free_udp_port()?;
        let recv = Command::new(self.braid)
            .args(["recv", "--listen", &format!("0.0.0.0:{port}"), "--quiet"])
            .arg("--key")
            .arg(self.key)
            .args(["--output", "-"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run braid recv")?;
        let _recv = KillOnDrop(recv);
        std::thread::sleep(Duration::from_millis(200));
        // A directory of its own per run: its series file is this run's.
        let _ = std::fs::remove_dir_all(self.plot_dir);
        let out = self.through_link(&format!(
            "exec {} send {} --to \"$BRAID_LINK_HOST:{port}\" --peer {} --cc {} --quiet --json --plot {}",
            sh_quote(self.braid),
            sh_quote(self.input),
            self.peer,
            self.cc,
            sh_quote(self.plot_dir),
        ))?;
        let mut m = goodput_and_retransmissions(&out)?;
        m.rtt_p95_ms = smoothed_rtt::of_plot_dir(self.plot_dir).context("braid's series")?;
        Ok(m)
    }
}

/// Goodput (Mbit/s), retransmitted share of packets (%) and p95 of the
/// raw RTT samples (the highest of its connections') from `braid send --json`'s transfer
/// record (docs/transfer-json.md).
fn goodput_and_retransmissions(record: &[u8]) -> anyhow::Result<Measured> {
    let v: serde_json::Value = serde_json::from_slice(record).context("braid's JSON")?;
    anyhow::ensure!(v["outcome"] == "verified", "transfer not verified");
    let goodput = v["goodput_mbps"].as_f64().context("no goodput")?;
    let sent: f64 = v["connections"].as_array().map_or(0.0, |c| {
        c.iter().filter_map(|c| c["packets_sent"].as_f64()).sum()
    });
    let retrans = v["retransmitted"].as_f64().unwrap_or(0.0);
    let rtt_p95_raw_ms = v["connections"].as_array().and_then(|c| {
        c.iter()
            .filter_map(|c| c["rtt_ms"]["p95"].as_f64())
            .reduce(f64::max)
    });
    Ok(Measured {
        goodput_mbps: goodput,
        retransmit_pct: 100.0 * retrans / sent.max(1.0),
        rtt_p95_ms: None,
        rtt_p95_raw_ms,
    })
}

/// The simulator's goodput for a row as `braid send` measures it: sealed,
/// probing for the path MTU as it does on the link's interface, and timed
/// from the handshake to the receiver's verdict, which leaves once the
/// receiver has read everything ("OK", a BLAKE3 hash, a newline).
fn simulated_as_sent(mut sc: Scenario) -> anyhow::Result<Measured> {
    const VERDICT_BYTES: u64 = 3 + 64 + 1;
    sc.discover_path_mtu(0);
    let flow = &mut sc.flows[0];
    flow.sealed = true;
    flow.verdict = true;
    flow.reverse_bytes = VERDICT_BYTES;
    let bytes = flow.bytes;
    let sim = braid_sim::run(&sc, None);
    let f = &sim.flows[0];
    let answered = f
        .reverse
        .as_ref()
        .filter(|r| f.forward.completed && r.completed && r.duration_s > 0.0)
        .context("the simulated transfer did not finish")?;
    let sent: u64 = f.forward.paths.iter().map(|p| p.packets_sent).sum();
    Ok(Measured {
        goodput_mbps: bytes as f64 * 8.0 / 1e6 / answered.duration_s,
        retransmit_pct: 100.0 * f.forward.retransmitted as f64 / sent.max(1) as f64,
        rtt_p95_ms: smoothed_rtt::of_series(&f.series),
        rtt_p95_raw_ms: (f.forward.rtt_ms.p95 > 0.0).then_some(f.forward.rtt_ms.p95),
    })
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A one-run iperf3 server on all addresses, for a client inside the link.
fn iperf_server(port: u16) -> anyhow::Result<KillOnDrop> {
    let child = Command::new("iperf3")
        .args(["-s", "-1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start iperf3 -s")?;
    std::thread::sleep(Duration::from_millis(200));
    Ok(KillOnDrop(child))
}

pub(super) fn free_tcp_port() -> anyhow::Result<u16> {
    let s = std::net::TcpListener::bind("0.0.0.0:0")?;
    Ok(s.local_addr()?.port())
}

pub(super) fn free_udp_port() -> anyhow::Result<u16> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
    Ok(s.local_addr()?.port())
}

/// Waits for `child` up to `limit`, its output read as it comes (a long
/// iperf3 JSON fills a pipe); then asks it to stop (braid link passes
/// SIGTERM to its command and removes its namespace), and kills it if it
/// has not within 5 s.
fn wait_bounded(child: Child, limit: Duration) -> anyhow::Result<std::process::Output> {
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    if let Ok(out) = rx.recv_timeout(limit) {
        return Ok(out?);
    }
    // SAFETY: kill with the pid of a child not yet reaped (its waiter is
    // still blocked).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    if rx.recv_timeout(Duration::from_secs(5)).is_err() {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = rx.recv();
    }
    bail!("did not finish within {} s", limit.as_secs())
}

/// Incompressible bytes, written once per row.
pub(super) fn write_content(path: &Path, bytes: u64) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut chunk = vec![0; 1 << 20];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(1 << 20) as usize;
        braid_sim::content::fill(0x5eed, at, &mut chunk[..n]);
        f.write_all(&chunk[..n])?;
        at += n as u64;
    }
    // On disk before the runs, so no writeback competes with the first
    // round's transfers.
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod record_tests {
    use super::*;

    #[test]
    fn every_kind_runs_by_default() {
        assert_eq!(
            *DEFAULT_KINDS,
            "tcp-cubic,tcp-bbr,iperf3-cubic,iperf3-bbr,braid"
        );
        assert_eq!(Kind::ALL.len(), Kind::value_variants().len());
    }

    #[test]
    fn a_transfer_record_gives_goodput_and_retransmissions() {
        let record = br#"{"schema":"braid.transfer/1","outcome":"verified","goodput_mbps":48.5,
            "connections":[{"packets_sent":600,"rtt_ms":{"p95":41.5}},
            {"packets_sent":400,"rtt_ms":{"p95":80.25}}],"retransmitted":25}"#;
        let m = goodput_and_retransmissions(record).unwrap();
        assert_eq!((m.goodput_mbps, m.retransmit_pct), (48.5, 2.5));
        assert_eq!(m.rtt_p95_raw_ms, Some(80.25));
        let failed = br#"{"outcome":"failed","goodput_mbps":1.0}"#;
        assert!(goodput_and_retransmissions(failed).is_err());
    }
}
