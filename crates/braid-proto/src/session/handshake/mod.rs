//! The handshake: a server session from a client's first datagram, what
//! the two sides agree on, and the answers that carry it. What each side
//! keeps of it until it is done is the [`Handshake`] part (`state.rs`).

mod give_up;
mod state;

pub(super) use give_up::GiveUp;
use give_up::COMMITMENT_LEN;
use state::Answer;
pub(super) use state::{Client, Handshake, Server};

use super::{Close, CloseCode, Datagram, Event, Session, State};
use crate::config::{ConfigError, SessionConfig};
use crate::crypto::ServerHandshake;
use crate::error::{SessionError, Violation};
use crate::wire::{self, DecodeError, Frame, Frames, Header, Hello, MIN_INITIAL_DATAGRAM, VERSION};
use crate::Role;
use crate::{cc, Instant};
use crate::{PathId, PublicKey};
use thiserror::Error;

/// Why a datagram could not open a server session. None of these leave
/// any state behind.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AcceptError {
    /// Not a well-formed braid datagram.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] DecodeError),
    /// Well-formed, but its first frame is not a handshake.
    #[error("datagram for an unknown session is not a handshake")]
    NotAHello,
    /// A first datagram shorter than [`MIN_INITIAL_DATAGRAM`] (not padded).
    #[error("handshake datagram of {0} bytes is not padded to {MIN_INITIAL_DATAGRAM}")]
    TooShort(usize),
    /// The handshake authenticated but its offer is incomplete.
    #[error("handshake refused: {0}")]
    Handshake(OfferError),
    /// Our own configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What an authenticated client offer lacks ([`AcceptError::Handshake`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum OfferError {
    /// Shorter than the date that starts a sealed offer.
    #[error("no date in the handshake")]
    NoDate,
    /// The offer's session parameters are missing or malformed.
    #[error("no parameters in the handshake")]
    NoParameters,
}

/// Bytes of the date that starts a sealed offer.
const DATE_LEN: usize = 8;

/// The whole of a refusal in clear: the handshake's mode (code, key or
/// insecure), the key, or the client's key was not what this server takes.
pub(crate) const REFUSED: &str = "refused";

impl Session {
    /// Opens a server session from a client's first datagram, which arrived
    /// on connection `path`; `seed` seeds the session's CSPRNG. A handshake
    /// that does not authenticate leaves nothing behind. One we cannot
    /// serve (version, controller, protection) still makes a session, one
    /// that only tells the client why and closes.
    pub fn accept(
        cfg: SessionConfig,
        now: Instant,
        path: PathId,
        datagram: &[u8],
        seed: [u8; 32],
    ) -> Result<Session, AcceptError> {
        cfg.validate_for(Role::Server)?;
        let (header, payload) = Header::decode(datagram)?;
        let first = match Frames::new(payload).next() {
            Some(Ok(f @ (Frame::Hello(_) | Frame::ClientHello { .. }))) => f,
            Some(Err(e)) => return Err(e.into()),
            _ => return Err(AcceptError::NotAHello),
        };
        if datagram.len() < MIN_INITIAL_DATAGRAM {
            return Err(AcceptError::TooShort(datagram.len()));
        }
        let mut s = Session::new(Role::Server, cfg, header.session_id, now, seed);
        let sealed = s.cfg.security.is_sealed();
        s.insert_path(path, now);
        s.trace_parameters(now);
        s.on_opening(now, path);
        s.start_validation(now, path, datagram.len(), false);
        match first {
            _ if header.version != VERSION => {
                let reason = format!(
                    "version {} not supported (this side speaks {VERSION})",
                    header.version
                );
                s.refuse(CloseCode::Version, reason);
            }
            Frame::Hello(_) if sealed => s.refuse(CloseCode::Security, REFUSED.into()),
            Frame::ClientHello { .. } if !sealed => s.refuse(CloseCode::Security, REFUSED.into()),
            Frame::Hello(hello) => {
                if let Err((code, reason)) = s.negotiate(&hello) {
                    s.refuse(code, reason);
                } else {
                    s.notices.push(Event::Connected);
                }
                s.handle_datagram(now, Datagram::new(now, path, &mut datagram.to_vec()));
            }
            Frame::ClientHello {
                mode, pake, noise, ..
            } => s.answer_opening(path, header.session_id, mode, pake, noise)?,
            _ => unreachable!("matched above"),
        }
        Ok(s)
    }

