//! Which connection carries the next data packet.
//!
//! The stream is delivered in order, so what matters is when each packet
//! reaches the peer, not how busy each connection is. Data goes on a
//! connection whose window has room and whose pacer lets a packet go now
//! (NCP's pull model, paced). Among those, the one where it would arrive
//! earliest wins, and a slower connection is skipped when the faster ones
//! would deliver the whole backlog before the slow one's packet arrived
//! (ECF, Lim et al., CoNEXT 2017), so the tail of a transfer does not wait
//! on a slow path. A packet arrives when it would be acknowledged (the
//! connection's minimum RTT, or the time its queue takes to drain at its
//! delivery rate) less the time ACKs take to come back, which the peer's
//! receive timestamps tell apart from the way out (`AckPathDelay`). Judged
//! by acknowledgements instead, a 1 s path whose packets arrive in 0.5 s
//! stopped half a second before the end of every transfer. A window-based
//! connection holds at most four
//! times its bandwidth-delay product while another would acknowledge
//! sooner, so a large window cannot queue the stream for seconds on a slow
//! path.
//!
//! The scheduler reads the connections and the backlog and changes nothing
//! but their pacers' wake-ups, so it runs on paths alone, without a session.

use super::path_map::PathMap;
use crate::path::Path;
use crate::stats::PathState;
use crate::Instant;
use crate::PathId;
use std::time::Duration;

/// Packets a connection may have in flight before its first RTT sample
/// (RFC 9002 §7.2's initial window of 10 packets).
const UNMEASURED_WINDOW_PACKETS: u64 = 10;
/// Bandwidth-delay products a connection may hold in flight while another
/// would acknowledge sooner (see `is_queue_capped`).
const QUEUE_CAP_BDPS: u64 = 4;

/// The connection that takes the next data packet of `charge` bytes: among
/// those validated (see [`Path::is_validated`]), whose window has room, whose pacer is ready
/// and whose queue is not capped (see `is_queue_capped`), the one where it
/// would arrive earliest (unmeasured paths count as immediate, so they get
/// measured), unless it is worth waiting for a faster one (see
/// `is_worth_waiting`, over what `demand` says the faster ones may deliver
/// first). When only pacing holds packets back, the paths remember when
/// to wake.
pub(super) fn pick_data_path(
    paths: &mut PathMap,
    now: Instant,
    charge: u64,
    segment_size: u64,
    demand: Demand,
) -> Option<PathId> {
    let blind = blind_window(paths, segment_size);
    // Only the queue cap reads these, and only with several connections
    // (`blind` is None on one): a single connection skips the work.
    let acks: Vec<(PathId, Duration)> = match blind {
        None => Vec::new(),
        Some(_) => paths
            .values()
            .filter(|p| p.state() == PathState::Active && p.delivery_rate() > 0.0)
            // The smoothed RTT where it is shorter: a connection still
            // growing its window has a delivery rate that understates it.
            .filter_map(|p| {
                let srtt = p.rtt().srtt_or(p.rtt().min());
                Some((p.id(), expected_ack(p, charge)?.min(srtt)))
            })
            .collect(),
    };
    let silent = demand
        .backlog
        .map_or(Silence::default(), |_| Silence::of(paths, now));
    // Data sent blind on a connection of unknown delay holds the stream
    // up for as long as it takes there (a relay's 30 ms against a LAN's
    // 0.3). A transfer of known length, which ends when its last byte
    // arrives, sends almost none: once one connection is measured, each
    // other one waits for its first sample while anything of it is in
    // flight (a handshake, a probe, or the one packet sent to measure
    // it). An open-ended stream starts them blind, for throughput.
    let hold_unmeasured = demand.known_len
        && paths
            .values()
            .any(|p| p.is_usable() && p.rtt().has_sample());
    let (arrival, id) = earliest_ready(paths, now, charge, segment_size, |p| {
        p.is_validated()
            && (p.rtt().has_sample() || !hold_unmeasured || !p.has_in_flight())
            && p.can_send_data(charge)
            && !is_queue_capped(p, charge, blind, &acks)
            && !silent.excludes(p)
    })?;
    // Waiting for a connection that went quiet (a NAT that rebound, a
    // path cut) waits for nothing: a transfer of known length, whose
    // window such a connection's losses hold, counts only those heard.
    let counts = |p: &Path| !demand.known_len || heard_lately(p, now);
    (!is_worth_waiting(paths, id, arrival, charge, demand.ahead, counts)).then_some(id)
}

