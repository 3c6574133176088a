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
    let mut admission = Admission::new(mode);
    while let [op, arg, rest @ ..] = script {
        script = rest;
        let from = SocketAddr::from(([10, arg % 4, arg / 4 % 4, arg % 7], 4000));
        match op % 6 {
            // A genuine opening, echoing its token when asked (op 1).
            0 | 1 => admission.open(from, *arg, op % 6 == 1),
            // Raw bytes, or a genuine header's session id with them.
            2 => {
                let len = usize::from(*arg).min(script.len());
                let (raw, rest) = script.split_at(len);
                script = rest;
                admission.handle(from, raw);
            }
            // A session confirms (as far as the endpoint is told).
            3 => {
                if let Some(&id) = admission.sessions.keys().nth(usize::from(*arg)) {
                    admission.ep.confirmed(id);
                }
            }
            // A session ends.
            4 => {
                if let Some(&id) = admission.sessions.keys().nth(usize::from(*arg)) {
                    admission.sessions.remove(&id);
                    admission.ep.remove(id);
                }
            }
            _ => admission.now += Duration::from_millis(u64::from(*arg) * 100),
        }
        admission.evict();
        admission.check_bounds();
    }
}

/// The listener's and its clients' protection: a key pair and the pinned
/// key for an even `mode`, a one-time code for an odd one.
fn securities(mode: u8) -> (Security, Security) {
    if mode.is_multiple_of(2) {
        let key = Keypair::generate([5; 32]);
        (
            Security::server(key.clone()),
            Security::pinned(key.public()),
        )
    } else {
        (
            Security::code("7-amber-walrus"),
            Security::code("7-amber-walrus"),
        )
    }
}

fn session_cfg(security: Security) -> SessionConfig {
    SessionConfig {
        security,
        ..SessionConfig::default()
    }
}

/// The endpoint under test, the sessions it admitted and the time.
struct Admission {
    ep: Endpoint<u64>,
    limits: EndpointConfig,
    /// What the clients the script opens are secured by.
    client: Security,
    sessions: BTreeMap<u64, Session>,
    now: Instant,
    next_id: u64,
    buf: Vec<u8>,
}

impl Admission {
    fn new(mode: u8) -> Admission {
        let (server, client) = securities(mode);
        let server_cfg = session_cfg(server);
        let limits = EndpointConfig {
            memory_budget: 6 * server_cfg.max_window,
            ..LIMITS
        };
        let mut ep: Endpoint<u64> = Endpoint::new(limits.clone(), [3; 32]);
        ep.listen(server_cfg).expect("valid");
        Admission {
            ep,
            limits,
            client,
            sessions: BTreeMap::new(),
            now: Instant::ZERO + Duration::from_secs(1000),
            next_id: 1,
            buf: Vec::new(),
        }
    }

    /// A genuine client opens from `from`; with `echo_token` it answers a
    /// retry with its token, as far as two datagrams.
    fn open(&mut self, from: SocketAddr, arg: u8, echo_token: bool) {
        let id = self.next_id;
        self.next_id += 1;
        let now = self.now;
        let Ok(mut c) = Session::connect(session_cfg(self.client.clone()), id, now, [arg; 32])
        else {
            return;
        };
        for _ in 0..2 {
            let Some(t) = c.poll_transmit(now, 1, &mut self.buf) else {
                break;
            };
            let d = self.buf[..t.size].to_vec();
            match self.handle(from, &d) {
                Some(answer) if echo_token => {
                    c.handle_datagram(now, Datagram::new(now, PathId(0), &mut answer.to_vec()));
                }
                _ => break,
            }
        }
    }

    /// Feeds one datagram; returns what the endpoint answered, if anything.
    fn handle(&mut self, from: SocketAddr, d: &[u8]) -> Option<Vec<u8>> {
        let now = self.now;
        let sessions = &mut self.sessions;
        let id = Header::decode(d).map_or(0, |(h, _)| h.session_id);
        match self.ep.handle(now, from, d, |s| {
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

    /// Drops the sessions the endpoint evicted, as their drivers do.
    fn evict(&mut self) {
        while let Some(id) = self.ep.poll_evicted() {
            assert!(
                self.sessions.remove(&id).is_some(),
                "evicted an unknown session"
            );
            self.ep.remove(id);
        }
    }

    /// The endpoint's promises: its tables and unconfirmed code answers
    /// stay within their limits.
    fn check_bounds(&self) {
        assert!(
            self.ep.half_open() <= self.limits.max_half_open,
            "half-open table past its bound"
        );
        assert!(
            self.ep.len() <= self.limits.max_sessions,
            "session table past its bound"
        );
        let stats = self.ep.stats();
        assert!(
            stats.code_unconfirmed <= self.limits.code_guess_limit,
            "more unconfirmed code answers than the guess limit"
        );
    }
}
