//! Each connection's figures describe that connection: its losses are
//! the packets it lost, wherever they were sent again, and its own round
//! trip is its packets out and their ACKs back on it, even while copies of
//! those ACKs come back first on a faster connection.

mod common;

use braid_proto::{Instant, PathId, PathStats, SessionConfig};
use common::{Pair, MS};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// The client's way out on each connection: a bottleneck of `rate`
/// (bytes/s) with a queue of at most 100 ms, then the link's latency and
/// `extra`; every `lose_every`-th data packet on connection 1 is lost
/// (0: none). ACKs come back at the latency plus `extra`.
struct Links {
    now: Instant,
    rate: [f64; 2],
    extra: [Duration; 2],
    lose_every: u64,
    data_packets: u64,
    busy: [Instant; 2],
    /// The extra delay of the datagram the drop rule just let through.
    delay: Duration,
}

impl Links {
    /// Whether the datagram is lost; if not, its delay is set.
    fn drop(&mut self, to_server: bool, path: PathId, len: usize) -> bool {
        let i = usize::from(path.0).min(1);
        self.delay = self.extra[i];
        if !to_server {
            return false;
        }
        if i == 1 && self.lose_every > 0 && len > 1000 {
            self.data_packets += 1;
            if self.data_packets.is_multiple_of(self.lose_every) {
                return true;
            }
        }
        let start = self.busy[i].max(self.now);
        if start - self.now > 100 * MS {
            return true;
        }
        self.busy[i] = start + Duration::from_secs_f64(len as f64 / self.rate[i]);
        self.delay += self.busy[i] - self.now;
        false
    }
}

/// A two-connection pair, 20 ms round trip plus `extra` each way on
/// connection 1, 1 MB/s out on connection 0 and 250 kB/s on 1, that has
/// moved `bytes` from client to server; the client's figures of each,
/// then the server's.
fn transfer(bytes: usize, extra: Duration, lose_every: u64) -> [Vec<PathStats>; 2] {
    let c = SessionConfig {
        paths: 2,
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(c, SessionConfig::default(), 10 * MS);
    pair.jitter = Box::new(move |_, path, _| {
        if path == PathId(1) {
            extra
        } else {
            Duration::ZERO
        }
    });
    pair.drive_until(Duration::from_secs(2), |p| p.client.is_established());
    let links = Rc::new(RefCell::new(Links {
        now: pair.now,
        rate: [1e6, 250e3],
        extra: [Duration::ZERO, extra],
        lose_every,
        data_packets: 0,
        busy: [pair.now; 2],
        delay: Duration::ZERO,
    }));
    let l = links.clone();
    pair.drop = Box::new(move |to_server, path, d| l.borrow_mut().drop(to_server, path, d.len()));
    let l = links.clone();
    pair.jitter = Box::new(move |_, _, _| l.borrow().delay);
    let data = payload(bytes);
    let mut written = 0;
    let deadline = pair.now + Duration::from_secs(120);
    while pair.received.len() < data.len() && pair.now < deadline {
        written += pair.client.write(&data[written..]);
        links.borrow_mut().now = pair.now;
        if !pair.step() {
            break;
        }
    }
    pair.flush();
    assert!(pair.received == data, "every byte arrived, in order");
    [pair.client.stats(), pair.server().stats()].map(|s| {
        assert_eq!(s.paths.len(), 2);
        s.paths.into_iter().map(|(_, p)| p).collect()
    })
}

/// Connection 1 loses one data packet in 50, connection 0 none; the
/// scheduler sends lost data again on whichever connection has room, so
/// the resends are not where the losses are, but the losses are.
#[test]
fn losses_count_on_the_connection_that_lost_them() {
    let [paths, server] = transfer(3_000_000, 5 * MS, 50);
    let (clean, lossy) = (&paths[0], &paths[1]);
    assert_eq!(clean.lost_data_packets, 0, "{clean:?}");
    assert!(lossy.data_packets_sent > 200, "{lossy:?}");
    let dropped = lossy.data_packets_sent / 50;
    assert!(
        lossy.lost_data_packets + 2 >= dropped && lossy.lost_data_packets <= dropped + 2,
        "connection 1 lost {} of its {} data packets; the network dropped about {dropped}",
        lossy.lost_data_packets,
        lossy.data_packets_sent
    );
    // The resends stay counted where they went: together, every loss.
    let resent = clean.retransmitted + lossy.retransmitted;
    assert!(resent >= lossy.lost_data_packets, "{resent} resends");
    // The receiver counts what each connection brought it: everything,
    // resends included, and on the lossy one what it did not lose.
    let brought: u64 = server.iter().map(|p| p.stream_bytes_received).sum();
    assert!(brought >= 3_000_000, "{brought}");
    let lossy_bytes = server[1].stream_bytes_received;
    assert!(
        lossy_bytes > 0 && lossy_bytes <= lossy.bytes_sent - lossy.lost_bytes,
        "{lossy_bytes} bytes arrived on connection 1"
    );
}

/// Connection 1's round trip is 600 ms; its ACKs are also copied onto
/// connection 0 (20 ms), and those copies come back first: the
/// controller's samples (`rtt_*`) are about 310 ms, the connection's own
/// are 600 ms.
#[test]
fn a_slow_connection_s_own_round_trip_is_its_own() {
    let [paths, _] = transfer(3_000_000, 290 * MS, 0);
    let (fast, slow) = (&paths[0], &paths[1]);
    assert!(slow.data_packets_sent > 50, "{slow:?}");
    assert!(
        slow.rtt_min < 400 * MS,
        "copies came back on the fast connection: {:?}",
        slow.rtt_min
    );
    assert!(slow.own_rtt_samples > 10, "{slow:?}");
    assert!(
        slow.own_rtt_min >= 600 * MS && slow.own_rtt_max < 800 * MS,
        "own round trip {:?}..{:?}",
        slow.own_rtt_min,
        slow.own_rtt_max
    );
    assert!(slow.own_rtt_p95 >= slow.own_rtt_min.mul_f64(0.97));
    // Without copies the two are the same samples.
    assert_eq!(fast.own_rtt_samples, fast.rtt_samples);
    assert_eq!(
        (fast.own_rtt_min, fast.own_rtt_max),
        (fast.rtt_min, fast.rtt_max)
    );
}
