//! The link options `braid emulate` and `braid link` share: one parser and
//! one description of a link, in the syntax of scenario files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use braid_link::units::{parse_duration, parse_probability};
use braid_link::{EcnMode, LinkConfig, LinkStats, QueueLimit, Rate, Trace};
use clap::Args;

/// Both directions get the same settings, except where a flag says otherwise.
/// "Forward" is the direction the data of the tool's usual use goes: client to
/// target for the emulator, the command's side to the outside for `braid link`.
#[derive(Args, Clone, Debug)]
pub struct LinkArgs {
    /// Service rate of each direction, e.g. "40Mbit" or "1024pps". Default: unlimited.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<Rate>,
    /// Service rate of the reverse direction only.
    #[arg(long, value_name = "RATE")]
    pub reverse_rate: Option<Rate>,
    /// Mahimahi trace serving the forward direction instead of a rate; the
    /// reverse direction then has --reverse-trace, --reverse-rate, or no limit.
    #[arg(long, value_name = "FILE", conflicts_with = "rate")]
    pub trace: Option<PathBuf>,
    /// Mahimahi trace serving the reverse direction.
    #[arg(long, value_name = "FILE", conflicts_with = "reverse_rate")]
    pub reverse_trace: Option<PathBuf>,
    /// One-way delay of each direction, e.g. "20ms".
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "0")]
    pub delay: Duration,
    /// Each packet's delay varies uniformly within ±J; packets may reorder.
    #[arg(long, value_name = "J", value_parser = parse_duration, default_value = "0")]
    pub jitter: Duration,
    /// Packets leave in bursts at multiples of this interval, e.g. "1ms"
    /// (as mahimahi's traces, Wi-Fi aggregation, LTE scheduling deliver).
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "0")]
    pub burst: Duration,
    /// Random loss of each direction, e.g. "1%" or 0.01.
    #[arg(long, value_name = "P", value_parser = parse_probability, default_value = "0")]
    pub loss: f64,
    /// Drop-tail queue of each direction: packets ("1000") or bytes ("256KB").
    #[arg(long, value_name = "Q", default_value = "1000")]
    pub queue: QueueLimit,
    /// Queue marking: off, threshold:K (CE at K queued packets) or mbecn
    /// (writes queue depth / 16 into braid's header).
    #[arg(long, value_name = "MODE", default_value = "off")]
    pub ecn: EcnMode,
    /// Largest IP packet each direction carries, bytes; larger ones are
    /// dropped, as a router drops a don't-fragment packet. Default:
    /// Ethernet's 1500 when the link is emulated (a rate, trace, delay,
    /// jitter or loss given), any size for a plain forwarder.
    #[arg(long, value_name = "BYTES")]
    pub mtu: Option<u32>,
    /// Seed of the random loss, jitter and duplication.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Both directions, their events and the seed from a path of a scenario
    /// file (docs/scenarios.md) instead of the options above.
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "rate", "reverse_rate", "trace", "reverse_trace", "delay", "jitter", "burst", "loss", "queue", "ecn", "mtu", "seed",
    ])]
    pub scenario: Option<PathBuf>,
    /// Which of the scenario's paths (from 0).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "scenario")]
    pub path: usize,
}

/// Both directions of an emulated path and the seed of their randomness.
#[derive(Debug, Clone)]
pub struct Links {
    pub forward: Direction,
    pub reverse: Direction,
    pub seed: u64,
    /// The scenario path they came from (0 without a scenario).
    pub path: usize,
}

/// A direction's link and the trace file it came from, for descriptions.
#[derive(Debug, Clone)]
pub struct Direction {
    pub config: LinkConfig,
    pub trace_file: Option<PathBuf>,
}

impl LinkArgs {
    /// Whether a link is emulated rather than datagrams only forwarded.
    fn emulates(&self) -> bool {
        self.rate.is_some()
            || self.reverse_rate.is_some()
            || self.trace.is_some()
            || self.reverse_trace.is_some()
            || !self.delay.is_zero()
            || !self.jitter.is_zero()
            || self.loss > 0.0
    }