    /// A sealed server reads the client's opening and answers it (with its
    /// parameters, or a refusal inside the answer); an opening that does
    /// not authenticate is refused in clear.
    fn answer_opening(
        &mut self,
        path: PathId,
        session_id: u64,
        mode: u8,
        pake: &[u8],
        noise: &[u8],
    ) -> Result<(), AcceptError> {
        let read = ServerHandshake::read(
            &self.cfg.security,
            session_id,
            mode,
            pake,
            noise,
            &mut self.rng,
        );
        let (hs, offer) = match read {
            Ok(r) => r,
            // Said in clear, so it says no more than "no": which key
            // or mode was wrong would help whoever is guessing.
            Err(_) => {
                self.refuse(CloseCode::Security, REFUSED.into());
                return Ok(());
            }
        };
        let Some((date, params)) = offer.split_first_chunk::<DATE_LEN>() else {
            return Err(AcceptError::Handshake(OfferError::NoDate));
        };
        let (give_up, params) = match mode {
            crate::crypto::mode::CODE => match params.split_first_chunk::<COMMITMENT_LEN>() {
                Some((c, rest)) => (Some(*c), rest),
                None => return Err(AcceptError::Handshake(OfferError::NoParameters)),
            },
            _ => (None, params),
        };
        let hello = match Frames::new(params).next() {
            Some(Ok(Frame::Hello(h))) => h,
            _ => return Err(AcceptError::Handshake(OfferError::NoParameters)),
        };
        let opening = hs.client().map(|k| (k, u64::from_be_bytes(*date)));
        let mut answer = Vec::new();
        let refusal = self.negotiate(&hello).err();
        match &refusal {
            None => Frame::HelloAck(self.hello()).encode(&mut answer),
            Some((code, reason)) => Frame::Close {
                code: code.value(),
                reason: reason.as_bytes(),
            }
            .encode(&mut answer),
        }
        let (our_pake, msg, keys) = hs.answer(&answer);
        let mut frame = Vec::new();
        Frame::ServerHello {
            pake: &our_pake,
            noise: &msg,
        }
        .encode(&mut frame);
        self.packets.set_keys(keys);
        if let Some(server) = self.handshake.server_mut() {
            server.set_answer(Answer {
                client_message: noise.to_vec(),
                frame,
                opening,
                give_up,
            });
        }
        if let Some((code, reason)) = refusal {
            // The refusal travels inside the answer, authenticated.
            self.refuse(code, reason);
        } else {
            self.notices.push(Event::Connected);
            self.paths
                .get_mut(&path)
                .expect("path exists")
                .pending
                .hello_ack = true;
        }
        Ok(())
    }

    /// Key mode, a server's: the client's key and the date its opening
    /// carried, for the endpoint to refuse replayed openings.
    pub(crate) fn opening_date(&self) -> Option<(PublicKey, u64)> {
        self.handshake.answer().and_then(|a| a.opening)
    }

    /// Whether this server session answered a sealed handshake (with a
    /// code: gave whoever sent it one guess to check).
    pub(crate) fn has_answered(&self) -> bool {
        self.handshake.answer().is_some()
    }

    /// Applies a client's offer, or says why it cannot be served.
    fn negotiate(&mut self, hello: &Hello) -> Result<(), (CloseCode, String)> {
        if hello.version != VERSION {
            return Err((
                CloseCode::Version,
                format!(
                    "version {} not supported (this side speaks {VERSION})",
                    hello.version
                ),
            ));
        }
        let Ok(cc) = hello.cc.parse::<cc::Algorithm>() else {
            return Err((CloseCode::Controller, hello.cc.clone()));
        };
        let paths = hello.paths.clamp(1, self.cfg.max_paths);
        let segment_size = hello
            .segment_size
            .min(self.cfg.segment_size)
            .max(*SessionConfig::SEGMENT_SIZE_RANGE.start());
        let send_window = negotiated_window(hello.send_window, self.cfg.send_window, segment_size);
        let recv_window = negotiated_window(hello.recv_window, self.cfg.recv_window, segment_size);
        self.peer.on_max_ack_delay(hello.max_ack_delay_us);
        self.apply_negotiated(segment_size, send_window, recv_window, paths, cc);
        Ok(())
    }

