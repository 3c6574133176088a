//! Incoming datagrams: validation, authentication and frame processing (the
//! handshake itself is in `handshake.rs`).

use super::{CloseCode, Event, Session, State};
use crate::error::{SessionError, Violation};
use crate::path::AckError;
use crate::recv_stream::RecvError;
use crate::rtt::AckRoute;
use crate::stats::PathState;
use crate::trace::EventKind;
use crate::wire::{AckFrame, Frame, Frames, Header, VERSION};
use crate::PathId;
use crate::Role;
use crate::{Ecn, Instant};
use smallvec::SmallVec;

/// A datagram from the network, for [`Session::handle_datagram`].
#[derive(Debug)]
pub struct Datagram<'a> {
    /// The connection it arrived on (its header's path id).
    pub path: PathId,
    /// The ECN codepoint it arrived with.
    pub ecn: Ecn,
    /// When it arrived: the caller's `now`, or a kernel receive timestamp
    /// when the caller read a batch some time after its first datagram came
    /// in (the ACKs' receive times then show the link's spacing, not the
    /// reads'). A time after `now` counts as `now`.
    pub received_at: Instant,
    /// Its bytes, opened in place.
    pub bytes: &'a mut [u8],
}

impl<'a> Datagram<'a> {
    /// A datagram on `path` that arrived at `now` without an ECN mark.
    pub fn new(now: Instant, path: PathId, bytes: &'a mut [u8]) -> Datagram<'a> {
        Datagram {
            path,
            ecn: Ecn::NotEct,
            received_at: now,
            bytes,
        }
    }
}

/// Where and when an authentic datagram arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    pub path: PathId,
    pub ecn: Ecn,
    /// Bytes of the datagram.
    pub len: usize,
    /// When it arrived (no later than the caller's now).
    pub at: Instant,
}

/// What an authentic datagram's frames are, read before any is acted on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Scan {
    /// Something in it asks for an ACK.
    ack_eliciting: bool,
    /// It carries the handshake's answer or a CLOSE.
    handshake: bool,
    /// It carries a client's opening in clear (an insecure HELLO).
    hello: bool,
}

impl Scan {
    /// [`Scan::keeping`] without the frames.
    #[cfg(test)]
    fn of(payload: &[u8], sealed: bool, stream_base: u64) -> Option<Scan> {
        Scan::keeping(payload, sealed, stream_base, |_| {})
    }

    /// The frames of `payload`, or `None` if any is malformed or, in a
    /// `sealed` session, a handshake frame (those travel in clear). Each
    /// frame read goes to `keep`, so that the caller acts on them without
    /// decoding them twice.
    fn keeping<'a>(
        payload: &'a [u8],
        sealed: bool,
        stream_base: u64,
        mut keep: impl FnMut(Frame<'a>),
    ) -> Option<Scan> {
        let mut scan = Scan::default();
        for frame in Frames::with_stream_base(payload, stream_base) {
            let frame = frame.ok()?;
            match &frame {
                Frame::Ack(_)
                | Frame::PathAck { .. }
                | Frame::Ece(_)
                | Frame::Blocked(_)
                | Frame::Padding => {}
                Frame::Close { .. } => scan.handshake = true,
                Frame::HelloAck(_) if !sealed => {
                    scan.handshake = true;
                    scan.ack_eliciting = true;
                }
                Frame::Hello(_)
                | Frame::HelloAck(_)
                | Frame::ClientHello { .. }
                | Frame::ServerHello { .. }
                | Frame::Retry { .. }
                    if sealed =>
                {
                    return None
                }
                f => {
                    scan.hello |= matches!(f, Frame::Hello(_));
                    scan.ack_eliciting = true;
                }
            }
            keep(frame);
        }
        Some(scan)
    }
}

