//! Handshakes that meet loss, in both protection modes.

mod common;

use braid_proto::SessionConfig;
use common::{Pair, MS};
use std::time::Duration;

/// The server's answers are lost for 7 s, longer than a half-open server
/// session lives without hearing from its client: the client's repeated
/// openings keep it alive, and the session opens on the fourth attempt.
#[test]
fn repeated_openings_keep_a_half_open_server_alive() {
    for (client, server) in [
        (SessionConfig::default(), SessionConfig::default()),
        (SessionConfig::insecure(), SessionConfig::insecure()),
    ] {
        let mut pair = Pair::new(client, server, 10 * MS);
        let lost_until = braid_proto::Instant::ZERO + Duration::from_secs(7);
        let now = std::rc::Rc::new(std::cell::Cell::new(braid_proto::Instant::ZERO));
        let clock = now.clone();
        pair.drop = Box::new(move |to_server, _, _| !to_server && clock.get() < lost_until);
        assert_eq!(pair.client.write(b"after the loss"), 14);
        pair.client.finish();
        let end = braid_proto::Instant::ZERO + Duration::from_secs(30);
        while pair.received.len() < 14 && pair.now < end {
            now.set(pair.now);
            if !pair.step() {
                break;
            }
        }
        assert_eq!(pair.received, b"after the loss");
        assert!(
            pair.server().error().is_none(),
            "{:?}",
            pair.server().error()
        );
        assert!(pair.now > lost_until);
    }
}
