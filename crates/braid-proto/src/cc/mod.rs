//! Congestion control: one controller per connection, chosen by name.
//!
//! Each algorithm lives in its own module and cites its source and constants.
//! Hooks have no-op defaults so an algorithm implements only what it uses.

mod aimd;
mod bbr;
mod cubic;
mod dctcp;
mod hystart;
mod mbecn;
mod mbecn_fallback;
mod ncp;
mod segments;

// The concrete controllers: outside the crate one is chosen by its
// [`Algorithm`] and driven through [`Controller`].
pub(crate) use aimd::Aimd;
pub(crate) use bbr::Bbr;
pub(crate) use cubic::Cubic;
pub(crate) use mbecn::EceReceiver;
pub(crate) use mbecn_fallback::MbEcnWithFallback;
pub(crate) use ncp::Ncp;

use crate::rtt::RttEstimator;
use crate::Instant;
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// The congestion controllers, each by the one name scenarios, the CLI and
/// the handshake use. Adding one is a module, a variant and its arms here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// ndncatchunks' AIMD (`Aimd`).
    Aimd,
    /// BBR v1 with braid's deviations (`Bbr`); the default.
    #[default]
    Bbr,
    /// CUBIC, RFC 9438 (`Cubic`).
    Cubic,
    /// Ouroboros MB-ECN, BBR where nothing marks (`MbEcnWithFallback`).
    MbEcn,
    /// NKP-0024's NCP (`Ncp`).
    Ncp,
}

impl Algorithm {
    /// Every controller, by name in alphabetical order.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Aimd,
        Algorithm::Bbr,
        Algorithm::Cubic,
        Algorithm::MbEcn,
        Algorithm::Ncp,
    ];

    /// The controller's name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Aimd => "aimd",
            Algorithm::Bbr => "bbr",
            Algorithm::Cubic => "cubic",
            Algorithm::MbEcn => "mbecn",
            Algorithm::Ncp => "ncp",
        }
    }

    /// A new controller of this kind for one connection.
    pub fn build(self, ctx: CcContext) -> Box<dyn Controller> {
        match self {
            Algorithm::Aimd => Box::new(Aimd::new(ctx)),
            Algorithm::Bbr => Box::new(Bbr::new(ctx)),
            Algorithm::Cubic => Box::new(Cubic::new(ctx)),
            Algorithm::MbEcn => Box::new(MbEcnWithFallback::new(ctx)),
            Algorithm::Ncp => Box::new(Ncp::new(ctx)),
        }
    }
}

impl std::str::FromStr for Algorithm {
    type Err = UnknownController;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| UnknownController(name.to_owned()))
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`Algorithm`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown congestion controller {0:?} (known: {known})", known = known_names())]
pub struct UnknownController(pub String);

fn known_names() -> String {
    Algorithm::ALL.map(Algorithm::name).join(", ")
}

/// What the controller needs to know about its session at creation.
#[derive(Debug, Clone, Copy)]
pub struct CcContext {
    /// Payload bytes per packet: the window unit of packet-counting algorithms.
    pub segment_size: u64,
    /// NKP-0024's `sendWindowPacketCount` = send window / segment size.
    pub session_window_packets: u64,
    /// Largest window a connection may reach, packets (the autotuning cap).
    pub max_window_packets: u64,
    /// Connections in the session when it was established.
    pub paths: usize,
}

/// One acknowledged packet.
#[derive(Debug, Clone, Copy)]
pub struct Acked {
    /// Wire bytes of the packet.
    pub bytes: u64,
    /// When it was sent.
    pub sent_at: Instant,
    /// Whether it carried a segment sent before.
    pub retransmission: bool,
    /// The peer's clock (µs, own epoch) when it received this packet, if
    /// the ACK dated it ([`crate::wire::AckFrame::rx_times`]).
    pub peer_rx_us: Option<u64>,
}

/// What one ACK frame told the sender, with a delivery-rate sample
/// (draft-cheng-iccrg-delivery-rate-estimation): delivered bytes over the
/// longer of the send and the ACK intervals of the newest acknowledged packet.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateSample {
    /// Bytes per second; 0 when no packet of this ACK gave a sample.
    pub delivery_rate: f64,
    /// The interval the rate was measured over.
    pub interval: Duration,
    /// Bytes delivered over `interval`.
    pub delivered: u64,
    /// The connection's delivered count when the newest acknowledged packet
    /// was sent (BBR counts round trips with it).
    pub prior_delivered: u64,
    /// The connection's delivered count after this ACK.
    pub total_delivered: u64,
    /// RTT of the newest acknowledged packet.
    pub rtt: Duration,
    /// The sample was taken while the sender had too little to send to fill
    /// the window: it may underestimate the path.
    pub is_app_limited: bool,
    /// Bytes newly acknowledged by this ACK.
    pub newly_acked: u64,
    /// Bytes declared lost while processing this ACK.
    pub newly_lost: u64,
    /// Bytes in flight after this ACK.
    pub in_flight: u64,
    /// Queueing delay on the ACKs' path beyond its minimum (smoothed): part
    /// of every RTT that the sender's own pacing cannot drain.
    pub ack_queue_delay: Duration,
    /// Bytes per second the peer received over this sample on its own clock,
    /// when that interval spans at least the minimum RTT; 0 otherwise.
    pub receive_rate: f64,
}