impl Session {
    /// Processes a datagram from the network. Returns whether it came from
    /// the peer: it opened with the session's keys (or, insecure, it
    /// parsed) and was not a replay. Only then may the caller trust
    /// anything about it, such as the address it came from. Anything else
    /// is dropped and counted before it can touch any state.
    ///
    /// A sealed datagram is opened where it lies, without a copy: its bytes
    /// hold plaintext (or, if it did not open, unspecified bytes) afterwards.
    pub fn handle_datagram(&mut self, now: Instant, datagram: Datagram<'_>) -> bool {
        let Datagram {
            path,
            ecn,
            received_at,
            bytes: datagram,
        } = datagram;
        if matches!(self.state, State::Closed) {
            return false;
        }
        let Ok((header, payload)) = Header::decode_expanded(datagram, self.largest_received(path))
        else {
            self.counters.malformed += 1;
            return false;
        };
        let header_len = datagram.len() - payload.len();
        // A short header names no session: its caller found ours by the
        // address, which only a connection we offered short headers on
        // maps to us, and the nonce checks the path. Nothing short is a
        // handshake message; a session that failed or closes still hears
        // the peer's answer to its CLOSE in one.
        let ours = if header.short {
            !matches!(self.state, State::Handshaking { .. })
        } else {
            header.session_id == self.session_id
        };
        if !ours || header.version != VERSION {
            self.counters.unexpected += 1;
            return false;
        }
        let arrival = Arrival {
            path,
            ecn,
            len: datagram.len(),
            at: received_at.min(now),
        };
        if !self.cfg.security.is_sealed() {
            return self.handle_authentic(now, arrival, &header, &datagram[header_len..]);
        }
        let Some(keys) = self.packets.keys() else {
            self.handle_clear_handshake(now, path, datagram);
            return false;
        };
        // A failed open leaves the bytes unspecified; the rare datagram that
        // may be a handshake message in clear is kept to be read as one.
        let clear = (!header.short
            && crate::wire::starts_with_clear_frame(&datagram[header_len..]))
        .then(|| datagram.to_vec());
        match keys.open(now, datagram, path, header.packet_number) {
            Some((frames, opened)) => {
                // Authentic: only now may it move the key phase.
                let grace = self.key_grace();
                let keys = self.packets.keys_mut().expect("opened with them");
                keys.on_opened(now, opened, grace);
                self.handle_authentic(now, arrival, &header, frames)
            }
            None => {
                match clear {
                    Some(clear) => self.handle_clear_handshake(now, path, &clear),
                    None => self.counters.forged += 1,
                }
                false
            }
        }
    }

    /// The largest packet number authenticated on `path`, against which
    /// a header's truncated number expands.
    pub fn largest_received(&self, path: PathId) -> Option<u64> {
        self.paths.get(&path)?.largest_received()
    }

