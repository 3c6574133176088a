//! `braid`: simulate, and (in later versions) send, receive, relay and benchmark.

mod sim_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

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
    /// Run a scenario file in the deterministic simulator (no FILE: a built-in two-path example).
    Sim(sim_cmd::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braid: {e}");
            ExitCode::from(2)
        }
    }
}
