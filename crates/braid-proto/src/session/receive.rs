//! Incoming datagrams: validation, handshake, and frame processing.

use super::{close_code, Event, Role, Session, State, CLOSE_REPEATS};
use crate::config::{ConfigError, SessionConfig};
use crate::error::SessionError;
use crate::recv_stream::RecvError;
use crate::stats::PathState;
use crate::wire::{DecodeError, Frame, Frames, Header, Hello, VERSION};
use crate::{cc, Ecn, Instant};
use thiserror::Error;

/// Why a datagram could not open a server session.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AcceptError {
    /// Not a well-formed braid datagram.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] DecodeError),
    /// Well-formed, but its first frame is not a HELLO.
    #[error("datagram for an unknown session is not a handshake")]
    NotAHello,
    /// Our own configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl Session {
    /// Opens a server session from a client's first datagram, which arrived on
    /// connection `path`. A HELLO we cannot serve (version, controller) still
    /// makes a session, one that only tells the client why and closes.
    pub fn accept(
        cfg: SessionConfig,
        now: Instant,
        path: u8,
        datagram: &[u8],
    ) -> Result<Session, AcceptError> {
        cfg.validate()?;
        let (header, payload) = Header::decode(datagram)?;
        let hello = match Frames::new(payload).next() {
            Some(Ok(Frame::Hello(h))) => h,
            Some(Err(e)) => return Err(e.into()),
            _ => return Err(AcceptError::NotAHello),
        };
        let mut s = Session::new(Role::Server, cfg, header.session_id, now);
        if hello.version != VERSION || header.version != VERSION {
            let reason = format!(
                "version {} not supported (this side speaks {VERSION})",
                hello.version
            );
            s.refuse(close_code::VERSION, reason);
        } else if !cc::is_known(&hello.cc) {
            s.refuse(close_code::CONTROLLER, hello.cc.clone());
        } else {
            let paths = hello.paths.clamp(1, s.cfg.max_paths);
            let mtu = hello.mtu.min(s.cfg.mtu).max(64);
            let send_window = hello.send_window.min(s.cfg.send_window).max(u64::from(mtu));
            let recv_window = hello.recv_window.min(s.cfg.recv_window).max(u64::from(mtu));
            s.apply_negotiated(mtu, send_window, recv_window, paths, hello.cc.clone());
            s.events.push_back(Event::Connected);
        }
        s.insert_path(path, now);
        s.handle_datagram(now, path, Ecn::NotEct, datagram);
        Ok(s)
    }

    fn refuse(&mut self, code: u64, reason: String) {
        self.close = Some((code, reason.clone(), CLOSE_REPEATS));
        self.fail(SessionError::LocallyAborted { code, reason });
    }

    /// The parameters this side asks for (client) or agreed (server).
    pub(super) fn hello(&self) -> Hello {
        Hello {
            version: VERSION,
            paths: self.cfg.paths,
            mtu: self.cfg.mtu,
            send_window: self.cfg.send_window,
            recv_window: self.cfg.recv_window,
            cc: self.cfg.cc.clone(),
        }
    }

    /// Processes a datagram that arrived on connection `path` with ECN codepoint `ecn`.
    /// Anything malformed or unexpected is dropped and counted.
    pub fn handle_datagram(&mut self, now: Instant, path: u8, ecn: Ecn, datagram: &[u8]) {
        if matches!(self.state, State::Closed) {
            return;
        }
        let Ok((header, payload)) = Header::decode(datagram) else {
            self.counters.malformed += 1;
            return;
        };
        if header.session_id != self.session_id || header.version != VERSION {
            self.counters.unexpected += 1;
            return;
        }
        // Validate every frame before acting on any.
        let mut ack_eliciting = false;
        let mut handshake = false;
        let mut hello = false;
        for frame in Frames::new(payload) {
            match frame {
                Ok(Frame::Ack(_) | Frame::Ece(_) | Frame::Blocked(_)) => {}
                Ok(Frame::Close { .. }) => handshake = true,
                Ok(Frame::HelloAck(_)) => {
                    handshake = true;
                    ack_eliciting = true;
                }
                Ok(f) => {
                    hello |= matches!(f, Frame::Hello(_));
                    ack_eliciting = true
                }
                Err(_) => {
                    self.counters.malformed += 1;
                    return;
                }
            }
        }
        // A handshaking client can use nothing but the answer (or a refusal):
        // acknowledging data it could not keep would lose that data.
        if self.is_handshaking() && !handshake {
            self.counters.unexpected += 1;
            return;
        }
        // Anything but a HELLO proves the client has our answer.
        if !hello {
            self.peer_confirmed = true;
        }
        if !self.paths.contains_key(&path) {
            let may_join =
                self.role == Role::Server && self.is_established() && path < self.cfg.max_paths;
            if !may_join {
                self.counters.unexpected += 1;
                return;
            }
            self.insert_path(path, now);
            self.normalize_windows();
        }
        let p = self.paths.get_mut(&path).expect("path exists");
        if p.state == PathState::Closed {
            self.counters.unexpected += 1;
            return;
        }
        if !p.on_received(
            now,
            header.packet_number,
            ack_eliciting,
            self.cfg.max_ack_delay,
            self.cfg.ack_every,
        ) {
            self.counters.duplicate_packets += 1;
            return;
        }
        p.stats.packets_received += 1;
        p.on_mbecn(header.mbecn);
        if ecn == Ecn::Ce {
            p.ce_received += 1;
        }
        self.last_recv = now;
        self.last_recv_path = path;
        for frame in Frames::new(payload).flatten() {
            if matches!(self.state, State::Failed | State::Closed) {
                break;
            }
            self.handle_frame(now, path, frame);
        }
        self.check_progress(now);
    }

    fn handle_frame(&mut self, now: Instant, path: u8, frame: Frame<'_>) {
        match frame {
            Frame::Ping => {}
            Frame::Blocked(limit) => {
                if self.recv.on_peer_blocked(limit) {
                    self.window_update = true;
                }
            }
            Frame::Ece(level) => {
                if let Some(p) = self.paths.get_mut(&path) {
                    p.cc.on_ece(now, level);
                }
            }
            Frame::Hello(_) => {
                if self.role == Role::Server {
                    if let Some(p) = self.paths.get_mut(&path) {
                        p.hello_ack_pending = true;
                    }
                }
            }
            Frame::HelloAck(h) => self.on_hello_ack(h),
            Frame::Stream { offset, fin, data } => {
                if !self.is_established() {
                    self.counters.unexpected += 1;
                    return;
                }
                match self.recv.insert(offset, data, fin) {
                    Ok(()) => {
                        if self.recv.on_data(offset + data.len() as u64) {
                            self.window_update = true;
                        }
                    }
                    Err(RecvError::FlowControl) => {
                        self.violation("stream data beyond the advertised window")
                    }
                    Err(RecvError::FinalSize) => {
                        self.violation("stream data inconsistent with its end")
                    }
                }
            }
            Frame::Ack(ack) => {
                if !self.is_established() {
                    self.counters.unexpected += 1;
                    return;
                }
                let p = self.paths.get_mut(&path).expect("path exists");
                let outcome = p.on_ack_frame(now, &ack, &mut self.send);
                if outcome.revived {
                    self.events.push_back(Event::PathUp(path));
                }
                self.send.update_max_data(ack.max_data);
                self.send.on_cumulative(ack.cumulative, ack.fin);
                self.normalize_windows();
                self.autotune_send_buffer();
            }
            Frame::Close { code, reason } => {
                let reason = String::from_utf8_lossy(reason).into_owned();
                let err = match code {
                    close_code::CONTROLLER => SessionError::UnknownController(reason),
                    _ => SessionError::PeerAborted { code, reason },
                };
                self.fail(err);
                self.state = State::Closed;
            }
            Frame::PathClose { path: closed } => self.on_path_closed(closed),
        }
    }

    fn on_hello_ack(&mut self, h: Hello) {
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
        if !cc::is_known(&h.cc) || h.mtu < 64 || h.paths == 0 {
            self.violation("handshake answer out of range");
            return;
        }
        let mtu = h.mtu.min(self.cfg.mtu);
        let send_window = h.send_window.min(self.cfg.send_window).max(u64::from(mtu));
        let recv_window = h.recv_window.min(self.cfg.recv_window).max(u64::from(mtu));
        // Connections the server will not take are closed on our side.
        let keep = h.paths.min(self.cfg.paths);
        self.paths.retain(|&id, _| id < keep);
        self.apply_negotiated(mtu, send_window, recv_window, keep, h.cc);
        for p in self.paths.values_mut() {
            p.hello_pending = false;
        }
        // Confirm at once, so a server with data to send need not wait for ours.
        if let Some(p) = self.paths.values_mut().next() {
            p.probe_pending = true;
        }
        self.peer_confirmed = true;
        self.state = State::Established;
        self.events.push_back(Event::Connected);
    }

    pub(super) fn on_path_closed(&mut self, id: u8) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        if p.state == PathState::Closed {
            return;
        }
        p.close(&mut self.send);
        self.events.push_back(Event::PathClosed(id));
        self.normalize_windows();
        if self.paths.values().all(|p| p.state == PathState::Closed) {
            self.fail(SessionError::AllPathsClosed);
        }
    }
}
