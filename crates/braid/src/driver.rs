//! The task that drives one session: runs its timers, sends what it has to
//! send (in GSO batches where the socket allows), and tells the application
//! and the endpoints what changed. Input arrives through the endpoints'
//! receive loops, which feed the core and wake this task.

use crate::clock;
use crate::route::SessionTable;
use crate::session::Shared;
use crate::udp::{UdpIo, MAX_GSO_BYTES};
use braid_proto::{Ecn, Instant, PathId};
use std::net::SocketAddr;
use std::sync::Arc;

/// Datagrams gathered under one hold of the lock before sending them.
const MAX_BURST: usize = 64;
/// Batch buffers kept for reuse between bursts.
const SPARE_BUFFERS: usize = 8;

/// Consecutive datagrams for one connection, sent with one system call.
struct Batch {
    path: PathId,
    ecn: Ecn,
    socket: Arc<UdpIo>,
    remote: SocketAddr,
    data: Vec<u8>,
    segment: usize,
    count: usize,
    max_segments: usize,
    /// A shorter datagram ended the batch (GSO allows only the last to be short).
    sealed: bool,
}

impl Batch {
    /// Whether a datagram of `size` bytes may follow the batch's first
    /// `before` bytes.
    fn accepts(&self, path: PathId, ecn: Ecn, size: usize, before: usize) -> bool {
        self.path == path
            && self.ecn == ecn
            && !self.sealed
            && size <= self.segment
            && self.count < self.max_segments
            && before + size <= MAX_GSO_BYTES
    }

    fn io(&self) -> &UdpIo {
        &self.socket
    }
}

/// Runs until the session has closed or failed, then unregisters it.
pub(crate) async fn drive(shared: Arc<Shared>) {
    // Datagrams are written straight into the batch they leave in (or to
    // `scratch` first when they start one); a batch's buffer goes back to
    // `spare` once sent.
    let mut scratch = Vec::with_capacity(2048);
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut batches: Vec<Batch> = Vec::new();
    loop {
        let now = clock::now();
        let (deadline, sent, finished) = {
            let mut g = shared.lock();
            g.proto.handle_timeout(now);
            let mut datagrams = 0;
            while datagrams < MAX_BURST {
                // Most datagrams join the batch written last: write them there.
                let in_last = batches.last().is_some_and(|b| !b.sealed);
                let buf = match batches.last_mut() {
                    Some(b) if in_last => &mut b.data,
                    _ => {
                        scratch.clear();
                        &mut scratch
                    }
                };
                let start = buf.len();
                let Some(t) = g.proto.poll_transmit_append(now, buf) else {
                    break;
                };
                datagrams += 1;
                if in_last {
                    let b = batches.last_mut().expect("checked");
                    if !t.to_candidate && b.accepts(t.path, t.ecn, t.size, start) {
                        b.count += 1;
                        b.sealed = t.size < b.segment;
                        continue;
                    }
                    // Another connection's: move it out.
                    scratch.clear();
                    scratch.extend_from_slice(&b.data[start..]);
                    b.data.truncate(start);
                }
                // The connection's latest batch, even with others' after it:
                // connections take turns, and each keeps its own batch long.
                if let Some(b) = batches
                    .iter_mut()
                    .rev()
                    .find(|b| b.path == t.path && !t.to_candidate)
                {
                    if b.accepts(t.path, t.ecn, t.size, b.data.len()) {
                        b.data.extend_from_slice(&scratch);
                        b.count += 1;
                        b.sealed = t.size < b.segment;
                        continue;
                    }
                }
                // A connection the server has not heard on yet has no address: drop.
                let route = if t.to_candidate {
                    g.candidate
                        .as_ref()
                        .filter(|(p, _)| *p == t.path)
                        .map(|(_, r)| r)
                } else {
                    g.routes.get(&t.path)
                };
                let Some(route) = route else {
                    continue;
                };
                let mut data = spare.pop().unwrap_or_default();
                data.clear();
                data.reserve(MAX_GSO_BYTES + scratch.len());
                data.extend_from_slice(&scratch);
                batches.push(Batch {
                    path: t.path,
                    ecn: t.ecn,
                    socket: route.socket.clone(),
                    remote: route.remote,
                    data,
                    segment: t.size,
                    count: 1,
                    max_segments: route.socket.max_gso_segments().max(1),
                    // A probe of another address travels alone.
                    sealed: t.to_candidate,
                });
            }
            g.process_events();
            for sample in g.proto.drain_samples() {
                // No subscriber is fine.
                let _ = shared.samples.send(sample);
            }
            (g.proto.poll_timeout(), datagrams, g.proto.is_closed())
        };
        shared.changed.notify_waiters();

        for b in batches.drain(..) {
            let segment = (b.count > 1).then_some(b.segment);
            let sent = b.io().send(b.remote, b.ecn, &b.data, segment).await;
            // A refusal reported on the socket is an earlier datagram's
            // ICMP error (read from the error queue), not congestion.
            if sent.is_err_and(|e| e.kind() != std::io::ErrorKind::ConnectionRefused) {
                shared.lock().proto.handle_send_error(clock::now(), b.path);
            }
            if spare.len() < SPARE_BUFFERS {
                spare.push(b.data);
            }
        }
        if finished {
            break;
        }
        if sent == 0 {
            // Idle (a timer only): an idle session keeps no batch buffers.
            spare = Vec::new();
        }
        if sent == MAX_BURST {
            // More to send now; let other tasks run between bursts.
            tokio::task::yield_now().await;
            continue;
        }
        sleep_or_wake(&shared, deadline).await;
    }
    finish(&shared);
}

async fn sleep_or_wake(shared: &Shared, deadline: Option<Instant>) {
    match deadline {
        Some(at) => {
            tokio::select! {
                _ = shared.wake_driver.notified() => {}
                _ = tokio::time::sleep_until(clock::deadline(at)) => {}
            }
        }
        None => shared.wake_driver.notified().await,
    }
}

/// Marks the session done, wakes everyone and leaves the endpoints' tables.
fn finish(shared: &Arc<Shared>) {
    let tables: Vec<Arc<dyn SessionTable>> = {
        let mut g = shared.lock();
        g.done = true;
        g.process_events();
        g.routes.values().map(|r| r.table.clone()).collect()
    };
    for t in tables {
        t.unregister(shared.id);
    }
    shared.changed.notify_waiters();
}
