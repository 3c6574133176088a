//! `braid send`: files, folders or stdin to a `braid recv`, over one or more connections.

use crate::failure::{self, Context, Failure, Kind, Mode};
use crate::manifest::Manifest;
use crate::outgoing::Outgoing;
use crate::progress::Progress;
use crate::record;
use crate::rendezvous::{Kept, Meet};
use crate::side::Side;
use crate::summary::Report;
use crate::transfer::{self, Source};
use crate::usage::UsageError;
use anyhow::bail;
use braid::rendezvous::Meeting;
use braid::{PathSpec, Session, SessionConfig};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

#[derive(Args)]
pub struct SendArgs {
    /// Files or folders to send (folders with all they hold), or - for
    /// stdin. Sending the same again after an interruption sends only
    /// what the receiver is missing.
    #[arg(value_name = "PATH", required = true)]
    files: Vec<PathBuf>,
    /// The name the receiver keeps it under, for one file or folder
    /// [default: its own name; for stdin, stdin-DATE-TIME in UTC].
    #[arg(long, value_name = "NAME", value_parser = parse_name)]
    name: Option<String>,
    /// Inside folders, send what symbolic links point to (default: leave
    /// links out, saying how many). Links named on the command line are
    /// always followed.
    #[arg(long)]
    follow_symlinks: bool,
    /// Receiver address; repeat for several connections (e.g. via several relays).
    #[arg(long = "to", value_name = "ADDR", required_unless_present = "relay")]
    to: Vec<String>,
    /// Meet the receiver at this rendezvous relay (`braid relay --serve`)
    /// by code or key instead of dialling its address: for a receiver
    /// behind a NAT or firewall. Repeat to use several relays at once; a
    /// direct path is punched too where the NATs allow.
    #[arg(long = "relay", value_name = "ADDR", conflicts_with = "to")]
    relay: Vec<String>,
    /// With --relay: never open a direct path, so the receiver does not
    /// learn our address from us (the relays still see it).
    #[arg(long, requires = "relay")]
    no_direct: bool,
    /// Local address to send from; one for all connections, or one per --to.
    #[arg(long = "bind", value_name = "ADDR")]
    bind: Vec<SocketAddr>,
    /// Congestion controller (aimd, bbr, cubic, mbecn, ncp) [default: bbr].
    #[arg(long)]
    cc: Option<braid_proto::cc::Algorithm>,
    /// Give up if the receiver does not answer within this time [default:
    /// 75s, about as long as TCP's connect; a `braid recv` started
    /// meanwhile is found].
    #[arg(long, value_name = "DURATION", value_parser = braid::text::parse_timeout)]
    handshake_timeout: Option<Duration>,
    /// With --relay: give up if no relay answers within this time
    /// [default: 5s]; then --handshake-timeout bounds the wait for the
    /// receiver.
    #[arg(long, value_name = "DURATION", value_parser = braid::text::parse_timeout, requires = "relay")]
    relay_timeout: Option<Duration>,
    /// With --relay: reach the relays over TCP from the start (a network
    /// known to block UDP). Without it, a relay whose UDP does not answer
    /// within 3 s is reached over TCP until its UDP answers again.
    #[arg(long, requires = "relay")]
    relay_tcp: bool,
    #[command(flatten)]
    security: crate::keys::SendSecurity,
    #[command(flatten)]
    report: crate::ReportArgs,
    #[command(flatten)]
    observe: crate::observe::ObserveArgs,
}

pub fn run(args: SendArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(send(args))?
}

async fn send(args: SendArgs) -> anyhow::Result<ExitCode> {
    let mut report = Report::new(Side::Send);
    let mut ctx = Context {
        side: Side::Send,
        peer: if args.relay.is_empty() {
            args.to.join(", ")
        } else {
            format!("the receiver (via {})", args.relay.join(", "))
        },
        mode: Mode::Code,
        relayed: !args.relay.is_empty(),
    };
    let result = attempt(&args, &mut report, &mut ctx).await;
    let session = match result {
        Ok(done) => Some(done),
        Err(e) if e.is::<UsageError>() => return Err(e),
        Err(e) => {
            report.failure = Some(failure::classify(&e, &ctx));
            None
        }
    };
    let status = record::print(&report, args.report.json);
    if let Some((session, meeting)) = session {
        // CLOSE_DONE goes out before we exit, through the relays too: the
        // meeting leaves them (and ends our pairs there) only after.
        crate::linger(&session).await;
        drop(meeting);
    }
    Ok(status)
}

