//! Admission against an attacker, in virtual time: the sans-IO endpoint
//! the runtime runs, fed the openings a guesser or a flood would send.

use braid_proto::{
    CloseCode, Datagram, DatagramEvent, Endpoint, EndpointConfig, Freshness, Instant, Keypair,
    PathId, Security, Session, SessionConfig, SessionError, CODE_GUESS_LIMIT,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// The endpoint and the server sessions it accepted, by id.
struct Server {
    ep: Endpoint<u64>,
    sessions: HashMap<u64, Session>,
    now: Instant,
}

/// What one opening got.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Session(u64),
    Answer(Vec<u8>),
    Nothing,
}

impl Server {
    fn new(cfg: SessionConfig, limits: EndpointConfig) -> Server {
        let mut ep = Endpoint::new(limits, [7; 32]);
        ep.listen(cfg).unwrap();
        Server {
            ep,
            sessions: HashMap::new(),
            now: Instant::ZERO + Duration::from_secs(100),
        }
    }

    fn handle(&mut self, from: SocketAddr, datagram: &[u8]) -> Got {
        let sessions = &mut self.sessions;
        let id = braid_proto::wire::Header::decode(datagram).map_or(0, |(h, _)| h.session_id);
        match self.ep.handle(self.now, from, datagram, |s| {
            sessions.insert(id, s);
            id
        }) {
            Some(DatagramEvent::Accepted(id)) => Got::Session(id),
            Some(DatagramEvent::Known(id)) => {
                let s = self.sessions.get_mut(&id).unwrap();
                s.handle_datagram(
                    self.now,
                    Datagram::new(self.now, PathId(0), &mut datagram.to_vec()),
                );
                Got::Session(id)
            }
            Some(DatagramEvent::Respond(d)) => Got::Answer(d),
            None => Got::Nothing,
        }
    }

    /// Ends a session, as its driver does when it closes or fails.
    fn end(&mut self, id: u64) {
        self.sessions.remove(&id);
        self.ep.remove(id);
    }
}

fn code(c: &str) -> SessionConfig {
    SessionConfig {
        security: Security::code(c),
        ..SessionConfig::default()
    }
}

fn addr(net: u8, host: u8) -> SocketAddr {
    SocketAddr::from(([10, 1, net, host], 4000))
}

/// A client's handshake with the endpoint, as a real client does it
/// (echoing a retry token when asked), until the endpoint gives it a
/// session or nothing; then, if `confirm`, until the server saw it
/// confirm. Returns the server session's id.
fn open(server: &mut Server, client: &mut Session, from: SocketAddr, confirm: bool) -> Option<u64> {
    let mut buf = Vec::new();
    for _ in 0..4 {
        client.handle_timeout(server.now);
        let t = client.poll_transmit(server.now, 1, &mut buf)?;
        match server.handle(from, &buf[..t.size]) {
            Got::Answer(d) => {
                client.handle_datagram(
                    server.now,
                    Datagram::new(server.now, PathId(0), &mut d.to_vec()),
                );
            }
            Got::Nothing => return None,
            Got::Session(id) => {
                if !confirm {
                    return Some(id);
                }
                for _ in 0..8 {
                    let s = server.sessions.get_mut(&id)?;
                    while let Some(t) = s.poll_transmit(server.now, 1, &mut buf) {
                        client.handle_datagram(
                            server.now,
                            Datagram::new(server.now, PathId(0), &mut buf[..t.size].to_vec()),
                        );
                    }
                    while let Some(t) = client.poll_transmit(server.now, 1, &mut buf) {
                        server.handle(from, &buf[..t.size]);
                    }
                    if server.sessions[&id].is_peer_confirmed() {
                        server.ep.confirmed(id);
                        return Some(id);
                    }
                }
                return None;
            }
        }
    }
    None
}