/// What the stream asks of the scheduler.
#[derive(Debug, Clone, Copy)]
pub(super) struct Demand {
    /// Bytes waiting to be sent; `None` while the application may write
    /// more than the send buffer holds (bulk: no connection is avoided
    /// for its silence).
    pub backlog: Option<u64>,
    /// What the faster connections may deliver first (see
    /// `SendStream::ahead`); `None`: unbounded, no connection waits.
    pub ahead: Option<u64>,
    /// The application said how long the stream is: finish it soonest.
    pub known_len: bool,
}

impl Demand {
    /// A stream with `backlog` bytes waiting, its length not announced.
    #[cfg(test)]
    fn backlog(backlog: Option<u64>) -> Demand {
        Demand {
            backlog,
            ahead: backlog,
            known_len: false,
        }
    }
}

/// How long a connection may go unheard, while another is heard, before
/// a bounded backlog (the end of a stream, a reply) avoids it, at least:
/// more than an ACK delay (10 ms) and than the gaps of a paced sender on
/// any path worth a reply's wait.
const SILENT_AFTER_MIN: Duration = Duration::from_millis(50);
/// Round trips of its own a connection may go unheard (see `Silence`).
const SILENT_AFTER_RTTS: u32 = 4;

/// Connections the peer stopped sending on while it kept sending on
/// another: at the end of a stream, or for a short reply, data avoids
/// them. A side that mostly receives (a receiver sending its verdict)
/// learns of a dead path no other way: its ACKs there elicit nothing, so
/// no timer of its own fires until its reply is lost there, twice. Only a
/// connection heard from lately makes others avoidable, so one that died
/// itself never shuts out the rest. While the application may write more
/// than the buffer holds (bulk), nothing is excluded, so a connection the
/// scheduler left idle is taken up again.
#[derive(Default)]
struct Silence {
    now: Option<Instant>,
}

impl Silence {
    fn of(paths: &PathMap, now: Instant) -> Silence {
        let alive = paths
            .values()
            .any(|p| p.is_usable() && heard_lately(p, now));
        Silence {
            now: alive.then_some(now),
        }
    }

    /// Whether `p` went unheard while another connection was heard.
    fn excludes(&self, p: &Path) -> bool {
        self.now
            .is_some_and(|now| p.last_received().is_some() && !heard_lately(p, now))
    }
}

/// Whether the peer's latest packet on `p` came within 4 of its round
/// trips (at least `SILENT_AFTER_MIN`).
fn heard_lately(p: &Path, now: Instant) -> bool {
    let Some(last) = p.last_received() else {
        return false;
    };
    // A side that only acknowledged has no samples of its own: the floor
    // alone, not the initial RTO's guess.
    let rtt = match p.rtt().has_sample() {
        true => p.rtt().srtt_or(Duration::ZERO),
        false => Duration::ZERO,
    };
    let patience = (rtt * SILENT_AFTER_RTTS).max(SILENT_AFTER_MIN);
    now.saturating_duration_since(last) <= patience
}

/// The connection for a second copy of a segment at the tail of the
/// stream (see `tail_copy`): the measured one, not being validated, with
/// window and pacer room, where a packet would arrive earliest. Its window
/// is the only bound: a copy takes room nothing else wants, since nothing
/// else is left to send.
pub(super) fn pick_tail_copy_path(
    paths: &mut PathMap,
    now: Instant,
    charge: u64,
    segment_size: u64,
) -> Option<PathId> {
    let (_, id) = earliest_ready(paths, now, charge, segment_size, |p| {
        p.is_validated() && p.can_send_data(charge) && expected_arrival(p, charge).is_some()
    })?;
    Some(id)
}

