//! How a session ends on purpose when the network loses the news: the
//! closing side answers the peer's packets with its CLOSE for three
//! retransmission timeouts; the side told answers once and drains as long,
//! and the closing side that hears that answer ends at once.

mod common;

use braid_proto::{Datagram, Event, Instant, PathId, SessionConfig, SessionError};
use common::{Pair, MS};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn aborted(code: u64, reason: &str) -> SessionError {
    SessionError::PeerAborted {
        code,
        reason: reason.into(),
    }
}

/// A sealed pair, 20 ms round trip, with the server sending the client a
/// long stream: the client reads part of it before the test closes.
fn downloading() -> Pair {
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    pair.client.write(b"get");
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    let server = pair.server.as_mut().unwrap();
    server.write(&payload(400_000));
    pair.drive_until(Duration::from_secs(5), |p| {
        p.received_by_client.len() > 50_000
    });
    assert!(pair.received_by_client.len() > 50_000);
    pair
}

/// Datagrams from the client (`to_server`) or the server, counted and
/// dropped while the count is below `drops`.
fn count_and_drop(to_server: bool, drops: usize) -> (Rc<RefCell<Vec<usize>>>, common::DropRule) {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = seen.clone();
    let rule = Box::new(move |up: bool, _: PathId, d: &[u8]| {
        if up != to_server {
            return false;
        }
        let mut log = log.borrow_mut();
        log.push(d.len());
        log.len() <= drops
    });
    (seen, rule)
}

/// The client's three CLOSE copies are all lost (and its first answer):
/// the server's next packets, its data and probes, are answered, so it
/// learns the code and reason within a few round trips, not from its
/// silence limit many seconds later.
#[test]
fn a_peer_that_lost_every_close_learns_why_from_an_answer() {
    for drops in [3, 4] {
        let mut pair = downloading();
        pair.client.abort(7, "user pressed ctrl-c");
        let closed_at = pair.now;
        let (sent, rule) = count_and_drop(true, drops);
        pair.drop = rule;
        pair.drive_until(Duration::from_secs(30), |p| p.server().error().is_some());
        assert_eq!(
            pair.server().error(),
            Some(&aborted(7, "user pressed ctrl-c")),
            "{drops} lost"
        );
        let waited = pair.now - closed_at;
        assert!(waited < 500 * MS, "{drops} lost: told after {waited:?}");
        // Nothing but CLOSEs left the client: no data, no ACKs.
        let sent = sent.borrow();
        assert!(sent.len() > drops, "an answer went out");
        assert!(sent.iter().all(|&n| n < 100), "only CLOSEs: {sent:?}");
    }
}

/// The closing period is bounded: three retransmission timeouts, answers
/// ever further apart however much the peer sends, then nothing at all.
#[test]
fn closing_ends_after_three_timeouts_with_few_answers() {
    let mut pair = downloading();
    pair.client.abort(9, "bye");
    let closed_at = pair.now;
    // Every CLOSE is lost: the server keeps sending until its own limits.
    let (sent, rule) = count_and_drop(true, usize::MAX);
    pair.drop = rule;
    pair.flush();
    assert!(!pair.client.is_closed(), "closing, not closed");
    assert!(pair
        .client_events
        .contains(&Event::Failed(SessionError::LocallyAborted {
            code: 9,
            reason: "bye".into()
        })));
    pair.drive_until(Duration::from_secs(60), |p| p.client.is_closed());
    assert!(pair.client.is_closed());
    let lasted = pair.now - closed_at;
    // 3 RTOs of at least 200 ms each, of 1 s at most (a 20 ms RTT).
    assert!(
        lasted >= 600 * MS && lasted <= 3 * Duration::from_secs(1),
        "{lasted:?}"
    );
    let copies = sent.borrow().len();
    assert!((4..=3 + 12).contains(&copies), "{copies} CLOSEs");
    // The server's later packets find nobody: nothing more is sent.
    let before = sent.borrow().len();
    pair.drive_until(Duration::from_secs(60), |p| p.server().error().is_some());
    assert_eq!(sent.borrow().len(), before);
}