    fn refuse(&mut self, code: CloseCode, reason: String) {
        tracing::info!(session = %crate::ids::Hex(self.session_id), reason = %reason, "refused the peer's opening");
        let code = code.value();
        self.ending.close = Some(Close::new(code, reason.clone()));
        self.fail(SessionError::LocallyAborted { code, reason });
    }

    /// The parameters this side asks for (client) or agreed (server).
    pub(super) fn hello(&self) -> Hello {
        Hello {
            version: VERSION,
            paths: self.cfg.paths,
            segment_size: self.cfg.segment_size,
            send_window: self.cfg.send_window,
            recv_window: self.cfg.recv_window,
            max_ack_delay_us: self.cfg.max_ack_delay.as_micros() as u64,
            cc: self.cfg.cc.name().to_owned(),
        }
    }

    /// A datagram that is not sealed with the session's keys: the only ones
    /// that may count are the handshake's (and only as the handshake
    /// allows); a refusal in clear is kept as a hint, never obeyed.
    pub(super) fn handle_clear_handshake(&mut self, now: Instant, path: PathId, datagram: &[u8]) {
        let Ok((_, payload)) = Header::decode(datagram) else {
            self.counters.forged += 1;
            return;
        };
        let Some(Ok(frame)) = Frames::new(payload).next() else {
            self.counters.forged += 1;
            return;
        };
        match frame {
            // A retransmitted opening: repeat our answer where it came from.
            Frame::ClientHello { noise, .. }
                if self
                    .handshake
                    .server()
                    .is_some_and(|s| s.is_repeated_opening(noise))
                    && datagram.len() >= MIN_INITIAL_DATAGRAM
                    && self.paths.get(&path).is_some_and(|p| p.is_usable())
                    && !self.is_closed() =>
            {
                self.credit_received(path, datagram.len());
                // Not authentic: it keeps the half-open session, but dates
                // nothing (a sealed connection's lag comes from its first
                // sealed packet).
                if let Some(server) = self.handshake.server_mut() {
                    server.on_opening(now);
                }
                self.paths
                    .get_mut(&path)
                    .expect("path exists")
                    .pending
                    .hello_ack = true;
            }
            Frame::ServerHello { pake, noise } if self.handshake.client_noise().is_some() => {
                self.on_clear_answer(now, path, datagram, pake, noise);
            }
            Frame::Retry { token } if self.handshake.client_noise().is_some() => {
                let client = self.handshake.client_mut().expect("checked");
                if client.on_retry(token) {
                    if let Some(p) = self.paths.get_mut(&path) {
                        p.pending.hello = true;
                    }
                }
            }
            Frame::Close { code, reason } if self.handshake.client_noise().is_some() => {
                let reason = String::from_utf8_lossy(reason);
                let client = self.handshake.client_mut().expect("checked");
                client.on_refusal(now, code, reason.chars().take(wire::MAX_REASON).collect());
                self.counters.forged += 1;
            }
            // A code client gave up on our answer, with the secret its
            // opening committed to: a wrong guess, known now.
            Frame::Close { code, reason }
                if code == CloseCode::GaveUp.value()
                    && self
                        .handshake
                        .server()
                        .is_some_and(|s| s.is_given_up_by(reason))
                    && !self.is_closed() =>
            {
                tracing::info!(session = %crate::ids::Hex(self.session_id), "the client gave up: wrong code");
                self.fail(SessionError::PeerAborted {
                    code,
                    reason: "wrong code".into(),
                });
            }
            // A late copy of a handshake message (a second connection's
            // answer, a repeated opening after the answer was dropped):
            // the handshake succeeded, so it says nothing either way.
            Frame::ServerHello { .. } | Frame::ClientHello { .. }
                if self.packets.keys().is_some() =>
            {
                self.counters.unexpected += 1;
            }
            _ => self.counters.forged += 1,
        }
    }

