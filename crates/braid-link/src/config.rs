//! What shapes one direction of a path: the settings of a [`Link`]
//! ([`LinkConfig`]), its queue limit and ECN mode, and the events that take
//! it down and up. Scenario files, `braid relay`, `braid link` and
//! `braid demo` all build their links as a `LinkConfig` and check it with
//! [`LinkConfig::validate`].
//!
//! [`Link`]: crate::Link

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::loss::Gilbert;
use crate::trace::Trace;
use crate::units::{self, is_probability, Rate};

/// Drop-tail queue capacity. The packet being serialised counts as queued,
/// so `Packets(1)` holds only the packet on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many wire bytes.
    Bytes(u64),
}

impl fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QueueLimit::Packets(n) => write!(f, "{n} packets"),
            QueueLimit::Bytes(b) => f.write_str(&units::format_size(b)),
        }
    }
}

impl QueueLimit {
    /// A queue of `n` packets: at least 1, at most `u32::MAX` (a scenario
    /// file's integer `queue`).
    pub fn packets(n: i64) -> Result<QueueLimit, String> {
        packet_count(&n.to_string())
    }
}

fn packet_count(count: &str) -> Result<QueueLimit, String> {
    match count.parse::<u32>() {
        Ok(n) if n > 0 => Ok(QueueLimit::Packets(n)),
        _ => Err(format!(
            "queue of {count} packets: expected at least 1 and at most {}",
            u32::MAX
        )),
    }
}

impl FromStr for QueueLimit {
    type Err = String;

    /// The one queue syntax of scenario files and the CLI: a bare count is
    /// packets ("300"); a size with a unit is bytes ("256KB", "1500B"), as
    /// in [`crate::units::parse_size`]. Both at least 1.
    fn from_str(s: &str) -> Result<QueueLimit, String> {
        let t = s.trim();
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            return packet_count(t);
        }
        match units::parse_size(t) {
            Ok(0) => Err(format!("queue {s:?} must hold at least one byte")),
            Ok(b) => Ok(QueueLimit::Bytes(b)),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// How the queue marks congestion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcnMode {
    /// No marking.
    #[default]
    Off,
    /// Set CE on an ECN-capable packet when the queue, counting the packet
    /// itself, holds at least this many packets (DCTCP-style step marking).
    Threshold(u32),
    /// Multi-bit ECN (Ouroboros): OR `min(255, queue_packets >> 4)` into the
    /// packet's 8-bit field, queue counted as for `Threshold`.
    MbEcn,
}

impl FromStr for EcnMode {
    type Err = String;

    /// "off", "threshold:K" (K ≥ 1) or "mbecn".
    fn from_str(s: &str) -> Result<EcnMode, String> {
        match s {
            "off" => Ok(EcnMode::Off),
            "mbecn" => Ok(EcnMode::MbEcn),
            _ => {
                let k = s.strip_prefix("threshold:").ok_or_else(|| {
                    format!(
                        "unknown ECN mode {s:?}; expected \"off\", \"threshold:K\" or \"mbecn\""
                    )
                })?;
                match k.parse::<u32>() {
                    Ok(k) if k > 0 => Ok(EcnMode::Threshold(k)),
                    _ => Err(format!(
                        "bad ECN threshold in {s:?}; expected a packet count of at least 1, as in \"threshold:20\""
                    )),
                }
            }
        }
    }
}

impl fmt::Display for EcnMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EcnMode::Off => f.write_str("off"),
            EcnMode::Threshold(k) => write!(f, "threshold:{k}"),
            EcnMode::MbEcn => f.write_str("mbecn"),
        }
    }
}

/// A scheduled change of link state, relative to the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEvent {
    /// When, since the start of the run.
    pub at: Duration,
    pub kind: LinkEventKind,
}

/// What a [`LinkEvent`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEventKind {
    /// Stop carrying packets; back up after `duration` if given.
    Down { duration: Option<Duration> },
    /// Carry packets again (ignored once closed).
    Up,
    /// Down for good.
    Close,
    /// The MTU (IP packet bytes) becomes this, as when a route changes.
    Mtu(u32),
}

/// Whether a link carries packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum LinkState {
    #[default]
    Up,
    Down,
    /// Permanent: a later `Up` is ignored.
    Closed,
}

/// The state changes of `events` in the order they apply: by time, ties in
/// list order, a timed outage's end right after it. The simulator, the relay
/// and `braid link` all schedule a path's events from this list.
pub fn state_changes(events: &[LinkEvent]) -> Vec<(Duration, LinkState)> {
    let mut changes = Vec::with_capacity(events.len());
    for e in events {
        match e.kind {
            LinkEventKind::Down { duration } => {
                changes.push((e.at, LinkState::Down));
                if let Some(d) = duration {
                    changes.push((e.at.saturating_add(d), LinkState::Up));
                }
            }
            LinkEventKind::Up => changes.push((e.at, LinkState::Up)),
            LinkEventKind::Close => changes.push((e.at, LinkState::Closed)),
            LinkEventKind::Mtu(_) => {}
        }
    }
    // Stable: equal times keep their order.
    changes.sort_by_key(|c| c.0);
    changes
}

