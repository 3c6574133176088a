//! The task that drives one session: runs its timers, sends what it has to
//! send (the GSO batches the core hands it), and tells the application and
//! the endpoints what changed. Input arrives through the endpoints' receive
//! loops, which feed the core and wake this task.

use crate::clock;
use crate::route::{Route, SessionTable};
use crate::session::{Inner, Shared};
use braid_proto::{Instant, Transmit};
use std::net::SocketAddr;
use std::sync::Arc;

/// Datagrams taken from the core under one hold of the lock before sending them.
const MAX_BURST: usize = 64;
/// Batch buffers kept for reuse between bursts.
const SPARE_BUFFERS: usize = 8;

/// A batch taken from the core, with where it goes.
type Outgoing = (Transmit, Route, SocketAddr, Vec<u8>);

/// Runs until the session has closed or failed, then unregisters it.
pub(crate) async fn drive(shared: Arc<Shared>) {
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut batches = Vec::new();
    loop {
        let now = clock::now();
        let (deadline, sent, finished, trace) = {
            let mut g = shared.lock();
            g.proto.handle_timeout(now);
            let sent = take_burst(&mut g, now, &mut spare, &mut batches);
            g.process_events();
            for sample in g.proto.drain_samples() {
                // No subscriber is fine.
                let _ = shared.samples.send(sample);
            }
            let trace = g.take_trace();
            // A draining session sends nothing more: its end is not waited for.
            let finished = g.proto.is_closed() || g.proto.is_draining();
            (g.proto.poll_timeout(), sent, finished, trace)
        };
        shared.changed.notify_waiters();
        if let Some((qlog, events)) = trace {
            // Closed only by finish_qlog, which reports the writer's error.
            let _ = qlog.send(events).await;
        }
        for (t, route, remote, buf) in batches.drain(..) {
            let sent = route.send(remote, t.ecn, &buf, t.segment_size).await;
            // A refusal reported on the socket is an earlier datagram's
            // ICMP error (read from the error queue), not congestion.
            if sent.is_err_and(|e| !crate::udp_errors::is_icmp_report(&e)) {
                shared.lock().proto.handle_send_error(clock::now(), t.path);
            }
            spare.push(buf);
        }
        // An idle session (a timer only) keeps no batch buffers.
        spare.truncate(if sent == 0 { 0 } else { SPARE_BUFFERS });
        if finished {
            break;
        }
        if sent >= MAX_BURST {
            // More to send now; let other tasks run between bursts.
            tokio::task::yield_now().await;
            continue;
        }
        sleep_or_wake(&shared, deadline).await;
    }
    finish(&shared);
}

/// Takes up to [`MAX_BURST`] datagrams from the core, in the batches it
/// hands out, into `batches`; returns how many.
fn take_burst(
    g: &mut Inner,
    now: Instant,
    spare: &mut Vec<Vec<u8>>,
    batches: &mut Vec<Outgoing>,
) -> usize {
    let mut datagrams = 0;
    while datagrams < MAX_BURST {
        let mut buf = spare.pop().unwrap_or_default();
        let Some(t) = g.proto.poll_transmit(now, MAX_BURST - datagrams, &mut buf) else {
            spare.push(buf);
            break;
        };
        datagrams += t.segment_size.map_or(1, |s| t.size.div_ceil(s));
        match route(g, &t) {
            Some((route, remote)) => batches.push((t, route, remote, buf)),
            None => spare.push(buf),
        }
    }
    datagrams
}

/// Where `t` goes, as the core says (its connection's address or, for a
/// probe, the candidate's), from the connection's socket. A connection
/// the server has not heard on yet has neither.
fn route(g: &Inner, t: &Transmit) -> Option<(Route, SocketAddr)> {
    Some((g.routes.get(&t.path)?.clone(), t.to?))
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
