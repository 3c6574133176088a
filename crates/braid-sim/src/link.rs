//! One direction of a path: the one model of a link that both the simulator
//! (virtual time) and the real-time relay (a real clock) apply to packets.
//!
//! A packet that is [offered](Link::offer) goes through, in order: the link
//! state (down or closed drops it), random loss at entry (like netem), a
//! drop-tail FIFO queue with optional ECN marking, a server (fixed bit or
//! packet rate, or a mahimahi trace), then propagation delay plus jitter.
//! The link only computes when a packet arrives; the caller holds packets
//! in flight and delivers them at that time.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use braid_proto::{Ecn, Instant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::loss::{chance, Gilbert, LossModel};
use crate::trace::{Trace, OPPORTUNITY_BYTES};
use crate::units::{is_probability, Rate};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// IPv4 + UDP header bytes a datagram occupies on a link besides its own:
/// [`Link::offer`] takes wire sizes, and every caller adds this.
pub const IP_UDP_OVERHEAD: u32 = 28;

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
            QueueLimit::Bytes(b) => f.write_str(&crate::units::format_size(b)),
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
        match crate::units::parse_size(t) {
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
    /// Applied by the caller through [`Link::set_state`], in time order.
    pub events: Vec<LinkEvent>,
    /// Packets leave in bursts at multiples of this interval: one served
    /// at t waits for the next tick, as with a mahimahi trace's 1 ms
    /// opportunities, Wi-Fi frame aggregation or an LTE scheduling interval.
    /// Zero: each packet leaves the moment it has been served.
    pub burst: Duration,
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
        }
    }
}

impl LinkConfig {
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

/// A [`LinkConfig`] setting out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct LinkConfigError {
    /// The setting, as [`LinkConfig`] names it ("loss", "gilbert.r").
    pub field: String,
    pub problem: String,
}

/// Why a packet did not make it onto the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The link was down or closed.
    Down,
    /// Random loss.
    Loss,
    /// The queue was full.
    Queue,
}

/// The fate of an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    Dropped(DropReason),
    Deliver {
        /// Arrival at the far end.
        at: Instant,
        /// Codepoint on arrival (CE if marked).
        ecn: Ecn,
        /// MB-ECN field on arrival.
        mbecn: u8,
        /// Time spent waiting behind other packets, serialisation excluded.
        queue_delay: Duration,
        /// Arrival of a duplicate copy, if the link duplicated the packet.
        duplicate_at: Option<Instant>,
    },
}

/// Counters since the link was made. Packets and bytes are wire sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LinkStats {
    /// Packets offered, in any state.
    pub offered: u64,
    /// Packets scheduled for delivery (duplicates not counted).
    pub delivered: u64,
    pub dropped_queue: u64,
    pub dropped_loss: u64,
    pub dropped_down: u64,
    /// Extra copies scheduled.
    pub duplicated: u64,
    /// Packets changed from ECT to CE.
    pub ce_marked: u64,
    /// Wire bytes of delivered packets.
    pub bytes_delivered: u64,
    /// Largest queue seen, packets, including the one on the wire.
    pub max_queue_packets: u64,
}

/// The state of one link direction.
#[derive(Debug, Clone)]
pub struct Link {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    loss: LossModel,
    state: LinkState,
    state_since: Instant,
    /// Departure times (ns) and sizes of packets not yet fully serialised.
    queue: VecDeque<(u64, u32)>,
    queued_bytes: u64,
    server: Server,
    delay_ns: u64,
    jitter_ns: u64,
    stats: LinkStats,
}

impl Link {
    /// A link with its own RNG seeded from `seed`.
    pub fn new(cfg: LinkConfig, seed: u64) -> Link {
        let server = Server::new(&cfg);
        let queue_cap = match cfg.queue {
            QueueLimit::Packets(n) => n.min(4096) as usize,
            QueueLimit::Bytes(_) => 64,
        };
        Link {
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss: LossModel::new(cfg.loss, cfg.gilbert),
            state: LinkState::Up,
            state_since: Instant::ZERO,
            queue: VecDeque::with_capacity(queue_cap),
            queued_bytes: 0,
            server,
            delay_ns: nanos(cfg.delay),
            jitter_ns: nanos(cfg.jitter),
            stats: LinkStats::default(),
            cfg,
        }
    }