    /// A datagram from the peer (opened, or insecure), its header's packet
    /// number expanded: replay check, then frames. Returns false if it was
    /// a replay or is dropped.
    pub(super) fn handle_authentic(
        &mut self,
        now: Instant,
        arrival: Arrival,
        header: &Header,
        payload: &[u8],
    ) -> bool {
        let Arrival { path, len, at, .. } = arrival;
        // Validate every frame before acting on any.
        let base = self.streams.recv.cumulative();
        // Most datagrams carry a few frames: kept inline, not allocated.
        let mut frames: SmallVec<[Frame<'_>; 4]> = SmallVec::new();
        let sealed = self.cfg.security.is_sealed();
        let Some(scan) = Scan::keeping(payload, sealed, base, |f| frames.push(f)) else {
            self.counters.malformed += 1;
            return false;
        };
        if self.ending.close.is_some() {
            return self.on_packet_while_closing(now, path, header.packet_number, payload);
        }
        // A handshaking client can use nothing but the answer (or a refusal):
        // acknowledging data it could not keep would lose that data.
        if self.is_handshaking() && !scan.handshake && !self.cfg.security.is_sealed() {
            self.counters.unexpected += 1;
            return false;
        }
        if !self.paths.contains_key(&path) && !self.admit_path(now, path, len, at) {
            self.counters.unexpected += 1;
            return false;
        }
        let p = self.paths.get_mut(&path).expect("path exists");
        if !p.on_authenticated(header.packet_number) {
            self.counters.duplicate_packets += 1;
            return false;
        }
        // Anything but a HELLO proves the client has our answer.
        if !scan.hello && !self.handshake.is_done() {
            self.on_confirmed(path, at);
        }
        self.credit_received(path, len);
        if !self.record_arrival(arrival, header, scan.ack_eliciting) {
            return false;
        }
        // Where the arrival goes in the log: before what its frames do.
        let mut traced = self.trace_arrival_slot();
        self.on_peer_heard(now, path);
        if scan.ack_eliciting {
            self.extend_drain(now);
        }
        for frame in frames {
            if matches!(self.state, State::Failed | State::Closed) {
                break;
            }
            if let Some((_, frames)) = traced.as_mut() {
                frames.note(&frame);
            }
            self.handle_frame(now, path, frame);
        }
        if let Some((slot, frames)) = traced {
            let packet = (path, header.packet_number, len, header.short);
            self.trace_received(now, slot, packet, frames);
        }
        self.check_progress(now);
        self.gather_trace(now);
        true
    }

    /// The connection records an authentic packet's arrival; false if it
    /// is dropped there (a closed connection, or a duplicate).
    fn record_arrival(&mut self, arrival: Arrival, header: &Header, ack_eliciting: bool) -> bool {
        let p = self.paths.get_mut(&arrival.path).expect("path exists");
        if p.state() == PathState::Closed {
            self.counters.unexpected += 1;
            return false;
        }
        let pn = header.packet_number;
        let (max_ack_delay, ack_every) = (self.cfg.max_ack_delay, self.cfg.ack_every);
        if !p.on_received(arrival.at, pn, ack_eliciting, max_ack_delay, ack_every) {
            self.counters.duplicate_packets += 1;
            return false;
        }
        p.on_mbecn(header.mbecn);
        p.on_header_form(header.short);
        if arrival.ecn == Ecn::Ce {
            p.on_ce_received();
        }
        true
    }

    /// An ack-eliciting packet while draining: a retransmission of the
    /// peer's end, whose ACK was lost; the peer keeps trying until the
    /// next one arrives.
    fn extend_drain(&mut self, now: Instant) {
        if let State::Draining { until } = self.state {
            let until = until.max(now + self.drain_linger());
            self.state = State::Draining { until };
        }
    }

    /// A connection the session does not have spoke first, its datagram of
    /// `len` bytes arriving `at`: a server takes it (and challenges its
    /// address) if it may. Whether it did.
    fn admit_path(&mut self, now: Instant, path: PathId, len: usize, at: Instant) -> bool {
        let may_join =
            self.role == Role::Server && self.is_established() && path.0 < self.cfg.max_paths;
        if !may_join {
            return false;
        }
        self.insert_path(path, now);
        self.start_validation(now, path, len, true);
        self.normalize_windows();
        // The client's first connections all speak at once, as soon as
        // our answer arrives: how much later than its confirmation this
        // one's first packet came says how much longer its way is.
        if let Some(confirmed) = self
            .handshake
            .confirmed_at()
            .filter(|_| path.0 < self.cfg.paths)
        {
            let p = self.paths.get_mut(&path).expect("just inserted");
            p.on_opening(at.saturating_duration_since(confirmed));
        }
        true
    }

    /// The client's first packet after our answer arrived, on `path`: it
    /// dates the handshake's round trip there, if our answers on `path`
    /// went close enough together to tell.
    fn on_confirmed(&mut self, path: PathId, at: Instant) {
        if let Some(p) = self.paths.get_mut(&path) {
            if let Some(rtt) = p.answer_rtt(at) {
                p.on_exchange_rtt(rtt);
            }
        }
        self.handshake.confirm(Some(at));
        self.hold_receive_window();
    }

    /// The client's opening (first or repeated) arrived on `path`: the
    /// half-open session lives on, and the connection's lag is noted.
    pub(super) fn on_opening(&mut self, now: Instant, path: PathId) {
        if let Some(server) = self.handshake.server_mut() {
            server.on_opening(now);
        }
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_opening(now.saturating_duration_since(self.epoch));
        }
    }

