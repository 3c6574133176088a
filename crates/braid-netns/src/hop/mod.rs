//! A hop: two TUN devices joined by the simulator's link model, one
//! [`Lane`] each way, in real time. `braid link` joins its command's
//! namespace to the outside with one; braid-bench's NAT lab joins its
//! namespaces with several, one thread each.
//!
//! [`forward`] moves every packet of a hop on the calling thread: it reads
//! what is waiting on both devices, offers each packet to its direction's
//! link at the moment it was read, writes it to the other device at the
//! arrival time the link computed, and sleeps in between with nanosecond
//! timeouts. At the start of each turn the caller sees the time and the
//! lanes, and decides whether the hop goes on.

mod ecn;
mod lane;

pub use lane::{Lane, LaneStats};

use std::io;
use std::ops::ControlFlow;
use std::time::Duration;

use braid_proto::Instant;

use crate::{wait_readable, Tun};

/// Packets read from one device per turn, so a flood one way cannot starve
/// deliveries the other way.
const READ_BATCH: usize = 256;
/// Longest sleep: how soon the caller sees a turn when nothing happens.
const MAX_WAIT: Duration = Duration::from_millis(20);

/// What the caller of [`forward`] sees at the start of a turn.
pub struct Turn<'a> {
    /// Link time: since the `origin` given to [`forward`].
    pub now: Instant,
    /// Whether a packet was read in the previous turn.
    pub read: bool,
    /// The hop's two directions, to change their state or read them.
    pub lanes: &'a mut [Lane; 2],
    /// A deadline of the caller's (a scheduled change): the next turn
    /// starts by then.
    pub wake_at: Option<Instant>,
}

/// Moves packets between `ends` until `turn` breaks, and returns what it
/// broke with: `lanes[0]` carries what `ends[0]` reads to `ends[1]`,
/// `lanes[1]` the way back. Link instants count from `origin`. A device
/// that fails to read (its namespace went) ends the hop with that error.
pub fn forward<T>(
    ends: [&Tun; 2],
    lanes: &mut [Lane; 2],
    origin: std::time::Instant,
    mut turn: impl FnMut(&mut Turn<'_>) -> ControlFlow<T>,
) -> io::Result<T> {
    // SAFETY: prctl on this thread only: its sleeps end when asked, not up
    // to 50 us later.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
    let now =
        || Instant::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX));
    let mut buf = vec![0u8; 65_536];
    let mut read = false;
    loop {
        let mut seen = Turn {
            now: now(),
            read,
            lanes,
            wake_at: None,
        };
        if let ControlFlow::Break(out) = turn(&mut seen) {
            return Ok(out);
        }
        let wake_at = seen.wake_at;
        read = false;
        for (lane, from, to) in [(0, ends[0], ends[1]), (1, ends[1], ends[0])] {
            lanes[lane].deliver(now(), to);
            for _ in 0..READ_BATCH {
                let Some(n) = from.recv(&mut buf)? else {
                    break;
                };
                read = true;
                lanes[lane].offer(now(), &mut buf[..n]);
            }
            lanes[lane].deliver(now(), to);
        }
        let due = lanes.iter().filter_map(Lane::due).chain(wake_at).min();
        let wait = due.map_or(MAX_WAIT, |at| {
            Duration::from_nanos(at.as_nanos().saturating_sub(now().as_nanos())).min(MAX_WAIT)
        });
        wait_readable(&ends, wait);
    }
}