    /// A packet of `size` wire bytes (datagram + [`IP_UDP_OVERHEAD`]) with ECN
    /// codepoint `ecn` and MB-ECN field `mbecn` enters the link at `now`.
    /// Calls must come in non-decreasing `now`.
    pub fn offer(&mut self, now: Instant, size: u32, ecn: Ecn, mbecn: u8) -> Offer {
        self.stats.offered += 1;
        if self.state != LinkState::Up {
            self.stats.dropped_down += 1;
            return Offer::Dropped(DropReason::Down);
        }
        if self.loss.is_lost(&mut self.rng) {
            self.stats.dropped_loss += 1;
            return Offer::Dropped(DropReason::Loss);
        }
        let now_ns = now.as_nanos();
        self.drain(now_ns);
        let fits = match self.cfg.queue {
            QueueLimit::Packets(n) => self.queue.len() < n as usize,
            QueueLimit::Bytes(b) => self.queued_bytes + u64::from(size) <= b,
        };
        let served = if fits {
            self.server.serve(now_ns, size)
        } else {
            None
        };
        let Some((start, departure)) = served else {
            self.stats.dropped_queue += 1;
            return Offer::Dropped(DropReason::Queue);
        };
        // A bursty link holds a served packet (in its queue) until the tick.
        let burst = nanos(self.cfg.burst);
        let departure = if burst > 0 {
            departure.div_ceil(burst).saturating_mul(burst)
        } else {
            departure
        };

        // Queue length seen by this packet, itself included.
        let depth = self.queue.len() as u64 + 1;
        let mut ecn = ecn;
        let mut mbecn = mbecn;
        match self.cfg.ecn {
            EcnMode::Off => {}
            EcnMode::Threshold(k) => {
                if ecn.is_capable() && depth >= u64::from(k) && ecn != Ecn::Ce {
                    ecn = Ecn::Ce;
                    self.stats.ce_marked += 1;
                }
            }
            EcnMode::MbEcn => mbecn |= (depth >> 4).min(255) as u8,
        }

        self.queue.push_back((departure, size));
        self.queued_bytes += u64::from(size);
        self.stats.max_queue_packets = self.stats.max_queue_packets.max(depth);
        self.stats.delivered += 1;
        self.stats.bytes_delivered += u64::from(size);

        let at = self.arrival(departure);
        let duplicate_at = if chance(&mut self.rng, self.cfg.duplicate) {
            self.stats.duplicated += 1;
            Some(self.arrival(departure))
        } else {
            None
        };
        Offer::Deliver {
            at,
            ecn,
            mbecn,
            queue_delay: Duration::from_nanos(start.saturating_sub(now_ns)),
            duplicate_at,
        }
    }

    /// Whether packets offered now would be carried.
    pub fn is_up(&self) -> bool {
        self.state == LinkState::Up
    }

    /// Current state.
    pub fn state(&self) -> LinkState {
        self.state
    }

    /// When the state last changed.
    pub fn state_since(&self) -> Instant {
        self.state_since
    }

    /// Changes state at `now`; once `Closed`, the link stays closed.
    /// Packets already scheduled are not recalled.
    pub fn set_state(&mut self, now: Instant, state: LinkState) {
        if self.state == LinkState::Closed || self.state == state {
            return;
        }
        self.state = state;
        self.state_since = now;
    }

    /// Packets in the queue at `now`, including the one on the wire.
    pub fn queue_packets(&mut self, now: Instant) -> usize {
        self.drain(now.as_nanos());
        self.queue.len()
    }

