//! `braid recv`: accept a transfer from `braid send`, verify it, and keep it.

use crate::failure::{self, Context, Failure, Kind, Mode};
use crate::keys::RecvIdentity;
use crate::progress::Progress;
use crate::record;
use crate::rendezvous::Meet;
use crate::side::Side;
use crate::summary::{Report, Written};
use crate::transfer::{self, Output};
use crate::usage::UsageError;
use braid::rendezvous::{Meeting, Refusal};
use braid::{Listener, Session, SessionConfig};
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

#[derive(Args)]
pub struct RecvArgs {
    /// Address to listen on, e.g. 0.0.0.0:7000 (port 0: any free port).
    /// With --relay: optional (default: any free port on every address
    /// that reaches the relays: [::], which takes IPv4 too, if a relay has
    /// an IPv6 address, else 0.0.0.0).
    #[arg(long, value_name = "ADDR", required_unless_present = "relay")]
    listen: Option<String>,
    /// Wait for the sender at this rendezvous relay (`braid relay --serve`)
    /// instead of being dialled: for a receiver behind a NAT or firewall.
    /// Repeat to use several relays at once; a direct path is punched too
    /// where the NATs allow.
    #[arg(long = "relay", value_name = "ADDR")]
    relay: Vec<String>,
    /// With --relay: never open a direct path, so the sender does not
    /// learn our address from us (the relays still see it).
    #[arg(long, requires = "relay")]
    no_direct: bool,
    /// With --relay: give up if no relay registers us within this time
    /// [default: 5s]. Once one has, we wait for a sender for as long as
    /// it takes.
    #[arg(long, value_name = "DURATION", value_parser = braid::text::parse_timeout, requires = "relay")]
    relay_timeout: Option<Duration>,
    /// With --relay: reach the relays over TCP from the start (a network
    /// known to block UDP). Without it, a relay whose UDP does not answer
    /// within 3 s is reached over TCP until its UDP answers again.
    #[arg(long, requires = "relay")]
    relay_tcp: bool,
    /// Where to write: a directory (the sender's files and folders inside
    /// it; a missing one is created if the name ends with /), a name for
    /// the one file or folder sent, or - for stdout (one file). Default:
    /// the current directory. An interrupted transfer waits in a hidden
    /// `.NAME.braid-part` folder there for the same one sent again.
    #[arg(long, short, value_name = "FILE|DIR|-", default_value = ".")]
    output: String,
    /// Keep accepting transfers (concurrently) instead of exiting after one.
    #[arg(long)]
    keep: bool,
    /// Replace an existing file or folder of the same name (default: refuse).
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    security: crate::keys::RecvSecurity,
    #[command(flatten)]
    report: crate::ReportArgs,
    #[command(flatten)]
    observe: crate::observe::ObserveArgs,
}

/// How long a stopped `--keep` receiver waits for its transfers to end.
const SIGNAL_GRACE: Duration = Duration::from_secs(2);

/// How often the listener's counters are read for failed tries.
const TRIES_POLL: Duration = Duration::from_millis(200);

pub fn run(args: RecvArgs) -> anyhow::Result<ExitCode> {
    if args.keep {
        // Transfers from different senders on different cores.
        crate::block_on_workers(crate::cores(), recv(args))?
    } else {
        crate::block_on(recv(args))?
    }
}

/// What every transfer of this receiver shares.
struct Setup {
    output: Output,
    mode: Mode,
    /// The registration at the relays, kept while receiving.
    meeting: crate::rendezvous::Kept,
}

/// Codes tried when a relay says a generated code's number is taken.
const CODE_TRIES: usize = 5;

/// When the command started: a record of a run that ended before any
/// transfer says how long it ran.
#[derive(Clone, Copy)]
struct Began {
    at: SystemTime,
    clock: Instant,
}

