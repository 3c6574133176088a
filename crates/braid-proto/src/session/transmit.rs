//! Outgoing datagrams: control frames first, then data, then standalone ACKs.
//!
//! Data goes on the connection the [`scheduler`](super::scheduler) picks,
//! with an ACK riding along when one is owed there.

use super::batch::Batch;
use super::scheduler::{self, Demand};
use super::{CloseCode, Session, State};
use crate::crypto::UpdatePolicy;
use crate::path::Path;
use crate::send_stream::Pending;
use crate::stats::PathState;
use crate::wire::{self, Frame, Header, MIN_INITIAL_DATAGRAM, VERSION};
use crate::PathId;
use crate::{Ecn, Instant};
use std::net::SocketAddr;
use std::time::Duration;

/// ACK ranges a data packet may carry and still fit a 1500-byte IP MTU
/// with the default payload; more go in an ACK-only packet.
const PIGGYBACK_RANGES: usize = 4;

/// Bytes a control or ACK-only datagram takes at most, for checking an
/// unvalidated connection's amplification credit before building one.
pub(super) const CONTROL_ESTIMATE: usize = 320;

/// Datagrams to send: one, or a GSO batch of several for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Connection to send it on.
    pub path: PathId,
    /// Bytes written to the buffer: all the datagrams, one after another.
    pub size: usize,
    /// ECN codepoint to set.
    pub ecn: Ecn,
    /// With several datagrams, the size of each but the last, which may
    /// be shorter (a GSO segment size); `None` for a single datagram.
    pub segment_size: Option<usize>,
    /// Send it to the address being probed on `path` (see
    /// [`Session::probe_candidate`]) rather than the connection's own.
    /// Such a datagram travels alone.
    pub to_candidate: bool,
    /// Where it goes: the connection's address, or the candidate's, as
    /// the session was told them ([`Session::set_remote`]); `None` for a
    /// caller that never tells addresses (each connection its own link).
    pub to: Option<SocketAddr>,
}

