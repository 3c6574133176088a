//! `braid`: send, receive, relay, emulate, simulate, benchmark, and see it all at once in `demo`.

mod bench_cmd;
mod close_codes;
mod demo_cmd;
mod emulate_cmd;
mod failure;
mod file_io;
mod filled;
mod keys;
mod landing;
mod lent;
mod link_args;
mod link_cmd;
mod live;
mod manifest;
mod metrics;
mod observe;
mod outgoing;
mod plot;
mod progress;
mod record;
mod recv_cmd;
mod relay_cmd;
mod rendezvous;
mod send_cmd;
mod side;
mod sim_cmd;
mod staging;
mod summary;
mod transfer;
mod usage;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use usage::UsageError;

/// `braid --version`: the release and the wire version it speaks (peers
/// of another wire version are refused).
fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} (wire version {})",
            env!("CARGO_PKG_VERSION"),
            braid_proto::wire::VERSION
        )
    })
}

#[derive(Parser)]
#[command(
    name = "braid",
    version = version_line(),
    about = "A fast, reliable multi-connection transport over UDP, and the tools to check it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `-v`, on the commands that run the protocol (the others log nothing).
#[derive(clap::Args, Clone, Copy, Default)]
struct LogArgs {
    /// Log the protocol's decisions on stderr: -v handshakes, connections,
    /// timeouts and ends; -vv also each loss. RUST_LOG (e.g.
    /// RUST_LOG=braid_proto=trace) overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Subcommand)]
enum Command {
    /// See braid work: a transfer over two emulated paths on loopback, live.
    Demo {
        #[command(flatten)]
        args: demo_cmd::DemoArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Send files, folders or stdin to `braid recv` over one or more connections.
    #[command(after_help = failure::EXIT_HELP)]
    Send {
        #[command(flatten)]
        args: send_cmd::SendArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Receive files or folders from `braid send`, verify them (BLAKE3) and keep them.
    #[command(after_help = failure::EXIT_HELP)]
    Recv {
        #[command(flatten)]
        args: recv_cmd::RecvArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Write a key pair for `braid recv --key` (secret mode 0600, public in FILE.pub).
    Keygen(keys::KeygenArgs),
    /// Run a scenario file in the deterministic simulator (no FILE: a built-in two-path example).
    Sim {
        #[command(flatten)]
        args: sim_cmd::SimArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Run a rendezvous relay where peers behind NATs meet by code or key (--serve).
    Relay {
        #[command(flatten)]
        args: relay_cmd::RelayArgs,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Forward UDP from --listen to --to through an emulated link (rate, delay, loss, ...), in real time.
    Emulate(emulate_cmd::EmulateArgs),
    /// Run a command (iperf3, curl, braid, ...) behind an emulated link, in a network namespace of its own (root).
    Link(link_cmd::LinkCmdArgs),
    /// Run the scenario suites with every controller and several seeds; write reports and plots (runs braid-bench).
    #[command(disable_help_flag = true)]
    Bench(bench_cmd::BenchArgs),
    /// Draw a run's window, in-flight, throughput and RTT per connection from a series JSON or a qlog.
    Plot(plot::PlotArgs),
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Err(e) = emulate_cmd::refuse_old_spelling(&argv) {
        eprintln!("braid: {e} (see braid --help)");
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    install_log(cli.command.log().verbose);
    let result = match cli.command {
        Command::Demo { args, .. } => demo_cmd::run(args),
        Command::Send { args, .. } => send_cmd::run(args),
        Command::Recv { args, .. } => recv_cmd::run(args),
        Command::Keygen(args) => keys::keygen(args),
        Command::Sim { args, .. } => {
            // Its output is meant for pipes (`| head`): a reader that
            // stops early ends it quietly, as it would `cat`. It opens no
            // sockets, so the default SIGPIPE can stop nothing else.
            #[cfg(unix)]
            // SAFETY: restoring a signal's default disposition before any
            // thread is started.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            }
            sim_cmd::run(args)
        }
        Command::Relay { args, .. } => relay_cmd::run(args),
        Command::Emulate(args) => emulate_cmd::run(args),
        Command::Link(args) => link_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Plot(args) => plot::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("braid: {e:#} (see braid --help)");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("braid: {}", braid::text::escape(&format!("{e:#}")));
            // A failure of a known kind exits with its own status (a key
            // file that exists is a local error, 5), anything else with 1.
            match e.downcast_ref::<failure::Failure>() {
                Some(f) => ExitCode::from(f.kind.exit_status()),
                None => ExitCode::FAILURE,
            }
        }
    }
}

impl Command {
    /// The command's `-v`, none where it has no effect.
    fn log(&self) -> LogArgs {
        match self {
            Command::Demo { log, .. }
            | Command::Send { log, .. }
            | Command::Recv { log, .. }
            | Command::Sim { log, .. }
            | Command::Relay { log, .. } => *log,
            Command::Keygen(_)
            | Command::Emulate(_)
            | Command::Link(_)
            | Command::Plot(_)
            | Command::Bench(_) => LogArgs::default(),
        }
    }
}

/// A `tracing` subscriber on stderr when RUST_LOG or -v asks for one; none
/// otherwise, so that disabled logging costs nothing.
fn install_log(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => match verbose {
            0 => return,
            1 => EnvFilter::new("braid=debug,braid_proto=debug,braid_cli=debug"),
            _ => EnvFilter::new("braid=trace,braid_proto=trace,braid_cli=trace"),
        },
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
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
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("bad command line");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // What is missing is listed on the indented lines that follow.
    let details: Vec<&str> = lines
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    let message = if details.is_empty() {
        first.to_owned()
    } else {
        format!("{first} {}", details.join(", "))
    };
    eprintln!("braid: {message} (see braid --help)");
    ExitCode::from(2)
}

/// Runs a networked command on a fresh single-threaded runtime: a transfer
/// is one session's receive, timers and sends, and handing them between
/// worker threads cost more than it gained (the disk has a thread of its
/// own, see `file_io`). The runtime is left behind rather than shut down in
/// order: the process is about to exit anyway.
fn block_on<T>(command: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    run_on(tokio::runtime::Builder::new_current_thread(), command)
}

/// As [`block_on`], on `workers` threads: for a receiver that keeps
/// listening, whose sessions are independent of each other.
fn block_on_workers<T>(
    workers: usize,
    command: impl std::future::Future<Output = T>,
) -> anyhow::Result<T> {
    if workers <= 1 {
        return block_on(command);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(workers);
    run_on(builder, command)
}

fn run_on<T>(
    mut builder: tokio::runtime::Builder,
    command: impl std::future::Future<Output = T>,
) -> anyhow::Result<T> {
    let runtime = builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let out = runtime.block_on(command);
    runtime.shutdown_background();
    Ok(out)
}

/// Cores this process may run on.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `ip:port`, `[ipv6]:port` or `host:port`; anything without a port is a
/// usage error, a name that does not resolve a runtime one. A name's first
/// address in the system's order of preference (RFC 6724: one this host
/// has no route to comes last).
async fn resolve(addr: &str) -> anyhow::Result<SocketAddr> {
    Ok(resolve_all(addr).await?[0])
}

/// As [`resolve`], every address a host name has (its A and AAAA records),
/// in the system's order of preference; never empty.
async fn resolve_all(addr: &str) -> anyhow::Result<Vec<SocketAddr>> {
    if let Ok(a) = addr.parse() {
        return Ok(vec![a]);
    }
    let has_port = addr
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !has_port {
        return Err(UsageError::new(format!(
            "{addr:?} is not an address; expected HOST:PORT, e.g. 127.0.0.1:7000"
        ))
        .into());
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map(Iterator::collect)
        .unwrap_or_default();
    if found.is_empty() {
        return Err(failure::Failure::err(
            failure::Kind::CannotResolve,
            format!("cannot resolve {addr:?}; expected HOST:PORT, e.g. 127.0.0.1:7000"),
        ));
    }
    Ok(found)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    braid_link::units::parse_duration(s).map_err(|e| e.to_string())
}

/// How a transfer reports: live progress on a terminal, then a summary or JSON.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// Print a transfer record (one line of JSON per transfer, schema
    /// braid.transfer/1, see docs/transfer-json.md) on stdout instead of the
    /// summary; errors and hints still go to stderr.
    #[arg(long)]
    json: bool,
    /// No progress bar (errors and hints are still shown).
    #[arg(long, short)]
    quiet: bool,
}

impl ReportArgs {
    /// Whether to draw live progress.
    fn live(&self) -> bool {
        !self.json && !self.quiet
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, with what happened and the exit
/// status a shell expects (128 + the signal's number).
async fn interrupted() -> (&'static str, u8) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => ("interrupted (SIGINT)", 130),
                _ = term.recv() => ("terminated (SIGTERM)", 143),
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    ("interrupted (SIGINT)", 130)
}

/// Stops a transfer's live display; after a failure, lingers briefly so the
/// CLOSE telling the peer why goes out. A success is printed first and
/// settled after (`transfer::settle`).
async fn wind_down(
    watch: Option<tokio::task::JoinHandle<()>>,
    progress: &progress::Progress,
    session: &braid::Session,
    failed: bool,
) {
    if let Some(w) = watch {
        w.abort();
    }
    progress.finish();
    if failed {
        linger(session).await;
    }
}

/// Lets the session send and acknowledge its last packets before the
/// process exits (there is no kernel to do it after us, unlike TCP).
async fn linger(session: &braid::Session) {
    let _ = tokio::time::timeout(Duration::from_millis(250), session.ended()).await;
}
