//! `braid`: send, receive, relay, simulate, benchmark, and see it all at once in `demo`.

mod bench;
mod demo_cmd;
mod progress;
mod recv_cmd;
mod relay_cmd;
mod send_cmd;
mod sim_cmd;
mod summary;
mod transfer;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "braid",
    version,
    about = "A fast, reliable multi-connection transport over UDP, and the tools to check it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// See braid work: a transfer over two emulated paths on loopback, live.
    Demo(demo_cmd::DemoArgs),
    /// Send a file (or stdin) to `braid recv` over one or more connections.
    Send(send_cmd::SendArgs),
    /// Receive a file from `braid send`, verify it (BLAKE3) and keep it.
    Recv(recv_cmd::RecvArgs),
    /// Run a scenario file in the deterministic simulator (no FILE: a built-in two-path example).
    Sim(sim_cmd::SimArgs),
    /// Forward UDP both ways through the simulator's link model in real time (one emulated path per relay).
    Relay(relay_cmd::RelayArgs),
    /// Run the scenario suites with every controller and several seeds; write reports and plots.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let result = match cli.command {
        Command::Demo(args) => demo_cmd::run(args),
        Command::Send(args) => send_cmd::run(args),
        Command::Recv(args) => recv_cmd::run(args),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Relay(args) => relay_cmd::run(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braid: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Help and version print in full; a bad command line is one line and exit 2.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("bad command line");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("braid: {first} (see braid --help)");
    ExitCode::from(2)
}

/// The runtime every networked command runs on.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `ip:port`, `[ipv6]:port` or `host:port`.
async fn resolve(addr: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = addr.parse() {
        return Ok(a);
    }
    tokio::net::lookup_host(addr)
        .await
        .ok()
        .and_then(|mut it| it.next())
        .with_context(|| {
            format!("cannot resolve {addr:?}; expected HOST:PORT, e.g. 127.0.0.1:7000")
        })
}

fn parse_cc(name: &str) -> Result<String, String> {
    if braid_proto::cc::is_known(name) {
        Ok(name.to_owned())
    } else {
        Err(braid_proto::cc::UnknownController(name.to_owned()).to_string())
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    braid_sim::units::parse_duration(s).map_err(|e| e.to_string())
}

/// How a transfer reports: live progress on a terminal, then a summary or JSON.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// Print the result as the JSON of `braid sim --json` instead of the summary.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

impl ReportArgs {
    /// Whether to draw live progress.
    fn live(&self) -> bool {
        !self.json && !self.quiet
    }
}

/// Stops a transfer's live display and lingers for the peer's last packets.
async fn wind_down(
    watch: Option<tokio::task::JoinHandle<()>>,
    progress: &progress::Progress,
    session: &braid::Session,
) {
    if let Some(w) = watch {
        w.abort();
    }
    progress.finish();
    linger(session).await;
}

/// Lets the session acknowledge the peer's last packets before the
/// process exits (there is no kernel to do it after us, unlike TCP).
async fn linger(session: &braid::Session) {
    let _ = tokio::time::timeout(Duration::from_millis(250), session.closed()).await;
}

/// Prints a transfer's result: JSON on stdout, or the summary on stderr.
fn print_result(ended: &summary::Ended<'_>, json: bool) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string(&ended.run_result().to_json(false))?
        );
    } else {
        eprint!("{}", ended.summary());
    }
    Ok(())
}