impl Session {
    /// Writes what to send next into `buf` (cleared first): up to
    /// `max_datagrams` datagrams for one connection, consecutive in `buf`,
    /// all of [`Transmit::segment_size`] bytes but the last, which may be
    /// shorter. `None` once there is nothing to send now.
    ///
    /// The caller calls it until it returns `None`: a datagram built while
    /// gathering a batch that may not join it (another connection's, or a
    /// larger one) is held, already sealed, for the next calls (see
    /// `batch`). With `max_datagrams` 1 nothing is ever held, and the
    /// datagrams are those of any other `max_datagrams`, one per call.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        buf.clear();
        let max = max_datagrams.max(1);
        // Nothing is held unless batches were asked for: no call then.
        let held = self.packets.held_mut();
        let mut batch = (held.len() > 0)
            .then(|| held.take_batch(max, buf))
            .flatten();
        while batch.as_ref().is_none_or(Batch::is_open) {
            let start = buf.len();
            self.packets.begin(start);
            let Some(t) = self.next_transmit(now, buf) else {
                buf.truncate(start);
                break;
            };
            let Some(b) = &mut batch else {
                batch = Some(Batch::new(t, max));
                continue;
            };
            if !b.offer(t) {
                let held = self.packets.held_mut();
                held.push(t, &buf[start..]);
                buf.truncate(start);
                if held.len() >= max {
                    break;
                }
            }
        }
        if batch.is_none() {
            self.packets.held_mut().release_spare();
        }
        batch.map(|b| {
            let t = b.transmit();
            let to = if t.to_candidate {
                self.candidate_address(t.path)
            } else {
                self.remote(t.path)
            };
            Transmit { to, ..t }
        })
    }

    fn next_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.prepare_keys(now);
        if let Some(t) = self.transmit_close(now, buf) {
            return Some(t);
        }
        if matches!(self.state, State::Closed | State::Failed) {
            return None;
        }
        if let Some(t) = self.transmit_control(now, buf) {
            return Some(t);
        }
        if !self.is_established() {
            return None;
        }
        if let Some(t) = self.transmit_pmtu_probe(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.transmit_data(now, buf) {
            return Some(t);
        }
        self.transmit_ack(now, buf)
    }

    /// Sealed sessions: ends the session if the key has sealed all AES-GCM
    /// allows and no new phase could start (a peer that never takes one).
    /// A phase starts as a packet does (see `start_packet`), so that a
    /// side never counts a phase the peer saw no packet of.
    fn prepare_keys(&mut self, now: Instant) {
        let Some(keys) = self.packets.keys_mut() else {
            return;
        };
        if keys.is_exhausted()
            && !keys.can_step(now)
            && self.ending.close.is_none()
            && self.notices.error().is_none()
        {
            self.abort(
                CloseCode::Security.into(),
                "AEAD usage limit reached: the peer never took a new key phase",
            );
        }
    }

    /// Starts a datagram on `path`: its header, short if the peer offers
    /// it there (see `path::short_headers`) and the handshake is done.
    pub(super) fn start_packet(&mut self, now: Instant, path: PathId, buf: &mut Vec<u8>) -> u64 {
        let short = self.handshake.is_done() && self.paths[&path].sends_short_headers();
        self.start_packet_in(now, path, short, buf)
    }

    /// Starts a datagram that names its session and path in full: path
    /// validation's, which travel when an address may have changed, and
    /// handshake answers.
    pub(super) fn start_long_packet(
        &mut self,
        now: Instant,
        path: PathId,
        buf: &mut Vec<u8>,
    ) -> u64 {
        self.start_packet_in(now, path, false, buf)
    }

    fn start_packet_in(
        &mut self,
        now: Instant,
        path: PathId,
        short: bool,
        buf: &mut Vec<u8>,
    ) -> u64 {
        let p = self.paths.get_mut(&path).expect("path exists");
        let pn = p.take_packet_number(&mut self.rng);
        let largest_acked = p.largest_acked();
        // A new key phase starts, if one is due (see
        // `PacketKeys::prepare_seal`), before the header names it. Clear
        // handshake datagrams carry the bit too, unread: the handshake
        // authenticates them, not the packet keys.
        let policy = UpdatePolicy {
            packets: self.cfg.key_update_packets,
            interval: self.cfg.key_update_interval,
        };
        let key_phase = self
            .packets
            .keys_mut()
            .is_some_and(|k| k.prepare_seal(now, policy));
        Header {
            version: VERSION,
            key_phase,
            mbecn: 0,
            short,
            session_id: self.session_id,
            path,
            packet_number: pn,
        }
        .encode_for(buf, largest_acked);
        self.trace_payload_starts(buf.len());
        self.packets.set_number(path, pn);
        self.liveness.on_sent(now);
        pn
    }

    /// Seals the datagram (once the session has keys) and accounts for it.
    pub(super) fn finish_packet(&mut self, path: PathId, buf: &mut Vec<u8>) -> Transmit {
        self.trace_frames(path, buf);
        self.seal_packet(buf);
        self.account_packet(path, buf)
    }

    /// Seals the datagram being written, once the session has keys.
    fn seal_packet(&mut self, buf: &mut Vec<u8>) {
        self.packets.seal(buf);
    }

    /// A handshake datagram: it travels in clear, its content authenticated
    /// (or not) by the handshake itself.
    fn finish_clear_packet(&mut self, path: PathId, buf: &[u8]) -> Transmit {
        self.trace_frames(path, buf);
        self.account_packet(path, buf)
    }

    fn account_packet(&mut self, path: PathId, buf: &[u8]) -> Transmit {
        let size = self.packets.len(buf);
        self.charge_amplification(path, size);
        let p = self.paths.get_mut(&path).expect("path exists");
        p.on_datagram_sent(size);
        self.trace_sent(path, size, wire::is_short(buf[0]));
        Transmit {
            path,
            size,
            ecn: Ecn::Ect0,
            segment_size: None,
            to_candidate: false,
            to: None,
        }
    }

    /// The ACK `path` owes. Only an ACK in a packet of its own (`alone`)
    /// has room for receive times; one riding on data leaves them for the
    /// next such ACK (in full duplex the ACKs ride on the peer's paced data,
    /// and their frames' own receive times serve the train).
    fn push_ack(&mut self, now: Instant, path: PathId, buf: &mut Vec<u8>, alone: bool) {
        let max_data = self.streams.recv.max_data();
        let p = self.paths.get_mut(&path).expect("path exists");
        let ece = p.take_ece();
        if let Some(level) = ece {
            Frame::Ece(level).encode(buf);
        }
        let mut ack = p.ack_frame(
            now,
            self.streams.recv.cumulative(),
            self.streams.recv.is_fin_received(),
            max_data,
        );
        let mut ping = false;
        if alone {
            ack.rx_times = p.ack_rx_times();
            ping = p.ack_wants_ping(now, self.cfg.rto.initial_rto);
            if ping {
                Frame::Ping.encode(buf);
                p.on_ack_ping_sent(now);
            }
        }
        let frame = Frame::Ack(ack);
        frame.encode(buf);
        p.on_ack_sent(now, self.packets.number(), alone);
        if let Frame::Ack(ack) = &frame {
            self.trace_ack_written(path, ack, ece.is_some(), ping);
        }
        self.streams.on_window_advertised();
        self.on_own_ack_sent(now, path);
        if let (Frame::Ack(ack), Some(p)) = (frame, self.paths.get_mut(&path)) {
            p.recycle_ack_frame(ack);
        }
    }

    /// A copy of our CLOSE, when one is due (see `close`).
    fn transmit_close(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.ending.close.as_ref().is_none_or(|c| c.left == 0) {
            return None;
        }
        let path = if self
            .paths
            .get(&self.liveness.last_recv_path())
            .is_some_and(|p| p.is_usable())
        {
            Some(self.liveness.last_recv_path())
        } else {
            self.paths.values().find(|p| p.is_usable()).map(|p| p.id())
        }?;
        if !self.amplification_allows(path, CONTROL_ESTIMATE) {
            return None;
        }
        // A client without our answer could not open a sealed CLOSE: the
        // answer goes first (a refusal travels inside it).
        if let Some(answer) = self.handshake.server_mut().and_then(|s| s.take_answer()) {
            self.start_long_packet(now, path, buf);
            buf.extend_from_slice(answer.frame());
            return Some(self.finish_clear_packet(path, buf));
        }
        // Only a peer that confirmed the handshake can open our answers.
        let (linger, period, gap) = (
            self.handshake.is_done(),
            self.closing_period(),
            self.answer_gap(),
        );
        let close = self.ending.close.as_mut().expect("checked");
        close.on_sent(now, linger, period, gap);
        let (code, reason) = (close.code, close.reason.clone());
        if close.is_spent() {
            self.ending.close = None;
        }
        self.start_packet(now, path, buf);
        Frame::Close {
            code,
            reason: reason.as_bytes(),
        }
        .encode(buf);
        Some(self.finish_packet(path, buf))
    }

    /// Handshake, path-validation, path-close and probe frames, in path order.
    fn transmit_control(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some(t) = self.transmit_validation(now, buf) {
            return Some(t);
        }
        let established = self.is_established();
        let id = self.paths.values().find(|p| {
            p.is_usable()
                && self.validations_allow(p.id())
                && (p.pending.hello
                    || p.pending.hello_ack
                    || p.pending.close
                    || (established && p.pending.probe))
        })?;
        let id = id.id();
        if let Some(pending) = self.probe_carries(id) {
            self.paths.get_mut(&id).expect("path exists").pending.probe = false;
            return self.send_segment(now, id, pending, buf);
        }
        let pn = self.start_packet(now, id, buf);
        let hello = self.hello();
        let p = self.paths.get_mut(&id).expect("path exists");
        if p.pending.hello {
            p.pending.hello = false;
            match self.handshake.client().filter(|c| c.noise().is_some()) {
                Some(client) => {
                    let hs = client.noise().expect("filtered");
                    let (pake, noise) = hs.message();
                    Frame::ClientHello {
                        mode: hs.mode(),
                        token: client.retry_token(),
                        pake,
                        noise,
                    }
                    .encode(buf);
                }
                None => Frame::Hello(hello).encode(buf),
            }
            wire::pad_to(buf, self.packets.start() + MIN_INITIAL_DATAGRAM);
            return Some(self.finish_clear_packet(id, buf));
        }
        let hello_ack = p.pending.hello_ack;
        if hello_ack {
            p.pending.hello_ack = false;
            p.on_answer_sent(now);
            if self.is_sealed() {
                let answer = self.handshake.answer()?;
                buf.extend_from_slice(answer.frame());
                return Some(self.finish_clear_packet(id, buf));
            }
            Frame::HelloAck(hello).encode(buf);
        } else if p.pending.close {
            Frame::PathClose { path: id }.encode(buf);
            let t = self.finish_packet(id, buf);
            self.on_path_closed(now, id);
            return Some(t);
        } else {
            p.pending.probe = false;
            Frame::Ping.encode(buf);
            p.on_sent(now, pn, 0, None, false);
        }
        // A probe repeats our ACK even when none is owed: in full duplex the
        // last one may have been lost, and the peer's probes, which it
        // answers, are its only other chance to learn what arrived.
        let ping = !hello_ack;
        let ack = self.paths[&id].is_ack_owed() || (ping && self.paths[&id].has_received());
        if self.is_established() && ack {
            self.push_ack(now, id, buf, false);
        }
        Some(self.finish_packet(id, buf))
    }

    /// The segment a probe on `id` carries instead of a bare PING: the
    /// oldest lost one, else new data (RFC 9002 §6.2.4), when no connection
    /// is active to carry it. As TCP retransmits at an RTO, the probe then
    /// both tests the path and moves the stream; bare PINGs cost a round
    /// trip per segment, which on one lossy connection can outlast the
    /// peer's patience (a receiver's verdict waited 8 s in
    /// `tests/ending.rs`, another never arrived), and an answer written
    /// while the connection probes waited for a PING's ACK first.
    fn probe_carries(&self, id: PathId) -> Option<Pending> {
        let p = &self.paths[&id];
        let only_probe =
            p.pending.probe && !p.pending.hello && !p.pending.hello_ack && !p.pending.close;
        let none_active = self
            .paths
            .values()
            .all(|q| !(q.is_usable() && q.state() == PathState::Active));
        // A connection still being validated keeps to its amplification
        // credit, which a data packet may exceed.
        let validated = p.is_validated();
        if !(only_probe
            && none_active
            && validated
            && self.is_established()
            && self.handshake.is_done())
        {
            return None;
        }
        self.streams.send.peek()
    }

    /// Whether a control or ACK-only packet fits `id`'s amplification credit.
    fn validations_allow(&self, id: PathId) -> bool {
        self.amplification_allows(id, CONTROL_ESTIMATE)
    }

    /// PATH_RESPONSEs we owe, then PATH_CHALLENGEs that are due. Both need
    /// keys (they would prove nothing forgeable).
    fn transmit_validation(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.is_established() || (self.is_sealed() && self.packets.keys().is_none()) {
            return None;
        }
        while let Some((id, data)) = self.challenges.responses.pop() {
            if self.paths.get(&id).is_some_and(|p| p.is_usable()) && self.validations_allow(id) {
                self.start_long_packet(now, id, buf);
                Frame::PathResponse(data).encode(buf);
                if self.paths[&id].is_ack_owed() {
                    self.push_ack(now, id, buf, false);
                }
                return Some(self.finish_packet(id, buf));
            }
        }
        // Alone in its datagram, so that a small credit suffices.
        if let Some((id, data)) = self.due_candidate_challenge(now) {
            self.start_long_packet(now, id, buf);
            Frame::PathChallenge(data).encode(buf);
            self.trace_frames(id, buf);
            self.seal_packet(buf);
            // Not the connection's address: its credit is the candidate's.
            let size = self.packets.len(buf);
            self.trace_sent(id, size, false);
            self.on_candidate_challenge_sent(now, size);
            self.paths
                .get_mut(&id)
                .expect("path exists")
                .on_datagram_sent(size);
            return Some(Transmit {
                path: id,
                size,
                ecn: Ecn::Ect0,
                segment_size: None,
                to_candidate: true,
                to: None,
            });
        }
        let (id, data) = self.due_challenge(now)?;
        self.start_long_packet(now, id, buf);
        Frame::PathChallenge(data).encode(buf);
        self.on_challenge_sent(now, id);
        Some(self.finish_packet(id, buf))
    }

    fn transmit_data(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.handshake.is_done() {
            return None; // the client may not have our HELLO_ACK yet and would drop data
        }
        if self.is_pmtud_on() {
            self.streams.send.segment_size = self.pmtu_segment_size();
        }
        let Some(pending) = self.streams.send.peek() else {
            if let Some(sent) = self.transmit_tail_copy(now, buf) {
                return Some(sent);
            }
            // Only an empty buffer is application-limited; a sender held back
            // by flow control or its send buffer still measures the path
            // (Linux tracks those as rwnd- and sndbuf-limited, not app-limited).
            if !self.streams.send.has_unsent() {
                for p in self.paths.values_mut() {
                    p.on_app_limited();
                }
            }
            // At most one BLOCKED per round trip: the receiver grows its
            // window at most that often anyway.
            let rtt = self
                .paths
                .values()
                .filter(|p| p.rtt().has_sample())
                .map(|p| p.rtt().srtt_or(Duration::ZERO))
                .min()
                .unwrap_or(self.cfg.rto.initial_rto)
                .max(Duration::from_millis(1));
            self.streams.on_nothing_to_send(now, rtt);
            return None;
        };
        let charge = u64::from(pending.len).max(1);
        // What the faster connections would have to deliver first, unless
        // the application may write more than the buffer holds.
        let backlog = (!self.streams.send.is_buffer_limited()).then(|| self.streams.send.backlog());
        // Segments as cut now (path MTU discovery may have grown them past
        // the negotiated size): the pacer's burst is counted in them.
        let id = scheduler::pick_data_path(
            &mut self.paths,
            now,
            charge,
            u64::from(self.streams.send.segment_size),
            Demand {
                backlog,
                ahead: self.streams.send.ahead(),
                known_len: self.streams.send.is_len_announced(),
            },
        )?;
        self.send_segment(now, id, pending, buf)
    }

    /// `pending` on connection `id`, with the ACK it owes.
    pub(super) fn send_segment(
        &mut self,
        now: Instant,
        id: PathId,
        pending: Pending,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        // An ACK needing many ranges goes in a packet of its own first.
        let p = &self.paths[&id];
        let piggyback = p.is_ack_owed() || p.short_offer_due(now);
        if piggyback && p.ack_range_count() > PIGGYBACK_RANGES {
            self.start_packet(now, id, buf);
            self.push_ack(now, id, buf, true);
            return Some(self.finish_packet(id, buf));
        }
        let pn = self.start_packet(now, id, buf);
        if piggyback {
            self.push_ack(now, id, buf, false);
        }
        let pending = self.fit_segment(id, pending, buf);
        let charge = u64::from(pending.len).max(1);
        let frame_start = buf.len();
        // The frame's header, then its data straight from the send buffer,
        // to the end of the datagram.
        let span = self.streams.offset_span();
        wire::encode_stream_header(buf, pending.offset, pending.fin, span);
        self.streams
            .send
            .read_segment(pending.offset, pending.len, buf);
        self.trace_stream_written(pending.offset, pending.len, pending.fin);
        debug_assert_eq!(
            buf.len() - frame_start,
            wire::stream_frame_overhead_within(pending.offset, span) + pending.len as usize
        );
        if !self.streams.send.has_outstanding() {
            // Data becomes outstanding: the no-progress count starts.
            self.liveness.on_progress(now);
            for p in self.paths.values_mut() {
                p.on_session_progress();
            }
        }
        let due = scheduler::expected_arrival(&self.paths[&id], charge)
            .map(|arrival| self.clock_us(now).saturating_add(arrival));
        self.streams.send.on_sent(pending, id, due);
        if pending.retransmission {
            self.counters.retransmitted += 1;
        } else {
            self.counters.segments_sent += 1;
        }
        let p = self.paths.get_mut(&id).expect("path exists");
        p.on_sent(
            now,
            pn,
            charge,
            Some(pending.offset),
            pending.retransmission,
        );
        Some(self.finish_packet(id, buf))
    }

    /// Whether `p`'s due ACK can wait for the data packet its pacer releases
    /// shortly: in full duplex every data packet carries an ACK, and ACK-only
    /// packets would take queue slots from data in both directions. The wait
    /// is at most a quarter of the minimum RTT and the ACK delay limit.
    fn ack_rides_data(&self, p: &Path, now: Instant) -> bool {
        let hold = self.cfg.max_ack_delay.min(p.rtt().min() / 4);
        !p.is_ack_urgent(now)
            && self.streams.send.peek().is_some()
            && p.can_send_data(u64::from(self.cfg.segment_size))
            && p.pacing_wakeup().is_some_and(|t| t <= now + hold)
    }

    /// A standalone ACK on a path that owes one, with the copies of slower
    /// connections' ACKs that ride there; copies that waited long enough on
    /// their own; or a window update.
    fn transmit_ack(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let copies = self.ack_copy_due();
        let due = self
            .paths
            .values()
            .find(|p| {
                p.is_usable()
                    && p.ack_due(now)
                    && !self.ack_rides_data(p, now)
                    && self.validations_allow(p.id())
            })
            .map(|p| p.id());
        // Copies alone: the fast connection's own ACK only if it owes one.
        let mut own_ack = true;
        let id = match due {
            Some(id) => id,
            None if copies.is_some_and(|(_, at)| now >= at) => {
                let (fast, _) = copies?;
                own_ack = self.paths[&fast].is_ack_owed();
                fast
            }
            None if self.streams.is_window_news_owed() => {
                let last = self
                    .paths
                    .get(&self.liveness.last_recv_path())
                    .filter(|p| p.state() != PathState::Closed);
                let any = last.or_else(|| self.paths.values().find(|p| p.is_usable()))?;
                if !self.validations_allow(any.id()) {
                    return None;
                }
                any.id()
            }
            None => return None,
        };
        self.start_packet(now, id, buf);
        if self.streams.take_blocked() {
            Frame::Blocked(self.streams.send.max_data()).encode(buf);
        }
        if own_ack {
            self.push_ack(now, id, buf, true);
        }
        if copies.is_some_and(|(fast, _)| fast == id) {
            self.push_ack_copies(now, id, buf);
        }
        Some(self.finish_packet(id, buf))
    }
}
