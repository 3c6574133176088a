//! `braid-bench`: braid's measuring wing. The scenario suites in the
//! simulator (the default, or `suite`), rows run for real through
//! `braid link` (`real`), transfers on loopback (`transfers`), what a
//! rendezvous relay costs (`pairings`), and NAT traversal in a lab of
//! network namespaces (`lab`, `reach`). Where it runs braid itself (`braid
//! send`, `recv`, `relay`, `keygen`), it runs the `braid` binary beside its
//! own; `braid bench ARGS` runs this program with ARGS.

mod bench;
mod lab;
mod tcp_file;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "braid-bench",
    version,
    about = "Measure braid: the scenario suites with every controller and several seeds \
             (the default), real transfers, relays and NAT traversal; write reports and plots"
)]
struct Cli {
    #[command(flatten)]
    args: bench::BenchArgs,
    /// Log the protocol's decisions on stderr: -v handshakes, connections,
    /// timeouts and ends; -vv also each loss. RUST_LOG (e.g.
    /// RUST_LOG=braid_proto=trace) overrides it.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    install_log(cli.verbose);
    match bench::run(cli.args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braid-bench: {}", braid::text::escape(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// A `tracing` subscriber on stderr when RUST_LOG or -v asks for one.
fn install_log(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => match verbose {
            0 => return,
            1 => EnvFilter::new("braid=debug,braid_proto=debug"),
            _ => EnvFilter::new("braid=trace,braid_proto=trace"),
        },
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// The `braid` binary this program runs (send, recv, relay, keygen): the
/// one beside its own executable, as cargo builds and installs them.
fn braid_exe() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find this program's own path: {e}"))?;
    let dir = me
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{} has no directory", me.display()))?;
    let braid = dir.join(format!("braid{}", std::env::consts::EXE_SUFFIX));
    if !braid.is_file() {
        anyhow::bail!(
            "no braid binary at {}: braid-bench runs the braid beside it; \
             build both (cargo build --release)",
            braid.display()
        );
    }
    Ok(braid)
}

/// This program itself, for the parts it runs as processes of their own
/// (`tcp-send`, `tcp-recv`).
fn own_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find this program's own path: {e}"))
}
