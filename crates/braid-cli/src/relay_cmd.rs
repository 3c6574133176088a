//! `braid relay`: forward UDP between clients and one target through the
//! simulator's link model, in real time, until Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use braid::relay::{DirectionStats, Relay, RelayConfig};
use braid_sim::link::{EcnMode, QueueLimit};
use braid_sim::units::{format_duration, parse_duration, Rate};
use braid_sim::{LinkConfig, Trace};
use clap::Args;

/// Values take the same syntax as scenario files (docs/scenarios.md).
/// Both directions get the same settings, except where a flag says otherwise.
#[derive(Args)]
#[command(
    after_help = "Delay, jitter, loss, queue and ECN apply to each direction; --trace and \
--reverse-rate shape one direction only. Values use the syntax of scenario files \
(docs/scenarios.md). Run several relays to emulate several paths. Ctrl-C stops the relay \
and prints its counters."
)]
pub struct RelayArgs {
    /// Address clients send to, e.g. 127.0.0.1:7001.
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// Address their datagrams are forwarded to; replies go back the same way.
    #[arg(long, value_name = "ADDR")]
    to: SocketAddr,
    /// Service rate of each direction, e.g. "40Mbit" or "1024pps". Default: unlimited.
    #[arg(long, value_name = "RATE")]
    rate: Option<Rate>,
    /// Service rate of the reverse direction (target to client) only.
    #[arg(long, value_name = "RATE")]
    reverse_rate: Option<Rate>,
    /// Mahimahi trace serving the forward direction (client to target) instead
    /// of a rate; the reverse direction then has --reverse-rate, or no limit.
    #[arg(long, value_name = "FILE", conflicts_with = "rate")]
    trace: Option<PathBuf>,
    /// One-way delay of each direction, e.g. "20ms".
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "0")]
    delay: Duration,
    /// Each datagram's delay varies uniformly within ±J; datagrams may reorder.
    #[arg(long, value_name = "J", value_parser = parse_duration, default_value = "0")]
    jitter: Duration,
    /// Random loss of each direction, e.g. "1%" or 0.01.
    #[arg(long, value_name = "P", value_parser = parse_probability, default_value = "0")]
    loss: f64,
    /// Drop-tail queue of each direction: packets ("1000") or bytes ("256KB").
    #[arg(long, value_name = "Q", default_value = "1000")]
    queue: QueueLimit,
    /// Queue marking: off, threshold:K (CE at K queued packets) or mbecn
    /// (writes queue depth / 16 into braid's header).
    #[arg(long, value_name = "MODE", default_value = "off")]
    ecn: EcnMode,
    /// Seed of the random loss, jitter and duplication.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: RelayArgs) -> anyhow::Result<ExitCode> {
    let forward = LinkConfig {
        rate: args.rate,
        trace: args.trace.as_deref().map(read_trace).transpose()?,
        delay: args.delay,
        jitter: args.jitter,
        loss: args.loss,
        queue: args.queue,
        ecn: args.ecn,
        ..LinkConfig::default()
    };
    let reverse = LinkConfig {
        rate: args.reverse_rate.or(args.rate),
        trace: None,
        ..forward.clone()
    };
    for r in [forward.rate, reverse.rate].into_iter().flatten() {
        anyhow::ensure!(r.is_positive(), "rate {r} must be above zero");
    }
    let cfg = RelayConfig {
        forward,
        reverse,
        seed: args.seed,
        ..RelayConfig::new(args.listen, args.to, LinkConfig::default())
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let relay = Relay::start(cfg.clone())?;
        let (fwd, rev) = (describe(&cfg.forward, &args), describe(&cfg.reverse, &args));
        let links = if fwd == rev {
            format!("{fwd} (both directions)")
        } else {
            format!("forward {fwd}; reverse {rev}")
        };
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

fn read_trace(path: &std::path::Path) -> anyhow::Result<Arc<Trace>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read trace {}: {e}", path.display()))?;
    let trace =
        Trace::parse(&text).map_err(|e| anyhow::anyhow!("trace {}: {e}", path.display()))?;
    Ok(Arc::new(trace))
}

/// "1%" or "0.01", from 0 to 1.
fn parse_probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim_end(), 100.0),
        None => (t, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|v| v / scale)
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| {
            format!("{s:?} is not a probability; expected 0 to 1 (0.01) or a percentage (1%)")
        })
}

/// One direction's settings, e.g. "40Mbit/s, 20ms delay, 1% loss, queue 1000 packets".
fn describe(link: &LinkConfig, args: &RelayArgs) -> String {
    let mut parts = vec![match (&link.trace, link.rate) {
        (Some(t), _) => format!(
            "trace {} ({:.1} Mbit/s average)",
            args.trace
                .as_deref()
                .unwrap_or(std::path::Path::new("?"))
                .display(),
            t.average_bits_per_sec() / 1e6
        ),
        (None, Some(r)) => format!("{r}/s"),
        (None, None) => "no rate limit".to_owned(),
    }];
    parts.push(format!("{} delay", format_duration(link.delay)));
    if !link.jitter.is_zero() {
        parts.push(format!("±{} jitter", format_duration(link.jitter)));
    }
    if link.loss > 0.0 {
        parts.push(format!("{} loss", percent(link.loss)));
    }
    parts.push(format!("queue {}", link.queue));
    if link.ecn != EcnMode::Off {
        parts.push(format!("ECN {}", link.ecn));
    }
    parts.join(", ")
}

fn percent(p: f64) -> String {
    let s = format!("{:.4}", p * 100.0);
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

fn counters(d: &DirectionStats) -> String {
    let l = &d.link;
    let mut s = format!(
        "offered {}, delivered {}, dropped {} by loss / {} by queue / {} while down, {} CE marks, sent {}",
        l.offered, l.delivered, l.dropped_loss, l.dropped_queue, l.dropped_down, l.ce_marked, d.sent
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_accept_fractions_and_percentages() {
        assert_eq!(parse_probability("0.01"), Ok(0.01));
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("100%"), Ok(1.0));
        for bad in ["1.5", "-1%", "lots", "NaN", ""] {
            assert!(parse_probability(bad).is_err(), "{bad:?}");
        }
        assert_eq!(percent(0.01), "1%");
        assert_eq!(percent(0.075), "7.5%");
    }
}
