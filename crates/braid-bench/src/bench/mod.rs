//! `braid-bench` (`braid bench`): runs the scenario suites in the simulator, every row with
//! each controller and several seeds, in parallel, and writes a markdown
//! and an HTML report, every run's JSON and plots.

mod pairings;
mod plots;
mod published;
mod reach;
mod real;
mod report;
mod report_html;
mod report_md;
mod report_tally;
mod smoothed_rtt;
mod stats;
mod targets;
mod transfers;
mod transfers_report;
mod transfers_tcp;

use anyhow::Context as _;
use braid_proto::cc::Algorithm;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use published::Row;
use rayon::prelude::*;
use stats::Outcome;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::LazyLock;
use std::time::Instant;

/// Controllers a row runs with unless it fixes one (`report_cc`): every
/// one, in the reports' column order.
fn default_ccs() -> Vec<Algorithm> {
    let mut all = Algorithm::ALL.to_vec();
    all.sort_by_key(|&a| column(a));
    all
}

/// A controller's column in the reports: the loss-based ones, then the
/// model-based ones, then NCP.
fn column(a: Algorithm) -> u8 {
    match a {
        Algorithm::Aimd => 0,
        Algorithm::Cubic => 1,
        Algorithm::Bbr => 2,
        Algorithm::MbEcn => 3,
        Algorithm::Ncp => 4,
    }
}

/// [`default_ccs`] as the option's default text.
static DEFAULT_CCS: LazyLock<String> = LazyLock::new(|| names(&default_ccs()).join(","));

/// The controllers' names.
fn names(ccs: &[Algorithm]) -> Vec<&'static str> {
    ccs.iter().map(|a| a.name()).collect()
}

/// The seed tables' order; other suites follow alphabetically.
const SUITE_ORDER: &[&str] = &[
    "nkp0024",
    "catchunks-delay",
    "catchunks-jitter",
    "catchunks-loss",
    "catchunks-mixed",
    "catchunks-queue",
    "catchunks-longrtt",
    "catchunks-cubic-aimd",
    "rapid",
    "rudp",
    "mbecn",
];

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    mode: Option<BenchMode>,
    /// With no subcommand: the suites (as `suite`).
    #[command(flatten)]
    suite: SuiteArgs,
}

/// The scenario suites in the simulator.
#[derive(Args)]
pub struct SuiteArgs {
    /// Suites: directory names under the suites directory (or paths to
    /// directories). None: every directory whose files have a [published] table.
    suites: Vec<String>,
    /// Seeds 1..=N per row and controller.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// Output directory: report.md, report.html, results.json, plots/.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// Simulations at once (default: one per core).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Controllers to run each row with (comma-separated).
    #[arg(long, default_value = DEFAULT_CCS.as_str(), value_delimiter = ',')]
    cc: Vec<Algorithm>,
    /// Where the suites are.
    #[arg(long, default_value = "scenarios")]
    suites_dir: PathBuf,
    /// Skip the PNG copies of the plots (SVG only).
    #[arg(long)]
    no_png: bool,
}

#[derive(clap::Subcommand)]
enum BenchMode {
    /// Run the scenario suites with every controller and several seeds
    /// (what braid-bench does with no subcommand).
    Suite(SuiteArgs),
    /// Rows run for real through `braid link` (root): kernel TCP (a file timed
    /// as braid's, and iperf3) and braid side by side, beside the simulator's
    /// figure for the same row.
    Real(real::RealArgs),
    /// Real transfers on loopback with braid as users run it
    /// (receiver, optional relay and sender as separate processes):
    /// sealed and insecure, direct or through relays, rounds rotated,
    /// medians of goodput and CPU seconds per GB.
    Transfers(transfers::TransfersArgs),
    /// What a rendezvous relay (`braid relay --serve`) costs: memory per
    /// pair with many concurrent pairs, CPU seconds per GB forwarded.
    Pairings(pairings::PairingsArgs),
    /// The NAT lab `reach` runs in (root): two sites behind NAT
    /// routers and two relays in network namespaces, kept until Ctrl-C.
    Lab(Box<crate::lab::LabArgs>),
    /// NAT traversal in the lab (root): for each pair of NAT kinds, whether
    /// and how soon a direct path opens, relay goodput and failover, with
    /// `braid relay --serve`, `braid recv --relay` and `braid send --relay`.
    Reach(Box<reach::ReachArgs>),
    /// A file over kernel TCP, timed as `braid send` times itself (`real`
    /// and `transfers --mtu` run it).
    #[command(hide = true)]
    TcpSend(crate::tcp_file::TcpSendArgs),
    /// The receiving end of `tcp-send` as a process (`transfers --mtu` runs it).
    #[command(hide = true)]
    TcpRecv(crate::tcp_file::TcpRecvArgs),
}

