//! BBR — placeholder while the controller is written; not yet in `CONTROLLERS`.

use super::{Acked, CcContext, CongestionEvent, Controller};
use crate::rtt::RttEstimator;
use crate::Instant;

#[derive(Debug)]
pub struct Bbr {
    window: u64,
}

impl Bbr {
    pub fn new(ctx: CcContext) -> Self {
        Bbr {
            window: 10 * ctx.mtu,
        }
    }
}

impl Controller for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }
    fn on_ack(&mut self, _now: Instant, _acked: &Acked, _rtt: &RttEstimator) {}
    fn on_congestion(&mut self, _now: Instant, _event: &CongestionEvent) -> bool {
        false
    }
    fn window(&self) -> u64 {
        self.window
    }
}