/// Where an opening's SPAKE2 message starts.
fn pake_offset(datagram: &[u8]) -> usize {
    use braid_proto::wire::{Frame, Frames, HEADER_LEN};
    match Frames::new(&datagram[HEADER_LEN..]).next() {
        Some(Ok(Frame::ClientHello { pake, .. })) => {
            pake.as_ptr() as usize - datagram.as_ptr() as usize
        }
        f => panic!("not an opening: {f:?}"),
    }
}

/// A server's and a client's configuration for a pinned key.
fn pinned_key() -> (SessionConfig, SessionConfig) {
    let server_key = Keypair::generate([3; 32]);
    let cfg = |security| SessionConfig {
        security,
        ..SessionConfig::default()
    };
    (
        cfg(Security::server(server_key.clone())),
        cfg(Security::pinned(server_key.public())),
    )
}

/// A client whose seed, and so whose key, is its id's own.
fn client(cfg: SessionConfig, id: u64) -> Session {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&id.to_le_bytes());
    Session::connect(cfg, id, Instant::ZERO + Duration::from_secs(100), seed).unwrap()
}

/// 100 guessers open code handshakes at once, each from an address of its
/// own that receives (so each echoes its retry token): the endpoint
/// answers exactly as many as the guess limit, counting each when it
/// answers, and none more, the right code included, until those end.
#[test]
fn parallel_code_handshakes_get_one_answer_per_allowed_guess() {
    let mut server = Server::new(code("5-quiet-harbor"), EndpointConfig::default());
    let mut answered = Vec::new();
    for i in 0..100u64 {
        let mut guesser = client(code(&format!("{i}-wrong-guess")), 1000 + i);
        if let Some(id) = open(&mut server, &mut guesser, addr(i as u8, 1), false) {
            answered.push(id);
        }
    }
    assert_eq!(answered.len() as u32, CODE_GUESS_LIMIT);
    assert_eq!(server.ep.stats().code_answers, CODE_GUESS_LIMIT);
    let mut right = client(code("5-quiet-harbor"), 7);
    assert_eq!(open(&mut server, &mut right, addr(200, 1), true), None);
    // The guesses' sessions end unconfirmed: the code is spent.
    assert!(
        !server.ep.is_code_spent(),
        "answers in flight may still confirm"
    );
    for id in answered {
        server.end(id);
    }
    assert!(server.ep.is_code_spent());
    assert_eq!(server.ep.failed_guesses(), CODE_GUESS_LIMIT);
}

/// Wrong codes one after the other, then the right one: within the limit
/// the right one gets in; at the limit nothing does.
#[test]
fn sequential_wrong_codes_use_up_the_code() {
    for wrong in [CODE_GUESS_LIMIT - 1, CODE_GUESS_LIMIT] {
        let mut server = Server::new(code("5-quiet-harbor"), EndpointConfig::default());
        for i in 0..u64::from(wrong) {
            let mut guesser = client(code("5-quiet-harbour"), 100 + i);
            let id = open(&mut server, &mut guesser, addr(1, i as u8), true);
            assert_eq!(id, None, "a wrong code confirmed");
            server.end(100 + i);
        }
        let mut right = client(code("5-quiet-harbor"), 7);
        let got = open(&mut server, &mut right, addr(2, 1), true);
        assert_eq!(
            got.is_some(),
            wrong < CODE_GUESS_LIMIT,
            "{wrong} wrong guesses"
        );
        assert_eq!(server.ep.is_code_spent(), wrong == CODE_GUESS_LIMIT);
    }
}

/// A clear CLOSE of `code` with `reason` in session `session_id`'s long
/// header, as anyone who saw one of its datagrams could send.
fn clear_close(session_id: u64, code: CloseCode, reason: &[u8]) -> Vec<u8> {
    use braid_proto::wire::{clear_datagram, Frame};
    let close = Frame::Close {
        code: code.value(),
        reason,
    };
    clear_datagram(session_id, PathId(0), 9, &[close])
}