    /// The links these options (or the scenario) describe.
    pub fn links(&self) -> anyhow::Result<Links> {
        if let Some(file) = &self.scenario {
            let sc = braid_sim::Scenario::from_file(file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let Some(p) = sc.paths.get(self.path) else {
                anyhow::bail!(
                    "{} has {} path(s); --path {} is not one of them",
                    file.display(),
                    sc.paths.len(),
                    self.path
                );
            };
            let from = |config: &LinkConfig| Direction {
                config: config.clone(),
                trace_file: config.trace.as_ref().map(|_| file.clone()),
            };
            return Ok(Links {
                forward: from(&p.forward),
                reverse: from(&p.reverse),
                seed: sc.seed,
                path: self.path,
            });
        }
        let forward = LinkConfig {
            rate: self.rate,
            trace: self.trace.as_deref().map(read_trace).transpose()?,
            delay: self.delay,
            jitter: self.jitter,
            burst: self.burst,
            loss: self.loss,
            queue: self.queue,
            ecn: self.ecn,
            mtu: self
                .mtu
                .or(self.emulates().then_some(braid_link::ETHERNET_MTU)),
            ..LinkConfig::default()
        };
        let reverse = LinkConfig {
            rate: self.reverse_rate.or(self.rate),
            trace: self.reverse_trace.as_deref().map(read_trace).transpose()?,
            ..forward.clone()
        };
        forward.validate()?;
        reverse
            .validate()
            .map_err(|e| anyhow::anyhow!("reverse {e}"))?;
        Ok(Links {
            forward: Direction {
                config: forward,
                trace_file: self.trace.clone(),
            },
            reverse: Direction {
                config: reverse,
                trace_file: self.reverse_trace.clone(),
            },
            seed: self.seed,
            path: 0,
        })
    }
}

fn read_trace(path: &Path) -> anyhow::Result<Arc<Trace>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read trace {}: {e}", path.display()))?;
    let trace =
        Trace::parse(&text).map_err(|e| anyhow::anyhow!("trace {}: {e}", path.display()))?;
    Ok(Arc::new(trace))
}

impl Direction {
    /// e.g. "40Mbit/s, 20ms delay, 1% loss, queue 1000 packets".
    pub fn describe(&self) -> String {
        self.config.describe(self.trace_file.as_deref())
    }
}

/// Both directions in one line, said once when they are the same.
pub fn describe_both(forward: &Direction, reverse: &Direction, names: [&str; 2]) -> String {
    let (f, r) = (forward.describe(), reverse.describe());
    if f == r {
        format!("{f} (both directions)")
    } else {
        format!("{} {f}; {} {r}", names[0], names[1])
    }
}

/// What a link did with the packets offered to it.
pub fn link_counters(l: &LinkStats) -> String {
    format!(
        "offered {}, delivered {}, dropped {} by loss / {} by queue / {} while down, {} CE marks",
        l.offered, l.delivered, l.dropped_loss, l.dropped_queue, l.dropped_down, l.ce_marked
    )
}

/// What one direction did: its link's counters, what it sent on, and what
/// it lost after the link (`[in flight when the link went down, for lack
/// of memory]`, then the sender's own errors), each said when nonzero.
pub fn direction_counters(
    l: &LinkStats,
    sent: u64,
    [in_flight, overflow]: [u64; 2],
    errors: (u64, &str),
) -> String {
    let mut s = format!("{}, sent {sent}", link_counters(l));
    for (n, what) in [
        (in_flight, "lost in flight when the link went down"),
        (overflow, "dropped for lack of memory"),
        errors,
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
    fn queue_means_what_it_means_in_a_scenario_file() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            link: LinkArgs,
        }
        let queue = |q: &str| {
            Cli::try_parse_from(["braid", "--rate", "1mbit", "--queue", q])
                .unwrap()
                .link
                .queue
        };
        assert_eq!(queue("300"), QueueLimit::Packets(300));
        assert_eq!(queue("64KB"), QueueLimit::Bytes(64_000));
        assert_eq!(
            Cli::try_parse_from(["braid"]).unwrap().link.queue,
            QueueLimit::Packets(1000)
        );
    }

    #[test]
    fn an_emulated_link_carries_ethernet_packets_unless_told() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            link: LinkArgs,
        }
        let mtu = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["braid"], args].concat()).unwrap();
            cli.link.links().unwrap().forward.config.mtu
        };
        assert_eq!(mtu(&["--rate", "1mbit"]), Some(1500));
        assert_eq!(mtu(&["--delay", "20ms"]), Some(1500));
        assert_eq!(mtu(&["--rate", "1mbit", "--mtu", "9000"]), Some(9000));
        assert_eq!(mtu(&[]), None, "a plain forwarder");
    }
}
