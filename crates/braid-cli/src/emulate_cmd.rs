//! `braid emulate`: an emulated link on real sockets. It forwards UDP
//! between clients and one target through the simulator's link model, in
//! real time, until Ctrl-C, then prints what each direction did.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use braid::emulator::{DirectionStats, Emulator, EmulatorConfig};
use braid_link::LinkConfig;
use clap::Args;

use crate::link_args::{describe_both, direction_counters, LinkArgs};

#[derive(Args)]
#[command(
    after_help = "Delay, jitter, loss, queue and ECN apply to each direction; --trace, \
--reverse-trace and --reverse-rate shape one direction only (forward is client to target). \
Values use the syntax of scenario files (docs/scenarios.md). Run several emulators to emulate \
several paths. Ctrl-C stops the emulator and prints its counters.

Example: braid emulate --listen 127.0.0.1:7001 --to 127.0.0.1:7000 --rate 50mbit --delay 20ms"
)]
pub struct EmulateArgs {
    /// The address clients send to, e.g. 127.0.0.1:7001.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Where their datagrams are forwarded; replies go back the same way.
    #[arg(long, value_name = "ADDR")]
    to: SocketAddr,
    #[command(flatten)]
    link: LinkArgs,
}

/// `braid relay --listen A --to B`, the emulator's former spelling, is
/// refused with the command it is now (`braid relay` is the rendezvous
/// relay only), rather than clap's bare "unexpected argument".
pub fn refuse_old_spelling(argv: &[OsString]) -> Result<(), String> {
    let given = |flag: &str| {
        argv.iter()
            .skip(2)
            .filter_map(|a| a.to_str())
            .take_while(|a| *a != "--")
            .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|v| v.starts_with('=')))
    };
    let is_relay = argv.get(1).is_some_and(|c| c == "relay");
    if is_relay && (given("--listen") || given("--to")) {
        return Err(
            "--listen and --to belong to the link emulator: braid emulate --listen ADDR \
                    --to ADDR [link options]; braid relay --serve ADDR runs a rendezvous relay"
                .into(),
        );
    }
    Ok(())
}

pub fn run(args: EmulateArgs) -> anyhow::Result<ExitCode> {
    let links = args.link.links()?;
    let (forward, reverse) = (&links.forward, &links.reverse);
    let cfg = EmulatorConfig {
        forward: forward.config.clone(),
        reverse: reverse.config.clone(),
        seed: links.seed,
        path: links.path,
        ..EmulatorConfig::new(args.listen, args.to, LinkConfig::default())
    };
    crate::block_on(async {
        let emulator = Emulator::start(cfg.clone())?;
        let links = describe_both(forward, reverse, ["forward", "reverse"]);
        println!("emulating {} -> {}: {links}", emulator.local_addr(), cfg.to);
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        let stats = emulator.stats();
        // Counters to stderr, beside the rest of what a command says.
        eprintln!("forward: {}", counters(&stats.forward));
        eprintln!("reverse: {}", counters(&stats.reverse));
        Ok(ExitCode::SUCCESS)
    })?
}

fn counters(d: &DirectionStats) -> String {
    let lost = [d.dropped_in_flight, d.dropped_overflow];
    direction_counters(&d.link, d.sent, lost, (d.send_errors, "send errors"))
}
