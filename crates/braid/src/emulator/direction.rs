//! One direction of the emulator: its link, the datagrams in flight on it
//! and the task that sends them on when the link says they arrive.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use braid_link::{InFlight, Link, LinkState, Offer, IP_UDP_OVERHEAD};
use braid_proto::{wire, Ecn, Instant};
use tokio::sync::Notify;

use crate::udp::{UdpIo, MAX_GSO_BYTES};
use crate::udp_gather;

use super::clients::split_batch_mut;
use super::{DirectionStats, Shared, SEND_BATCH};

#[derive(Debug, Clone, Copy)]
pub(super) enum Dir {
    Forward,
    Reverse,
}

/// One direction: its link and the datagrams it has yet to deliver.
#[derive(Debug)]
pub(super) struct Direction {
    state: Mutex<DirectionState>,
    /// Wakes the delivery task when a datagram becomes the earliest.
    wake: Notify,
}

#[derive(Debug)]
pub(super) struct DirectionState {
    pub(super) link: Link,
    pending: InFlight<Pending>,
    sent: u64,
    dropped_in_flight: u64,
    dropped_overflow: u64,
    pub(super) send_errors: u64,
}

impl Direction {
    pub(super) fn new(link: Link) -> Direction {
        Direction {
            state: Mutex::new(DirectionState {
                link,
                pending: InFlight::default(),
                sent: 0,
                dropped_in_flight: 0,
                dropped_overflow: 0,
                send_errors: 0,
            }),
            wake: Notify::new(),
        }
    }

    /// A panic elsewhere leaves the state consistent (every update is a
    /// few plain assignments), so a poisoned lock is still usable.
    pub(super) fn lock(&self) -> MutexGuard<'_, DirectionState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn stats(&self) -> DirectionStats {
        let s = self.lock();
        DirectionStats {
            link: s.link.stats(),
            sent: s.sent,
            dropped_in_flight: s.dropped_in_flight,
            dropped_overflow: s.dropped_overflow,
            send_errors: s.send_errors,
        }
    }

    /// Offers the datagrams of one receive buffer (`stride` bytes each, the
    /// last may be shorter), received now from one sender, to the link,
    /// under one lock. Those the link delivers at once, with nothing held
    /// before them, are marked in place and added to `runs`, to go out
    /// straight from the receive buffers ([`send_runs`]): an unimpaired
    /// link costs no copy, allocation or queue. The rest wait in the queue
    /// for [`deliver`]. Sends from `via` to `to`.
    pub(super) fn offer_buffer(
        &self,
        shared: &Shared,
        received: Received<'_>,
        to: SocketAddr,
        via: &Arc<UdpIo>,
        runs: &mut Vec<Run>,
    ) {
        let Received {
            buf,
            offset,
            stride,
            ecn,
        } = received;
        let stride = if stride == 0 { buf.len() } else { stride };
        let mut earliest = false;
        let mut s = self.lock();
        // Read under the lock so that offers reach the link in time order.
        let now = shared.now();
        let mut start = offset;
        for datagram in split_batch_mut(buf, stride) {
            let (begin, end) = (start, start + datagram.len());
            start = end;
            let has_header = datagram.len() >= wire::HEADER_LEN;
            let level = match datagram.get(wire::MBECN_OFFSET) {
                Some(&b) if has_header => b,
                _ => 0,
            };
            let size = u32::try_from(datagram.len())
                .unwrap_or(u32::MAX)
                .saturating_add(IP_UDP_OVERHEAD);
            let Offer::Deliver {
                at,
                ecn,
                mbecn,
                duplicate_at,
                ..
            } = s.link.offer(now, size, ecn, level)
            else {
                continue;
            };
            if has_header {
                wire::mark_mbecn(datagram, mbecn);
            }
            let direct = at <= now && duplicate_at.is_none() && s.pending.next_at().is_none();
            if direct {
                s.sent += 1;
                match runs.last_mut() {
                    // Contiguous and the same codepoint: one GSO call
                    // (only a buffer's last datagram is short).
                    Some(r) if r.end == begin && r.ecn == ecn => r.end = end,
                    _ => runs.push(Run {
                        via: Arc::clone(via),
                        to,
                        ecn,
                        start: begin,
                        end,
                        stride,
                    }),
                }
                continue;
            }
            let datagram: Box<[u8]> = (&*datagram).into();
            if let Some(dup) = duplicate_at {
                earliest |= s.push(dup, to, via, ecn, datagram.clone());
            }
            earliest |= s.push(at, to, via, ecn, datagram);
        }
        drop(s);
        if earliest {
            self.wake.notify_one();
        }
    }
}

