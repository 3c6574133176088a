//! `braid relay --serve`: a public rendezvous relay that pairs braid peers
//! by code or key and forwards between them, until Ctrl-C or SIGTERM.
//! (The link emulator, once `braid relay --listen --to`, is `braid emulate`.)

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use braid::rendezvous::{RendezvousRelay, ServerConfig, TcpOptions};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

use crate::metrics;

#[derive(Args)]
pub struct RelayArgs {
    /// Where to serve (e.g. 0.0.0.0:7000): `braid send --relay` and `braid
    /// recv --relay` meet here by code or key, learn their public
    /// addresses, punch a direct path, and use the relay as a path of their
    /// session. It forwards only between two paired peers and sees only
    /// sealed datagrams.
    #[arg(long, value_name = "ADDR")]
    serve: SocketAddr,
    /// Answer `GET /metrics` over HTTP at this address (e.g.
    /// 127.0.0.1:9400) with the relay's counters in Prometheus's text
    /// format. Off by default; anyone who reaches the address can read them.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    limits: ServeLimits,
}

/// An operator's bounds on a rendezvous relay.
#[derive(Args)]
struct ServeLimits {
    /// Peers waiting under a code or key at once.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_registrations: usize,
    /// Pairs forwarding at once.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_pairs: usize,
    /// Registrations, and pairs joined, one host may hold at once (an IPv4
    /// address or an IPv6 /64), so no host can take the relay.
    #[arg(long, value_name = "N", default_value_t = 32)]
    max_per_host: usize,
    /// Most one pair may be forwarded, both ways together (e.g. 100mbit);
    /// the excess is dropped. Default: no limit.
    #[arg(long, value_name = "RATE")]
    pair_rate: Option<braid_link::units::Rate>,
    /// Most one pair may be forwarded in all (e.g. 10GB); then it ends.
    /// Default: no limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pair_quota: Option<u64>,
    /// Print the counters this often (0: only when stopped).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::parse_duration)]
    stats_every: Duration,
    /// A pair that forwarded nothing for this long ends.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = braid::text::parse_timeout)]
    pair_idle: Duration,
    /// Where peers whose UDP is blocked reach the relay over TCP [default:
    /// the --serve address, on TCP].
    #[arg(long, value_name = "ADDR", conflicts_with = "no_tcp")]
    tcp: Option<SocketAddr>,
    /// Serve over UDP only.
    #[arg(long)]
    no_tcp: bool,
    /// TCP connections open at once; more are closed as they come.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_tcp: usize,
    /// Threads forwarding UDP, each on a socket of its own on the same
    /// port (Linux; 1 elsewhere) [default: one per core].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: Option<u16>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    braid_link::units::parse_size(s).map_err(|e| e.to_string())
}

pub fn run(args: RelayArgs) -> anyhow::Result<ExitCode> {
    serve(args.serve, args.metrics, &args.limits)
}

/// Runs a rendezvous relay until Ctrl-C or SIGTERM, then prints its
/// counters; with `metrics`, serves them there over HTTP meanwhile.
fn serve(
    listen: SocketAddr,
    metrics: Option<SocketAddr>,
    limits: &ServeLimits,
) -> anyhow::Result<ExitCode> {
    let (cfg, tcp) = server_config(limits)?;
    crate::block_on(async {
        let workers = limits.workers.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        );
        let relay = Arc::new(RendezvousRelay::start_workers(listen, cfg, tcp, workers)?);
        let scraped = match metrics {
            Some(at) => Some(
                tokio::net::TcpListener::bind(at)
                    .await
                    .with_context(|| format!("cannot listen for metrics on {at}"))?,
            ),
            None => None,
        };
        let tcp = match relay.tcp_addr() {
            Some(at) => format!("; peers whose UDP is blocked reach it over TCP at {at}"),
            None => String::new(),
        };
        println!(
            "relay serving on {}: peers meet here by code or key; only paired peers are forwarded{tcp}",
            relay.local_addr()
        );
        if let Some(listener) = &scraped {
            println!("metrics at http://{}/metrics", listener.local_addr()?);
        }
        // Stopping is how a relay ends: not a failure.
        let (what, _) = tokio::select! {
            stopped = crate::interrupted() => stopped,
            never = print_counters_every(limits.stats_every, &relay, limits.pair_idle) => match never {},
            never = serve_metrics(scraped, relay.clone()) => match never {},
        };
        eprintln!("braid: {what}");
        eprintln!(
            "{}",
            serve_counters(&relay.stats(), &relay.tcp_stats(), limits.pair_idle)
        );
        Ok(ExitCode::SUCCESS)
    })?
}