/// Ends the server sessions that failed, as their drivers do.
fn end_failed(server: &mut Server) {
    let failed: Vec<u64> = server
        .sessions
        .iter()
        .filter(|(_, s)| s.error().is_some())
        .map(|(&id, _)| id)
        .collect();
    for id in failed {
        server.end(id);
    }
}

/// A guesser whose code is wrong finds out from the answer and tells the
/// server at once, with the secret its opening committed to: the wrong
/// guess counts a round trip after the answer, not when the half-open
/// session expires. Every guess is known the moment it fails, so the
/// code is spent at the limit's last one without any time passing.
#[test]
fn a_wrong_code_is_a_failed_guess_within_a_round_trip() {
    let mut server = Server::new(code("5-quiet-harbor"), EndpointConfig::default());
    let start = server.now;
    for i in 0..u64::from(CODE_GUESS_LIMIT) {
        let mut guesser = client(code("5-quiet-harbour"), 100 + i);
        assert_eq!(
            open(&mut server, &mut guesser, addr(1, i as u8), true),
            None
        );
        assert_eq!(guesser.error(), Some(&SessionError::CodeRejected));
        let failed: Vec<_> = server.sessions.values().filter_map(|s| s.error()).collect();
        assert!(
            matches!(failed[..], [SessionError::PeerAborted { code, .. }] if *code == CloseCode::GaveUp.value()),
            "{failed:?}"
        );
        end_failed(&mut server);
        assert_eq!(server.ep.failed_guesses(), i as u32 + 1);
    }
    assert_eq!(server.now, start, "no time passed");
    assert!(server.ep.is_code_spent());
}

/// Whoever sees a code opening (an observer on the path) sees its
/// commitment and the session id, not the secret: a CLOSE that claims
/// the client gave up, with the commitment, another secret or nothing,
/// ends nothing, and the real client still gets in.
#[test]
fn a_forged_give_up_ends_no_handshake() {
    let mut server = Server::new(code("5-quiet-harbor"), EndpointConfig::default());
    let mut right = client(code("5-quiet-harbor"), 7);
    let id = open(&mut server, &mut right, addr(2, 1), false).expect("answered");
    let forged_secret = "00".repeat(32);
    for reason in [&b""[..], &[0u8; 32][..], forged_secret.as_bytes()] {
        let forged = clear_close(id, CloseCode::GaveUp, reason);
        server.handle(addr(9, 9), &forged);
        server.handle(addr(2, 1), &forged);
    }
    assert!(server.sessions[&id].error().is_none(), "a forgery ended it");
    server.end(id);
    let mut again = client(code("5-quiet-harbor"), 8);
    assert!(open(&mut server, &mut again, addr(2, 2), true).is_some());
    assert_eq!(server.ep.failed_guesses(), 1, "the ended one, unconfirmed");
}

/// Openings that are not guesses cost no guess: ones from forged sources
/// (they never echo the token), and ones whose PAKE message is junk (the
/// server cannot answer them). A thousand of them leave the code intact.
#[test]
fn junk_openings_do_not_spend_the_code() {
    let mut server = Server::new(code("5-quiet-harbor"), EndpointConfig::default());
    for i in 0..1000u64 {
        let mut c = client(code("5-quiet-harbor"), 10_000 + i);
        let mut buf = Vec::new();
        let t = c.poll_transmit(server.now, 1, &mut buf).unwrap();
        // Never echoes the token: it cannot receive at the forged source.
        let got = server.handle(addr((i % 200) as u8, 9), &buf[..t.size]);
        assert!(matches!(got, Got::Answer(_)), "{got:?}");
    }
    for i in 0..200u64 {
        let mut c = client(code("5-quiet-harbor"), 20_000 + i);
        let from = addr(i as u8, 10);
        let mut buf = Vec::new();
        let t = c.poll_transmit(server.now, 1, &mut buf).unwrap();
        let got = server.handle(from, &buf[..t.size]);
        let Got::Answer(retry) = got else {
            panic!("no retry: {got:?} at {i}")
        };
        c.handle_datagram(
            server.now,
            Datagram::new(server.now, PathId(0), &mut retry.to_vec()),
        );
        let t = c.poll_transmit(server.now, 1, &mut buf).unwrap();
        let mut junk = buf[..t.size].to_vec();
        // Spoil the SPAKE2 message's first byte (which side sent it), so
        // the server cannot answer it.
        let at = pake_offset(&junk);
        junk[at] ^= 0xff;
        server.handle(from, &junk);
    }
    assert_eq!(server.ep.stats().code_answers, 0);
    assert!(!server.ep.is_code_spent());
    let mut right = client(code("5-quiet-harbor"), 7);
    assert!(open(&mut server, &mut right, addr(250, 1), true).is_some());
}