/// One receive buffer's datagrams, all from one sender.
pub(super) struct Received<'a> {
    /// One datagram, or several of `stride` bytes (the last may be shorter).
    pub(super) buf: &'a mut [u8],
    /// Where `buf` starts in the receiver's storage.
    pub(super) offset: usize,
    pub(super) stride: usize,
    pub(super) ecn: Ecn,
}

/// Datagrams sent on together, straight from the receiver's storage:
/// `start..end` of it.
#[derive(Debug)]
pub(super) struct Run {
    via: Arc<UdpIo>,
    to: SocketAddr,
    ecn: Ecn,
    start: usize,
    end: usize,
    stride: usize,
}

impl Run {
    /// Whether `next` may follow this run in one GSO call: same socket,
    /// destination, codepoint and stride, and this run whole segments.
    fn joins(&self, next: &Run) -> bool {
        Arc::ptr_eq(&self.via, &next.via)
            && self.to == next.to
            && self.ecn == next.ecn
            && self.stride == next.stride
            && (self.end - self.start).is_multiple_of(self.stride.max(1))
    }
}

/// Sends `runs` (taken from `storage`), several in one call where they
/// join; counts what the socket refused against `dir`.
pub(super) async fn send_runs(dir: &Direction, storage: &[u8], runs: &mut Vec<Run>) {
    let mut failed = 0u64;
    let mut rest = &runs[..];
    while let Some(first) = rest.first() {
        let stride = first.stride.max(1);
        let max_segments = first.via.max_gso_segments().min(MAX_GSO_BYTES / stride);
        let (mut n, mut bytes) = (1, first.end - first.start);
        while n < rest.len().min(udp_gather::MAX_PARTS) {
            let next = &rest[n];
            let len = next.end - next.start;
            if !rest[n - 1].joins(next) || (bytes + len).div_ceil(stride) > max_segments {
                break;
            }
            bytes += len;
            n += 1;
        }
        let group = &rest[..n];
        let part = |r: &Run| &storage[r.start..r.end];
        let gathered = if n > 1 {
            let parts: Vec<&[u8]> = group.iter().map(part).collect();
            udp_gather::send_gathered(&first.via, first.to, first.ecn, &parts, stride)
                .await
                .is_ok()
        } else {
            false
        };
        if !gathered {
            // One run, or a system without gathered sends: part by part.
            for r in group {
                let contents = part(r);
                let segment = (contents.len() > stride).then_some(stride);
                if r.via.send(r.to, r.ecn, contents, segment).await.is_err() {
                    failed += contents.len().div_ceil(stride).max(1) as u64;
                }
            }
        }
        rest = &rest[n..];
    }
    runs.clear();
    if failed > 0 {
        let mut s = dir.lock();
        s.sent = s.sent.saturating_sub(failed);
        s.send_errors += failed;
    }
}

impl DirectionState {
    /// Queues a datagram for `at`; true if it is now the earliest.
    fn push(
        &mut self,
        at: Instant,
        to: SocketAddr,
        via: &Arc<UdpIo>,
        ecn: Ecn,
        datagram: Box<[u8]>,
    ) -> bool {
        let len = datagram.len();
        let pending = Pending {
            to,
            via: Arc::clone(via),
            ecn,
            datagram,
        };
        self.pending.push(at, len, pending).unwrap_or_else(|_| {
            self.dropped_overflow += 1;
            false
        })
    }
}

/// A datagram waiting for its arrival time.
#[derive(Debug)]
struct Pending {
    to: SocketAddr,
    /// The socket it leaves from: the client's upstream socket forward,
    /// the listen socket in reverse.
    via: Arc<UdpIo>,
    ecn: Ecn,
    datagram: Box<[u8]>,
}

/// Waits shorter than this finish in a thread's `nanosleep`: tokio's timer
/// has 1 ms resolution, which would send a 50 Mbit/s link's packets in 1 ms
/// bursts instead of 0.23 ms apart, and the first flight's ACK spacing
/// (BBR's startup estimate) would measure the timer, not the link.
const FINE_WAIT: Duration = Duration::from_millis(2);

