//! Outgoing datagrams: control frames first, then data, then standalone ACKs.
//!
//! Data goes on a connection whose window has room and whose pacer lets a
//! packet go now (NCP's pull model, paced). Among those, the one that would
//! acknowledge it earliest wins (its minimum RTT, or the time its queue
//! takes to drain at its delivery rate), and a slower connection is skipped
//! when the faster ones would deliver the whole backlog before the slow
//! one's packet arrived (ECF, Lim et al., CoNEXT 2017), so the tail of a
//! transfer does not wait on a slow path. A window-based connection holds
//! at most four times its bandwidth-delay product while another would
//! acknowledge sooner, so a large window cannot queue the stream for
//! seconds on a slow path.

use super::{Session, State};
use crate::path::Path;
use crate::stats::PathState;
use crate::wire::{self, Frame, Header, MIN_INITIAL_DATAGRAM, VERSION};
use crate::{Ecn, Instant};
use std::time::Duration;

/// ACK ranges a data packet may carry and still fit a 1500-byte IP MTU
/// with the default payload; more go in an ACK-only packet.
const PIGGYBACK_RANGES: usize = 4;
/// Packets a connection may have in flight before its first RTT sample
/// (RFC 9002 §7.2's initial window of 10 packets).
const UNMEASURED_WINDOW_PACKETS: u64 = 10;
/// Bandwidth-delay products a connection may hold in flight while another
/// would acknowledge sooner (see `is_queue_capped`).
const QUEUE_CAP_BDPS: u64 = 4;

/// Bytes a control or ACK-only datagram takes at most, for checking an
/// unvalidated connection's amplification credit before building one.
pub(super) const CONTROL_ESTIMATE: usize = 320;

/// A datagram to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Connection to send it on.
    pub path: u8,
    /// Length of the datagram in the buffer.
    pub size: usize,
    /// ECN codepoint to set.
    pub ecn: Ecn,
}

