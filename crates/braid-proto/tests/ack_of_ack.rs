//! A one-way receiver's ACKs stop repeating what the sender has heard: once
//! a round trip one of them elicits an ACK, and the ranges the acknowledged
//! one reported are not listed again (RFC 9000 §13.2.4).

mod common;

use braid_proto::SessionConfig;
use common::{Pair, MS};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// 20 MB one way at about 56 Mbit/s, every 100th data datagram lost: some
/// 145 holes, more than an ACK frame's 128 ranges, about one per round trip.
#[test]
fn a_receiver_that_only_acknowledges_forgets_what_the_sender_has_heard() {
    let mut pair = Pair::new(
        SessionConfig::insecure(),
        SessionConfig::insecure(),
        10 * MS,
    );
    let ack_sizes = Rc::new(RefCell::new(Vec::new()));
    let sizes = ack_sizes.clone();
    let mut sent = 0u64;
    pair.drop = Box::new(move |to_server, _, datagram| {
        if !to_server {
            sizes.borrow_mut().push(datagram.len());
            return false;
        }
        sent += 1;
        datagram.len() > 1000 && sent.is_multiple_of(100)
    });
    let data: Vec<u8> = (0..20_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut written = 0;
    while written < data.len() {
        let end = data.len().min(written + 7_000);
        written += pair.client.write(&data[written..end]);
        let until = pair.now + MS - braid_proto::Instant::ZERO;
        pair.drive_until(until, |_| false);
    }
    pair.drive_until(Duration::from_secs(300), |p| p.received.len() == data.len());
    assert!(
        pair.received == data,
        "{} bytes arrived",
        pair.received.len()
    );
    let sizes = ack_sizes.borrow();
    let lost = pair.client.stats().paths[0].1.lost_packets;
    assert!(lost > 128, "{lost} packets lost");
    // Reporting every hole would take 128 ranges (~290 bytes) per ACK.
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    let p99 = sorted[sorted.len() * 99 / 100];
    assert!(
        p99 < 100,
        "99th percentile ACK datagram {p99} bytes of {}",
        sizes.len()
    );
    let stats = pair.server().stats();
    assert!(stats.paths[0].1.packets_sent > 1000);
}