async fn wait_until(deadline: tokio::time::Instant) {
    let now = tokio::time::Instant::now();
    if deadline >= now + FINE_WAIT {
        tokio::time::sleep_until(deadline - Duration::from_millis(1)).await;
    }
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    if !left.is_zero() {
        // Cancelled by a wake-up, the thread just finishes its sleep.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}

/// Sends the datagrams of one direction at their arrival times.
pub(super) async fn deliver(shared: Arc<Shared>, dir: Dir) {
    let d = shared.direction(dir);
    let mut due = Vec::with_capacity(SEND_BATCH);
    let mut batch = Vec::new();
    loop {
        let next = {
            let mut s = d.lock();
            let now = shared.now();
            while due.len() < SEND_BATCH {
                let Some((_, p)) = s.pending.pop_due(now) else {
                    break;
                };
                // As in the simulator, a link that is down at the arrival
                // time loses what was in flight.
                if s.link.is_up() {
                    due.push(p);
                } else {
                    s.dropped_in_flight += 1;
                }
            }
            s.pending.next_at()
        };
        if !due.is_empty() {
            let (mut sent, mut failed) = (0, 0);
            let mut rest = &due[..];
            while !rest.is_empty() {
                // Datagrams due together for one destination leave in one
                // GSO call; a link with a rate makes them due one by one.
                let n = gso_run(rest, &mut batch);
                let first = &rest[0];
                let segment = (n > 1).then_some(first.datagram.len());
                let contents: &[u8] = if n > 1 { &batch } else { &first.datagram };
                match first.via.send(first.to, first.ecn, contents, segment).await {
                    Ok(()) => sent += n as u64,
                    Err(_) => failed += n as u64,
                }
                rest = &rest[n..];
            }
            due.clear();
            let mut s = d.lock();
            s.sent += sent;
            s.send_errors += failed;
            continue;
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = wait_until(shared.deadline(at)) => {}
                    _ = d.wake.notified() => {}
                }
            }
            None => d.wake.notified().await,
        }
    }
}

/// How many datagrams from the start of `due` can leave in one GSO call
/// (same socket, destination and ECN; all as long as the first but the
/// last, which may be shorter); with more than one, `batch` holds them.
fn gso_run(due: &[Pending], batch: &mut Vec<u8>) -> usize {
    let first = &due[0];
    let segment = first.datagram.len();
    let max = first.via.max_gso_segments().min(due.len());
    let mut n = 1;
    while n < max {
        let p = &due[n];
        let fits = Arc::ptr_eq(&p.via, &first.via)
            && p.to == first.to
            && p.ecn == first.ecn
            && p.datagram.len() <= segment
            && (n + 1) * segment <= MAX_GSO_BYTES;
        if !fits {
            break;
        }
        n += 1;
        if p.datagram.len() < segment {
            break; // Only the last may be shorter.
        }
    }
    if n > 1 {
        batch.clear();
        for p in &due[..n] {
            batch.extend_from_slice(&p.datagram);
        }
    }
    n
}

/// Applies scheduled state changes to both directions at their times.
pub(super) async fn apply_changes(shared: Arc<Shared>, changes: Vec<(Duration, LinkState)>) {
    for (at, state) in changes {
        tokio::time::sleep_until(shared.deadline(Instant::ZERO + at)).await;
        shared.set_state(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn datagrams_due_together_leave_in_gso_runs() {
        let via = Arc::new(UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap());
        let other = Arc::new(UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap());
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let p = |via: &Arc<UdpIo>, to, len: usize, fill: u8| Pending {
            to,
            via: via.clone(),
            ecn: Ecn::NotEct,
            datagram: vec![fill; len].into(),
        };
        let due = [
            p(&via, to, 100, 1),
            p(&via, to, 100, 2),
            p(&via, to, 60, 3), // shorter: ends the run
            p(&via, to, 100, 4),
            p(&other, to, 100, 5), // another socket
        ];
        let mut batch = Vec::new();
        if via.max_gso_segments() < 3 {
            assert_eq!(gso_run(&due, &mut batch), 1, "without GSO, one by one");
            return;
        }
        assert_eq!(gso_run(&due, &mut batch), 3);
        assert_eq!(batch.len(), 260);
        assert_eq!((batch[0], batch[100], batch[200]), (1, 2, 3));
        assert_eq!(gso_run(&due[3..], &mut batch), 1);
        assert_eq!(gso_run(&due[4..], &mut batch), 1);
    }
}
