//! Path MTU discovery between two sealed sessions: only the peer's
//! authenticated ACKs of probes raise a connection's datagram size;
//! forged, tampered or truncated datagrams leave it where it was.

mod common;

use braid_proto::{PathId, SessionConfig};
use common::{Pair, MS};
use std::time::Duration;

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 11 + i / 307) as u8).collect()
}

fn cfg() -> SessionConfig {
    SessionConfig {
        max_datagram: Some(1472),
        // A controller that halves its window on loss.
        cc: braid_proto::cc::Algorithm::Cubic,
        ..SessionConfig::default()
    }
}

fn max_datagram(pair: &Pair) -> u16 {
    pair.client.stats().paths[0].1.max_datagram
}

/// A transfer over a route that drops datagrams above `mtu`; `forge`
/// injects datagrams towards the client as the transfer goes.
fn transfer(mtu: usize, mut forge: impl FnMut(&mut Pair)) -> Pair {
    let mut pair = Pair::new(cfg(), cfg(), 10 * MS);
    pair.drop = Box::new(move |_, _, d| d.len() > mtu);
    let up = payload(2_000_000);
    assert_eq!(pair.client.write(&up), up.len());
    pair.client.finish();
    let limit = pair.now + Duration::from_secs(60);
    while pair.now < limit && pair.received.len() < up.len() {
        forge(&mut pair);
        if !pair.step() {
            break;
        }
        assert!(usize::from(max_datagram(&pair)) <= mtu.max(1404 + 16));
    }
    assert_eq!(pair.received, up);
    pair
}

#[test]
fn authenticated_acks_of_probes_raise_the_size_to_what_the_route_carries() {
    let pair = transfer(1472, |_| {});
    assert_eq!(max_datagram(&pair), 1472);
    let pair = transfer(1450, |_| {});
    let found = max_datagram(&pair);
    assert!((1430..=1450).contains(&found), "{found}");
    // Probes of 1472 and more were lost, three per size: neither a loss
    // nor a window decrease, and nothing to retransmit.
    let stats = pair.client.stats().paths[0].1;
    assert!(stats.pmtu_probes > 3, "{stats:?}");
    assert_eq!(
        (
            stats.lost_packets,
            stats.loss_decreases,
            stats.retransmitted
        ),
        (0, 0, 0)
    );
}

#[test]
fn forged_and_malformed_datagrams_do_not_move_the_path_mtu() {
    // The route carries 1430 bytes. An attacker who sees the server's
    // datagrams sends the client altered copies (any of which, if taken,
    // could acknowledge a larger probe), truncated ones and padded ones.
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut n = 0u64;
    let pair = transfer(1430, |pair| {
        for (&(_, _), (to_server, _, d)) in pair.in_flight.iter() {
            if !*to_server && seen.len() < 64 {
                seen.push(d.clone());
            }
        }
        n += 1;
        if !n.is_multiple_of(7) || seen.is_empty() {
            return;
        }
        let mut d = seen[(n as usize / 7) % seen.len()].clone();
        match n % 3 {
            0 => {
                let i = 16 + (n as usize % (d.len() - 16));
                d[i] ^= 0x40;
            }
            1 => d.truncate(d.len() / 2),
            _ => d.resize(1472, 0),
        }
        let at = pair.now + MS;
        pair.seq += 1;
        pair.in_flight.insert((at, pair.seq), (false, PathId(0), d));
    });
    let found = max_datagram(&pair);
    assert!(found <= 1430, "{found}");
    assert!(pair.client.stats().forged_dropped > 0);
}
