//! `braid send`: one file (or stdin) to a `braid recv`, over one or more connections.

use crate::progress::{Progress, Side};
use crate::summary::Ended;
use crate::transfer::{self, Header, CLOSE_INTERRUPTED};
use crate::UsageError;
use anyhow::{anyhow, bail, Context as _};
use braid::{PathSpec, SessionConfig, SessionError};
use clap::Args;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct SendArgs {
    /// File to send, or - for stdin.
    file: PathBuf,
    /// Receiver address; repeat for several connections (e.g. via several relays).
    #[arg(long = "to", value_name = "ADDR", required = true)]
    to: Vec<String>,
    /// Local address to send from; one for all connections, or one per --to.
    #[arg(long = "bind", value_name = "ADDR")]
    bind: Vec<SocketAddr>,
    /// Congestion controller (aimd, bbr, cubic, mbecn, ncp).
    #[arg(long, value_parser = crate::parse_cc)]
    cc: Option<braid_proto::cc::Algorithm>,
    /// Give up if the receiver does not answer within this time [default:
    /// 75s, about as long as TCP's connect; a `braid recv` started
    /// meanwhile is found].
    #[arg(long, value_name = "DURATION", value_parser = crate::parse_timeout)]
    handshake_timeout: Option<Duration>,
    #[command(flatten)]
    security: crate::keys::SendSecurity,
    #[command(flatten)]
    report: crate::ReportArgs,
}

pub fn run(args: SendArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(send(args))?
}

async fn send(args: SendArgs) -> anyhow::Result<ExitCode> {
    let security = args.security.resolve()?;
    let mut remotes = Vec::new();
    for to in &args.to {
        remotes.push(crate::resolve(to).await?);
    }
    let paths = pair(&remotes, &args.bind)?;
    let (header, input) = open_input(&args.file).await?;
    let mut cfg = SessionConfig {
        security,
        ..SessionConfig::default()
    };
    if let Some(t) = args.handshake_timeout {
        cfg.handshake_timeout = t;
    }
    let give_up = cfg.handshake_timeout;
    if let Some(cc) = &args.cc {
        cfg.cc = *cc;
    }
    let waiting = waiting_notice(&args.to, give_up, args.report.quiet);
    let connected = tokio::select! {
        s = braid::connect(&paths, cfg) => Ok(s),
        signal = crate::interrupted() => Err(signal),
        never = waiting => match never {},
    };
    let mut session = match connected {
        Ok(s) => s
            .map_err(|e| match e {
                // Nobody answered: say who should have.
                braid::Error::Session(SessionError::HandshakeTimeout(_)) => {
                    anyhow!("{e} (is `braid recv` running there?)")
                }
                e => e.into(),
            })
            .with_context(|| format!("cannot reach {}", args.to.join(", ")))?,
        Err((what, status)) => {
            eprintln!("braid: {what}");
            return Ok(ExitCode::from(status));
        }
    };
    let progress = Progress::new(args.report.live(), header.size, "send");
    let watch = progress.watch(session.monitor(), Side::Sender);
    let started = Instant::now();
    let monitor = session.monitor();
    let outcome = tokio::select! {
        r = transfer::send(&mut session, &header, input, &progress) => Ok(r),
        // Noticed even while waiting for input, as from a stalled pipe.
        e = monitor.failed() => Ok(Err(e.into())),
        signal = crate::interrupted() => Err(signal),
    };
    let (result, status) = match outcome {
        Ok(r) => (r, None),
        Err((what, status)) => {
            // The receiver learns why at once, and deletes its partial file.
            session.abort(CLOSE_INTERRUPTED, &format!("sender {what}"));
            (Err(anyhow!("{what}")), Some(status))
        }
    };
    crate::wind_down(watch, &progress, &session, result.is_err()).await;
    let config = session.config();
    let (delivered, verified, elapsed, error) = match &result {
        Ok(o) => (o.bytes, true, o.elapsed, None),
        Err(e) => (
            transfer::content_acknowledged(&session, &header),
            false,
            started.elapsed(),
            Some(crate::text::escape(&format!("{e:#}"))),
        ),
    };
    let ended = Ended {
        role: "braid send",
        cc: config.cc.name().to_owned(),
        stats: session.stats(),
        segment_size: config.segment_size,
        bytes: header.size.unwrap_or(delivered),
        delivered,
        verified,
        duration_s: elapsed.as_secs_f64(),
        error,
    };
    crate::print_result(&ended, args.report.json)?;
    match result {
        Ok(o) => {
            if !args.report.json {
                eprintln!("verified: BLAKE3 {}", o.hash.to_hex());
            }
            // CLOSE_DONE goes out before we exit.
            crate::linger(&session).await;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("braid: {}", crate::text::escape(&format!("{e:#}")));
            Ok(status.map_or(ExitCode::FAILURE, ExitCode::from))
        }
    }
}

type Input = Box<dyn Read + Send>;

async fn open_input(file: &PathBuf) -> anyhow::Result<(Header, Input)> {
    if file.as_os_str() == "-" {
        let header = Header {
            name: "stdin".into(),
            size: None,
        };
        return Ok((header, Box::new(std::io::stdin())));
    }
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let meta = f.metadata()?;
    if meta.is_dir() {
        bail!("{} is a directory; send a file", file.display());
    }
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let header = Header {
        name,
        size: Some(meta.len()),
    };
    Ok((header, Box::new(f)))
}

/// After [`NOTICE_AFTER`] without an answer, says once on stderr who is
/// silent and how long the handshake will keep trying: the timeout is as
/// long as TCP's connect, and a mistyped address should not look like a
/// hang. Never resolves.
async fn waiting_notice(to: &[String], give_up: Duration, quiet: bool) -> std::convert::Infallible {
    if !quiet && give_up > NOTICE_AFTER {
        tokio::time::sleep(NOTICE_AFTER).await;
        eprintln!(
            "braid: no answer from {} after {} s (is `braid recv` running there?); \
             trying until {} s (--handshake-timeout)",
            to.join(", "),
            NOTICE_AFTER.as_secs(),
            give_up.as_secs_f64(),
        );
    }
    std::future::pending().await
}

/// See [`waiting_notice`].
const NOTICE_AFTER: Duration = Duration::from_secs(5);

/// One connection per --to; --bind gives one local address for all, or one each.
pub fn pair(remotes: &[SocketAddr], binds: &[SocketAddr]) -> anyhow::Result<Vec<PathSpec>> {
    if remotes.len() > 255 {
        return Err(UsageError::new(format!(
            "at most 255 connections ({} --to given)",
            remotes.len()
        ))
        .into());
    }
    match binds.len() {
        0 => Ok(remotes.iter().map(|&r| PathSpec::to(r)).collect()),
        1 => Ok(remotes
            .iter()
            .map(|&remote| PathSpec {
                local: Some(binds[0]),
                remote,
            })
            .collect()),
        n if remotes.len() == 1 => Ok(binds
            .iter()
            .take(n)
            .map(|&b| PathSpec {
                local: Some(b),
                remote: remotes[0],
            })
            .collect()),
        n if n == remotes.len() => Ok(remotes
            .iter()
            .zip(binds)
            .map(|(&remote, &b)| PathSpec {
                local: Some(b),
                remote,
            })
            .collect()),
        n => Err(UsageError::new(format!(
            "{n} --bind for {} --to: give one --bind, one per --to, or one --to",
            remotes.len()
        ))
        .into()),
    }
}
