//! Short headers in the core: a side sends them only where its peer
//! offers them, the offer reaches a peer that only sends data, and after
//! a timeout a side names its session in full until it hears the peer.

mod common;

use braid_proto::wire::is_short;
use braid_proto::SessionConfig;
use common::{Pair, MS};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// Forms of the datagrams each way, in order: (to_server, short).
type Forms = Rc<RefCell<Vec<(bool, bool)>>>;

/// A sealed pair whose network records every datagram's form, and a
/// server that offers short headers (the client does if `client_offers`).
fn pair(client_offers: bool) -> (Pair, Forms) {
    pair_with(SessionConfig::default(), client_offers)
}

/// As [`pair`], both sides configured as `cfg`.
fn pair_with(cfg: SessionConfig, client_offers: bool) -> (Pair, Forms) {
    let mut pair = Pair::new(cfg.clone(), cfg, 10 * MS);
    if client_offers {
        pair.client.accept_short_headers_everywhere();
    }
    let forms: Forms = Rc::default();
    let f = forms.clone();
    pair.drop = Box::new(move |to_server, _, d| {
        f.borrow_mut().push((to_server, is_short(d[0])));
        false
    });
    pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
    pair.server
        .as_mut()
        .unwrap()
        .accept_short_headers_everywhere();
    (pair, forms)
}

fn count(forms: &[(bool, bool)], to_server: bool) -> (usize, usize) {
    let way = forms.iter().filter(|f| f.0 == to_server);
    let short = way.clone().filter(|f| f.1).count();
    (short, way.count() - short)
}

#[test]
fn each_side_sends_short_headers_only_where_the_peer_offers_them() {
    for client_offers in [false, true] {
        let (mut pair, forms) = pair(client_offers);
        let data = vec![5u8; 400_000];
        pair.client.write(&data);
        pair.drive_until(Duration::from_secs(10), |p| p.received.len() == data.len());
        assert_eq!(pair.received, data);
        let forms = forms.borrow();
        let (short_up, long_up) = count(&forms, true);
        let (short_down, long_down) = count(&forms, false);
        // The data goes short once the server's first ACK offers it: the
        // handshake and the first window (10 packets) are long.
        assert!(
            short_up > 200 && long_up < 16,
            "{short_up} short, {long_up} long"
        );
        if client_offers {
            // The client only sends data, yet its offer reaches the server.
            assert!(short_down > 20, "{short_down} short, {long_down} long");
        } else {
            assert_eq!(short_down, 0);
        }
    }
}

#[test]
fn after_a_timeout_a_side_names_its_session_until_it_hears_the_peer() {
    let (mut pair, forms) = pair(true);
    pair.client.write(&[1u8; 100_000]);
    pair.drive_until(Duration::from_secs(5), |p| p.received.len() == 100_000);
    // The way to the server goes dark (a NAT rebinding, as the server
    // sees it): the client's timeouts fire.
    let f = forms.clone();
    let dark_until = pair.now + Duration::from_secs(3);
    let clock = Rc::new(RefCell::new(pair.now));
    let c = clock.clone();
    pair.drop = Box::new(move |to_server, _, d| {
        f.borrow_mut().push((to_server, is_short(d[0])));
        to_server && *c.borrow() < dark_until
    });
    let start = forms.borrow().len();
    pair.client.write(&[2u8; 100_000]);
    while pair.received.len() < 200_000 && pair.now < dark_until + Duration::from_secs(30) {
        *clock.borrow_mut() = pair.now;
        if !pair.step() {
            break;
        }
    }
    assert_eq!(pair.received.len(), 200_000);
    let forms = forms.borrow();
    let up: Vec<bool> = forms[start..].iter().filter(|f| f.0).map(|f| f.1).collect();
    // Short while the client has no reason to doubt its address; long
    // from the timeout until the server answers; short again after.
    let first_long = up.iter().position(|&s| !s).expect("a long header");
    assert!(first_long > 0, "short before the timeout: {up:?}");
    let back = up[first_long..]
        .iter()
        .position(|&s| s)
        .map(|i| first_long + i)
        .expect("short again once the server answers");
    assert!(back - first_long >= 2, "the probes were long: {up:?}");
    assert!(up[back..].iter().filter(|&&s| s).count() > 10);
}

/// A side that closes hears the peer's answer to its CLOSE in a short
/// header and ends a round trip later, as with long ones, not after three
/// retransmission timeouts (a `braid send` that took 250 ms to exit).
#[test]
fn a_close_answered_in_a_short_header_ends_the_closing_period() {
    let (mut pair, forms) = pair(true);
    pair.client.write(&[1u8; 100_000]);
    pair.drive_until(Duration::from_secs(5), |p| p.received.len() == 100_000);
    let settled = pair.now + 100 * MS;
    pair.drive_until(Duration::from_secs(6), |p| p.now >= settled);
    let start = forms.borrow().len();
    pair.client.abort(9, "done");
    let closed_at = pair.now;
    pair.drive_until(Duration::from_secs(60), |p| p.client.is_closed());
    assert!(pair.client.is_closed());
    let answer_was_short = forms.borrow()[start..]
        .iter()
        .any(|&(up, short)| !up && short);
    assert!(answer_was_short, "{:?}", &forms.borrow()[start..]);
    let lasted = pair.now - closed_at;
    assert!(lasted <= 40 * MS, "closing lasted {lasted:?}");
}

#[test]
fn the_trace_records_each_datagrams_header_form() {
    use braid_proto::trace::{EventKind, TraceEvent};
    let traced = SessionConfig {
        trace: true,
        ..SessionConfig::default()
    };
    let (mut pair, forms) = pair_with(traced, true);
    let data = vec![3u8; 200_000];
    pair.client.write(&data);
    pair.drive_until(Duration::from_secs(10), |p| p.received.len() == data.len());
    let (mut sent, mut received) = (Vec::<TraceEvent>::new(), Vec::<TraceEvent>::new());
    pair.client.drain_trace(&mut sent);
    pair.server.as_mut().unwrap().drain_trace(&mut received);
    // The header form of each datagram sent (or received) in order.
    let forms_of = |events: &[TraceEvent], sending: bool| -> Vec<bool> {
        let form = |e: &TraceEvent| match e.kind {
            EventKind::PacketSent { short, .. } if sending => Some(short),
            EventKind::PacketReceived { short, .. } if !sending => Some(short),
            _ => None,
        };
        events.iter().filter_map(form).collect()
    };
    let (sent, received) = (forms_of(&sent, true), forms_of(&received, false));
    // What the client logged as sent is what crossed the wire, datagram
    // for datagram, and the server logged the same on arrival (nothing is
    // lost; it logs only what it could open, from its first one on).
    let on_wire: Vec<bool> = forms.borrow().iter().filter(|f| f.0).map(|f| f.1).collect();
    assert_eq!(sent, on_wire);
    assert!(sent.contains(&false) && sent.iter().filter(|&&s| s).count() > 100);
    assert_eq!(received[..], sent[sent.len() - received.len()..]);
}