/// Connects and sends, filling `report` as it learns; returns the session
/// of a verified transfer, to linger on after printing, and the meeting
/// that keeps its relays.
async fn attempt(
    args: &SendArgs,
    report: &mut Report,
    ctx: &mut Context,
) -> anyhow::Result<(Session, Kept)> {
    let security = args.security.resolve().map_err(failure::local)?;
    crate::plot::ready(args.observe.plot.as_deref()).map_err(failure::local)?;
    ctx.mode = Mode::of(&security);
    report.mode = Some(ctx.mode);
    let meet = crate::rendezvous::meeting(
        &args.relay,
        &security,
        !args.no_direct,
        args.relay_timeout,
        args.relay_tcp,
    )
    .await?;
    let mut remotes = Vec::new();
    for to in &args.to {
        remotes.push(crate::resolve(to).await?);
    }
    report.peer = remotes.first().copied();
    let paths = pair(&remotes, &args.bind)?;
    if meet.is_some() && args.bind.len() > 1 {
        return Err(UsageError::new("with --relay, give at most one --bind").into());
    }
    let (manifest, input) = open_input(args).map_err(failure::local)?;
    report.describe(&manifest);
    let cfg = session_config(args, security);
    let (session, joined) = open_session(args, report, meet.as_ref(), &paths, cfg).await?;
    // Kept while the transfer runs: it adds the connections found later.
    let meeting = Kept(joined);
    let session = send_and_report(
        args,
        report,
        session,
        &manifest,
        input,
        meet.as_ref(),
        &meeting,
    )
    .await?;
    Ok((session, meeting))
}

/// The session's configuration from the command line's options.
fn session_config(args: &SendArgs, security: braid::Security) -> SessionConfig {
    let mut cfg = SessionConfig {
        security,
        ..SessionConfig::default()
    };
    if let Some(t) = args.handshake_timeout {
        cfg.handshake_timeout = t;
    }
    if let Some(cc) = &args.cc {
        cfg.cc = *cc;
    }
    args.observe.configure(&mut cfg);
    cfg
}

/// The handshake, directly to `paths` or through the relays of `meet`,
/// telling the user while it waits; returns the session and the meeting
/// that found it (none without relays).
async fn open_session(
    args: &SendArgs,
    report: &mut Report,
    meet: Option<&Meet>,
    paths: &[PathSpec],
    cfg: SessionConfig,
) -> anyhow::Result<(Session, Option<Meeting>)> {
    let give_up = cfg.handshake_timeout;
    report.started = SystemTime::now();
    let started = Instant::now();
    let joined = match meet {
        Some(m) => Some(m.join(args.bind.first().copied())?),
        None => None,
    };
    let waiting = waiting_notice(&args.to, give_up, joined.as_ref());
    let opening = async {
        match &joined {
            Some(m) => m.open(cfg).await,
            None => braid::connect(paths, cfg).await,
        }
    };
    let connected = tokio::select! {
        s = opening => s.map_err(anyhow::Error::from),
        (what, status) = crate::interrupted() => Err(Failure::err(Kind::Interrupted(status), what)),
        never = waiting => match never {},
    };
    // A failed handshake's duration is how long it tried; what the relays
    // said is part of why.
    let session = connected.inspect_err(|_| {
        report.duration = started.elapsed();
        report.reach = joined.as_ref().map(Meeting::reach);
    })?;
    Ok((session, joined))
}

/// Sends `input` on an open session with its progress shown, then fills
/// `report` with how it ended; returns the session of a verified transfer.
async fn send_and_report(
    args: &SendArgs,
    report: &mut Report,
    mut session: Session,
    manifest: &Manifest,
    input: Source,
    meet: Option<&Meet>,
    meeting: &Kept,
) -> anyhow::Result<Session> {
    let title = format!("braid send {}", manifest.label());
    let watching = args.observe.watch(&session, Side::Send, &title);
    // From here on as `transfer::send` times itself: from the handshake's end.
    let started = Instant::now();
    let view = || crate::live::Setup {
        side: Side::Send,
        title: format!("braid send {}", braid::text::escape(&manifest.label())),
        notes: Vec::new(),
        relays: meet.map_or_else(Vec::new, |m| m.at.relays.clone()),
    };
    let live = args.observe.live.unwrap_or(false);
    let progress = Progress::with_live(args.report.live(), live, manifest.size(), "send", view);
    progress.set_files(manifest);
    let watch = progress.watch(session.monitor(), Side::Send);
    let monitor = session.monitor();
    let mut start = 0;
    let outcome = tokio::select! {
        r = transfer::send(&mut session, manifest, input, &progress, &mut start) => r,
        // Noticed even while waiting for input, as from a stalled pipe.
        e = monitor.failed() => Err(e.into()),
        (what, status) = crate::interrupted() => {
            Err(transfer::interrupted(&session, Side::Send, what, status))
        }
    };
    crate::wind_down(watch, &progress, &session, outcome.is_err()).await;
    watching.end(&session, report).await;
    report.reach = meeting.reach();
    match outcome {
        Ok(o) => {
            report.completed(&o);
            Ok(session)
        }
        Err(e) => {
            report.resumed = start;
            report.bytes = transfer::content_done(manifest, start, session.stats().bytes_acked);
            report.duration = started.elapsed();
            Err(e)
        }
    }
}