async fn recv(args: RecvArgs) -> anyhow::Result<ExitCode> {
    let began = Began {
        at: SystemTime::now(),
        clock: Instant::now(),
    };
    let listening = tokio::select! {
        l = listen(&args) => l,
        (what, status) = crate::interrupted() => Err(Failure::err(Kind::Interrupted(status), what)),
    };
    let (listener, setup) = match listening {
        Ok(l) => l,
        Err(e) if e.is::<UsageError>() => return Err(e),
        Err(e) => {
            let ctx = context(args.security.mode(), !args.relay.is_empty());
            return Ok(failed(failure::classify(&e, &ctx), &args, began, None));
        }
    };
    let args = Arc::new(args);
    let setup = Arc::new(setup);
    let tries = failed_tries(&listener, setup.mode);
    tokio::pin!(tries);
    // With --keep, the transfers under way; on a signal each one tells its
    // sender and removes its partial file, and we wait for them to.
    let mut running = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            s = listener.accept() => Ok(s),
            signal = crate::interrupted() => Err(signal),
            Some(_) = running.join_next(), if !running.is_empty() => continue,
            never = &mut tries => match never {},
        };
        let session = match accepted {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let ctx = context(setup.mode, !args.relay.is_empty());
                let f = failure::from_runtime(&e, &ctx);
                return Ok(failed(f, &args, began, Some(&setup)));
            }
            Err((what, status)) => {
                let _ = tokio::time::timeout(SIGNAL_GRACE, async {
                    while running.join_next().await.is_some() {}
                })
                .await;
                if args.keep {
                    // Stopping is how --keep ends: no transfer to record.
                    eprintln!("braid: {what}");
                    return Ok(ExitCode::from(status));
                }
                let waited = braid::text::duration(began.clock.elapsed());
                let f = Failure::new(
                    Kind::Interrupted(status),
                    format!("{what} while waiting for a sender: none came in {waited}"),
                );
                return Ok(failed(f, &args, began, Some(&setup)));
            }
        };
        if args.keep {
            let (args, setup) = (args.clone(), setup.clone());
            running.spawn(async move {
                receive_one(session, &setup, &args, false).await;
            });
        } else {
            return Ok(receive_one(session, &setup, &args, true).await);
        }
    }
}

fn context(mode: Mode, relayed: bool) -> Context {
    Context {
        side: Side::Recv,
        peer: "the sender".into(),
        mode,
        relayed,
    }
}

/// Prints a failure that ended the command before any transfer, with how
/// long it ran and, once listening, what the relays said.
fn failed(f: Failure, args: &RecvArgs, began: Began, setup: Option<&Setup>) -> ExitCode {
    let mut report = Report::new(Side::Recv);
    report.mode = Some(setup.map_or(args.security.mode(), |s| s.mode));
    if let Some(setup) = setup {
        report.reach = setup.meeting.reach();
    }
    report.started = began.at;
    report.duration = began.clock.elapsed();
    report.failure = Some(f);
    record::print(&report, args.report.json)
}

/// Checks the output, binds, and tells the user what to run on the sender.
async fn listen(args: &RecvArgs) -> anyhow::Result<(Listener, Setup)> {
    let output = checked_output(args)?;
    let listen = match &args.listen {
        Some(a) => Some(crate::resolve(a).await?),
        None => None,
    };
    let mut tries = 0;
    let (listener, identity, meeting) = loop {
        let identity = args.security.resolve().map_err(failure::local)?;
        let meet = crate::rendezvous::meeting(
            &args.relay,
            &identity.security,
            !args.no_direct,
            args.relay_timeout,
            args.relay_tcp,
        )
        .await?;
        let mut cfg = SessionConfig {
            security: identity.security.clone(),
            ..SessionConfig::default()
        };
        args.observe.configure(&mut cfg);
        // Without --listen, --relay is given: bind what reaches the relays.
        let binds = listen.map_or_else(|| meet.as_ref().expect("--relay").binds(), |a| vec![a]);
        let receivers = if args.keep { crate::cores() } else { 1 };
        let listener = bind(&binds, cfg, receivers)?;
        let Some(meet) = meet else {
            break (listener, identity, None);
        };
        let meeting = listener.register_at(&meet.at);
        tries += 1;
        match busy_relay(&meeting).await? {
            // Another receiver waits under this code's number: pick another.
            Some(_) if args.security.generates_code() && tries < CODE_TRIES => continue,
            Some(e) => return Err(e.into()),
            None => break (listener, identity, Some((meeting, meet))),
        }
    };
    let mode = Mode::of(&identity.security);
    tell_the_sender(args, &listener, &identity, meeting.as_ref(), mode);
    let meeting = crate::rendezvous::Kept(meeting.map(|(m, _)| m));
    Ok((
        listener,
        Setup {
            output,
            mode,
            meeting,
        },
    ))
}

