//! One direction of a hop: its link, the packets it has yet to deliver,
//! what happened to them, and an optional per-packet log.

use std::fs::File;
use std::io::{BufWriter, Write};

use braid_link::{DropReason, InFlight, Link, LinkConfig, LinkState, LinkStats, Offer};
use braid_proto::Instant;

use super::ecn::{ip_ecn, set_ip_ecn};
use crate::Tun;

/// What a lane did with the packets read for it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LaneStats {
    /// What the link did with the packets offered to it.
    pub link: LinkStats,
    /// Packets written out at their arrival time, duplicates included.
    pub sent: u64,
    /// Packets the link delivered but that were still in flight when it
    /// went down; the simulator discards those too.
    pub dropped_in_flight: u64,
    /// Packets the link delivered but the lane had no room to hold.
    pub dropped_overflow: u64,
    /// Packets the device refused.
    pub write_errors: u64,
}

/// One direction: its link, the packets it has yet to deliver, its log.
#[derive(Debug)]
pub struct Lane {
    link: Link,
    /// Packets with the time they entered the link.
    pending: InFlight<(Instant, Box<[u8]>)>,
    stats: LaneStats,
    log: Option<BufWriter<File>>,
}

impl Lane {
    /// A lane through a link of `cfg` whose randomness starts from `seed`.
    pub fn new(cfg: LinkConfig, seed: u64) -> Lane {
        Lane {
            link: Link::new(cfg, seed),
            pending: InFlight::default(),
            stats: LaneStats::default(),
            log: None,
        }
    }

    /// Logs each packet to `file`, as mahimahi does: "ms + bytes" when it
    /// enters, "ms - bytes delay_ms" when it leaves, "ms d bytes reason"
    /// when it is dropped, after a `# title` line and the base timestamp.
    pub fn with_log(mut self, file: File, title: &str) -> Lane {
        let mut w = BufWriter::new(file);
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let _ = writeln!(w, "# {title}");
        let _ = writeln!(w, "# base timestamp: {base}");
        self.log = Some(w);
        self
    }

    /// Takes the link down (it loses what is offered and what is in
    /// flight) or up again.
    pub fn set_state(&mut self, now: Instant, state: LinkState) {
        self.link.set_state(now, state);
    }

    /// When the next packet is due to leave.
    pub fn due(&self) -> Option<Instant> {
        self.pending.next_at()
    }

    /// Counters so far.
    pub fn stats(&self) -> LaneStats {
        LaneStats {
            link: self.link.stats(),
            ..self.stats
        }
    }

    /// Writes out what the log holds.
    pub fn finish(&mut self) {
        if let Some(w) = &mut self.log {
            let _ = w.flush();
        }
    }

    /// Offers an IP packet read at `now`; queues it for its arrival time,
    /// with the ECN codepoint the link gave it.
    pub(super) fn offer(&mut self, now: Instant, packet: &mut [u8]) {
        let size = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        self.log(now, format_args!("+ {size}"));
        let offer = self.link.offer(now, size, ip_ecn(packet), 0);
        let Offer::Deliver {
            at,
            ecn,
            duplicate_at,
            ..
        } = offer
        else {
            if let Offer::Dropped(why) = offer {
                let why = match why {
                    DropReason::Down => "down",
                    DropReason::Loss => "loss",
                    DropReason::Queue => "queue",
                    DropReason::TooBig => "mtu",
                };
                self.log(now, format_args!("d {size} {why}"));
            }
            return;
        };
        set_ip_ecn(packet, ecn);
        for at in duplicate_at.into_iter().chain([at]) {
            let held = (now, packet.to_vec().into_boxed_slice());
            if self.pending.push(at, packet.len(), held).is_err() {
                self.stats.dropped_overflow += 1;
            }
        }
    }

    /// Writes every packet whose arrival time has come to `to`.
    pub(super) fn deliver(&mut self, now: Instant, to: &Tun) {
        while let Some((at, (entered, packet))) = self.pending.pop_due(now) {
            // As in the simulator and the emulator, a link that is down at
            // the arrival time loses what was in flight.
            if !self.link.is_up() {
                self.stats.dropped_in_flight += 1;
                self.log(at, format_args!("d {} in-flight", packet.len()));
                continue;
            }
            match to.send(&packet) {
                Ok(()) => self.stats.sent += 1,
                Err(_) => self.stats.write_errors += 1,
            }
            // At the link's arrival time: ours is later by the wake-up latency.
            let delay_ms = (at.as_nanos() - entered.as_nanos()) / 1_000_000;
            self.log(at, format_args!("- {} {delay_ms}", packet.len()));
        }
    }

    fn log(&mut self, at: Instant, what: std::fmt::Arguments) {
        if let Some(w) = &mut self.log {
            let _ = writeln!(w, "{} {what}", at.as_nanos() / 1_000_000);
        }
    }
}