/// Among the connections `eligible` admits whose pacer lets `charge`
/// bytes go now, the one where they would arrive earliest, with that
/// arrival ([`expected_arrival`]; unmeasured first, and `None` for a
/// connection alone). Pacers that hold a packet back remember when to wake.
fn earliest_ready(
    paths: &mut PathMap,
    now: Instant,
    charge: u64,
    segment_size: u64,
    eligible: impl Fn(&Path) -> bool,
) -> Option<(Option<i64>, PathId)> {
    let mut best: Option<(Option<i64>, PathId)> = None;
    // Alone, a connection's arrival has nothing to be compared with (and
    // `is_worth_waiting` nothing to wait for): its float arithmetic is skipped.
    let alone = paths.len() == 1;
    for p in paths.values_mut() {
        if eligible(p) && p.is_pacer_ready(now, charge, segment_size) {
            let arrival = if alone {
                None
            } else {
                expected_arrival(p, charge)
            };
            let key = (arrival, p.id());
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
    }
    best
}

/// Most bytes an unmeasured connection may have in flight when the
/// session has others: data queued blind on a slow path holds up the
/// stream for as long as that path takes to deliver it. The
/// bandwidth-delay product of the best measured path, at least an
/// initial window (RFC 9002 §7.2); `None` (no limit but the
/// controller's) on a single connection.
fn blind_window(paths: &PathMap, segment_size: u64) -> Option<u64> {
    if paths.values().filter(|p| p.is_usable()).count() < 2 {
        return None;
    }
    let bdp = paths
        .values()
        .filter(|p| p.state() == PathState::Active && p.rtt().has_sample())
        .map(|p| (p.delivery_rate() * p.rtt().min().as_secs_f64()) as u64)
        .max()
        .unwrap_or(0);
    Some(bdp.max(UNMEASURED_WINDOW_PACKETS * segment_size))
}

/// ECF (Lim et al., CoNEXT 2017), over N paths: whether the connections
/// where a packet would arrive sooner than on `id` (at `arrival`) would
/// deliver the `backlog` bytes ahead of it before a packet sent now on
/// `id` arrived (see [`Demand::ahead`]; unbounded, no path waits).
fn is_worth_waiting(
    paths: &PathMap,
    id: PathId,
    arrival: Option<i64>,
    charge: u64,
    backlog: Option<u64>,
    counts: impl Fn(&Path) -> bool,
) -> bool {
    let (Some(backlog), Some(arrival)) = (backlog, arrival) else {
        return false;
    };
    if paths[&id].has_tlp_credit() {
        return false;
    }
    let mut rate = 0.0;
    let mut first: Option<i64> = None;
    for p in paths.values() {
        if p.id() == id || p.state() != PathState::Active || p.delivery_rate() <= 0.0 || !counts(p)
        {
            continue;
        }
        let Some(t) = expected_arrival(p, charge).filter(|&t| t < arrival) else {
            continue;
        };
        rate += p.delivery_rate();
        first = Some(first.map_or(t, |f| f.min(t)));
    }
    let Some(first) = first else {
        return false;
    };
    let drain_us = backlog as f64 / rate * 1e6;
    arrival as f64 > first as f64 + drain_us
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
fn is_queue_capped(p: &Path, charge: u64, blind: Option<u64>, acks: &[(PathId, Duration)]) -> bool {
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

/// When a packet of `charge` bytes sent on `p` now would reach the peer:
/// [`expected_ack`] less the ACK path's least delay, µs on a scale whose
/// origin (the clocks' offset) is unknown but shared by the session's
/// connections, so only comparisons mean anything. `None` (sooner than
/// any) until measured: an unmeasured path gets its first flight.
pub(super) fn expected_arrival(p: &Path, charge: u64) -> Option<i64> {
    let ack = crate::time::micros_i64(expected_ack(p, charge)?);
    Some(ack.saturating_sub(p.ack_path_base_us()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send_stream::SendStream;
    use crate::wire::AckFrame;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    const SEGMENT_SIZE: u64 = 1200;
    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn path(id: u8) -> Path {
        // CUBIC: window-based, so the queue cap applies to it.
        Path::cubic_for_test(PathId(id), SEGMENT_SIZE, 2)
    }

    /// Sends `packets` full packets on `p` at `now`.
    fn send(p: &mut Path, now: Instant, packets: u64) -> (u64, u64) {
        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(p.id().0));
        let first = p.take_packet_number(&mut rng);
        p.on_sent(now, first, SEGMENT_SIZE, None, false);
        let mut last = first;
        for _ in 1..packets {
            last = p.take_packet_number(&mut rng);
            p.on_sent(now, last, SEGMENT_SIZE, None, false);
        }
        (first, last)
    }

    /// A path whose first flight of 10 packets at time 0 was acknowledged
    /// one `rtt_ms` later: it delivers 12 kB per round trip.
    fn measured(id: u8, rtt_ms: u64) -> Path {
        measured_one_way(id, rtt_ms, rtt_ms / 2)
    }

    /// As `measured`, with the peer's clock (whose origin is ours) saying
    /// the packets took `forward_ms` to arrive.
    fn measured_one_way(id: u8, rtt_ms: u64, forward_ms: u64) -> Path {
        let mut p = path(id);
        let (first, last) = send(&mut p, at(0), 10);
        let ack = AckFrame {
            ranges: vec![(first, last)],
            ack_delay_us: 0,
            cumulative: 0,
            fin: false,
            max_data: 0,
            ce_count: 0,
            rx_timestamp_us: forward_ms * 1000,
            rx_times: Vec::new(),
            short_headers: false,
        };
        let mut stream = SendStream::new(SEGMENT_SIZE as u32, 1 << 20, 1024, 0);
        p.on_ack_frame(
            at(rtt_ms),
            &ack,
            crate::rtt::AckRoute::Own,
            MS * 10,
            &mut stream,
        );
        assert_eq!(p.rtt().min(), Duration::from_millis(rtt_ms));
        p
    }

    fn paths(list: Vec<Path>) -> PathMap {
        list.into_iter().map(|p| (p.id(), p)).collect()
    }

    #[test]
    fn the_path_that_acknowledges_sooner_takes_the_packet() {
        let mut paths = paths(vec![measured(0, 200), measured(1, 20)]);
        let pick = |paths: &mut PathMap| {
            pick_data_path(
                paths,
                at(200),
                SEGMENT_SIZE,
                SEGMENT_SIZE,
                Demand::backlog(Some(1 << 20)),
            )
        };
        assert_eq!(pick(&mut paths), Some(PathId(1)));
        // With its window full, the packet goes to the other path.
        send(paths.get_mut(&PathId(1)).unwrap(), at(200), 110);
        assert!(!paths[&PathId(1)].can_send_data(SEGMENT_SIZE));
        assert_eq!(pick(&mut paths), Some(PathId(0)));
    }

    #[test]
    fn a_slow_path_is_skipped_when_the_fast_one_would_deliver_the_backlog_first() {
        let mut paths = paths(vec![measured(0, 200), measured(1, 20)]);
        // The fast path cannot take this packet (it is being validated),
        // yet it delivers 600 kB/s from 10 ms on: 12 kB would be through
        // by 30 ms, long before the slow path's packet arrived at 100 ms.
        let fast = paths.get_mut(&PathId(1)).unwrap();
        fast.start_validation(at(200), 1200, Some([1; 8]));
        let pick = |paths: &mut PathMap, backlog| {
            let demand = Demand::backlog(backlog);
            pick_data_path(paths, at(200), SEGMENT_SIZE, SEGMENT_SIZE, demand)
        };
        assert_eq!(pick(&mut paths, Some(12_000)), None);
        assert_eq!(pick(&mut paths, Some(36_000)), None, "through by 70 ms");
        // 72 kB take the fast path until 130 ms: the slow path's packet
        // arrives first. Judged by acknowledgements (200 ms against 20 +
        // 120 ms) the slow path was left idle here.
        assert_eq!(pick(&mut paths, Some(72_000)), Some(PathId(0)));
        assert_eq!(pick(&mut paths, Some(1_000_000)), Some(PathId(0)));
        assert_eq!(pick(&mut paths, None), Some(PathId(0)), "unbounded backlog");
    }

    #[test]
    fn a_slow_path_waits_when_the_receivers_window_would_stall_behind_it() {
        // As above, with more to come than the buffer holds: a 36 kB
        // receive window is through the fast path by 70 ms, so a packet
        // arriving at 100 ms would hold the stream up; a 1 MB one is not.
        let mut paths = paths(vec![measured(0, 200), measured(1, 20)]);
        let fast = paths.get_mut(&PathId(1)).unwrap();
        fast.start_validation(at(200), 1200, Some([1; 8]));
        let pick = |paths: &mut PathMap, window| {
            let demand = Demand {
                backlog: None,
                ahead: Some(window),
                known_len: false,
            };
            pick_data_path(paths, at(200), SEGMENT_SIZE, SEGMENT_SIZE, demand)
        };
        assert_eq!(pick(&mut paths, 36_000), None);
        assert_eq!(pick(&mut paths, 1_000_000), Some(PathId(0)));
    }

    #[test]
    fn a_transfer_of_known_length_sends_nothing_blind_beside_a_measured_path() {
        let mut paths = paths(vec![measured(0, 20), path(1)]);
        // The measured path's window is full: only the other has room.
        let fast = paths.get_mut(&PathId(0)).unwrap();
        while fast.can_send_data(SEGMENT_SIZE) {
            send(fast, at(200), 1);
        }
        let pick = |paths: &mut PathMap, known_len| {
            let demand = Demand {
                backlog: None,
                ahead: None,
                known_len,
            };
            pick_data_path(paths, at(200), SEGMENT_SIZE, SEGMENT_SIZE, demand)
        };
        // With nothing in flight there, one packet goes to measure it.
        assert_eq!(pick(&mut paths, true), Some(PathId(1)));
        send(paths.get_mut(&PathId(1)).unwrap(), at(200), 1);
        assert_eq!(pick(&mut paths, true), None, "then it waits for its sample");
        assert_eq!(
            pick(&mut paths, false),
            Some(PathId(1)),
            "an open-ended stream goes on"
        );
    }

    #[test]
    fn the_packet_goes_where_it_arrives_first_not_where_it_is_acknowledged_first() {
        // Path 0 is acknowledged in 100 ms but its packets take 90 ms out;
        // path 1's take 10 ms out and its ACKs 140 ms back (a satellite
        // return, say).
        let mut paths = paths(vec![
            measured_one_way(0, 100, 90),
            measured_one_way(1, 150, 10),
        ]);
        let pick = pick_data_path(
            &mut paths,
            at(150),
            SEGMENT_SIZE,
            SEGMENT_SIZE,
            Demand::backlog(Some(1 << 20)),
        );
        assert_eq!(pick, Some(PathId(1)));
    }

    #[test]
    fn expected_ack_counts_the_queue_ahead() {
        let mut p = measured(0, 20);
        assert_eq!(expected_ack(&p, SEGMENT_SIZE), Some(20 * MS));
        send(&mut p, at(20), 100);
        // 121.2 kB to drain at 600 kB/s.
        let eta = expected_ack(&p, SEGMENT_SIZE).unwrap();
        assert!(eta.abs_diff(202 * MS) < Duration::from_micros(1), "{eta:?}");
        assert_eq!(expected_ack(&path(1), SEGMENT_SIZE), None);
    }

    #[test]
    fn an_unmeasured_path_beside_others_holds_one_blind_window() {
        let mut fresh = path(1);
        send(&mut fresh, at(0), 10);
        let paths = paths(vec![measured(0, 20), fresh]);
        // 600 kB/s × 20 ms is 12 kB, the initial window too.
        let blind = blind_window(&paths, SEGMENT_SIZE);
        assert_eq!(blind, Some(12_000));
        assert!(is_queue_capped(
            &paths[&PathId(1)],
            SEGMENT_SIZE,
            blind,
            &[]
        ));
        assert!(
            !is_queue_capped(&paths[&PathId(1)], SEGMENT_SIZE, None, &[]),
            "alone"
        );
        assert!(
            !is_queue_capped(&paths[&PathId(0)], SEGMENT_SIZE, blind, &[]),
            "empty"
        );
    }
}