/// What to send and where it comes from: the paths walked into a
/// manifest, or stdin as one stream named `--name` or by the date (so
/// that a second stdin transfer into the same folder does not collide
/// with the first).
fn open_input(args: &SendArgs) -> anyhow::Result<(Manifest, Source)> {
    if args.files.iter().any(|f| f.as_os_str() == "-") {
        if args.files.len() > 1 {
            bail!("- (stdin) travels alone; send the files in another transfer");
        }
        let name = args.name.clone().unwrap_or_else(stdin_name);
        let manifest = Manifest::single(&name, None);
        return Ok((manifest, Source::Once(Box::new(std::io::stdin()))));
    }
    let out = Outgoing::collect(&args.files, args.name.as_deref(), args.follow_symlinks)?;
    if out.skipped_links > 0 {
        eprintln!(
            "left out {} symbolic link{} inside folders (--follow-symlinks sends what they point to)",
            out.skipped_links,
            if out.skipped_links == 1 { "" } else { "s" }
        );
    }
    if out.skipped_special > 0 {
        eprintln!(
            "left out {} sockets, FIFOs or devices inside folders",
            out.skipped_special
        );
    }
    Ok((out.manifest.clone(), Source::Files(out)))
}

/// "stdin-20250314-153000" (UTC, to the second).
fn stdin_name() -> String {
    let secs = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!(
        "stdin-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// `civil_from_days`, http://howardhinnant.github.io/date_algorithms.html).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A name for the receiver to keep: one plain name.
fn parse_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\\']) {
        return Err("a file name without directories, e.g. backup.tar".into());
    }
    Ok(s.to_owned())
}

/// After [`NOTICE_AFTER`] without an answer, says once on stderr who is
/// silent and how long the handshake will keep trying: the timeout is as
/// long as TCP's connect, and a mistyped address should not look like a
/// hang. At relays it says what they said instead. Shown with --quiet
/// too: it hides the bar, not reasons. Never resolves.
async fn waiting_notice(
    to: &[String],
    give_up: Duration,
    meeting: Option<&braid::rendezvous::Meeting>,
) -> std::convert::Infallible {
    tokio::time::sleep(NOTICE_AFTER).await;
    let until = |flag| format!("trying until {} s ({flag})", give_up.as_secs_f64());
    let line = match meeting {
        None if give_up > NOTICE_AFTER => Some(format!(
            "no answer from {} after {} s (is `braid recv` running there?); {}",
            to.join(", "),
            NOTICE_AFTER.as_secs(),
            until("--handshake-timeout"),
        )),
        None => None,
        Some(m) => relay_notice(&m.reach(), m.relay_timeout(), give_up).map(|(what, flag)| {
            let limit = if flag == "--relay-timeout" {
                m.relay_timeout()
            } else {
                give_up
            };
            format!("{what}; trying until {} s ({flag})", limit.as_secs_f64())
        }),
    };
    if let Some(line) = line {
        eprintln!("braid: {line}");
    }
    std::future::pending().await
}

/// What the relays said after [`NOTICE_AFTER`], and the option that bounds
/// the wait from here; `None` when the wait ends about now anyway.
fn relay_notice(
    reach: &braid::rendezvous::Reach,
    relay_timeout: Duration,
    give_up: Duration,
) -> Option<(String, &'static str)> {
    let after = NOTICE_AFTER.as_secs();
    let answered: Vec<_> = reach.relays.iter().filter(|r| r.answered).collect();
    if answered.is_empty() {
        // Without an answer the meeting ends at the relay timeout.
        let silent = crate::rendezvous::list(reach.relays.iter().map(|r| r.relay));
        return (relay_timeout.min(give_up) > NOTICE_AFTER).then(|| {
            let how = match reach.relays.iter().any(|r| r.tcp) {
                true => "over UDP or TCP",
                false => "(is UDP to it allowed?)",
            };
            let what = format!("no relay answered at {silent} after {after} s {how}");
            let flag = if relay_timeout < give_up {
                "--relay-timeout"
            } else {
                "--handshake-timeout"
            };
            (what, flag)
        });
    }
    if give_up <= NOTICE_AFTER {
        return None;
    }
    let what = if let Some(r) = reach.relays.iter().find(|r| r.paired_at.is_some()) {
        format!(
            "relay {} paired us with the receiver, but its handshake has not answered after {after} s",
            r.relay
        )
    } else if let Some((r, why)) = reach.relays.iter().find_map(|r| {
        r.refused
            .filter(|&w| w != braid::rendezvous::Refusal::Unknown)
            .map(|w| (r, w))
    }) {
        format!("relay {} refused: {why}", r.relay)
    } else {
        let answered: Vec<_> = answered.iter().map(|r| r.relay).collect();
        format!(
            "{} answered, but nobody is waiting under that code or key after {after} s \
             (is `braid recv` running with the same --relay and code or key?)",
            crate::rendezvous::named(&answered)
        )
    };
    Some((what, "--handshake-timeout"))
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