    /// Wire bytes in the queue at `now`, including the packet on the wire.
    pub fn queue_bytes(&mut self, now: Instant) -> u64 {
        self.drain(now.as_nanos());
        self.queued_bytes
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Scheduled state changes, as configured.
    pub fn events(&self) -> &[LinkEvent] {
        &self.cfg.events
    }

    /// Forgets packets that finished serialisation by `now_ns`.
    fn drain(&mut self, now_ns: u64) {
        while let Some(&(dep, size)) = self.queue.front() {
            if dep > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= u64::from(size);
        }
    }

    /// Departure + delay + a uniform jitter sample, never before departure.
    fn arrival(&mut self, departure: u64) -> Instant {
        let mut delay = self.delay_ns;
        if self.jitter_ns > 0 {
            let j = self.jitter_ns;
            let offset = self.rng.gen_range(0..=j.saturating_mul(2));
            delay = delay.saturating_add(offset).saturating_sub(j);
        }
        Instant::from_nanos(departure.saturating_add(delay))
    }
}

/// The serialising end of the queue. Fixed rates keep the start of the
/// current busy period and the work done since, and compute each departure
/// from those, so rounding never accumulates.
#[derive(Debug, Clone)]
enum Server {
    Unlimited,
    /// A zero rate: nothing is ever served.
    Stalled,
    Bits {
        bps: u64,
        origin: u64,
        bits: u128,
        last_departure: u64,
    },
    Packets {
        pps: f64,
        origin: u64,
        count: u64,
        last_departure: u64,
    },
    Trace {
        trace: Arc<Trace>,
        /// The opportunity being filled.
        next: u64,
        /// Bytes of it already used.
        used: u32,
    },
}

impl Server {
    fn new(cfg: &LinkConfig) -> Server {
        if let Some(trace) = &cfg.trace {
            return Server::Trace {
                trace: Arc::clone(trace),
                next: 0,
                used: 0,
            };
        }
        match cfg.rate {
            None => Server::Unlimited,
            Some(r) if !r.is_positive() => Server::Stalled,
            Some(Rate::BitsPerSec(bps)) => Server::Bits {
                bps,
                origin: 0,
                bits: 0,
                last_departure: 0,
            },
            Some(Rate::PacketsPerSec(pps)) => Server::Packets {
                pps,
                origin: 0,
                count: 0,
                last_departure: 0,
            },
        }
    }

    /// Serves a packet of `size` bytes arriving at `now`: returns when its
    /// service starts and when it has fully left, in ns.
    fn serve(&mut self, now: u64, size: u32) -> Option<(u64, u64)> {
        match self {
            Server::Unlimited => Some((now, now)),
            Server::Stalled => None,
            Server::Bits {
                bps,
                origin,
                bits,
                last_departure,
            } => {
                if now > *last_departure {
                    *origin = now;
                    *bits = 0;
                }
                let start = (*last_departure).max(now);
                *bits += u128::from(size) * 8;
                let elapsed = (*bits * NANOS_PER_SEC).div_ceil(u128::from(*bps));
                let dep = origin.saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX));
                *last_departure = dep;
                Some((start, dep))
            }
            Server::Packets {
                pps,
                origin,
                count,
                last_departure,
            } => {
                if now > *last_departure {
                    *origin = now;
                    *count = 0;
                }
                let start = (*last_departure).max(now);
                *count += 1;
                // Float to int `as` saturates; the product is exact enough
                // for any realistic run and does not accumulate.
                let elapsed = (*count as f64 * 1e9 / *pps).ceil() as u64;
                let dep = origin.saturating_add(elapsed);
                *last_departure = dep;
                Some((start, dep))
            }
            Server::Trace { trace, next, used } => {
                // Opportunities that passed while the queue was empty are
                // wasted, as in mahimahi.
                let first = trace.first_at_or_after(now);
                if first > *next {
                    *next = first;
                    *used = 0;
                }
                let start = trace.opportunity_nanos(*next);
                let mut left = size;
                loop {
                    let room = OPPORTUNITY_BYTES - *used;
                    if left < room {
                        *used += left;
                        return Some((start, trace.opportunity_nanos(*next)));
                    }
                    left -= room;
                    let at = trace.opportunity_nanos(*next);
                    *next += 1;
                    *used = 0;
                    if left == 0 {
                        return Some((start, at));
                    }
                }
            }
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bursty_link_delivers_on_its_ticks_at_the_same_rate() {
        let cfg = |burst| LinkConfig {
            burst,
            ..LinkConfig::new(Rate::BitsPerSec(48_000_000), Duration::from_millis(5))
        };
        let mut even = Link::new(cfg(Duration::ZERO), 1);
        let mut bursty = Link::new(cfg(Duration::from_millis(1)), 1);
        let mut last = (Instant::ZERO, Instant::ZERO);
        let mut per_tick = std::collections::BTreeMap::new();
        for i in 0..100u64 {
            // 1500 bytes every 0.2 ms, faster than the 0.25 ms it takes to
            // serve one: a queue builds and each tick carries what was
            // served by then, four packets.
            let now = Instant::from_nanos(i * 200_000);
            let at = |o: Offer| match o {
                Offer::Deliver { at, .. } => at,
                Offer::Dropped(why) => panic!("dropped: {why:?}"),
            };
            let e = at(even.offer(now, 1500, Ecn::NotEct, 0));
            let b = at(bursty.offer(now, 1500, Ecn::NotEct, 0));
            assert_eq!(b.as_nanos() % 1_000_000, 0, "off the tick: {b:?}");
            assert!(b >= e && b - e < Duration::from_millis(1), "{b:?} vs {e:?}");
            *per_tick.entry(b).or_insert(0) += 1;
            last = (e, b);
        }
        // Same rate overall: the last packets leave within a tick.
        assert!(last.1 - last.0 < Duration::from_millis(1));
        let counts: Vec<u32> = per_tick.values().copied().collect();
        let inner = &counts[1..counts.len() - 1];
        assert!(
            inner.iter().all(|&n| n == 4),
            "48 Mbit/s is four 1500 B packets a ms: {counts:?}"
        );
    }

