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
use std::sync::Arc;
use std::time::Duration;

use braid_proto::{Ecn, Instant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{EcnMode, LinkConfig, LinkEvent, LinkState, QueueLimit};
use crate::loss::{chance, LossModel};
use crate::trace::{Trace, OPPORTUNITY_BYTES};
use crate::units::Rate;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// IPv4 + UDP header bytes a datagram occupies on a link besides its own:
/// [`Link::offer`] takes wire sizes, and every caller adds this.
pub const IP_UDP_OVERHEAD: u32 = 28;

/// Ethernet's MTU: what an emulated link carries unless told otherwise
/// (scenario files, `braid relay` with link flags, the demo's paths).
pub const ETHERNET_MTU: u32 = 1500;

/// Why a packet did not make it onto the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The link was down or closed.
    Down,
    /// Random loss.
    Loss,
    /// The queue was full.
    Queue,
    /// Larger than the link's MTU (a router drops a don't-fragment packet).
    TooBig,
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
    /// Packets larger than the MTU, dropped.
    pub dropped_too_big: u64,
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
        if self.cfg.mtu_at(now).is_some_and(|mtu| size > mtu) {
            self.stats.dropped_too_big += 1;
            return Offer::Dropped(DropReason::TooBig);
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
mod tests;
