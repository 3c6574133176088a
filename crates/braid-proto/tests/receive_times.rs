//! A receiver that reads the first flight in one batch (late, or from a
//! link that delivers in bursts) still tells the sender how the flight
//! arrived: the ACK carries each packet's receive time, so BBR's start from
//! the first flight's ACK train holds.

mod common;

use braid_proto::cc::Algorithm;
use braid_proto::{Datagram, Ecn, PathId, SessionConfig};
use common::{Pair, MS};
use std::time::Duration;

/// 50 Mbit/s: one 1450-byte datagram every 232 µs.
const SPACING: Duration = Duration::from_micros(232);
const RATE_BYTES: f64 = 50e6 / 8.0;

/// Sends the client's first flight over a 50 ms link and hands it to the
/// server in one batch, read 3 ms after the first packet arrived. With
/// `stamped`, each datagram carries its receive time (as a kernel stamp
/// gives it), `SPACING` apart. Returns the client's pacing rate (bytes/s)
/// once the server's first ACK of the data is in.
fn pacing_after_a_batch_read(stamped: bool) -> f64 {
    let mut cfg = SessionConfig::insecure();
    cfg.cc = Algorithm::Bbr;
    let mut pair = Pair::new(cfg, SessionConfig::insecure(), 50 * MS);
    pair.client.write(&vec![1u8; 4 << 20]);
    pair.drive_until(Duration::from_secs(2), |p| {
        p.client.stats().paths[0].1.data_packets_sent >= 10
    });
    let flight: Vec<_> = std::mem::take(&mut pair.in_flight)
        .into_iter()
        .filter(|(_, (to_server, _, _))| *to_server)
        .collect();
    assert!(flight.len() >= 10, "the first flight left at once");
    let arrived = flight[0].0 .0;
    pair.now = arrived + 3 * MS;
    let server = pair.server.as_mut().expect("handshake done");
    for (i, (_, (_, path, mut datagram))) in flight.into_iter().enumerate() {
        let at = if stamped {
            arrived + SPACING * i as u32
        } else {
            pair.now
        };
        let datagram = Datagram {
            path,
            ecn: Ecn::NotEct,
            received_at: at,
            bytes: &mut datagram,
        };
        server.handle_datagram(pair.now, datagram);
    }
    let acked = |p: &Pair| p.client.stats().paths[0].1.stream_bytes_acked > 0;
    pair.drive_until(Duration::from_secs(3), acked);
    assert!(acked(&pair), "the batch was acknowledged");
    let (id, path) = &pair.client.stats().paths[0];
    assert_eq!(*id, PathId(0));
    path.pacing_rate.expect("BBR paces")
}

#[test]
fn a_batch_read_still_gives_the_first_flight_s_spacing() {
    // The ACK dates every packet: the train shows the spacing (its
    // datagrams are a little under 1450 bytes).
    let stamped = pacing_after_a_batch_read(true);
    assert!(stamped >= 0.9 * RATE_BYTES, "paced at {stamped} B/s");
    // One reading for the whole batch says nothing of the link: STARTUP
    // starts from the initial window instead.
    let unstamped = pacing_after_a_batch_read(false);
    assert!(unstamped < RATE_BYTES / 4.0, "paced at {unstamped} B/s");
}