/// 600 handshakes that never confirm, from 38 addresses of one block and
/// from 20 others, all echoing their tokens (the attacker receives at its
/// addresses): the table stays bounded, and a real client that arrives
/// in the middle gets a session at its first token.
#[test]
fn a_half_open_flood_does_not_lock_out_a_real_client() {
    let (server_cfg, client_cfg) = pinned_key();
    let limits = EndpointConfig::default();
    let mut server = Server::new(server_cfg, limits.clone());
    let mut flood = 0;
    for i in 0..600u64 {
        let from = if i % 3 == 0 {
            addr(100 + (i % 20) as u8, 1)
        } else {
            addr(7, (i % 38) as u8)
        };
        let mut attacker = client(client_cfg.clone(), 50_000 + i);
        flood += u32::from(open(&mut server, &mut attacker, from, false).is_some());
        assert!(server.ep.half_open() <= limits.max_half_open);
        server.now += Duration::from_millis(5);
        if i == 550 {
            let mut real = client(client_cfg.clone(), 9);
            let id = open(&mut server, &mut real, addr(7, 200), true);
            assert_eq!(id, Some(9), "the real client was locked out");
        }
    }
    assert_eq!(
        flood, 600,
        "each flood opening got a session, pushing out older ones"
    );
    assert!(server.ep.stats().evicted > 0);
}

/// Server sessions draw their initial receive window from the memory
/// budget; past it an opening is told "busy", and a session that ends
/// gives its share back.
#[test]
fn the_memory_budget_bounds_sessions_by_what_they_hold() {
    let (server_cfg, client_cfg) = pinned_key();
    let limits = EndpointConfig {
        memory_budget: 2 * server_cfg.recv_window,
        ..EndpointConfig::default()
    };
    let mut server = Server::new(server_cfg, limits);
    let mut c1 = client(client_cfg.clone(), 1);
    let mut c2 = client(client_cfg.clone(), 2);
    let mut c3 = client(client_cfg.clone(), 3);
    assert!(open(&mut server, &mut c1, addr(1, 1), true).is_some());
    assert!(open(&mut server, &mut c2, addr(2, 1), true).is_some());
    assert_eq!(open(&mut server, &mut c3, addr(3, 1), true), None);
    assert!(server.ep.stats().busy > 0);
    server.end(1);
    let mut c4 = client(client_cfg, 4);
    assert!(open(&mut server, &mut c4, addr(3, 1), true).is_some());
}

/// A key-mode client's first datagram.
fn opening_of(client: &mut Session, now: Instant) -> Vec<u8> {
    let mut buf = Vec::new();
    let t = client.poll_transmit(now, 1, &mut buf).unwrap();
    buf.truncate(t.size);
    buf
}