/// This run's command line, as a user would type it.
pub(super) fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .map(|a| if a.contains(' ') { format!("{a:?}") } else { a })
        .collect();
    format!("braid bench {}", args.join(" "))
}

/// A suite and its rows, in order.
pub struct Suite {
    pub name: String,
    pub rows: Vec<Row>,
}

/// One simulation of the bench.
pub struct Run {
    pub suite: usize,
    pub row: usize,
    pub cc: Algorithm,
    pub seed: u64,
    pub outcome: Outcome,
}

/// Everything the reports are made of.
pub struct Bench {
    pub suites: Vec<Suite>,
    pub ccs: Vec<Algorithm>,
    pub seeds: u64,
    pub runs: Vec<Run>,
    pub jobs: usize,
    pub wall_s: f64,
}

impl Bench {
    /// The runs of one row with one controller, in seed order.
    pub fn runs_of(&self, suite: usize, row: usize, cc: Algorithm) -> Vec<(u64, &Outcome)> {
        self.runs
            .iter()
            .filter(|r| r.suite == suite && r.row == row && r.cc == cc)
            .map(|r| (r.seed, &r.outcome))
            .collect()
    }

    /// The controllers a row runs with.
    pub fn ccs_of(&self, row: &Row) -> Vec<Algorithm> {
        match row.report_cc {
            Some(cc) => vec![cc],
            None => self.ccs.clone(),
        }
    }
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.mode {
        Some(BenchMode::Suite(suite)) => suites(suite),
        Some(BenchMode::Real(real)) => real::run(real),
        Some(BenchMode::Transfers(t)) => transfers::run(t),
        Some(BenchMode::Pairings(p)) => pairings::run(p),
        Some(BenchMode::Lab(l)) => crate::lab::run(*l),
        Some(BenchMode::Reach(r)) => reach::run(*r),
        Some(BenchMode::TcpSend(a)) => crate::tcp_file::send(a),
        Some(BenchMode::TcpRecv(a)) => crate::tcp_file::recv(a),
        None => suites(args.suite),
    }
}

/// The scenario suites: every row with each controller and seed, then the
/// reports.
fn suites(args: SuiteArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let names = if args.suites.is_empty() {
        discover(&args.suites_dir)?
    } else {
        args.suites.clone()
    };
    if names.is_empty() {
        anyhow::bail!(
            "no suites in {} (no directory with a [published] table)",
            args.suites_dir.display()
        );
    }
    let suites = names
        .iter()
        .map(|n| load_suite(&args.suites_dir, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });

    let mut bench = Bench {
        suites,
        ccs: args.cc.clone(),
        seeds: args.seeds,
        runs: Vec::new(),
        jobs,
        wall_s: 0.0,
    };
    bench.runs = simulate_all(&bench)?;
    write_reports(&mut bench, &args, started)
}

/// Every row of every suite with each of its controllers and seeds, the
/// bench's jobs at once, with a progress bar.
fn simulate_all(bench: &Bench) -> anyhow::Result<Vec<Run>> {
    let mut todo = Vec::new();
    for (si, s) in bench.suites.iter().enumerate() {
        for (ri, row) in s.rows.iter().enumerate() {
            for cc in bench.ccs_of(row) {
                for seed in 1..=bench.seeds {
                    todo.push((si, ri, cc, seed));
                }
            }
        }
    }

    let bar = ProgressBar::with_draw_target(
        Some(todo.len() as u64),
        ProgressDrawTarget::stderr_with_hz(4),
    );
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} bench [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta} {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(bench.jobs.max(1))
        .build()
        .context("cannot start the worker threads")?;
    let suites = &bench.suites;
    let runs: Vec<Run> = pool.install(|| {
        todo.into_par_iter()
            .map(|(si, ri, cc, seed)| {
                let row = &suites[si].rows[ri];
                let outcome = simulate(row, cc, seed);
                bar.inc(1);
                bar.set_message(format!("{}/{}", row.suite, row.name));
                Run {
                    suite: si,
                    row: ri,
                    cc,
                    seed,
                    outcome,
                }
            })
            .collect()
    });
    bar.finish_and_clear();
    Ok(runs)
}