/// While closing, only an authentic, fresh packet of the peer's buys an
/// answer: forged datagrams (a genuine one with its payload altered) and a
/// replay of a genuine one get nothing.
#[test]
fn only_authentic_fresh_packets_are_answered() {
    let mut pair = downloading();
    // A genuine datagram on its way to the client, kept aside.
    let (&key, _) = pair
        .in_flight
        .iter()
        .find(|(_, (to_server, _, _))| !to_server)
        .expect("the server's data in flight");
    let (_, path, genuine) = pair.in_flight.remove(&key).unwrap();
    pair.in_flight.clear();
    pair.client.abort(7, "stop");
    let mut buf = Vec::new();
    let now = pair.now;
    let mut copies = 0;
    while pair.client.poll_transmit(now, 1, &mut buf).is_some() {
        copies += 1;
    }
    assert_eq!(copies, 3);
    let mut deliver = |pair: &mut Pair, mut d: Vec<u8>| {
        let at = pair.now;
        pair.client
            .handle_datagram(at, Datagram::new(at, path, &mut d));
        let mut n = 0;
        while pair.client.poll_transmit(at, 1, &mut buf).is_some() {
            n += 1;
        }
        n
    };
    for i in 0..200 {
        let mut forged = genuine.clone();
        let at = 20 + i % (forged.len() - 20);
        forged[at] ^= 1 + (i as u8 % 255);
        assert_eq!(deliver(&mut pair, forged), 0, "forgery {i} answered");
    }
    assert_eq!(deliver(&mut pair, genuine.clone()), 1, "the genuine packet");
    pair.now += Duration::from_secs(1) / 2;
    assert_eq!(deliver(&mut pair, genuine), 0, "its replay");
}

/// The side told drains: it sends one CLOSE in answer and nothing more
/// (not even ACKs of what was in flight), and ends after three
/// retransmission timeouts.
#[test]
fn the_side_told_answers_once_and_drains() {
    let mut pair = downloading();
    pair.client.abort(7, "stop");
    pair.drive_until(Duration::from_secs(5), |p| p.server().error().is_some());
    assert_eq!(pair.server().error(), Some(&aborted(7, "stop")));
    let told_at = pair.now;
    assert!(!pair.server().is_closed(), "draining");
    let (sent, rule) = count_and_drop(false, 0);
    pair.drop = rule;
    pair.drive_until(Duration::from_secs(60), |p| p.server().is_closed());
    assert!(pair.server().is_closed());
    // Its answer left as the CLOSE arrived; nothing after it.
    assert!(sent.borrow().is_empty(), "sent {:?}", sent.borrow());
    let lasted = pair.now - told_at;
    assert!(
        lasted >= 600 * MS && lasted <= 3 * Duration::from_secs(1),
        "{lasted:?}"
    );
}

/// The closing side whose CLOSE arrived hears the peer's answer and ends
/// a round trip later, not after three retransmission timeouts; the side
/// told still learns the code and reason.
#[test]
fn a_close_that_is_answered_ends_the_closing_period() {
    let mut pair = downloading();
    pair.client.abort(9, "done");
    let closed_at = pair.now;
    pair.drive_until(Duration::from_secs(60), |p| p.client.is_closed());
    assert!(pair.client.is_closed());
    let lasted = pair.now - closed_at;
    // A 20 ms round trip; three timeouts would be 600 ms at least.
    assert!(lasted <= 40 * MS, "closing lasted {lasted:?}");
    assert_eq!(pair.server().error(), Some(&aborted(9, "done")));
}

/// Both sides close at once: each keeps its own reason, neither answers
/// the other's CLOSE with another (no ping-pong), and both end.
#[test]
fn both_sides_closing_at_once_end_quietly() {
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    pair.client.write(b"hello");
    pair.drive_until(Duration::from_secs(2), |p| p.received == b"hello");
    let settled = pair.now + 100 * MS;
    pair.drive_until(Duration::from_secs(3), |p| p.now >= settled);
    assert!(pair.in_flight.is_empty());
    pair.client.abort(1, "client quits");
    pair.server.as_mut().unwrap().abort(2, "server quits");
    let count = Rc::new(RefCell::new(0));
    let c = count.clone();
    pair.drop = Box::new(move |_, _, _| {
        *c.borrow_mut() += 1;
        false
    });
    pair.drive_until(Duration::from_secs(60), |p| {
        p.client.is_closed() && p.server().is_closed()
    });
    assert!(pair.client.is_closed() && pair.server().is_closed());
    assert!(pair.now < Instant::ZERO + Duration::from_secs(10));
    assert!(matches!(
        pair.client.error(),
        Some(SessionError::LocallyAborted { code: 1, .. })
    ));
    assert!(matches!(
        pair.server().error(),
        Some(SessionError::LocallyAborted { code: 2, .. })
    ));
    // Three copies each, and no answer to the other's.
    assert_eq!(*count.borrow(), 6);
}

/// Closing with our data in flight: the peer's ACKs of it are answered
/// with the CLOSE, never with data, and the peer learns why.
#[test]
fn closing_with_data_in_flight_sends_only_closes() {
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    pair.client.write(&payload(2_000_000));
    pair.drive_until(Duration::from_secs(5), |p| p.received.len() > 100_000);
    assert!(pair.in_flight.len() > 10, "data in flight");
    pair.client.abort(5, "enough");
    let (sent, rule) = count_and_drop(true, 3);
    pair.drop = rule;
    pair.drive_until(Duration::from_secs(5), |p| p.server().error().is_some());
    assert_eq!(pair.server().error(), Some(&aborted(5, "enough")));
    assert!(
        sent.borrow().iter().all(|&n| n < 100),
        "{:?}",
        sent.borrow()
    );
}