/// The relay's limits from the command line, and how it listens on TCP
/// (`None`: not at all).
fn server_config(limits: &ServeLimits) -> anyhow::Result<(ServerConfig, Option<TcpOptions>)> {
    let pair_rate = match limits.pair_rate {
        None => None,
        Some(braid_link::units::Rate::BitsPerSec(b)) => Some(b / 8),
        Some(_) => {
            return Err(crate::usage::UsageError::new(
                "--pair-rate is in bits per second, e.g. 100mbit",
            )
            .into())
        }
    };
    let cfg = ServerConfig {
        max_registrations: limits.max_registrations,
        max_pairs: limits.max_pairs,
        max_per_host: limits.max_per_host,
        pair_rate,
        pair_quota: limits.pair_quota,
        pair_idle: limits.pair_idle,
        ..ServerConfig::default()
    };
    let tcp = (!limits.no_tcp).then_some(TcpOptions {
        listen: limits.tcp,
        max_connections: limits.max_tcp,
        max_per_host: limits.max_per_host,
    });
    Ok((cfg, tcp))
}

/// Serves the relay's counters to scrapers on `scraped`; without a
/// listener, waits forever so that only a signal ends the relay.
async fn serve_metrics(
    scraped: Option<tokio::net::TcpListener>,
    relay: Arc<RendezvousRelay>,
) -> Infallible {
    let Some(listener) = scraped else {
        return std::future::pending().await;
    };
    let render: metrics::Render = Arc::new(move || {
        let process = braid::process::usage(std::process::id()).ok();
        metrics::exposition(&relay.stats(), process)
    });
    metrics::serve(listener, metrics::Limits::default(), render).await
}

/// Prints the relay's counters every `every` (never when zero), for an
/// operator who follows its log.
async fn print_counters_every(
    every: Duration,
    relay: &RendezvousRelay,
    pair_idle: Duration,
) -> Infallible {
    if every.is_zero() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tick.tick().await;
        eprintln!(
            "{}",
            serve_counters(&relay.stats(), &relay.tcp_stats(), pair_idle)
        );
    }
}

/// A rendezvous relay's counters, on one line.
/// A pair is kept until it has been idle for `pair_idle`: ends that left
/// do not say so, so "kept" counts them until then.
fn serve_counters(
    s: &braid::rendezvous::ServerStats,
    t: &braid::rendezvous::TcpStats,
    pair_idle: Duration,
) -> String {
    let mut line = format!(
        "pairs: {} made, {} kept (until idle {}); registrations: {} now; forwarded {} datagrams, {}; \
         dropped {} over a pair's limits, {} from unpaired addresses; {} cookies, {} refusals, \
         {} ends moved after a NAT rebinding, {} pairs taken from a joiner the receiver never \
         answered, {} released",
        s.paired,
        s.pairs,
        braid::text::duration(pair_idle),
        s.registrations,
        s.forwarded_datagrams,
        braid::text::size(s.forwarded_bytes),
        s.dropped_over_limit,
        s.dropped_unknown,
        s.cookies,
        s.refused,
        s.rebound,
        s.replaced,
        s.released,
    );
    if t.accepted > 0 || t.refused > 0 {
        line += &format!(
            "; TCP: {} connections now, {} in all, {} refused; {} datagrams in ({}), {} out ({}), \
             {} dropped at a full connection",
            t.open,
            t.accepted,
            t.refused,
            t.datagrams_in,
            braid::text::size(t.bytes_in),
            t.datagrams_out,
            braid::text::size(t.bytes_out),
            t.dropped,
        );
    }
    line
}
