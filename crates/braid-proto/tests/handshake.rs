//! Handshakes that meet loss, in both protection modes.

mod common;

use braid_proto::SessionConfig;
use common::{Pair, MS};
use std::time::Duration;

/// The server's answers are lost for 40 s, longer than a half-open server
/// session lives without hearing from its client (15 s) and than the idle
/// timeout (30 s): the client's repeated openings keep it alive, and the
/// session opens once an answer gets through.
#[test]
fn repeated_openings_keep_a_half_open_server_alive() {
    for (client, server) in [
        (SessionConfig::default(), SessionConfig::default()),
        (SessionConfig::insecure(), SessionConfig::insecure()),
    ] {
        let mut pair = Pair::new(client, server, 10 * MS);
        let lost_until = braid_proto::Instant::ZERO + Duration::from_secs(40);
        let now = std::rc::Rc::new(std::cell::Cell::new(braid_proto::Instant::ZERO));
        let clock = now.clone();
        pair.drop = Box::new(move |to_server, _, _| !to_server && clock.get() < lost_until);
        assert_eq!(pair.client.write(b"after the loss"), 14);
        pair.client.finish();
        let end = braid_proto::Instant::ZERO + Duration::from_secs(60);
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

/// A client that pinned another key hears a refusal, which, in clear,
/// says no more than "no" (which key or mode was wrong would help whoever
/// is guessing) and is only reported once the handshake timed out.
#[test]
fn a_wrong_pinned_key_gets_a_bare_refusal_after_the_timeout() {
    use braid_proto::{Keypair, Security, SessionError};
    let client = SessionConfig {
        security: Security::pinned(Keypair::generate([8; 32]).public()),
        handshake_timeout: Duration::from_secs(2),
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(client, SessionConfig::default(), 10 * MS);
    pair.drive_until(Duration::from_secs(10), |p| p.client.error().is_some());
    match pair.client.error() {
        Some(SessionError::UnauthenticatedRefusal { said, .. }) => assert_eq!(said, "refused"),
        e => panic!("{e:?}"),
    }
    // The server's side is a refusal: it only says no, and is over.
    assert!(pair.server().error().is_some());
}

/// With a wrong one-time code the server answers, but its answer cannot
/// authenticate: the client ends the handshake at that first answer and
/// says the code was wrong (or someone intercepted), after one round trip.
#[test]
fn a_wrong_code_ends_the_handshake_at_the_first_answer() {
    use braid_proto::{Security, SessionError};
    let with = |code: &str| SessionConfig {
        security: Security::code(code),
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(with("4-lemon-drop"), with("4-lemon-crop"), 10 * MS);
    pair.drive_until(Duration::from_secs(10), |p| p.client.error().is_some());
    assert_eq!(pair.client.error(), Some(&SessionError::CodeRejected));
    assert_eq!(pair.now - braid_proto::Instant::ZERO, 20 * MS);
    assert_eq!(pair.client.stats().forged_dropped, 1);
}

/// An attacker on the path answers a code handshake before the server, as
/// many times as it likes, each answer a guess at the code: the client
/// ends the handshake at the first, so even a later answer made with the
/// right code opens nothing. One guess per handshake.
#[test]
fn a_code_client_checks_one_answer_per_handshake() {
    use braid_proto::{Datagram, Instant, PathId, Security, Session, SessionError};
    let with = |code: &str| SessionConfig {
        security: Security::code(code),
        ..SessionConfig::default()
    };
    let mut client = Session::connect(with("4-lemon-drop"), 42, Instant::ZERO, [1; 32]).unwrap();
    let mut opening = Vec::new();
    client
        .poll_transmit(Instant::ZERO, 1, &mut opening)
        .unwrap();
    // Answers from servers holding these codes; the last is right.
    let answer = |code: &str, seed: u8| {
        let mut s =
            Session::accept(with(code), Instant::ZERO, PathId(0), &opening, [seed; 32]).unwrap();
        let mut buf = Vec::new();
        s.poll_transmit(Instant::ZERO, 1, &mut buf).unwrap();
        buf
    };
    let mut answers: Vec<Vec<u8>> = (0..100)
        .map(|i| answer(&format!("{i}-guess-code"), i))
        .collect();
    answers.push(answer("4-lemon-drop", 200));
    for a in &answers {
        client.handle_datagram(
            Instant::ZERO + MS,
            Datagram::new(Instant::ZERO + MS, PathId(0), &mut a.to_vec()),
        );
    }
    assert_eq!(client.error(), Some(&SessionError::CodeRejected));
    assert!(!client.is_established(), "a later answer was still checked");
    assert_eq!(client.stats().forged_dropped, answers.len() as u64);
    // It is over: no further opening goes out for another guess, only
    // the CLOSE that tells the server it gave up.
    let mut out = Vec::new();
    while let Some(t) = client.poll_transmit(Instant::ZERO + MS, 1, &mut out) {
        use braid_proto::wire::{Frame, Frames, Header};
        let (_, payload) = Header::decode(&out[..t.size]).unwrap();
        let frame = Frames::new(payload).next();
        assert!(
            matches!(frame, Some(Ok(Frame::Close { code, .. })) if code == braid_proto::CloseCode::GaveUp.value()),
            "{frame:?}"
        );
    }
    // Without the forgeries, the right answer opens the session.
    let mut honest = Session::connect(with("4-lemon-drop"), 42, Instant::ZERO, [1; 32]).unwrap();
    honest
        .poll_transmit(Instant::ZERO, 1, &mut Vec::new())
        .unwrap();
    honest.handle_datagram(
        Instant::ZERO + MS,
        Datagram::new(
            Instant::ZERO + MS,
            PathId(0),
            &mut answers.last().unwrap().to_vec(),
        ),
    );
    assert!(honest.is_established() && honest.error().is_none());
}

/// The server's answer travels in clear, and Noise does not cover its
/// header: an attacker who rewrites its packet number (to one the server
/// never sent, or near 2^32, which would misplace every later number)
/// changes nothing, and data flows both ways.
#[test]
fn a_rewritten_answer_packet_number_is_ignored() {
    for forged in [0x1000u32, 0x7fff_fff0, 0xffff_fff0] {
        let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
        let mut first = true;
        pair.tamper = Box::new(move |to_server, _, d| {
            if !to_server && std::mem::take(&mut first) {
                d[11..15].copy_from_slice(&forged.to_be_bytes());
            }
        });
        let up: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        assert_eq!(pair.client.write(&up), up.len());
        pair.client.finish();
        pair.drive_until(Duration::from_secs(2), |p| p.server.is_some());
        let down = b"and back".to_vec();
        let server = pair.server.as_mut().unwrap();
        assert_eq!(server.write(&down), down.len());
        server.finish();
        pair.drive_until(Duration::from_secs(30), |p| {
            p.client.is_closed() && p.server().is_closed()
        });
        assert_eq!(pair.client.error(), None, "{forged:#x}");
        assert_eq!(pair.server().error(), None, "{forged:#x}");
        assert_eq!(pair.received, up, "{forged:#x}");
        assert_eq!(pair.received_by_client, down, "{forged:#x}");
    }
}

/// A wrong pinned key: the answers arrive but do not authenticate, and
/// the client says so about 3 s after the first rather than at the full
/// handshake timeout (75 s, for answers that cannot get through). An IK
/// answer that fails gives nobody a guess at anything, so one forgery
/// must not end the handshake (see the next test).
#[test]
fn an_answer_that_does_not_authenticate_fails_in_seconds() {
    use braid_proto::{Keypair, Security, SessionError};
    let client = SessionConfig {
        security: Security::pinned(Keypair::generate([8; 32]).public()),
        ..SessionConfig::default()
    };
    assert!(client.handshake_timeout > Duration::from_secs(60));
    let mut pair = Pair::new(client, SessionConfig::default(), 10 * MS);
    pair.drive_until(Duration::from_secs(80), |p| p.client.error().is_some());
    let after = match pair.client.error() {
        Some(SessionError::UnauthenticatedRefusal { after, .. }) => *after,
        e => panic!("{e:?}"),
    };
    assert_eq!(pair.now - braid_proto::Instant::ZERO, after);
    assert!(
        after > Duration::from_secs(3) && after < Duration::from_secs(4),
        "{after:?}"
    );
}

/// A forged (here: corrupted) first answer does not end a handshake whose
/// server answers: the client's next HELLO gets the real answer within
/// the grace that a bad answer leaves.
#[test]
fn one_unauthentic_answer_does_not_end_the_handshake() {
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    let mut first = true;
    pair.tamper = Box::new(move |to_server, _, d| {
        if !to_server && std::mem::take(&mut first) {
            let last = d.len() - 1;
            d[last] ^= 1;
        }
    });
    assert_eq!(pair.client.write(b"still here"), 10);
    pair.client.finish();
    pair.drive_until(Duration::from_secs(10), |p| p.received.len() >= 10);
    assert_eq!(pair.client.error(), None);
    assert_eq!(pair.received, b"still here");
    assert!(pair.client.stats().forged_dropped >= 1);
}

/// Repeats of the client's opening keep an unconfirmed server session,
/// but not for ever (anyone on the path could replay them): it ends 90 s
/// after it was created, the default handshake timeout plus 15 s.
#[test]
fn repeated_openings_hold_an_unconfirmed_server_for_90_s_at_most() {
    let client = SessionConfig {
        handshake_timeout: Duration::from_secs(300),
        ..SessionConfig::default()
    };
    let mut pair = Pair::new(client, SessionConfig::default(), 10 * MS);
    // Every answer is lost: the client keeps opening, once a second.
    pair.drop = Box::new(|to_server, _, _| !to_server);
    pair.drive_until(Duration::from_secs(200), |p| {
        p.server.as_ref().is_some_and(|s| s.error().is_some())
    });
    let server_failed_at = pair.now - braid_proto::Instant::ZERO;
    assert_eq!(
        pair.server().error(),
        Some(&braid_proto::SessionError::HandshakeTimeout(
            server_failed_at - 10 * MS
        ))
    );
    assert!(
        server_failed_at > Duration::from_secs(89) && server_failed_at < Duration::from_secs(91),
        "{server_failed_at:?}"
    );
    assert!(pair.client.error().is_none(), "the client still tries");
}

/// A loaded server answers openings with RETRYs whose tokens live 10 s,
/// and a handshake tries for 75 s: the client answers the first four at
/// once, and keeps every later token for its next scheduled opening
/// rather than ignoring it (no ping-pong either way).
#[test]
fn every_retry_token_is_kept_but_only_four_answered_at_once() {
    use braid_proto::wire::{clear_datagram, Frame, Frames, HEADER_LEN};
    use braid_proto::{Datagram, Instant, Keypair, PathId, Security, Session};
    let token_of = |d: &[u8]| match Frames::new(&d[HEADER_LEN..]).next() {
        Some(Ok(Frame::ClientHello { token, .. })) => token.to_vec(),
        f => panic!("{f:?}"),
    };
    let cfg = SessionConfig {
        security: Security::pinned(Keypair::generate([9; 32]).public()),
        ..SessionConfig::default()
    };
    let mut now = Instant::ZERO;
    let mut client = Session::connect(cfg, 42, now, [1; 32]).unwrap();
    let mut buf = Vec::new();
    assert!(client.poll_transmit(now, 1, &mut buf).is_some());
    assert!(token_of(&buf).is_empty());
    for i in 1..=6u8 {
        now += 10 * MS;
        let retry = clear_datagram(42, PathId(0), 0, &[Frame::Retry { token: &[i; 40] }]);
        client.handle_datagram(now, Datagram::new(now, PathId(0), &mut retry.to_vec()));
        buf.clear();
        let answered = client.poll_transmit(now, 1, &mut buf).is_some();
        assert_eq!(answered, i <= 4, "retry {i}");
        if answered {
            assert_eq!(token_of(&buf), [i; 40]);
        }
    }
    // The next scheduled opening carries the latest token.
    now = client.poll_timeout().unwrap();
    client.handle_timeout(now);
    buf.clear();
    assert!(client.poll_transmit(now, 1, &mut buf).is_some());
    assert_eq!(token_of(&buf), [6; 40]);
}

/// "Port unreachable" is believed only about a datagram the session sent
/// on a connection that never heard from the peer: a quote with another
/// session id, a packet number never sent or a connection that answered
/// changes nothing. Even a genuine-looking report is only noted: it brings
/// the HELLO's retransmission forward, and a report that recurs about the
/// retransmission fails the handshake, a fraction of a second in.
#[test]
fn port_unreachable_is_believed_only_about_our_own_unanswered_datagrams() {
    use braid_proto::wire::{clear_datagram, Header, HEADER_LEN};
    use braid_proto::{Instant, PathId, PathState, Session, SessionError};
    let cfg = SessionConfig {
        paths: 2,
        ..SessionConfig::insecure()
    };
    let mut client = Session::connect(cfg, 7, Instant::ZERO, [3; 32]).unwrap();
    let peer: std::net::SocketAddr = "192.0.2.1:7000".parse().unwrap();
    let elsewhere: std::net::SocketAddr = "192.0.2.1:7001".parse().unwrap();
    client.set_remote(PathId(0), peer);
    client.set_remote(PathId(1), peer);
    let headers = |client: &mut Session, now: Instant| {
        let (mut buf, mut sent) = (Vec::new(), Vec::new());
        while let Some(t) = client.poll_transmit(now, 1, &mut buf) {
            sent.push((t.path, buf[..HEADER_LEN].to_vec()));
            buf.clear();
        }
        sent
    };
    let sent = headers(&mut client, Instant::ZERO);
    let quote = |path: PathId| sent.iter().find(|(p, _)| *p == path).unwrap().1.clone();
    let with = |mut q: Vec<u8>, edit: &dyn Fn(&mut Header)| {
        let (mut h, _) = Header::decode(&q).unwrap();
        edit(&mut h);
        q.clear();
        h.encode(&mut q);
        q
    };
    let forged = [
        with(quote(PathId(0)), &|h| h.session_id ^= 1),
        with(quote(PathId(0)), &|h| h.packet_number += 1000),
        with(quote(PathId(0)), &|h| h.path = PathId(9)),
        quote(PathId(0))[..HEADER_LEN - 1].to_vec(),
    ];
    let zero = Instant::ZERO;
    for q in &forged {
        assert!(!client.handle_unreachable(zero, peer, q));
    }
    // About an address the connection does not send to.
    assert!(!client.handle_unreachable(zero, elsewhere, &quote(PathId(0))));
    // A first report about each connection is only noted, however often.
    for _ in 0..3 {
        assert!(client.handle_unreachable(zero, peer, &quote(PathId(0))));
        assert!(client.handle_unreachable(zero, peer, &quote(PathId(1))));
    }
    assert!(client.error().is_none());
    let open = |c: &Session| c.path_states().iter().all(|(_, s)| *s != PathState::Closed);
    assert!(open(&client));
    let now = client.poll_timeout().unwrap();
    assert!(now <= zero + Duration::from_millis(200), "{now:?}");
    client.handle_timeout(now);
    let again = headers(&mut client, now);
    let requote = |path: PathId| again.iter().find(|(p, _)| *p == path).unwrap().1.clone();
    // It recurs after the retransmission: one connection refused, the
    // other may still answer.
    assert!(client.handle_unreachable(now, peer, &requote(PathId(0))));
    assert!(client.error().is_none());
    assert!(client.is_handshaking());
    assert!(client.handle_unreachable(now, peer, &requote(PathId(1))));
    assert_eq!(client.error(), Some(&SessionError::NothingListening));

    // A connection the peer answered on is not closed by any report.
    let mut pair = Pair::new(SessionConfig::default(), SessionConfig::default(), 10 * MS);
    pair.drive_until(Duration::from_secs(5), |p| p.client.is_established());
    let q = clear_datagram(pair.client.session_id(), PathId(0), 0, &[]);
    pair.client.set_remote(PathId(0), peer);
    assert!(!pair.client.handle_unreachable(pair.now, peer, &q));
    assert!(pair.client.error().is_none());
}
