//! `braid recv`: accept a transfer from `braid send`, verify it, and keep it.

use crate::progress::{Progress, Side};
use crate::summary::Ended;
use crate::transfer::{self, Output, CLOSE_INTERRUPTED};
use anyhow::{anyhow, bail};
use braid::{Listener, Session, SessionConfig};
use clap::Args;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(Args)]
pub struct RecvArgs {
    /// Address to listen on, e.g. 0.0.0.0:7000 (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// Where to write: a file, an existing directory (the sender's file
    /// name inside it), or - for stdout. Default: the current directory.
    #[arg(long, short, value_name = "FILE|DIR|-", default_value = ".")]
    output: String,
    /// Keep accepting transfers (concurrently) instead of exiting after one.
    #[arg(long)]
    keep: bool,
    /// Replace an existing file of the same name (default: refuse).
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    security: crate::keys::RecvSecurity,
    #[command(flatten)]
    report: crate::ReportArgs,
}

/// How long a stopped `--keep` receiver waits for its transfers to end.
const SIGNAL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

pub fn run(args: RecvArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(recv(args))?
}

async fn recv(args: RecvArgs) -> anyhow::Result<ExitCode> {
    let output = Output::parse(&args.output)?;
    if matches!(output, Output::Stdout) && args.report.json {
        bail!("--json prints to stdout; it cannot be combined with --output -");
    }
    if let Output::File(path) = &output {
        if path.exists() && !args.overwrite {
            bail!("{} exists; pass --overwrite to replace it", path.display());
        }
    }
    let identity = args.security.resolve()?;
    let code_mode = identity.security.code.is_some();
    let addr = crate::resolve(&args.listen).await?;
    let cfg = SessionConfig {
        security: identity.security,
        ..SessionConfig::default()
    };
    let listener = Listener::bind(addr, cfg)?;
    let local = listener.local_addr();
    let host = if local.ip().is_unspecified() {
        format!("THIS-HOST:{}", local.port())
    } else {
        local.to_string()
    };
    eprintln!("listening on {local}");
    eprintln!(
        "on the sender: braid send FILE --to {host} {}",
        identity.sender_option.as_str()
    );
    if code_mode {
        let reuse = if args.keep {
            "the code stays valid for every transfer; "
        } else {
            ""
        };
        eprintln!(
            "({reuse}after {} wrong guesses at it, this receiver stops)",
            braid::CODE_GUESS_LIMIT
        );
    }
    let args = Arc::new(args);
    let output = Arc::new(output);
    // With --keep, the transfers under way; on a signal each one tells its
    // sender and removes its partial file, and we wait for them to.
    let mut running = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            s = listener.accept() => Ok(s),
            signal = crate::interrupted() => Err(signal),
            Some(_) = running.join_next(), if !running.is_empty() => continue,
        };
        let session = match accepted {
            Ok(s) => s?,
            Err((what, status)) => {
                let _ = tokio::time::timeout(SIGNAL_GRACE, async {
                    while running.join_next().await.is_some() {}
                })
                .await;
                eprintln!("braid: {what}");
                return Ok(ExitCode::from(status));
            }
        };
        if args.keep {
            let (args, output) = (args.clone(), output.clone());
            running.spawn(async move {
                let _ = receive_one(session, &output, &args, false).await;
            });
        } else {
            return receive_one(session, &output, &args, true).await;
        }
    }
}

/// Receives one transfer and prints its result.
pub async fn receive_one(
    mut session: Session,
    output: &Output,
    args: &RecvArgs,
    bar: bool,
) -> anyhow::Result<ExitCode> {
    let progress = Progress::new(bar && args.report.live(), None, "recv");
    let watch = progress.watch(session.monitor(), Side::Receiver);
    let started = Instant::now();
    let outcome = tokio::select! {
        r = transfer::receive(&mut session, output, args.overwrite, &progress) => Ok(r),
        signal = crate::interrupted() => Err(signal),
    };
    // Interrupted, the transfer's partial file is already gone with it.
    let (result, status) = match outcome {
        Ok(r) => (r, None),
        Err((what, status)) => {
            session.abort(CLOSE_INTERRUPTED, &format!("receiver {what}"));
            (Err(anyhow!("{what}")), Some(status))
        }
    };
    crate::wind_down(watch, &progress, &session, result.is_err()).await;
    let config = session.config();
    let stats = session.stats();
    let (delivered, verified, elapsed, error) = match &result {
        Ok(o) => (o.bytes, true, o.elapsed, None),
        Err(e) => (
            stats.bytes_received,
            false,
            started.elapsed(),
            Some(crate::text::escape(&format!("{e:#}"))),
        ),
    };
    let ended = Ended {
        role: "braid recv",
        cc: config.cc.name().to_owned(),
        stats,
        segment_size: config.segment_size,
        bytes: delivered,
        delivered,
        verified,
        duration_s: elapsed.as_secs_f64(),
        error,
    };
    crate::print_result(&ended, args.report.json)?;
    match result {
        Ok(o) => {
            if !args.report.json {
                let place = o.path.map_or("stdout".to_owned(), |p| {
                    crate::text::escape(&p.display().to_string())
                });
                eprintln!("verified: BLAKE3 {} -> {place}", o.hash.to_hex());
            }
            transfer::verdict_acknowledged(&mut session).await;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("braid: {}", crate::text::escape(&format!("{e:#}")));
            Ok(status.map_or(ExitCode::FAILURE, ExitCode::from))
        }
    }
}