/// Why the network signalled congestion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Packets declared lost by the packet or time threshold.
    Loss,
    /// The retransmission timer expired.
    Timeout,
    /// The peer reported ECN CE marks.
    Ecn,
    /// The driver could not send a datagram.
    SendFailure,
}

/// A congestion signal.
#[derive(Debug, Clone, Copy)]
pub struct CongestionEvent {
    /// What signalled it.
    pub cause: Cause,
    /// Send time of the newest packet the signal concerns; controllers that
    /// react once per RTT ignore signals about packets sent before their last reaction.
    pub sent_at: Instant,
    /// Packets lost (or marked) in this signal.
    pub packets: u64,
    /// A timeout that fired again with nothing acknowledged since the last
    /// one: it times out the same data (RFC 5681 §3.1 holds ssthresh).
    /// Always false for other causes.
    pub repeated: bool,
}

/// Snapshot of a controller for stats and plots.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ControllerMetrics {
    /// Congestion window, bytes.
    pub window: u64,
    /// Slow-start threshold, bytes; `None` while unbounded.
    pub ssthresh: Option<u64>,
}

impl ControllerMetrics {
    /// From a window and slow-start threshold counted in segments of `segment_size`
    /// bytes; an infinite threshold means none yet.
    pub(crate) fn from_segments(cwnd: f64, ssthresh: f64, segment_size: u64) -> Self {
        ControllerMetrics {
            window: (cwnd * segment_size as f64) as u64,
            ssthresh: ssthresh
                .is_finite()
                .then_some((ssthresh * segment_size as f64) as u64),
        }
    }
}

/// A congestion controller for one connection.
pub trait Controller: Send + fmt::Debug {
    /// Which controller this is.
    fn algorithm(&self) -> Algorithm;
    /// A packet of `bytes` was sent.
    fn on_sent(&mut self, _now: Instant, _bytes: u64) {}
    /// An ACK frame newly acknowledging packets arrived: before its
    /// `on_ack` calls, the peer's clock (µs, own epoch) when it received the
    /// frame's largest packet, if that packet is among them and all of them
    /// are above the previous largest acknowledged (no reordering shown).
    fn on_ack_frame(&mut self, _now: Instant, _peer_rx_us: Option<u64>) {}
    /// A packet in flight was acknowledged.
    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &RttEstimator);
    /// Returns whether the window was decreased.
    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool;
    /// After the per-packet `on_ack` calls and loss detection of one ACK frame.
    fn on_rate_sample(&mut self, _now: Instant, _sample: &RateSample) {}
    /// The peer's MB-ECN congestion level (seed 004's ECE field) changed.
    fn on_ece(&mut self, _now: Instant, _ece: u16) {}
    /// A packet declared lost turned out to have arrived.
    fn on_spurious_loss(&mut self, _now: Instant) {}
    /// The last retransmission timeouts were spurious (an ACK of a packet
    /// sent before them arrived): their packets are in flight again, and a
    /// controller that cut its window for them may restore it (RFC 4015).
    fn on_spurious_timeout(&mut self, _now: Instant) {}
    /// Pacing rate in bytes per second, for controllers that set it; `None`
    /// lets the connection pace at a gain over window / sRTT.
    fn pacing_rate(&self) -> Option<f64> {
        None
    }
    /// Whether the next packets leave unpaced, whatever the rate: a
    /// measurement that needs them back to back.
    fn unpaced(&self) -> bool {
        false
    }
    /// Whether the controller is still in slow start (paced faster).
    fn in_slow_start(&self) -> bool {
        false
    }
    /// Congestion window, bytes.
    fn window(&self) -> u64;
    /// Whether the session rescales this controller's window so all
    /// connections' windows sum to the session window (NKP-0024).
    fn is_normalized(&self) -> bool {
        false
    }
    /// Sets the window during normalisation.
    fn set_window(&mut self, _bytes: u64) {}
    /// Starts from a configured window instead of the algorithm's initial
    /// one; a no-op for controllers whose window follows a model (BBR, MB-ECN).
    fn set_initial_window(&mut self, _bytes: u64) {}
    /// The controller's state in qlog's words (`slow_start`,
    /// `congestion_avoidance`) or the algorithm's own (BBR's modes).
    fn state_name(&self) -> &'static str {
        if self.in_slow_start() {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }
    /// A rate-slot controller's slot now (MB-ECN): bytes allowed per
    /// slot and the slot's width; `None` for window controllers.
    fn rate_slot(&self) -> Option<(u64, Duration)> {
        None
    }
    /// Snapshot for stats.
    fn metrics(&self) -> ControllerMetrics {
        ControllerMetrics {
            window: self.window(),
            ssthresh: None,
        }
    }
}
