//! Congestion control: one controller per connection, chosen by name.
//!
//! Each algorithm lives in its own module and cites its source and constants.
//! Hooks have no-op defaults so an algorithm implements only what it uses.

mod aimd;
mod cubic;
mod ncp;

pub use aimd::Aimd;
pub use cubic::Cubic;
pub use ncp::Ncp;

use crate::rtt::RttEstimator;
use crate::Instant;
use std::fmt;
use thiserror::Error;

/// Controllers this build knows, by name.
pub const CONTROLLERS: &[&str] = &["aimd", "cubic", "ncp"];

/// The controller used when none is named.
pub const DEFAULT_CONTROLLER: &str = "aimd";

/// A name that is not in [`CONTROLLERS`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown congestion controller {0:?} (known: {known})", known = CONTROLLERS.join(", "))]
pub struct UnknownController(pub String);

/// What the controller needs to know about its session at creation.
#[derive(Debug, Clone, Copy)]
pub struct CcContext {
    /// Payload bytes per packet: the window unit of packet-counting algorithms.
    pub mtu: u64,
    /// NKP-0024's `sendWindowPacketCount` = send window / MTU.
    pub session_window_packets: u64,
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
    pub cause: Cause,
    /// Send time of the newest packet the signal concerns; controllers that
    /// react once per RTT ignore signals about packets sent before their last reaction.
    pub sent_at: Instant,
    /// Packets lost (or marked) in this signal.
    pub packets: u64,
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
    /// From a window and slow-start threshold counted in segments of `mtu`
    /// bytes; an infinite threshold means none yet.
    pub fn from_segments(cwnd: f64, ssthresh: f64, mtu: u64) -> Self {
        ControllerMetrics {
            window: (cwnd * mtu as f64) as u64,
            ssthresh: ssthresh
                .is_finite()
                .then_some((ssthresh * mtu as f64) as u64),
        }
    }
}

/// A congestion controller for one connection.
pub trait Controller: Send + fmt::Debug {
    /// The name it is chosen by.
    fn name(&self) -> &'static str;
    /// A packet of `bytes` was sent.
    fn on_sent(&mut self, _now: Instant, _bytes: u64) {}
    /// A packet in flight was acknowledged.
    fn on_ack(&mut self, now: Instant, acked: &Acked, rtt: &RttEstimator);
    /// Returns whether the window was decreased.
    fn on_congestion(&mut self, now: Instant, event: &CongestionEvent) -> bool;
    /// A packet declared lost turned out to have arrived.
    fn on_spurious_loss(&mut self, _now: Instant) {}
    /// Congestion window, bytes.
    fn window(&self) -> u64;
    /// Whether the session rescales this controller's window so all
    /// connections' windows sum to the session window (NKP-0024).
    fn is_normalized(&self) -> bool {
        false
    }
    /// Sets the window during normalisation.
    fn set_window(&mut self, _bytes: u64) {}
    /// Snapshot for stats.
    fn metrics(&self) -> ControllerMetrics {
        ControllerMetrics {
            window: self.window(),
            ssthresh: None,
        }
    }
}

/// Builds the controller called `name`.
pub fn new_controller(
    name: &str,
    ctx: CcContext,
) -> Result<Box<dyn Controller>, UnknownController> {
    match name {
        "aimd" => Ok(Box::new(Aimd::new(ctx))),
        "cubic" => Ok(Box::new(Cubic::new(ctx))),
        "ncp" => Ok(Box::new(Ncp::new(ctx))),
        other => Err(UnknownController(other.to_owned())),
    }
}

/// Whether `name` is a known controller.
pub fn is_known(name: &str) -> bool {
    CONTROLLERS.contains(&name)
}
