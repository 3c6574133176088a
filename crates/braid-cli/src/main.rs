//! `braid`: simulate and relay, and (in later versions) send, receive and benchmark.

mod relay_cmd;
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
    /// Forward UDP both ways through the simulator's link model in real time (one emulated path per relay).
    Relay(relay_cmd::RelayArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
        Command::Relay(args) => relay_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braid: {e}");
            ExitCode::from(2)
        }
    }
}