/// results.json, the plots, report.md and report.html in the output
/// directory.
fn write_reports(
    bench: &mut Bench,
    args: &SuiteArgs,
    started: Instant,
) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    write_results_json(bench, &args.out.join("results.json"))?;
    let plots_dir = args.out.join("plots");
    let figures = plots::suite_plots(bench, &plots_dir, !args.no_png)?;
    bench.wall_s = started.elapsed().as_secs_f64();
    // Kernel TCP on real links, if `braid bench real` wrote its results here.
    let kernel = real::kernel_ratios(&args.out.join("real.json"));
    let doc = report::build(bench, &figures, &kernel);
    let md = report_md::render(&doc);
    std::fs::write(args.out.join("report.md"), md).context("cannot write report.md")?;
    let html = report_html::render(&doc, &args.out);
    std::fs::write(args.out.join("report.html"), html).context("cannot write report.html")?;
    eprintln!(
        "braid bench: {} runs in {:.1} s; report in {}",
        bench.runs.len(),
        bench.wall_s,
        args.out.join("report.md").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs one row with one controller and seed; a panic becomes the run's error.
fn simulate(row: &Row, cc: Algorithm, seed: u64) -> Outcome {
    let mut scenario = row.scenario.clone();
    for flow in &mut scenario.flows {
        flow.session.cc = cc;
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        braid_sim::run(&scenario, Some(seed))
    }))
    .map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown panic".into());
        format!("simulator panicked: {msg}")
    })
}

/// Every directory of `dir` with a scenario file that has a `[published]` table.
fn discover(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for e in entries {
        let path = e?.path();
        if !path.is_dir() {
            continue;
        }
        let has = toml_files(&path)?.iter().any(|f| {
            std::fs::read_to_string(f)
                .ok()
                .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
                .is_some_and(|t| t.contains_key("published"))
        });
        if has {
            out.push(
                path.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    let rank = |n: &str| {
        SUITE_ORDER
            .iter()
            .position(|s| *s == n)
            .unwrap_or(SUITE_ORDER.len())
    };
    out.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    Ok(out)
}

fn toml_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort_by_key(|p| {
        published::natural_key(&p.file_stem().unwrap_or_default().to_string_lossy())
    });
    Ok(files)
}

fn load_suite(dir: &Path, name: &str) -> anyhow::Result<Suite> {
    let mut path = dir.join(name);
    if !path.is_dir() {
        path = PathBuf::from(name);
    }
    if !path.is_dir() {
        anyhow::bail!("no suite directory {name:?} (looked in {})", dir.display());
    }
    let suite = path
        .file_name()
        .map_or_else(|| name.to_owned(), |n| n.to_string_lossy().into_owned());
    let rows = toml_files(&path)?
        .iter()
        .map(|f| Row::load(&suite, f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Suite { name: suite, rows })
}

/// results.json: one object per run, its result being exactly the JSON of
/// `braid sim FILE --cc CC --seed SEED --json`.
fn write_results_json(bench: &Bench, path: &Path) -> anyhow::Result<()> {
    let runs: Vec<serde_json::Value> = bench
        .runs
        .iter()
        .map(|r| {
            let row = &bench.suites[r.suite].rows[r.row];
            let mut v = serde_json::json!({
                "suite": row.suite,
                "row": row.name,
                "file": row.path.display().to_string(),
                "cc": r.cc.name(),
                "seed": r.seed,
            });
            match &r.outcome {
                Ok(res) => v["result"] = res.to_json(false),
                Err(e) => v["error"] = serde_json::Value::String(e.clone()),
            }
            v
        })
        .collect();
    let doc = serde_json::json!({
        "seeds": bench.seeds,
        "controllers": names(&bench.ccs),
        "runs": runs,
    });
    let text = serde_json::to_string_pretty(&doc)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// results.json and the reports list the controllers in this order.
    #[test]
    fn every_controller_runs_by_default_in_column_order() {
        assert_eq!(
            names(&default_ccs()),
            ["aimd", "cubic", "bbr", "mbecn", "ncp"]
        );
        assert_eq!(*DEFAULT_CCS, "aimd,cubic,bbr,mbecn,ncp");
    }
}
