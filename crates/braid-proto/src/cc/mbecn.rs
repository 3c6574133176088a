//! MB-ECN — placeholder while the controller is written; not yet in `CONTROLLERS`.

use super::{Acked, CcContext, CongestionEvent, Controller};
use crate::rtt::RttEstimator;
use crate::Instant;

#[derive(Debug)]
pub struct MbEcn {
    window: u64,
}

impl MbEcn {
    pub fn new(ctx: CcContext) -> Self {
        MbEcn {
            window: 10 * ctx.mtu,
        }
    }
}

impl Controller for MbEcn {
    fn name(&self) -> &'static str {
        "mbecn"
    }
    fn on_ack(&mut self, _now: Instant, _acked: &Acked, _rtt: &RttEstimator) {}
    fn on_congestion(&mut self, _now: Instant, _event: &CongestionEvent) -> bool {
        false
    }
    fn window(&self) -> u64 {
        self.window
    }
}

/// Receiver side of MB-ECN — placeholder.
#[derive(Debug, Default)]
pub struct EceReceiver {}

impl EceReceiver {
    /// A packet arrived with MB-ECN field `mbecn`; returns the ECE value to
    /// send to the sender now, if an update is due.
    pub fn on_packet(&mut self, _mbecn: u8) -> Option<u16> {
        None
    }
}