    /// An authentic packet arrived on `path`: the peer is not silent.
    pub(super) fn on_peer_heard(&mut self, now: Instant, path: PathId) {
        self.liveness.on_heard(now, path);
        for p in self.paths.values_mut() {
            p.on_silence_over();
        }
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_heard();
        }
    }

    fn handle_frame(&mut self, now: Instant, path: PathId, frame: Frame<'_>) {
        match frame {
            Frame::Ping => {}
            Frame::Blocked(limit) => {
                let rtt = self.recv_growth_interval();
                match self.streams.recv.on_peer_blocked(limit, now, rtt) {
                    Ok(grew) => self.streams.owe_window_update(grew),
                    Err(_) => self.violation(Violation::BlockedBeyondLimit),
                }
            }
            Frame::Ece(level) => {
                if let Some(p) = self.paths.get_mut(&path) {
                    p.cc_mut().on_ece(now, level);
                    p.trace.stale = true;
                }
                self.trace_event(now, EventKind::MbEcn { path, level });
            }
            Frame::Hello(_) => {
                if self.role == Role::Server {
                    self.on_opening(now, path);
                    if let Some(p) = self.paths.get_mut(&path) {
                        p.pending.hello_ack = true;
                    }
                }
            }
            Frame::HelloAck(h) => self.on_hello_ack(h),
            Frame::Stream { offset, fin, data } => {
                if !self.is_established() {
                    self.counters.unexpected += 1;
                    return;
                }
                match self.streams.recv.insert(offset, data, fin) {
                    Ok(()) => {
                        if let Some(p) = self.paths.get_mut(&path) {
                            p.on_stream_received(data.len());
                        }
                        let rtt = self.recv_growth_interval();
                        let grew = self
                            .streams
                            .recv
                            .on_data(offset + data.len() as u64, now, rtt);
                        self.streams.owe_window_update(grew);
                    }
                    Err(RecvError::FlowControl) => self.violation(Violation::BeyondWindow),
                    Err(RecvError::FinalSize) => self.violation(Violation::BeyondEnd),
                    Err(RecvError::Fragmented) => self.violation(Violation::TooFragmented),
                }
            }
            Frame::Ack(ack) => self.on_ack(now, path, &ack, AckRoute::Own),
            Frame::PathAck { path: acked, ack } => {
                // A copy for a connection we closed or never had: the
                // original, if any, is what counts.
                if self
                    .paths
                    .get(&acked)
                    .is_some_and(|p| p.state() != PathState::Closed)
                {
                    let route = if acked == path {
                        AckRoute::Own
                    } else {
                        AckRoute::Copy
                    };
                    self.on_ack(now, acked, &ack, route);
                } else {
                    self.counters.unexpected += 1;
                }
            }
            Frame::Close { code, reason } => self.on_close(code, reason),
            Frame::PathClose { path: closed } => self.on_path_closed(now, closed),
            Frame::PathChallenge(data) => self.on_path_challenge(path, data),
            Frame::PathResponse(data) => self.on_path_response(now, path, data),
            Frame::Padding
            | Frame::ClientHello { .. }
            | Frame::ServerHello { .. }
            | Frame::Retry { .. } => {}
        }
    }

    /// An ACK of connection `path`'s packets, which arrived on it or, as a
    /// copy, on another connection.
    fn on_ack(&mut self, now: Instant, path: PathId, ack: &AckFrame, route: AckRoute) {
        if !self.is_established() {
            self.counters.unexpected += 1;
            return;
        }
        let p = self.paths.get_mut(&path).expect("path exists");
        // Numbers from the peer are checked before anything uses them.
        match p.validate_ack(ack) {
            Err(AckError::NeverSent) => return self.violation(Violation::AckNeverSent),
            Err(AckError::Skipped) => return self.violation(Violation::AckSkipped),
            Ok(()) => {}
        }
        if !self
            .streams
            .send
            .is_plausible_cumulative(ack.cumulative, ack.fin)
        {
            return self.violation(Violation::AckDataNeverSent);
        }
        let acked_before = self.streams.send.acked_bytes;
        let delivered_before = self.streams.send.delivered_on(path);
        let p = self.paths.get_mut(&path).expect("path exists");
        let outcome = p.on_ack_frame(
            now,
            ack,
            route,
            self.peer.max_ack_delay(),
            &mut self.streams.send,
        );
        let bytes = self.streams.send.delivered_on(path) - delivered_before;
        if bytes > 0 {
            self.trace_event(now, EventKind::StreamAcked { path, bytes });
        }
        if outcome.back_from_probing {
            self.notices.push(Event::PathUp(path));
        }
        self.streams.send.update_max_data(ack.max_data);
        self.streams.send.on_cumulative(ack.cumulative, ack.fin);
        self.streams.on_peer_cumulative(ack.cumulative);
        if self.streams.send.acked_bytes > acked_before || !self.streams.send.has_outstanding() {
            self.liveness.on_progress(now);
            for p in self.paths.values_mut() {
                p.on_session_progress();
            }
        }
        self.normalize_windows();
        self.autotune_send_buffer();
    }

    pub(super) fn on_close(&mut self, code: u64, reason: &[u8]) {
        let reason = String::from_utf8_lossy(reason).into_owned();
        let err = match CloseCode::from_value(code) {
            Some(CloseCode::Controller) => SessionError::UnknownController(reason),
            _ => SessionError::PeerAborted { code, reason },
        };
        self.fail(err);
        self.enter_draining(code);
    }

    pub(super) fn on_path_closed(&mut self, now: Instant, id: PathId) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        if p.state() == PathState::Closed {
            return;
        }
        p.close(now, &mut self.streams.send);
        self.notices.push(Event::PathClosed(id));
        self.normalize_windows();
        if self.paths.values().all(|p| p.state() == PathState::Closed) {
            self.fail(SessionError::AllPathsClosed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Hello;

    fn payload(frames: &[Frame<'_>]) -> Vec<u8> {
        let mut buf = Vec::new();
        for f in frames {
            f.clone().encode(&mut buf);
        }
        buf
    }

    fn hello() -> Hello {
        Hello {
            version: VERSION,
            paths: 1,
            segment_size: 1200,
            send_window: 1 << 20,
            recv_window: 1 << 20,
            max_ack_delay_us: 10_000,
            cc: "cubic".into(),
        }
    }

    #[test]
    fn a_scan_tells_what_a_datagram_asks_for() {
        let acks_only = payload(&[Frame::Padding, Frame::Blocked(7)]);
        assert_eq!(Scan::of(&acks_only, true, 0), Some(Scan::default()));
        let ping = payload(&[Frame::Ping]);
        let scan = Scan::of(&ping, true, 0).unwrap();
        assert!(scan.ack_eliciting && !scan.handshake && !scan.hello);
        let close = payload(&[Frame::Close {
            code: 1,
            reason: b"x",
        }]);
        let scan = Scan::of(&close, false, 0).unwrap();
        assert!(scan.handshake && !scan.ack_eliciting);
        let answer = payload(&[Frame::HelloAck(hello())]);
        let scan = Scan::of(&answer, false, 0).unwrap();
        assert!(scan.handshake && scan.ack_eliciting && !scan.hello);
        let opening = payload(&[Frame::Hello(hello())]);
        let scan = Scan::of(&opening, false, 0).unwrap();
        assert!(scan.hello && scan.ack_eliciting);
    }

    #[test]
    fn a_sealed_datagram_with_a_handshake_frame_is_malformed() {
        let opening = payload(&[Frame::Ping, Frame::Hello(hello())]);
        assert_eq!(Scan::of(&opening, true, 0), None);
        let answer = payload(&[Frame::HelloAck(hello())]);
        assert_eq!(Scan::of(&answer, true, 0), None);
        let mut truncated = payload(&[
            Frame::Ping,
            Frame::Close {
                code: 1,
                reason: b"bye",
            },
        ]);
        truncated.pop();
        assert_eq!(Scan::of(&truncated, false, 0), None);
    }
}
