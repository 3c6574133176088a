//! Fuzz targets for braid's sans-IO core, as plain functions of a byte
//! string so that any harness can drive them: `cargo fuzz` (see `fuzz/`),
//! and the seeded smoke run in this crate's tests, which CI runs.
//!
//! Each target panics only on a real bug: the core panicking, spinning
//! (a timer it cannot serve), or, for the session pair, an honest
//! transfer that an attacker without the keys managed to disturb.

mod endpoint;
mod pair;
mod rendezvous;

use braid_proto::wire::{Frames, Header};
use braid_proto::{Datagram, Instant, Keypair, PathId, Security, Session, SessionConfig};

pub use endpoint::endpoint;
pub use pair::session_pair;
pub use rendezvous::rendezvous;

/// The wire decoder: a header and every frame after it.
pub fn decode(data: &[u8]) {
    if let Ok((_, payload)) = Header::decode(data) {
        for frame in Frames::new(payload) {
            if frame.is_err() {
                break;
            }
        }
    }
}

fn server_key() -> Keypair {
    Keypair::generate([5; 32])
}

/// The configurations a handshake target runs: pinned key, one-time code,
/// and unprotected, for a server and a client.
fn configs(mode: u8) -> (SessionConfig, SessionConfig) {
    let (server, client) = match mode % 3 {
        0 => (
            Security::server(server_key()),
            Security::pinned(server_key().public()),
        ),
        1 => (
            Security::code("7-amber-walrus"),
            Security::code("7-amber-walrus"),
        ),
        _ => (Security::insecure(), Security::insecure()),
    };
    let cfg = |security| SessionConfig {
        security,
        ..SessionConfig::default()
    };
    (cfg(server), cfg(client))
}

/// The handshake: a server fed an arbitrary first datagram (and then the
/// rest of the input as later ones), and a client fed arbitrary answers.
/// The first byte picks the protection mode.
pub fn handshake(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (server_cfg, client_cfg) = configs(mode);
    let now = Instant::ZERO;
    let datagrams: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
    let mut buf = Vec::new();
    if let Ok(mut server) = Session::accept(server_cfg, now, PathId(0), datagrams[0], [1; 32]) {
        for d in &datagrams[1..] {
            server.handle_datagram(now, Datagram::new(now, PathId(0), &mut d.to_vec()));
        }
        drain(&mut server, now, &mut buf);
    }
    let Ok(mut client) = Session::connect(client_cfg, 42, now, [2; 32]) else {
        return;
    };
    drain(&mut client, now, &mut buf);
    for d in &datagrams {
        client.handle_datagram(now, Datagram::new(now, PathId(0), &mut d.to_vec()));
        drain(&mut client, now, &mut buf);
    }
    // Whatever was fed, time still moves on to a verdict.
    let mut t = now;
    for _ in 0..10_000 {
        let Some(next) = client.poll_timeout() else {
            return;
        };
        assert!(next >= t, "a timer in the past");
        t = next;
        client.handle_timeout(t);
        drain(&mut client, t, &mut buf);
    }
    panic!("the client's timers never settle");
}

/// Sends everything a session has to send (at most a bounded amount).
fn drain(s: &mut Session, now: Instant, buf: &mut Vec<u8>) {
    for _ in 0..10_000 {
        buf.clear();
        if s.poll_transmit(now, 1, buf).is_none() {
            return;
        }
    }
    panic!("a session that never stops sending at one instant");
}
