//! Path MTU discovery in the session: the sizes each connection starts
//! from and probes up to, the padded PINGs that probe, and how large a
//! data packet may be on a connection (see `path::pmtud` for the search).

use super::Session;
use crate::send_stream::Pending;
use crate::wire::{self, Frame};
use crate::{Instant, PathId};

/// Bytes a STREAM frame's header takes at most (type and an 8-byte offset).
const MAX_STREAM_HEADER: usize = 9;

impl Session {
    /// Whether discovery runs ([`crate::SessionConfig::max_datagram`]).
    pub(super) fn is_pmtud_on(&self) -> bool {
        self.cfg.max_datagram.is_some_and(|m| m > 0)
    }

    /// The datagram size every connection starts from (a full segment with
    /// the headers) and the ceiling discovery probes up to (at or below
    /// the base: off).
    fn pmtu_bounds(&self) -> (u16, u16) {
        let base = usize::from(self.cfg.segment_size)
            + wire::datagram_overhead(self.is_sealed())
            + MAX_STREAM_HEADER;
        let base = u16::try_from(base).unwrap_or(u16::MAX);
        (base, self.cfg.max_datagram.unwrap_or(0))
    }

    /// Starts discovery on `id` over (once negotiated: again from) its base.
    pub(super) fn reset_pmtu(&mut self, now: Instant, id: PathId) {
        let (base, ceiling) = self.pmtu_bounds();
        if let Some(p) = self.paths.get_mut(&id) {
            p.set_pmtu_bounds(base, ceiling, now);
        }
    }

    /// The largest segment new data is cut into: what the connection
    /// carrying the most takes without an ACK riding along, with the
    /// header it sends while data flows (short if the peer offers it, a
    /// 2-byte packet number). Without discovery, the negotiated segment
    /// size.
    pub(super) fn pmtu_segment_size(&self) -> u32 {
        let floor = u32::from(self.cfg.segment_size);
        if !self.is_pmtud_on() {
            return floor;
        }
        let tag = wire::datagram_overhead(self.is_sealed()) - wire::datagram_overhead(false);
        let largest = self
            .paths
            .values()
            .filter(|p| p.is_usable())
            .map(|p| {
                let header = match p.sends_short_headers() {
                    true => wire::SHORT_HEADER_LEN - 2,
                    false => wire::HEADER_LEN - 2,
                };
                let overhead = header + tag + wire::stream_frame_overhead(0);
                usize::from(p.max_datagram()).saturating_sub(overhead)
            })
            .max()
            .unwrap_or(0);
        floor.max(u32::try_from(largest).unwrap_or(u32::MAX))
    }

    /// Cuts `pending` to what the datagram being written on `id` still has
    /// room for (never below the negotiated segment size, which the base
    /// size fits with an ACK riding along); a lost segment too large is
    /// split, its rest left to go next.
    pub(super) fn fit_segment(&mut self, id: PathId, pending: Pending, buf: &[u8]) -> Pending {
        if !self.is_pmtud_on() {
            return pending;
        }
        let tag = wire::datagram_overhead(self.is_sealed()) - wire::datagram_overhead(false);
        let stream = wire::stream_frame_overhead_within(pending.offset, self.streams.offset_span());
        let used = self.packets.len(buf) + tag + stream;
        let room = usize::from(self.paths[&id].max_datagram()).saturating_sub(used);
        let limit = u32::try_from(room)
            .unwrap_or(u32::MAX)
            .max(u32::from(self.cfg.segment_size));
        if pending.len <= limit {
            return pending;
        }
        if pending.retransmission {
            self.streams.send.split(pending.offset, limit);
        }
        Pending {
            len: limit,
            fin: false,
            ..pending
        }
    }

    /// A padded PING testing a larger datagram on a connection whose search
    /// wants one; only once data flows there (see [`crate::path::Path::pmtu_probe_due`]).
    pub(super) fn transmit_pmtu_probe(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
    ) -> Option<super::transmit::Transmit> {
        if !self.is_pmtud_on() || !self.handshake.is_done() {
            return None;
        }
        let (id, size) = self.paths.values_mut().find_map(|p| {
            let ok = p.is_usable() && p.is_validated();
            ok.then(|| p.pmtu_probe_due(now).map(|size| (p.id(), size)))
                .flatten()
        })?;
        let pn = self.start_packet(now, id, buf);
        Frame::Ping.encode(buf);
        let tag = wire::datagram_overhead(self.is_sealed()) - wire::datagram_overhead(false);
        wire::pad_to(buf, self.packets.start() + usize::from(size) - tag);
        let p = self.paths.get_mut(&id).expect("path exists");
        p.on_pmtu_probe_sent(now, pn, size);
        Some(self.finish_packet(id, buf))
    }
}
