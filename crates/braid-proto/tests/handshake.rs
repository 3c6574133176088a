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

/// A client that pinned another key learns why from the server's refusal,
/// which, in clear, is only reported once the handshake timed out.
#[test]
fn a_wrong_pinned_key_is_named_after_the_timeout() {
    use braid_proto::{Keypair, Security, SessionError};
    let client = SessionConfig {
        security: Security::pinned(Keypair::generate([8; 32]).public()),
        handshake_timeout: Duration::from_secs(2),
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(client, SessionConfig::default(), 10 * MS);
    pair.drive_until(Duration::from_secs(10), |p| p.client.error().is_some());
    match pair.client.error() {
        Some(SessionError::UnauthenticatedRefusal { said, .. }) => {
            assert!(said.contains("another key"), "{said}")
        }
        e => panic!("{e:?}"),
    }
    // The server's side is a refusal: it only says why, and is over.
    assert!(pair.server().error().is_some());
}

/// With a wrong one-time code the server answers, but its answer cannot
/// authenticate: the client says so rather than "no answer".
#[test]
fn a_wrong_code_is_reported_as_an_unauthenticated_answer() {
    use braid_proto::{Security, SessionError};
    let with = |code: &str| SessionConfig {
        security: Security::code(code),
        handshake_timeout: Duration::from_secs(2),
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(with("4-lemon-drop"), with("4-lemon-crop"), 10 * MS);
    pair.drive_until(Duration::from_secs(10), |p| p.client.error().is_some());
    assert_eq!(
        pair.client.error(),
        Some(&SessionError::HandshakeUnauthenticated(
            Duration::from_secs(2)
        ))
    );
    assert!(pair.client.stats().forged_dropped >= 1);
}