/// A copy of a genuine key-mode opening, replayed once the listener has
/// forgotten its session id (4,096 sessions later), opens nothing and
/// gets no answer: its date was seen. Sessions one client opens at once
/// may still arrive in any order.
#[test]
fn a_replayed_key_opening_opens_nothing_after_its_id_is_forgotten() {
    let (server_cfg, client_cfg) = pinned_key();
    let mut server = Server::new(server_cfg, EndpointConfig::default());
    let identity = Keypair::generate([9; 32]);
    let now = server.now;
    let dated = |id: u64, secs: u64| {
        let cfg = SessionConfig {
            security: match &client_cfg.security {
                Security::Pinned { peer, .. } => Security::Pinned {
                    peer: *peer,
                    identity: Some(identity.clone()),
                },
                other => panic!("not a pinned key: {other:?}"),
            },
            ..client_cfg.clone()
        };
        let date = Duration::from_secs(1_800_000_000 + secs);
        Session::connect_dated(cfg, id, now, [id as u8; 32], date).unwrap()
    };
    // Two sessions of one client, the later-dated one arriving first.
    let (mut first, mut second) = (dated(1, 10), dated(2, 9));
    let captured = opening_of(&mut first, server.now);
    let from = addr(1, 1);
    assert_eq!(server.handle(from, &captured), Got::Session(1));
    let other = opening_of(&mut second, server.now);
    assert_eq!(server.handle(from, &other), Got::Session(2));
    server.end(1);
    server.end(2);
    // While its id is remembered as closed, the copy is dropped anyway.
    assert_eq!(server.handle(addr(2, 2), &captured), Got::Nothing);
    for id in 100..100 + 4096u64 {
        let mut c = client(client_cfg.clone(), id);
        let o = opening_of(&mut c, server.now);
        assert_eq!(server.handle(addr(3, 3), &o), Got::Session(id));
        server.end(id);
    }
    let replayed = server.ep.stats().replayed;
    assert_eq!(server.handle(addr(2, 2), &captured), Got::Nothing);
    assert_eq!(server.ep.stats().replayed, replayed + 1);
    // The same client's new opening, dated now, is welcome.
    let mut fresh = dated(3, 20);
    let o = opening_of(&mut fresh, server.now);
    assert_eq!(server.handle(from, &o), Got::Session(3));
}

/// A listener restarted remembers no opening date. A copy of a genuine
/// key-mode opening captured before the restart is still refused, without
/// an answer: it is dated before the listener started. The same client's
/// next opening, dated after, is welcome.
#[test]
fn an_opening_captured_before_a_restart_gets_no_answer() {
    let (server_cfg, client_cfg) = pinned_key();
    let wall = Duration::from_secs(1_800_000_000);
    let started = |at: Duration| EndpointConfig {
        fresh_since: Some(Freshness::since(at)),
        ..EndpointConfig::default()
    };
    let identity = Keypair::generate([9; 32]);
    let cfg = SessionConfig {
        security: match &client_cfg.security {
            Security::Pinned { peer, .. } => Security::Pinned {
                peer: *peer,
                identity: Some(identity),
            },
            other => panic!("not a pinned key: {other:?}"),
        },
        ..client_cfg
    };
    let mut before = Server::new(
        server_cfg.clone(),
        started(wall - Duration::from_secs(3600)),
    );
    let dated = |id: u64, date: Duration, now: Instant| {
        let mut c = Session::connect_dated(cfg.clone(), id, now, [id as u8; 32], date).unwrap();
        opening_of(&mut c, now)
    };
    let captured = dated(1, wall, before.now);
    assert_eq!(before.handle(addr(1, 1), &captured), Got::Session(1));
    // The listener restarts a minute later, and the copy is replayed.
    let mut after = Server::new(server_cfg, started(wall + Duration::from_secs(60)));
    for from in [addr(1, 1), addr(2, 2)] {
        assert_eq!(after.handle(from, &captured), Got::Nothing);
    }
    assert_eq!(after.ep.stats().replayed, 2);
    assert_eq!(after.ep.len(), 0);
    let fresh = dated(2, wall + Duration::from_secs(61), after.now);
    assert_eq!(after.handle(addr(1, 1), &fresh), Got::Session(2));
}