/// Where to write, refused before anything is bound when it cannot be
/// written: a file already there, or stdout wanted twice.
fn checked_output(args: &RecvArgs) -> anyhow::Result<Output> {
    if args.output == "-" && args.report.json {
        return Err(UsageError::new(
            "--json prints to stdout; it cannot be combined with --output -",
        )
        .into());
    }
    let output = Output::parse(&args.output).map_err(failure::local)?;
    crate::plot::ready(args.observe.plot.as_deref()).map_err(failure::local)?;
    if let Output::File(path) = &output {
        if path.exists() && !args.overwrite {
            return Err(Failure::err(
                Kind::Local,
                format!("{} exists; pass --overwrite to replace it", path.display()),
            ));
        }
    }
    Ok(output)
}

/// A relay where another receiver holds the handle: a sender there would
/// meet that one. (No relay holding us at all is an error.)
async fn busy_relay(meeting: &Meeting) -> anyhow::Result<Option<braid::Error>> {
    Ok(match meeting.registered().await {
        Ok(reach) => reach
            .relays
            .iter()
            .find(|v| v.refused == Some(Refusal::Busy))
            .map(|v| braid::Error::RelayRefused {
                relay: v.relay,
                refusal: Refusal::Busy,
            }),
        Err(
            e @ braid::Error::RelayRefused {
                refusal: Refusal::Busy,
                ..
            },
        ) => Some(e),
        Err(e) => return Err(e.into()),
    })
}

/// Tells the user where we listen and the command that reaches us there.
fn tell_the_sender(
    args: &RecvArgs,
    listener: &Listener,
    identity: &RecvIdentity,
    meeting: Option<&(Meeting, Meet)>,
    mode: Mode,
) {
    let local = listener.local_addr();
    eprintln!("listening on {local}");
    match meeting {
        None => {
            let host = if local.ip().is_unspecified() {
                format!("THIS-HOST:{}", local.port())
            } else {
                local.to_string()
            };
            eprintln!(
                "on the sender: braid send FILE --to {host} {}",
                identity.sender_option.as_str()
            );
        }
        Some((meeting, meet)) => {
            for v in meeting.reach().relays {
                match v.reflexive {
                    Some(seen) => eprintln!("waiting at relay {} (it sees us as {seen})", v.relay),
                    None => eprintln!(
                        "braid: relay {} has not answered yet; still trying",
                        v.relay
                    ),
                }
            }
            let relays: String = meet
                .at
                .relays
                .iter()
                .map(|r| format!(" --relay {r}"))
                .collect();
            eprintln!(
                "on the sender: braid send FILE{relays} {}",
                identity.sender_option.as_str()
            );
        }
    }
    if mode == Mode::Code {
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
}

/// A listener on the first of `binds` that binds, reading with
/// `receivers` sockets.
fn bind(binds: &[SocketAddr], cfg: SessionConfig, receivers: usize) -> braid::Result<Listener> {
    let mut failed = None;
    for &addr in binds {
        match Listener::bind_spread(addr, cfg.clone(), Default::default(), receivers) {
            Ok(l) => return Ok(l),
            Err(e) => failed = Some(e),
        }
    }
    Err(failed.expect("one address at least"))
}

/// Says on stderr, one line per try, each handshake that failed here (the
/// sender is told why on its side). Never resolves.
async fn failed_tries(listener: &Listener, mode: Mode) -> std::convert::Infallible {
    let mut refused = 0;
    let mut guesses = 0;
    loop {
        tokio::time::sleep(TRIES_POLL).await;
        let now = listener.stats().refused;
        for _ in refused..now {
            eprintln!("braid: {}", refusal_line(mode));
        }
        refused = refused.max(now);
        let now = listener.failed_handshakes();
        for n in guesses + 1..=now {
            eprintln!(
                "braid: a sender's code was wrong (or someone guessed): {n} of {} wrong \
                 guesses before this code is spent",
                braid::CODE_GUESS_LIMIT
            );
        }
        guesses = guesses.max(now);
    }
}

fn refusal_line(mode: Mode) -> &'static str {
    match mode {
        Mode::Key => {
            "refused a sender: it pinned another key with --peer, its key is not in \
             --allow, or it used a code or --insecure"
        }
        Mode::Code => "refused a sender: it used --peer or --insecure, not a code",
        Mode::Insecure => "refused a sender: it used a code or a key, not --insecure",
    }
}

