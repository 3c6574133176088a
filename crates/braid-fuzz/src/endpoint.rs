//! The endpoint target: admission driven by a script of openings from
//! many addresses (genuine ones, with and without their retry token, and
//! raw bytes), sessions confirming or ending, and time passing, against
//! small limits so that tokens, eviction and the code's guess limit all
//! come into play. Its invariants are the endpoint's promises.

use braid_proto::wire::Header;
use braid_proto::{
    Datagram, DatagramEvent, Endpoint, EndpointConfig, Instant, Keypair, PathId, Security, Session,
    SessionConfig,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

const LIMITS: EndpointConfig = EndpointConfig {
    max_sessions: 24,
    max_sessions_per_prefix: 6,
    max_sessions_per_key: 4,
    max_half_open: 8,
    max_half_open_per_prefix: 3,
    retry_threshold: 4,
    code_guess_limit: 3,
    memory_budget: 0,
    fresh_since: None,
};

/// The script: the first byte picks a key or a code listener; then each
/// step is an operation byte and an argument byte (and, for raw bytes, a
/// length and the bytes).
pub fn endpoint(data: &[u8]) {
    let Some((&mode, mut script)) = data.split_first() else {
        return;
    };
    let key = Keypair::generate([5; 32]);
    let (server, client) = if mode % 2 == 0 {
        (
            Security::server(key.clone()),
            Security::pinned(key.public()),
        )
    } else {
        (
            Security::code("7-amber-walrus"),
            Security::code("7-amber-walrus"),
        )
    };
    let cfg = |security| SessionConfig {
        security,
        ..SessionConfig::default()
    };
    let server_cfg = cfg(server);
    let limits = EndpointConfig {
        memory_budget: 6 * server_cfg.max_window,
        ..LIMITS
    };
    let mut ep: Endpoint<u64> = Endpoint::new(limits.clone(), [3; 32]);
    ep.listen(server_cfg).expect("valid");
    let mut now = Instant::ZERO + Duration::from_secs(1000);
    let mut sessions: BTreeMap<u64, Session> = BTreeMap::new();
    let mut next_id = 1u64;
    let mut buf = Vec::new();
    while let [op, arg, rest @ ..] = script {
        script = rest;
        let from = SocketAddr::from(([10, arg % 4, arg / 4 % 4, arg % 7], 4000));
        match op % 6 {
            // A genuine opening, echoing its token when asked (op 1).
            0 | 1 => {
                let id = next_id;
                next_id += 1;
                let Ok(mut c) = Session::connect(cfg(client.clone()), id, now, [*arg; 32]) else {
                    continue;
                };
                for _ in 0..2 {
                    let Some(t) = c.poll_transmit(now, 1, &mut buf) else {
                        break;
                    };
                    let d = buf[..t.size].to_vec();
                    match handle(&mut ep, &mut sessions, now, from, &d) {
                        Some(answer) if op % 6 == 1 => {
                            c.handle_datagram(
                                now,
                                Datagram::new(now, PathId(0), &mut answer.to_vec()),
                            );
                        }
                        _ => break,
                    }
                }
            }
            // Raw bytes, or a genuine header's session id with them.
            2 => {
                let len = usize::from(*arg).min(script.len());
                let (raw, rest) = script.split_at(len);
                script = rest;
                handle(&mut ep, &mut sessions, now, from, raw);
            }
            // A session confirms (as far as the endpoint is told).
            3 => {
                if let Some(&id) = sessions.keys().nth(usize::from(*arg)) {
                    ep.confirmed(id);
                }
            }
            // A session ends.
            4 => {
                if let Some(&id) = sessions.keys().nth(usize::from(*arg)) {
                    sessions.remove(&id);
                    ep.remove(id);
                }
            }
            _ => now += Duration::from_millis(u64::from(*arg) * 100),
        }
        while let Some(id) = ep.poll_evicted() {
            assert!(sessions.remove(&id).is_some(), "evicted an unknown session");
            ep.remove(id);
        }
        assert!(
            ep.half_open() <= limits.max_half_open,
            "half-open table past its bound"
        );
        assert!(
            ep.len() <= limits.max_sessions,
            "session table past its bound"
        );
        let stats = ep.stats();
        assert!(
            stats.code_unconfirmed <= limits.code_guess_limit,
            "more unconfirmed code answers than the guess limit"
        );
    }
}

/// Feeds one datagram; returns what the endpoint answered, if anything.
fn handle(
    ep: &mut Endpoint<u64>,
    sessions: &mut BTreeMap<u64, Session>,
    now: Instant,
    from: SocketAddr,
    d: &[u8],
) -> Option<Vec<u8>> {
    let id = Header::decode(d).map_or(0, |(h, _)| h.session_id);
    match ep.handle(now, from, d, |s| {
        sessions.insert(id, s);
        id
    })? {
        DatagramEvent::Respond(answer) => Some(answer),
        DatagramEvent::Accepted(_) => None,
        DatagramEvent::Known(id) => {
            let s = sessions
                .get_mut(&id)
                .expect("the endpoint knows only our sessions");
            s.handle_datagram(now, Datagram::new(now, PathId(0), &mut d.to_vec()));
            None
        }
    }
}