    #[test]
    fn outages_end_in_order() {
        let s = Duration::from_secs;
        let events = [
            LinkEvent {
                at: s(1),
                kind: LinkEventKind::Down {
                    duration: Some(s(2)),
                },
            },
            LinkEvent {
                at: s(3),
                kind: LinkEventKind::Close,
            },
        ];
        assert_eq!(
            state_changes(&events),
            [
                (s(1), LinkState::Down),
                (s(3), LinkState::Up),
                (s(3), LinkState::Closed)
            ]
        );
    }

    const MS: u64 = 1_000_000;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * MS)
    }

    fn deliver(o: Offer) -> (Instant, Ecn, u8, Duration, Option<Instant>) {
        match o {
            Offer::Deliver {
                at,
                ecn,
                mbecn,
                queue_delay,
                duplicate_at,
            } => (at, ecn, mbecn, queue_delay, duplicate_at),
            Offer::Dropped(r) => panic!("dropped: {r:?}"),
        }
    }

    fn at(o: Offer) -> u64 {
        deliver(o).0.as_nanos()
    }

    fn link(cfg: LinkConfig) -> Link {
        Link::new(cfg, 1)
    }

    fn traced(text: &str) -> LinkConfig {
        LinkConfig {
            trace: Some(Arc::new(Trace::parse(text).unwrap())),
            ..LinkConfig::default()
        }
    }

    #[test]
    fn fifty_megabit_serialises_at_the_right_rate() {
        let mut cfg = LinkConfig::new(Rate::mbit(50), Duration::from_millis(20));
        cfg.queue = QueueLimit::Packets(1000);
        let mut l = link(cfg);
        let mut last = 0;
        for i in 0..1000u64 {
            let (a, _, _, qd, _) = deliver(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0));
            // 1500 B at 50 Mbit/s = 240 us each.
            assert_eq!(a.as_nanos(), (i + 1) * 240_000 + 20 * MS);
            assert_eq!(qd, Duration::from_nanos(i * 240_000));
            last = a.as_nanos();
        }
        assert_eq!(last, 260 * MS);
        let s = l.stats();
        assert_eq!(
            (s.delivered, s.bytes_delivered, s.max_queue_packets),
            (1000, 1_500_000, 1000)
        );
        // The queue empties at 240 ms and a new packet starts at once.
        assert_eq!(l.queue_packets(ms(240)), 0);
        assert_eq!(
            at(l.offer(ms(300), 1500, Ecn::NotEct, 0)),
            300 * MS + 240_000 + 20 * MS
        );
    }

    #[test]
    fn odd_rates_do_not_drift() {
        // 7 bits/s-ish rounding: 1 byte at 3 bit/s takes 2.666… s.
        let mut l = link(LinkConfig::new(Rate::BitsPerSec(3), Duration::ZERO));
        let times: Vec<u64> = (0..3)
            .map(|_| at(l.offer(Instant::ZERO, 1, Ecn::NotEct, 0)))
            .collect();
        assert_eq!(times, [2_666_666_667, 5_333_333_334, 8_000_000_000]);
    }

    #[test]
    fn packet_rate_ignores_size() {
        let mut l = link(LinkConfig::new(Rate::PacketsPerSec(1024.0), Duration::ZERO));
        for n in 1..=10u64 {
            let size = if n % 2 == 0 { 100 } else { 1500 };
            let want = (n as f64 * 1e9 / 1024.0).ceil() as u64;
            assert_eq!(at(l.offer(Instant::ZERO, size, Ecn::NotEct, 0)), want);
        }
    }

    #[test]
    fn packet_queue_overflows_exactly() {
        // 12 Mbit/s: one 1500-byte packet per ms.
        let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
        cfg.queue = QueueLimit::Packets(10);
        let mut l = link(cfg);
        let outcomes: Vec<bool> = (0..15)
            .map(|_| {
                matches!(
                    l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
                    Offer::Deliver { .. }
                )
            })
            .collect();
        assert_eq!(outcomes, [&[true; 10][..], &[false; 5]].concat());
        assert_eq!(l.stats().dropped_queue, 5);
        // Just before the first departure the queue is still full.
        let o = l.offer(Instant::from_nanos(MS - 1), 1500, Ecn::NotEct, 0);
        assert_eq!(o, Offer::Dropped(DropReason::Queue));
        // At 1 ms one packet has left; exactly one more fits.
        assert_eq!(at(l.offer(ms(1), 1500, Ecn::NotEct, 0)), 11 * MS);
        assert_eq!(
            l.offer(ms(1), 1500, Ecn::NotEct, 0),
            Offer::Dropped(DropReason::Queue)
        );
    }

    #[test]
    fn byte_queue_overflows_exactly() {
        let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
        cfg.queue = QueueLimit::Bytes(4000);
        let mut l = link(cfg);
        assert!(matches!(
            l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
            Offer::Deliver { .. }
        ));
        assert!(matches!(
            l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
            Offer::Deliver { .. }
        ));
        assert_eq!(
            l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0),
            Offer::Dropped(DropReason::Queue)
        );
        assert!(matches!(
            l.offer(Instant::ZERO, 1000, Ecn::NotEct, 0),
            Offer::Deliver { .. }
        ));
        assert_eq!(
            l.offer(Instant::ZERO, 1, Ecn::NotEct, 0),
            Offer::Dropped(DropReason::Queue)
        );
        assert_eq!(l.queue_bytes(Instant::ZERO), 4000);
        assert_eq!(l.queue_bytes(ms(1)), 2500);
    }

    #[test]
    fn jitter_reorders_within_bounds() {
        let mut cfg = LinkConfig::new(Rate::mbit(100), Duration::from_millis(10));
        cfg.jitter = Duration::from_millis(5);
        let mut l = link(cfg);
        let mut prev = 0;
        let mut reordered = 0;
        for i in 0..2000u64 {
            let now = Instant::from_nanos(i * 200_000);
            let a = at(l.offer(now, 1000, Ecn::NotEct, 0));
            let dep = now.as_nanos() + 80_000;
            assert!(a >= dep + 5 * MS && a <= dep + 15 * MS, "{a} vs {dep}");
            reordered += u32::from(a < prev);
            prev = a;
        }
        assert!(reordered > 100, "{reordered}");
    }

    #[test]
    fn jitter_larger_than_delay_never_arrives_before_departure() {
        let mut cfg = LinkConfig::new(Rate::mbit(100), Duration::from_millis(1));
        cfg.jitter = Duration::from_millis(5);
        let mut l = link(cfg);
        for i in 0..1000u64 {
            let now = Instant::from_nanos(i * MS);
            assert!(at(l.offer(now, 1000, Ecn::NotEct, 0)) >= now.as_nanos() + 80_000);
        }
    }

    #[test]
    fn bernoulli_loss_rate_is_close() {
        let mut cfg = LinkConfig::new(Rate::mbit(100), Duration::ZERO);
        cfg.loss = 0.05;
        let mut l = Link::new(cfg, 9);
        for i in 0..100_000u64 {
            l.offer(Instant::from_nanos(i * MS), 1000, Ecn::NotEct, 0);
        }
        let s = l.stats();
        let rate = s.dropped_loss as f64 / s.offered as f64;
        assert!((rate - 0.05).abs() < 0.003, "{rate}");
        assert_eq!(s.dropped_loss + s.delivered, 100_000);
    }

    #[test]
    fn threshold_marks_ecn_capable_packets_only() {
        let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
        cfg.ecn = EcnMode::Threshold(5);
        let mut l = link(cfg);
        let marks: Vec<Ecn> = (0..10)
            .map(|_| deliver(l.offer(Instant::ZERO, 1500, Ecn::Ect0, 0)).1)
            .collect();
        assert_eq!(marks, [&[Ecn::Ect0; 4][..], &[Ecn::Ce; 6]].concat());
        assert_eq!(
            deliver(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0)).1,
            Ecn::NotEct
        );
        assert_eq!(deliver(l.offer(Instant::ZERO, 1500, Ecn::Ce, 0)).1, Ecn::Ce);
        assert_eq!(l.stats().ce_marked, 6);
    }

    #[test]
    fn mbecn_ors_queue_depth_over_sixteen() {
        let mut cfg = LinkConfig::new(Rate::mbit(12), Duration::ZERO);
        cfg.ecn = EcnMode::MbEcn;
        let mut l = link(cfg);
        let fields: Vec<u8> = (0..40)
            .map(|_| deliver(l.offer(Instant::ZERO, 1500, Ecn::Ect1, 0)).2)
            .collect();
        // Packet i sees a queue of i + 1.
        for (i, &f) in fields.iter().enumerate() {
            assert_eq!(f, ((i + 1) >> 4) as u8, "packet {i}");
        }
        // 41 deep → 2, OR 4 → 6.
        assert_eq!(deliver(l.offer(Instant::ZERO, 1500, Ecn::Ect1, 4)).2, 6);
    }

    #[test]
    fn trace_of_one_is_twelve_megabit() {
        let mut l = link(LinkConfig {
            delay: Duration::from_millis(5),
            ..traced("1")
        });
        for n in 1..=100u64 {
            assert_eq!(
                at(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0)),
                (n + 5) * MS
            );
        }
        // 1.2 MB in 100 ms is 12 Mbit/s; the queue is empty again at 100 ms.
        assert_eq!(l.queue_packets(ms(100)), 0);
    }

    #[test]
    fn trace_opportunities_are_shared_and_split() {
        let mut l = link(traced("1"));
        let mut send = |now: u64, size| at(l.offer(Instant::from_nanos(now), size, Ecn::NotEct, 0));
        assert_eq!([send(0, 500), send(0, 500), send(0, 500)], [MS; 3]);
        // 1000 + 1000: the second takes the rest of 2 ms and half of 3 ms.
        assert_eq!([send(0, 1000), send(0, 1000)], [2 * MS, 3 * MS]);
        // Arriving at 3.5 ms after the queue emptied: the leftover of 3 ms
        // is gone, the next opportunity is 4 ms.
        assert_eq!(send(3 * MS + MS / 2, 1500), 4 * MS);
        // A 4000-byte packet spans three opportunities.
        assert_eq!(send(3 * MS + MS / 2, 4000), 7 * MS);
    }

    #[test]
    fn trace_loops_and_wastes_idle_opportunities() {
        let mut l = link(traced("1\n1\n3"));
        let times: Vec<u64> = (0..6)
            .map(|_| at(l.offer(Instant::ZERO, 1500, Ecn::NotEct, 0)) / MS)
            .collect();
        assert_eq!(times, [1, 1, 3, 4, 4, 6]);
        // Idle until 20 ms: loop 6 has 19, 19, 21 and loop 7 has 22, 22, 24.
        let times: Vec<u64> = (0..4)
            .map(|_| at(l.offer(ms(20), 1500, Ecn::NotEct, 0)) / MS)
            .collect();
        assert_eq!(times, [21, 22, 22, 24]);
    }

    #[test]
    fn down_and_closed_links_drop() {
        let mut l = link(LinkConfig::new(Rate::mbit(10), Duration::ZERO));
        l.set_state(ms(1), LinkState::Down);
        assert!(!l.is_up());
        assert_eq!(
            l.offer(ms(1), 100, Ecn::NotEct, 0),
            Offer::Dropped(DropReason::Down)
        );
        l.set_state(ms(2), LinkState::Up);
        assert!(matches!(
            l.offer(ms(2), 100, Ecn::NotEct, 0),
            Offer::Deliver { .. }
        ));
        l.set_state(ms(3), LinkState::Closed);
        l.set_state(ms(4), LinkState::Up);
        assert_eq!(l.state(), LinkState::Closed);
        assert_eq!(l.state_since(), ms(3));
        assert_eq!(
            l.offer(ms(4), 100, Ecn::NotEct, 0),
            Offer::Dropped(DropReason::Down)
        );
        assert_eq!(l.stats().dropped_down, 2);
    }

    #[test]
    fn duplicates_arrive_separately() {
        let mut cfg = LinkConfig::new(Rate::mbit(10), Duration::from_millis(10));
        cfg.duplicate = 1.0;
        cfg.jitter = Duration::from_millis(2);
        let mut l = link(cfg);
        let (a, _, _, _, dup) = deliver(l.offer(Instant::ZERO, 1000, Ecn::NotEct, 0));
        let dup = dup.unwrap();
        assert!(dup.as_nanos().abs_diff(a.as_nanos()) <= 4 * MS);
        assert_eq!(l.stats().duplicated, 1);
    }

    #[test]
    fn validation_names_the_setting() {
        assert_eq!(LinkConfig::default().validate(), Ok(()));
        let bad = |cfg: LinkConfig| cfg.validate().unwrap_err().field;
        assert_eq!(
            bad(LinkConfig::new(Rate::BitsPerSec(0), Duration::ZERO)),
            "rate"
        );
        assert_eq!(
            bad(LinkConfig {
                loss: 1.5,
                ..LinkConfig::default()
            }),
            "loss"
        );
        assert_eq!(
            bad(LinkConfig {
                duplicate: f64::NAN,
                ..LinkConfig::default()
            }),
            "duplicate"
        );
        let gilbert = Some(Gilbert {
            p: 0.1,
            r: -0.3,
            h: 1.0,
            k: 0.0,
        });
        assert_eq!(
            bad(LinkConfig {
                gilbert,
                ..LinkConfig::default()
            }),
            "gilbert.r"
        );
        let full = LinkConfig {
            loss: 1.0,
            ..LinkConfig::default()
        };
        assert_eq!(full.validate(), Ok(()));
    }

    #[test]
    fn queue_limits_parse_as_packets_or_bytes() {
        assert_eq!("300".parse(), Ok(QueueLimit::Packets(300)));
        assert_eq!("256KB".parse(), Ok(QueueLimit::Bytes(256_000)));
        assert_eq!("1500B".parse(), Ok(QueueLimit::Bytes(1500)));
        for bad in ["0", "0KB", "", "ten", "99999999999"] {
            assert!(bad.parse::<QueueLimit>().is_err(), "{bad:?}");
        }
        assert_eq!(" 300 ".parse(), Ok(QueueLimit::Packets(300)));
        assert_eq!(QueueLimit::packets(300), "300".parse());
        assert!(QueueLimit::packets(-1).unwrap_err().contains("-1 packets"));
    }

    #[test]
    fn zero_rate_serves_nothing() {
        let mut l = link(LinkConfig::new(Rate::BitsPerSec(0), Duration::ZERO));
        assert_eq!(
            l.offer(Instant::ZERO, 100, Ecn::NotEct, 0),
            Offer::Dropped(DropReason::Queue)
        );
    }

    #[test]
    fn same_seed_same_outcomes() {
        let mut cfg = LinkConfig::new(Rate::mbit(20), Duration::from_millis(10));
        cfg.loss = 0.05;
        cfg.gilbert = Some(Gilbert {
            p: 0.01,
            r: 0.3,
            h: 1.0,
            k: 0.0,
        });
        cfg.jitter = Duration::from_millis(3);
        cfg.duplicate = 0.02;
        cfg.queue = QueueLimit::Packets(50);
        let run = |seed| {
            let mut l = Link::new(cfg.clone(), seed);
            (0..5000u64)
                .map(|i| l.offer(Instant::from_nanos(i * 300_000), 1400, Ecn::Ect0, 0))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