/// Everything that shapes one direction of a path.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Fixed service rate; ignored when `trace` is set. With neither, the
    /// link serialises instantly.
    pub rate: Option<Rate>,
    /// Mahimahi trace; its time 0 is `Instant::ZERO`.
    pub trace: Option<Arc<Trace>>,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Each packet's delay varies uniformly within ±jitter (never below
    /// zero); packets may reorder.
    pub jitter: Duration,
    /// Bernoulli loss probability at entry.
    pub loss: f64,
    /// Gilbert–Elliott loss at entry, on top of `loss`.
    pub gilbert: Option<Gilbert>,
    /// Probability that a packet is also delivered a second time.
    pub duplicate: f64,
    pub queue: QueueLimit,
    pub ecn: EcnMode,
    /// Applied by the caller through [`Link::set_state`](crate::Link::set_state), in time order.
    pub events: Vec<LinkEvent>,
    /// Packets leave in bursts at multiples of this interval: one served
    /// at t waits for the next tick, as with a mahimahi trace's 1 ms
    /// opportunities, Wi-Fi frame aggregation or an LTE scheduling interval.
    /// Zero: each packet leaves the moment it has been served.
    pub burst: Duration,
    /// Largest IP packet (datagram + [`IP_UDP_OVERHEAD`](crate::IP_UDP_OVERHEAD))
    /// the link carries; larger ones are dropped, as a router drops a
    /// don't-fragment packet. `None`: any size. `Mtu` events change it.
    pub mtu: Option<u32>,
}

impl Default for LinkConfig {
    /// No rate limit, no delay, no loss, 1000-packet queue, no ECN.
    fn default() -> Self {
        LinkConfig {
            rate: None,
            trace: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            gilbert: None,
            duplicate: 0.0,
            queue: QueueLimit::Packets(1000),
            ecn: EcnMode::Off,
            events: Vec::new(),
            burst: Duration::ZERO,
            mtu: None,
        }
    }
}

impl LinkConfig {
    /// The MTU at `now` (the run's start is `Instant::ZERO`): the latest
    /// `Mtu` event's by then, else [`LinkConfig::mtu`].
    pub fn mtu_at(&self, now: braid_proto::Instant) -> Option<u32> {
        let since = Duration::from_nanos(now.as_nanos());
        self.events
            .iter()
            .take_while(|e| e.at <= since)
            .filter_map(|e| match e.kind {
                LinkEventKind::Mtu(m) => Some(m),
                _ => None,
            })
            .last()
            .or(self.mtu)
    }

    /// One line for people, e.g. "40Mbit/s, 20ms delay, 1% loss, queue
    /// 1000 packets"; a trace is named by `trace_file` when it was read
    /// from one.
    pub fn describe(&self, trace_file: Option<&std::path::Path>) -> String {
        use units::format_duration;
        let mut parts = vec![match (&self.trace, self.rate) {
            (Some(t), _) => format!(
                "trace {} ({:.1} Mbit/s average)",
                trace_file.unwrap_or(std::path::Path::new("?")).display(),
                t.average_bits_per_sec() / 1e6
            ),
            (None, Some(r)) => format!("{r}/s"),
            (None, None) => "no rate limit".to_owned(),
        }];
        parts.push(format!("{} delay", format_duration(self.delay)));
        if !self.jitter.is_zero() {
            parts.push(format!("±{} jitter", format_duration(self.jitter)));
        }
        if !self.burst.is_zero() {
            parts.push(format!("bursts every {}", format_duration(self.burst)));
        }
        if self.loss > 0.0 {
            parts.push(format!("{} loss", percent(self.loss)));
        }
        parts.push(format!("queue {}", self.queue));
        if let Some(mtu) = self.mtu {
            parts.push(format!("MTU {mtu} B"));
        }
        if self.ecn != EcnMode::Off {
            parts.push(format!("ECN {}", self.ecn));
        }
        parts.join(", ")
    }

    /// A link of the given rate and one-way delay, other settings default.
    pub fn new(rate: Rate, delay: Duration) -> Self {
        LinkConfig {
            rate: Some(rate),
            delay,
            ..LinkConfig::default()
        }
    }

    /// Checks the settings a link cannot work with: a rate that serves
    /// nothing, or a probability outside [`is_probability`]'s range.
    /// Scenario files, `braid relay`, `braid link` and `braid demo` all
    /// check their links here.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        if let Some(r) = self.rate.filter(|r| !r.is_positive()) {
            return Err(LinkConfigError {
                field: "rate".into(),
                problem: format!("{r} must be above zero"),
            });
        }
        let mut probabilities = vec![
            ("loss".to_owned(), self.loss),
            ("duplicate".to_owned(), self.duplicate),
        ];
        if let Some(g) = &self.gilbert {
            probabilities.extend(
                g.probabilities()
                    .map(|(name, p)| (format!("gilbert.{name}"), p)),
            );
        }
        if let Some((field, p)) = probabilities.into_iter().find(|(_, p)| !is_probability(*p)) {
            return Err(LinkConfigError {
                field,
                problem: format!("{p} is not a probability from 0 to 1 (0% to 100%)"),
            });
        }
        Ok(())
    }
}

/// A probability as a short percentage: "1%", "7.5%".
fn percent(p: f64) -> String {
    let s = format!("{:.4}", p * 100.0);
    format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
}

/// A [`LinkConfig`] setting out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct LinkConfigError {
    /// The setting, as [`LinkConfig`] names it ("loss", "gilbert.r").
    pub field: String,
    pub problem: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_print_short() {
        assert_eq!(percent(0.01), "1%");
        assert_eq!(percent(0.075), "7.5%");
    }

    #[test]
    fn a_link_describes_itself_in_one_line() {
        let mut link = LinkConfig::new(Rate::BitsPerSec(40_000_000), Duration::from_millis(20));
        link.loss = 0.01;
        let said = link.describe(None);
        assert!(said.contains("20ms delay"), "{said}");
        assert!(said.contains("1% loss"), "{said}");
        assert!(said.contains("queue"), "{said}");
    }
}