/// Receives one transfer and prints its result.
async fn receive_one(mut session: Session, setup: &Setup, args: &RecvArgs, bar: bool) -> ExitCode {
    let mut report = Report::new(Side::Recv);
    report.mode = Some(setup.mode);
    report.started = SystemTime::now();
    let watching = args.observe.watch(&session, Side::Recv, "braid recv");
    let view = || crate::live::Setup {
        side: Side::Recv,
        title: "braid recv".into(),
        notes: Vec::new(),
        relays: setup
            .meeting
            .reach()
            .map_or_else(Vec::new, |r| r.relays.iter().map(|v| v.relay).collect()),
    };
    let live = args.observe.live.unwrap_or(false);
    let progress = Progress::with_live(bar && args.report.live(), live, None, "recv", view);
    let watch = progress.watch(session.monitor(), Side::Recv);
    let started = Instant::now();
    let mut seen = transfer::Seen::default();
    let receiving = transfer::receive_telling(
        &mut session,
        &setup.output,
        args.overwrite,
        &progress,
        &mut seen,
    );
    let outcome = tokio::select! {
        r = receiving => r,
        (what, status) = crate::interrupted() => {
            Err(transfer::interrupted(&session, Side::Recv, what, status))
        }
    };
    crate::wind_down(watch, &progress, &session, outcome.is_err()).await;
    watching.end(&session, &mut report).await;
    report.reach = setup.meeting.reach();
    report.resumed = seen.start;
    if let Some(m) = &seen.manifest {
        report.bytes = transfer::content_done(m, seen.start, session.stats().bytes_received);
        report.describe(m);
    }
    let mut ctx = context(setup.mode, setup.meeting.0.is_some());
    if let Some(peer) = report.peer {
        ctx.peer = peer.to_string();
    }
    match outcome {
        Ok(o) => {
            report.completed(&o);
            report.written = Some(match o.path {
                Some(p) => Written::File(p),
                None => Written::Stdout,
            });
            let status = record::print(&report, args.report.json);
            transfer::verdict_acknowledged(&mut session).await;
            // The sender's CLOSE is a round trip behind the verdict's ACK:
            // answering it lets the sender exit at once.
            crate::linger(&session).await;
            status
        }
        Err(e) => {
            say_kept(&seen);
            report.duration = started.elapsed();
            report.failure = Some(failure::classify(&e, &ctx));
            record::print(&report, args.report.json)
        }
    }
}

/// Where what a failed transfer brought waits for the same one again.
fn say_kept(seen: &transfer::Seen) {
    if let Some((path, bytes)) = &seen.kept {
        eprintln!(
            "kept {} in {}: the same transfer sent again goes on from there",
            braid::text::size(*bytes),
            braid::text::escape(&path.display().to_string())
        );
    }
}