    /// The server's answer, in clear and authenticated by Noise: it opens
    /// the session's keys, or, not authentic, is counted (and with a code,
    /// ends the handshake, telling the server we gave up).
    fn on_clear_answer(
        &mut self,
        now: Instant,
        path: PathId,
        datagram: &[u8],
        pake: &[u8],
        noise: &[u8],
    ) {
        let client = self.handshake.client_mut().expect("checked");
        let hs = client.noise_mut().expect("checked");
        match hs.read_answer(pake, noise) {
            Ok((answer, keys)) => {
                self.packets.set_keys(keys);
                client.drop_noise();
                self.on_sealed_answer(now, path, datagram, &answer);
            }
            // With a code, every answer we check is a guess an
            // attacker who sent it can verify offline: the first
            // that fails ends the handshake, so a code gives one
            // guess per handshake on this side too.
            Err(_) if hs.mode() == crate::crypto::mode::CODE => {
                self.counters.forged += 1;
                client.drop_noise();
                // Tell the server at once that its answer was a
                // wrong guess, so it counts it now.
                if let Some(g) = client.take_give_up() {
                    let code = CloseCode::GaveUp.value();
                    self.ending.close = Some(Close::new(code, g.secret().to_owned()));
                }
                self.fail(SessionError::CodeRejected);
            }
            Err(_) => {
                self.counters.forged += 1;
                client.on_unauthentic_answer(now);
            }
        }
    }

    /// The server's authenticated answer: its parameters, or its refusal.
    fn on_sealed_answer(&mut self, now: Instant, path: PathId, datagram: &[u8], answer: &[u8]) {
        // The answer's header travels in clear and Noise does not cover its
        // packet number: it arrived, but its number must not enter the
        // replay window or the ACK state (a forged one near 2^32 would
        // misplace every later number, one never sent would fail the
        // server's ACK check). The server does not track it either.
        self.on_answer_arrival(now, path, datagram.len());
        match Frames::new(answer).next() {
            Some(Ok(Frame::HelloAck(h))) => {
                self.on_hello_ack(h);
                // Every connection shows itself to the server sealed, so it
                // joins (and is validated) without a handshake of its own.
                for p in self.paths.values_mut() {
                    p.pending.probe = true;
                }
            }
            Some(Ok(Frame::Close { code, reason })) => self.on_close(code, reason),
            _ => self.violation(Violation::AnswerWithoutParameters),
        }
    }

    /// What an authentic packet's arrival says besides its number: the
    /// peer is there and has answered.
    fn on_answer_arrival(&mut self, now: Instant, path: PathId, len: usize) {
        self.handshake.confirm(None);
        self.credit_received(path, len);
        self.on_peer_heard(now, path);
    }

    pub(super) fn on_hello_ack(&mut self, h: Hello) {
        if self.role != Role::Client || !self.is_handshaking() {
            return;
        }
        if h.version != VERSION {
            self.fail(SessionError::VersionMismatch {
                ours: VERSION,
                peer: h.version,
            });
            return;
        }
        let cc = match h.cc.parse::<cc::Algorithm>() {
            Ok(cc)
                if h.segment_size >= *SessionConfig::SEGMENT_SIZE_RANGE.start() && h.paths > 0 =>
            {
                cc
            }
            _ => {
                self.violation(Violation::AnswerOutOfRange);
                return;
            }
        };
        let segment_size = h.segment_size.min(self.cfg.segment_size);
        let send_window = negotiated_window(h.send_window, self.cfg.send_window, segment_size);
        let recv_window = negotiated_window(h.recv_window, self.cfg.recv_window, segment_size);
        self.peer.on_max_ack_delay(h.max_ack_delay_us);
        // Connections the server will not take are closed on our side.
        let keep = h.paths.min(self.cfg.paths);
        self.paths.retain(|&id, _| id.0 < keep);
        self.apply_negotiated(segment_size, send_window, recv_window, keep, cc);
        for p in self.paths.values_mut() {
            p.pending.hello = false;
        }
        // Confirm at once, so a server with data to send need not wait for ours.
        if let Some(p) = self.paths.values_mut().next() {
            p.pending.probe = true;
        }
        self.handshake.confirm(None);
        self.state = State::Established;
        self.notices.push(Event::Connected);
    }
}

/// A window both sides agree on: the smaller offer, at least one segment.
fn negotiated_window(peer: u64, ours: u64, segment_size: u16) -> u64 {
    peer.min(ours).max(u64::from(segment_size))
}
