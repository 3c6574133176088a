//! Statistics: plain snapshots returned by value.

use crate::PathId;
use std::time::Duration;

/// State of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathState {
    /// Carrying data.
    #[default]
    Active,
    /// Consecutive timeouts: carries only probes until one is acknowledged.
    Probing,
    /// Closed by either side; never used again.
    Closed,
}

/// Counters and state of one connection.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct PathStats {
    /// Whether the connection carries data, only probes, or is closed.
    pub state: PathState,
    /// Datagrams sent, all kinds.
    pub packets_sent: u64,
    /// Datagrams received and accepted, all kinds (drops and duplicates not counted).
    pub packets_received: u64,
    /// Datagram bytes sent.
    pub bytes_sent: u64,
    /// Packets that carried stream data.
    pub data_packets_sent: u64,
    /// Of those, retransmissions this connection carried: of a packet lost
    /// on any connection (the scheduler sends it again where there is
    /// room), a tail-loss probe, or a second copy at the stream's end.
    pub retransmitted: u64,
    /// Packets declared lost, all kinds (a timeout proved spurious gives
    /// its back).
    pub lost_packets: u64,
    /// Of those, the ones that carried stream data: the losses on this
    /// connection, whichever connection then sent the data again.
    pub lost_data_packets: u64,
    /// Stream bytes of the packets declared lost.
    pub lost_bytes: u64,
    /// Lost packets later acknowledged after all.
    pub spurious_losses: u64,
    /// Retransmission-timer expiries.
    pub timeouts: u64,
    /// Window decreases caused by those expiries.
    pub timeout_decreases: u64,
    /// Expiries an ACK of a packet sent before them proved spurious, and
    /// undid (the packets were delayed, not lost).
    pub spurious_timeouts: u64,
    /// Tail-loss probes sent.
    pub tail_loss_probes: u64,
    /// Path MTU probes sent (padded PINGs; their loss is not congestion).
    pub pmtu_probes: u64,
    /// Largest datagram (UDP payload, bytes) path MTU discovery found.
    pub max_datagram: u16,
    /// Times packets above the base size stopped getting through, and
    /// discovery fell back to it.
    pub pmtu_black_holes: u32,
    /// Threshold loss events' window decreases.
    pub loss_decreases: u64,
    /// ECN CE marks reported by the peer.
    pub ecn_marks: u64,
    /// Window decreases caused by those marks.
    pub ecn_decreases: u64,
    /// Stream bytes acknowledged whose latest transmission went on this path.
    pub stream_bytes_acked: u64,
    /// Stream bytes that arrived on this path, copies and bytes already
    /// received included: what it carried to this side.
    pub stream_bytes_received: u64,
    /// Congestion window, bytes.
    pub window: u64,
    /// The controller's slow-start threshold, bytes, if it keeps one
    /// (BBR reports its BDP at the end of STARTUP, as Linux does).
    pub ssthresh: Option<u64>,
    /// The controller's pacing rate, bytes/s, if it sets one.
    pub pacing_rate: Option<f64>,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Smoothed RTT; zero before the first sample.
    pub srtt: Duration,
    /// Retransmission timeout now, including backoff.
    pub rto: Duration,
    /// Smallest raw RTT sample (before ack-delay adjustment); zero before any.
    pub rtt_min: Duration,
    /// Mean of the raw RTT samples; zero before any.
    pub rtt_avg: Duration,
    /// Largest raw RTT sample; zero before any.
    pub rtt_max: Duration,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// 95th percentile of the raw RTT samples (within ±2.2 %); zero before any.
    pub rtt_p95: Duration,
    /// The connection's own round trip: raw samples of its packets out and
    /// their ACK back on it. The `rtt_*` figures above are the controller's
    /// samples, which also take the copies of a slow connection's ACKs that
    /// came back first on a faster one (the way out on this connection,
    /// back on the other). Smallest sample; zero before any.
    pub own_rtt_min: Duration,
    /// Mean of the own samples; zero before any.
    pub own_rtt_avg: Duration,
    /// Largest own sample; zero before any.
    pub own_rtt_max: Duration,
    /// 95th percentile of the own samples (within ±2.2 %); zero before any.
    pub own_rtt_p95: Duration,
    /// Own samples taken.
    pub own_rtt_samples: u64,
}

/// Session-wide counters; per-connection detail is in `paths`.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SessionStats {
    /// Receive window now, bytes, after autotuning.
    pub recv_window: u64,
    /// Bytes the send buffer may hold now, after autotuning.
    pub send_buffer: u64,
    /// Each connection's id and statistics.
    pub paths: Vec<(PathId, PathStats)>,
    /// Application bytes accepted by `write`.
    pub bytes_written: u64,
    /// Application bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Application bytes received in order.
    pub bytes_received: u64,
    /// Segments sent for the first time.
    pub segments_sent: u64,
    /// Segments retransmitted (each retransmission counted).
    pub retransmitted: u64,
    /// Retransmissions later found unnecessary.
    pub spurious_retransmits: u64,
    /// Retransmission-timer expiries, summed over connections.
    pub timeouts: u64,
    /// Congestion-window decreases of every cause, summed over connections.
    pub window_decreases: u64,
    /// ECN CE marks reported by the peer, summed over connections.
    pub ecn_marks: u64,
    /// Datagrams dropped as malformed or truncated.
    pub malformed_dropped: u64,
    /// Well-formed datagrams that did not fit the session's state (wrong
    /// session id, unknown path, stale handshake, flow-control breach).
    pub unexpected_dropped: u64,
    /// Packets received twice (network duplication, or a replay).
    pub duplicate_packets: u64,
    /// Datagrams that did not open with the session's keys: forged,
    /// corrupted, or a handshake message that did not authenticate.
    pub forged_dropped: u64,
    /// Stream bytes received more than once.
    pub duplicate_bytes: u64,
    /// Key phases stepped since the handshake, started by either side
    /// (sealed sessions; both sides count the same steps).
    pub key_updates: u64,
    /// Memory holding received stream data now, bytes: read-ready and
    /// out-of-order, spare capacity included.
    pub recv_buffered: u64,
}

/// One point of a connection's time series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathSample {
    /// Seconds since the epoch of the driver's clock.
    pub at_s: f64,
    /// The connection's id.
    pub path: PathId,
    /// Congestion window, bytes.
    pub window: u64,
    /// Smoothed RTT; zero before the first sample.
    pub srtt: Duration,
    /// Retransmission timeout, including backoff.
    pub rto: Duration,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Stream bytes acknowledged on this path since the previous sample, per second × 8.
    pub throughput_bps: f64,
}
