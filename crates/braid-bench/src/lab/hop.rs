//! A hop of the lab: two TUN devices in two namespaces joined by the
//! simulator's link model, one direction each way, as `braid link` joins
//! its namespace to the outside (same model, same seeds per direction).
//!
//! One thread per hop moves its packets: it reads what waits on either
//! device, offers each packet to its direction's [`Link`] at the moment it
//! was read, writes it to the other device at the arrival time the link
//! computed, and sleeps in between (nanosecond timer slack). A hop can be
//! taken down and up while it runs: a down link loses what is offered and
//! what is in flight, as in the simulator.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use braid_link::{InFlight, Link, LinkConfig, LinkState, Offer};
use braid_proto::{Ecn, Instant};

use braid_netns::Tun;

/// Packets read from one device per turn, so a flood one way cannot starve
/// the other.
const READ_BATCH: usize = 256;
/// Longest sleep: how soon a stop or a state change is noticed.
const MAX_WAIT: Duration = Duration::from_millis(20);

/// What a direction did, when the hop stops.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LaneCounts {
    pub offered: u64,
    pub delivered: u64,
    pub dropped: u64,
}

/// A running hop; stops (and drops its devices) on drop.
pub struct Hop {
    pub name: String,
    stop: Arc<AtomicBool>,
    /// 0: as configured; 1: down; 2: back up (applied once by the thread).
    state: Arc<AtomicU8>,
    thread: Option<JoinHandle<[LaneCounts; 2]>>,
}

impl Hop {
    /// Starts moving packets between `a` and `b`: `ab` shapes what `a`'s
    /// side sends, `ba` the way back; `seeds` seed their randomness.
    pub fn start(
        name: &str,
        a: Tun,
        b: Tun,
        ab: LinkConfig,
        ba: LinkConfig,
        seeds: [u64; 2],
    ) -> anyhow::Result<Hop> {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(AtomicU8::new(0));
        let (s, st) = (stop.clone(), state.clone());
        let thread = std::thread::Builder::new()
            .name(format!("hop {name}"))
            .spawn(move || {
                let mut lanes = [Lane::new(ab, seeds[0]), Lane::new(ba, seeds[1])];
                forward(&a, &b, &mut lanes, &s, &st);
                lanes.map(|l| l.counts)
            })?;
        Ok(Hop {
            name: name.to_owned(),
            stop,
            state,
            thread: Some(thread),
        })
    }

    /// Takes the hop down (both directions lose everything) or up again.
    pub fn set_up(&self, up: bool) {
        self.state.store(if up { 2 } else { 1 }, Ordering::Relaxed);
    }

    fn halt(&mut self) -> [LaneCounts; 2] {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Hop {
    fn drop(&mut self) {
        self.halt();
    }
}

fn forward(a: &Tun, b: &Tun, lanes: &mut [Lane; 2], stop: &AtomicBool, state: &AtomicU8) {
    // SAFETY: prctl on this thread only: its sleeps end when asked.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
    let origin = std::time::Instant::now();
    let now = || Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(0));
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        match state.swap(0, Ordering::Relaxed) {
            1 => lanes
                .iter_mut()
                .for_each(|l| l.link.set_state(now(), LinkState::Down)),
            2 => lanes
                .iter_mut()
                .for_each(|l| l.link.set_state(now(), LinkState::Up)),
            _ => {}
        }
        for (lane, from, to) in [(0, a, b), (1, b, a)] {
            lanes[lane].deliver(now(), to);
            for _ in 0..READ_BATCH {
                match from.recv(&mut buf) {
                    Ok(Some(n)) => lanes[lane].offer(now(), &buf[..n]),
                    Ok(None) => break,
                    // The device went (its namespace is being removed).
                    Err(_) => return,
                }
            }
            lanes[lane].deliver(now(), to);
        }
        let due = lanes.iter().filter_map(|l| l.pending.next_at()).min();
        let wait = due.map_or(MAX_WAIT, |at| {
            Duration::from_nanos(at.as_nanos().saturating_sub(now().as_nanos())).min(MAX_WAIT)
        });
        braid_netns::wait_readable(&[a, b], wait);
    }
}

/// One direction: its link and the packets it has yet to deliver.
struct Lane {
    link: Link,
    pending: InFlight<Box<[u8]>>,
    counts: LaneCounts,
}

impl Lane {
    fn new(cfg: LinkConfig, seed: u64) -> Lane {
        Lane {
            link: Link::new(cfg, seed),
            pending: InFlight::default(),
            counts: LaneCounts::default(),
        }
    }

    fn offer(&mut self, now: Instant, packet: &[u8]) {
        self.counts.offered += 1;
        let size = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        // The lab's links mark nothing: ECN is left as the sender set it.
        match self.link.offer(now, size, Ecn::NotEct, 0) {
            Offer::Deliver {
                at, duplicate_at, ..
            } => {
                for at in duplicate_at.into_iter().chain([at]) {
                    let copy = packet.to_vec().into_boxed_slice();
                    if self.pending.push(at, packet.len(), copy).is_err() {
                        self.counts.dropped += 1;
                    }
                }
            }
            _ => self.counts.dropped += 1,
        }
    }

    fn deliver(&mut self, now: Instant, to: &Tun) {
        while let Some((_, packet)) = self.pending.pop_due(now) {
            if !self.link.is_up() {
                self.counts.dropped += 1;
                continue;
            }
            match to.send(&packet) {
                Ok(()) => self.counts.delivered += 1,
                Err(_) => self.counts.dropped += 1,
            }
        }
    }
}
