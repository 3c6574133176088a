//! `braid bench ARGS`: runs `braid-bench ARGS`, the measuring wing, which
//! is a program of its own (crates/braid-bench). It is found beside this
//! one, where cargo builds and installs both.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// braid-bench's arguments: suites and options, or a subcommand (real,
    /// transfers, pairings, lab, reach); `braid bench --help` lists them.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let bench = beside_me()?;
    let mut command = std::process::Command::new(&bench);
    command.args(&args.args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        // Replaces this process: signals, exit status and the terminal
        // are braid-bench's own.
        let e = command.exec();
        Err(anyhow::anyhow!("cannot run {}: {e}", bench.display()))
    }
    #[cfg(not(unix))]
    {
        let status = command
            .status()
            .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", bench.display()))?;
        Ok(ExitCode::from(status.code().map_or(1, |c| c as u8)))
    }
}

/// `braid-bench` in this program's directory, or an error that says how
/// to build it.
fn beside_me() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find this program's own path: {e}"))?;
    let name = format!("braid-bench{}", std::env::consts::EXE_SUFFIX);
    let bench = me.with_file_name(&name);
    if bench.is_file() {
        return Ok(bench);
    }
    anyhow::bail!(
        "braid bench runs {name}, and there is none beside braid in {}; \
         build it with `cargo build --release -p braid-bench` (or \
         `cargo install --path crates/braid-bench` next to an installed braid)",
        me.parent()
            .map_or_else(String::new, |d| d.display().to_string())
    )
}
