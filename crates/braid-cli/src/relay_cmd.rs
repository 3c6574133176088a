//! `braid relay`: forward UDP between clients and one target through the
//! simulator's link model, in real time, until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use braid::relay::{DirectionStats, Relay, RelayConfig};
use braid_link::LinkConfig;
use clap::Args;

use crate::link_args::{describe_both, link_counters, LinkArgs};

#[derive(Args)]
#[command(
    after_help = "Delay, jitter, loss, queue and ECN apply to each direction; --trace, \
--reverse-trace and --reverse-rate shape one direction only (forward is client to target). \
Values use the syntax of scenario files (docs/scenarios.md). Run several relays to emulate several paths. Ctrl-C stops the relay \
and prints its counters."
)]
pub struct RelayArgs {
    /// Address clients send to, e.g. 127.0.0.1:7001.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Address their datagrams are forwarded to; replies go back the same way.
    #[arg(long, value_name = "ADDR")]
    to: SocketAddr,
    #[command(flatten)]
    link: LinkArgs,
}

pub fn run(args: RelayArgs) -> anyhow::Result<ExitCode> {
    let links = args.link.links()?;
    let (forward, reverse) = (&links.forward, &links.reverse);
    let cfg = RelayConfig {
        forward: forward.config.clone(),
        reverse: reverse.config.clone(),
        seed: links.seed,
        path: links.path,
        ..RelayConfig::new(args.listen, args.to, LinkConfig::default())
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let relay = Relay::start(cfg.clone())?;
        let links = describe_both(forward, reverse, ["forward", "reverse"]);
        println!("relay {} -> {}: {links}", relay.local_addr(), cfg.to);
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        let stats = relay.stats();
        println!("forward: {}", counters(&stats.forward));
        println!("reverse: {}", counters(&stats.reverse));
        Ok(ExitCode::SUCCESS)
    })
}

fn counters(d: &DirectionStats) -> String {
    let mut s = format!("{}, sent {}", link_counters(&d.link), d.sent);
    for (n, what) in [
        (
            d.dropped_in_flight,
            "lost in flight when the link went down",
        ),
        (d.dropped_overflow, "dropped for lack of memory"),
        (d.send_errors, "send errors"),
    ] {
        if n > 0 {
            s += &format!(", {n} {what}");
        }
    }
    s
}
