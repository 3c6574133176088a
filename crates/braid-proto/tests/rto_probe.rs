//! What a probe sends on a connection that stopped answering, when no
//! other connection carries data: the stream itself, as TCP's
//! retransmission timeout does, so the probe that gets through delivers.

mod common;

use braid_proto::{PathState, SessionConfig};
use common::{Pair, MS};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// A receiver midway through the peer's stream whose return path went
/// dark long enough for its keep-alive probes to time out twice: its only
/// connection probes. Its answer, written then, is new data with nothing
/// lost to repair: the next probe carries it, so the first datagram
/// through delivers the answer, not a PING that must first be
/// acknowledged (a round trip, or many on a lossy path).
#[test]
fn a_probe_carries_new_data_when_nothing_is_lost() {
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    pair.client.write(&[7; 10_000]);
    pair.drive_until(Duration::from_secs(2), |p| p.received.len() == 10_000);
    assert_eq!(pair.received.len(), 10_000);
    pair.drop = Box::new(|to_server, _, _| !to_server);
    let dark = pair.now + Duration::from_secs(6);
    pair.drive_until(Duration::from_secs(30), |p| p.now >= dark);
    let probing = |p: &Pair| p.server().path_states()[0].1 == PathState::Probing;
    assert!(probing(&pair), "{:?}", pair.server().path_states());
    let answer = b"verdict: OK";
    assert_eq!(pair.server.as_mut().unwrap().write(answer), answer.len());
    // The return path is back; count what the server sends until the
    // answer is read.
    let sent = Rc::new(Cell::new(0));
    let n = sent.clone();
    pair.drop = Box::new(move |to_server, _, _| {
        if !to_server {
            n.set(n.get() + 1);
        }
        false
    });
    let written = pair.now;
    pair.drive_until(Duration::from_secs(60), |p| {
        p.received_by_client.len() == answer.len()
    });
    assert_eq!(pair.received_by_client, answer);
    assert_eq!(sent.get(), 1, "the first datagram through carried it");
    assert!(pair.now - written <= Duration::from_secs(1) + 20 * MS);
}

/// A sender's only connection goes dark both ways for six seconds, long
/// enough for two RTOs and then probes: each probe carries the oldest lost
/// segment (not a bare PING), and the transfer completes within a round
/// trip or so of the first probe that gets through.
#[test]
fn a_probe_carries_the_oldest_lost_segment() {
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    let data = [3; 30_000];
    pair.client.write(&data);
    // Through after the first flight's departure, dark from then on.
    let start = pair.now;
    let light = Rc::new(Cell::new(start + Duration::from_secs(1000)));
    let sizes = Rc::new(RefCell::new(Vec::new()));
    let (l, s, clock) = (light.clone(), sizes.clone(), Rc::new(Cell::new(start)));
    let c = clock.clone();
    pair.drop = Box::new(move |to_server, _, d| {
        let dark = c.get() > start + 5 * MS && c.get() < l.get();
        if to_server && dark {
            s.borrow_mut().push(d.len());
        }
        dark
    });
    let back = start + Duration::from_secs(6);
    while pair.now < back {
        clock.set(pair.now);
        assert!(pair.step());
    }
    assert_eq!(
        pair.client.path_states()[0].1,
        PathState::Probing,
        "two RTOs passed"
    );
    // The probes sent since the path started probing (after the first
    // RTO's retransmissions): one segment each.
    let probes: Vec<usize> = sizes.borrow().iter().rev().take(3).copied().collect();
    assert!(probes.iter().all(|&n| n > 1_000), "{:?}", sizes.borrow());
    light.set(back);
    clock.set(pair.now);
    let first_probe_through = back + Duration::from_secs(1);
    pair.drive_until(Duration::from_secs(60), |p| p.received.len() == data.len());
    assert_eq!(pair.received.len(), data.len());
    assert!(
        pair.now <= first_probe_through + 100 * MS,
        "{:?}",
        pair.now - start
    );
}