/// Runs a client and its server session until the server has read
/// something or `limit` of virtual time passed; returns what it read.
fn first_bytes(
    server: &mut Server,
    c: &mut Session,
    id: u64,
    from: SocketAddr,
    limit: Duration,
) -> Vec<u8> {
    let (start, mut buf, mut got) = (server.now, Vec::new(), Vec::new());
    while got.is_empty() && server.now <= start + limit {
        while let Some(t) = c.poll_transmit(server.now, 1, &mut buf) {
            server.handle(from, &buf[..t.size]);
        }
        let s = server.sessions.get_mut(&id).unwrap();
        let mut out = [0u8; 256];
        let n = s.read(server.now, &mut out);
        got.extend_from_slice(&out[..n]);
        while let Some(t) = s.poll_transmit(server.now, 1, &mut buf) {
            let mut d = buf[..t.size].to_vec();
            c.handle_datagram(server.now, Datagram::new(server.now, PathId(0), &mut d));
        }
        let next = [c.poll_timeout(), s.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        server.now = next
            .unwrap_or(server.now)
            .max(server.now + Duration::from_millis(1));
        c.handle_timeout(server.now);
        server
            .sessions
            .get_mut(&id)
            .unwrap()
            .handle_timeout(server.now);
    }
    got
}

/// 100 clients, each with a key of its own, from one host's prefix,
/// complete the handshake and send nothing. A sender from elsewhere still
/// gets in, and its first bytes arrive within a second; the idle ones past
/// their prefix's share were told "busy", and those admitted are closed
/// after the first-data timeout, with a reason their client hears.
#[test]
fn idle_sessions_do_not_lock_out_a_sender() {
    let (server_cfg, client_cfg) = pinned_key();
    let mut server = Server::new(server_cfg, EndpointConfig::default());
    let mut idle = Vec::new();
    for id in 1..=100u64 {
        let mut c = client(client_cfg.clone(), id);
        if let Some(s) = open(&mut server, &mut c, addr(9, id as u8), true) {
            idle.push((s, c));
        }
    }
    assert!(idle.len() >= 16, "{} idle sessions", idle.len());
    let from = addr(1, 1);
    let mut sender = client(client_cfg, 1000);
    let id = open(&mut server, &mut sender, from, true).expect("the sender gets in");
    assert_eq!(sender.write(b"file header"), 11);
    let got = first_bytes(&mut server, &mut sender, id, from, Duration::from_secs(1));
    assert_eq!(got, b"file header");
    let (idle_id, mut idle_client) = idle.pop().unwrap();
    let s = server.sessions.get_mut(&idle_id).unwrap();
    let at = s.created_at() + Duration::from_secs(5);
    s.handle_timeout(at);
    let closed = |e: Option<&SessionError>| {
        matches!(e, Some(SessionError::LocallyAborted { code, .. }
            | SessionError::PeerAborted { code, .. }) if *code == CloseCode::NoData.value())
    };
    assert!(closed(s.error()), "{:?}", s.error());
    let mut buf = Vec::new();
    while let Some(t) = s.poll_transmit(at, 1, &mut buf) {
        let mut d = buf[..t.size].to_vec();
        idle_client.handle_datagram(at, Datagram::new(at, PathId(0), &mut d));
    }
    assert!(closed(idle_client.error()), "{:?}", idle_client.error());
    // The sender's session has data: no deadline ends it.
    let s = server.sessions.get_mut(&id).unwrap();
    s.handle_timeout(at);
    assert!(s.error().is_none());
}

/// A sender that pinned another key is refused each time its opening
/// arrives, and counted once: its retransmissions are one sender.
#[test]
fn a_refused_sender_is_counted_once_however_often_it_retries() {
    let (server_cfg, _) = pinned_key();
    let mut server = Server::new(server_cfg, EndpointConfig::default());
    let wrong = SessionConfig {
        security: Security::pinned(Keypair::generate([4; 32]).public()),
        ..SessionConfig::default()
    };
    for id in [7u64, 8] {
        let mut c = client(wrong.clone(), id);
        let o = opening_of(&mut c, server.now);
        for _ in 0..3 {
            assert!(matches!(server.handle(addr(1, 1), &o), Got::Answer(_)));
        }
    }
    assert_eq!(server.ep.stats().refused, 2);
}