impl Session {
    /// Writes the next datagram into `buf` (cleared first), if there is one to send now.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        self.poll_transmit_append(now, buf)
    }

    /// Appends the next datagram to `buf`, if there is one to send now: a
    /// driver builds a GSO batch of a connection's datagrams in place.
    /// [`Transmit::size`] is the new datagram's length.
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.packet_start = buf.len();
        let t = self.next_transmit(now, buf);
        if t.is_none() {
            buf.truncate(self.packet_start);
        }
        t
    }

    fn next_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
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
        if let Some(t) = self.transmit_data(now, buf) {
            return Some(t);
        }
        self.transmit_ack(now, buf)
    }

    fn start_packet(&mut self, now: Instant, path: u8, buf: &mut Vec<u8>) -> u64 {
        let p = self.paths.get_mut(&path).expect("path exists");
        let pn = p.take_packet_number(now, &mut self.rng);
        Header {
            version: VERSION,
            mbecn: 0,
            session_id: self.session_id,
            path,
            packet_number: pn,
        }
        .encode(buf);
        self.last_send = now;
        pn
    }

    /// Seals the datagram (once the session has keys) and accounts for it.
    fn finish_packet(&mut self, path: u8, buf: &mut Vec<u8>) -> Transmit {
        if let Some(keys) = &self.keys {
            keys.seal(buf, self.packet_start);
        }
        self.account_packet(path, buf)
    }

    /// A handshake datagram: it travels in clear, its content authenticated
    /// (or not) by the handshake itself.
    fn finish_clear_packet(&mut self, path: u8, buf: &[u8]) -> Transmit {
        self.account_packet(path, buf)
    }

    fn account_packet(&mut self, path: u8, buf: &[u8]) -> Transmit {
        let size = buf.len() - self.packet_start;
        self.charge_amplification(path, size);
        let p = self.paths.get_mut(&path).expect("path exists");
        p.on_datagram_sent(size);
        Transmit {
            path,
            size,
            ecn: Ecn::Ect0,
        }
    }

    fn push_ack(&mut self, now: Instant, path: u8, buf: &mut Vec<u8>) {
        let max_data = self.recv.max_data();
        let p = self.paths.get_mut(&path).expect("path exists");
        if let Some(level) = p.take_ece() {
            Frame::Ece(level).encode(buf);
        }
        Frame::Ack(p.ack_frame(
            now,
            self.recv.cumulative(),
            self.recv.is_fin_received(),
            max_data,
        ))
        .encode(buf);
        p.on_ack_sent(now);
        self.recv.on_advertised();
        self.window_update = false;
    }

    fn transmit_close(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let (code, reason, left) = self.close.take()?;
        let path = if self
            .paths
            .get(&self.last_recv_path)
            .is_some_and(|p| p.is_usable())
        {
            Some(self.last_recv_path)
        } else {
            self.paths.values().find(|p| p.is_usable()).map(|p| p.id())
        }?;
        if !self.amplification_allows(path, CONTROL_ESTIMATE) {
            return None;
        }
        // A client without our answer could not open a sealed CLOSE: the
        // answer goes first (a refusal travels inside it).
        if let Some(answer) = self.answer.take().filter(|_| !self.peer_confirmed) {
            self.close = Some((code, reason, left));
            self.start_packet(now, path, buf);
            buf.extend_from_slice(answer.frame());
            return Some(self.finish_clear_packet(path, buf));
        }
        if left > 1 {
            self.close = Some((code, reason.clone(), left - 1));
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
        let pn = self.start_packet(now, id, buf);
        let hello = self.hello();
        let p = self.paths.get_mut(&id).expect("path exists");
        if p.pending.hello {
            p.pending.hello = false;
            match &self.client_hs {
                Some(hs) => {
                    let (pake, noise) = hs.message();
                    Frame::ClientHello {
                        mode: hs.mode(),
                        token: &self.retry_token,
                        pake,
                        noise,
                    }
                    .encode(buf);
                }
                None => Frame::Hello(hello).encode(buf),
            }
            wire::pad_to(buf, self.packet_start + MIN_INITIAL_DATAGRAM);
            return Some(self.finish_clear_packet(id, buf));
        } else if p.pending.hello_ack {
            p.pending.hello_ack = false;
            if self.is_sealed() {
                let answer = self.answer.as_ref()?;
                buf.extend_from_slice(answer.frame());
                return Some(self.finish_clear_packet(id, buf));
            }
            Frame::HelloAck(hello).encode(buf);
        } else if p.pending.close {
            Frame::PathClose { path: id }.encode(buf);
            let t = self.finish_packet(id, buf);
            self.on_path_closed(id);
            return Some(t);
        } else {
            p.pending.probe = false;
            Frame::Ping.encode(buf);
            p.on_sent(now, pn, 0, None, false);
        }
        if self.is_established() && self.paths[&id].is_ack_owed() {
            self.push_ack(now, id, buf);
        }
        Some(self.finish_packet(id, buf))
    }

    /// Whether a control or ACK-only packet fits `id`'s amplification credit.
    fn validations_allow(&self, id: u8) -> bool {
        self.amplification_allows(id, CONTROL_ESTIMATE)
    }

    /// PATH_RESPONSEs we owe, then PATH_CHALLENGEs that are due. Both need
    /// keys (they would prove nothing forgeable).
    fn transmit_validation(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.is_established() || (self.is_sealed() && self.keys.is_none()) {
            return None;
        }
        while let Some(&(id, data)) = self.responses.front() {
            self.responses.pop_front();
            if self.paths.get(&id).is_some_and(|p| p.is_usable()) && self.validations_allow(id) {
                self.start_packet(now, id, buf);
                Frame::PathResponse(data).encode(buf);
                if self.paths[&id].is_ack_owed() {
                    self.push_ack(now, id, buf);
                }
                return Some(self.finish_packet(id, buf));
            }
        }
        // Alone in its datagram, so that a small credit suffices.
        let (id, data) = self.due_challenge(now)?;
        self.start_packet(now, id, buf);
        Frame::PathChallenge(data).encode(buf);
        self.on_challenge_sent(now, id);
        Some(self.finish_packet(id, buf))
    }

    /// The connection that takes the next data packet: among those whose
    /// window has room, whose pacer is ready and whose queue is not capped
    /// (see `is_queue_capped`), the one where it would be acknowledged
    /// earliest (unmeasured paths count as immediate, so they get
    /// measured). When only pacing holds packets back, the paths remember
    /// when to wake.
    fn pick_data_path(&mut self, now: Instant, charge: u64) -> Option<u8> {
        let mtu = u64::from(self.cfg.mtu);
        let blind = self.blind_window();
        // Only the queue cap reads these, and only with several connections
        // (`blind` is None on one): a single connection skips the work.
        let acks: Vec<(u8, Duration)> = match blind {
            None => Vec::new(),
            Some(_) => self
                .paths
                .values()
                .filter(|p| p.state() == PathState::Active && p.delivery_rate() > 0.0)
                // The smoothed RTT where it is shorter: a connection still
                // growing its window has a delivery rate that understates it.
                .filter_map(|p| {
                    Some((
                        p.id(),
                        expected_ack(p, charge)?.min(p.rtt().srtt_or(p.rtt().min())),
                    ))
                })
                .collect(),
        };
        let mut ready: Option<(Duration, u8)> = None;
        let unvalidated = &self.validations;
        for p in self.paths.values_mut() {
            if unvalidated.contains_key(&p.id())
                || !p.can_send_data(charge)
                || is_queue_capped(p, charge, blind, &acks)
            {
                continue;
            }
            if p.is_pacer_ready(now, charge, mtu) {
                let key = (expected_ack(p, charge).unwrap_or(Duration::ZERO), p.id());
                if ready.is_none_or(|r| key < r) {
                    ready = Some(key);
                }
            }
        }
        let (eta, id) = ready?;
        (!self.is_worth_waiting(id, eta, charge)).then_some(id)
    }

    /// Most bytes an unmeasured connection may have in flight when the
    /// session has others: data queued blind on a slow path holds up the
    /// stream for as long as that path takes to deliver it. The
    /// bandwidth-delay product of the best measured path, at least an
    /// initial window (RFC 9002 §7.2); `None` (no limit but the
    /// controller's) on a single connection.
    fn blind_window(&self) -> Option<u64> {
        if self.paths.values().filter(|p| p.is_usable()).count() < 2 {
            return None;
        }
        let mtu = u64::from(self.cfg.mtu);
        let bdp = self
            .paths
            .values()
            .filter(|p| p.state() == PathState::Active && p.rtt().has_sample())
            .map(|p| (p.delivery_rate() * p.rtt().min().as_secs_f64()) as u64)
            .max()
            .unwrap_or(0);
        Some(bdp.max(UNMEASURED_WINDOW_PACKETS * mtu))
    }

    /// ECF (Lim et al., CoNEXT 2017), over N paths: whether the connections
    /// that would acknowledge a packet sooner than `id` (in `eta`) would
    /// deliver everything waiting to be sent before a packet sent now on
    /// `id` arrived. While the application may write more than the buffer
    /// holds, the backlog is unbounded and no path waits.
    fn is_worth_waiting(&self, id: u8, eta: Duration, charge: u64) -> bool {
        if eta.is_zero() || self.paths[&id].has_tlp_credit() || self.send.is_buffer_limited() {
            return false;
        }
        let backlog = self.send.backlog();
        let mut rate = 0.0;
        let mut first: Option<Duration> = None;
        for p in self.paths.values() {
            if p.id() == id || p.state() != PathState::Active || p.delivery_rate() <= 0.0 {
                continue;
            }
            let Some(t) = expected_ack(p, charge).filter(|t| *t < eta) else {
                continue;
            };
            rate += p.delivery_rate();
            first = Some(first.map_or(t, |f| f.min(t)));
        }
        let Some(first) = first else {
            return false;
        };
        let drain = backlog as f64 / rate;
        eta.as_secs_f64() > first.as_secs_f64() + drain
    }

    fn transmit_data(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.peer_confirmed {
            return None; // the client may not have our HELLO_ACK yet and would drop data
        }
        let Some(pending) = self.send.peek() else {
            // Only an empty buffer is application-limited; a sender held back
            // by flow control or its send buffer still measures the path
            // (Linux tracks those as rwnd- and sndbuf-limited, not app-limited).
            if !self.send.has_unsent() {
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
            let due = self.blocked_sent.is_none_or(|t| now >= t + rtt);
            if self.send.is_flow_blocked() && due {
                self.blocked_sent = Some(now);
                self.blocked_pending = true;
            }
            return None;
        };
        let charge = u64::from(pending.len).max(1);
        let id = self.pick_data_path(now, charge)?;
        // An ACK needing many ranges goes in a packet of its own first.
        let p = &self.paths[&id];
        let piggyback = p.is_ack_owed();
        if piggyback && p.ack_range_count() > PIGGYBACK_RANGES {
            self.start_packet(now, id, buf);
            self.push_ack(now, id, buf);
            return Some(self.finish_packet(id, buf));
        }
        let pn = self.start_packet(now, id, buf);
        if piggyback {
            self.push_ack(now, id, buf);
        }
        let frame_start = buf.len();
        // The frame's header, then its data straight from the send buffer.
        wire::encode_stream_header(buf, pending.offset, pending.fin, pending.len as usize);
        self.send.read_segment(pending.offset, pending.len, buf);
        debug_assert_eq!(
            buf.len() - frame_start,
            wire::stream_frame_overhead(pending.offset, pending.len as usize)
                + pending.len as usize
        );
        if !self.send.has_outstanding() {
            // Data becomes outstanding: the no-progress count starts.
            self.progress_at = now;
            self.rtos_without_progress.clear();
        }
        self.send.on_sent(pending, id);
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
            && self.send.peek().is_some()
            && p.can_send_data(u64::from(self.cfg.mtu))
            && p.pacing_wakeup().is_some_and(|t| t <= now + hold)
    }

    /// A standalone ACK on a path that owes one, or a window update.
    fn transmit_ack(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
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
        let id = match due {
            Some(id) => id,
            None if self.window_update || self.blocked_pending => {
                let last = self
                    .paths
                    .get(&self.last_recv_path)
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
        if std::mem::take(&mut self.blocked_pending) {
            Frame::Blocked(self.send.max_data()).encode(buf);
        }
        self.push_ack(now, id, buf);
        Some(self.finish_packet(id, buf))
    }
}

/// Whether `p` must not take another packet now although its window has
/// room. With more than one connection (`blind` is `Some`), a connection
/// whose delivery rate is not measured yet holds at most the blind window,
/// and a measured one at most four times its bandwidth-delay product (delivery
/// rate × minimum RTT) while another measured connection would acknowledge
/// a packet sooner. Data beyond that only waits in the path's queue, where
/// it holds up the stream (and the receive window) for longer than the
/// faster connection would take: a controller with a large window, such as
/// a connection starting from most of NCP's session window, would otherwise
/// queue tens of seconds on a slow path. Four BDPs keep the path busy and
/// let a low rate estimate grow fourfold a round trip (two, BBR's cwnd
/// gain, left a 1-s path longer at a low estimate: nkp0024 row 6 ncp 12.9
/// Mbit/s against 13.8, and rows 8-11 converged later).
fn is_queue_capped(p: &Path, charge: u64, blind: Option<u64>, acks: &[(u8, Duration)]) -> bool {
    let Some(blind) = blind else {
        return false;
    };
    if p.in_flight() == 0 || p.has_tlp_credit() {
        return false;
    }
    let after = p.in_flight() + charge;
    if !p.rtt().has_sample() {
        return after > blind;
    }
    // A controller with its own model of the path's rate (BBR, MBECN)
    // bounds its in-flight data by it; a delivery rate measured while this
    // cap held the path back would only understate a long path.
    if p.cc().pacing_rate().is_some() {
        return false;
    }
    let rate = p.delivery_rate();
    if rate <= 0.0 {
        return after > blind;
    }
    let bdp = (rate * p.rtt().min().as_secs_f64()) as u64;
    let cap = (QUEUE_CAP_BDPS * bdp).max(blind);
    if after <= cap {
        return false;
    }
    let mine = expected_ack(p, charge).unwrap_or(Duration::MAX);
    acks.iter().any(|&(id, t)| id != p.id() && t < mine)
}

/// Time from now until a packet of `charge` bytes sent on `p` now would be
/// acknowledged: the path's minimum RTT, or longer when what is in flight
/// must first drain at its delivery rate (the queue it built). Unlike the
/// smoothed RTT this falls as soon as the queue drains, so a path left idle
/// is not judged by the queue it once had. `None` until measured.
fn expected_ack(p: &Path, charge: u64) -> Option<Duration> {
    if !p.rtt().has_sample() {
        return None;
    }
    let min = p.rtt().min();
    let rate = p.delivery_rate();
    if rate <= 0.0 {
        return Some(p.rtt().srtt_or(min));
    }
    let drain = Duration::from_secs_f64((p.in_flight() + charge) as f64 / rate);
    Some(min.max(drain))
}
