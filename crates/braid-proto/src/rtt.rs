//! Round-trip time estimation and the retransmission timeout.
//!
//! RFC 6298 §2: `SRTT = 7/8 SRTT + 1/8 R`, `RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|`,
//! `RTO = SRTT + k·RTTVAR` (RFC 6298 fixes k = 4; catchunks showed a larger k
//! avoids spurious timeouts on long paths, so it is configuration), clamped to
//! `[min_rto, max_rto]` and multiplied by the backoff factor per expiry.

use crate::own_rtt::OwnRtt;
use crate::rtt_histogram::RttHistogram;
use crate::Instant;
use std::time::Duration;

/// A request sent once or repeated (a handshake answer, a path challenge):
/// when it first and last went, to date its round trip by Karn's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exchange {
    first: Instant,
    last: Instant,
}

impl Exchange {
    /// `previous` went out again at `now` (or for the first time).
    pub fn sent(previous: Option<Exchange>, now: Instant) -> Exchange {
        Exchange {
            first: previous.map_or(now, |e| e.first),
            last: now,
        }
    }

    /// The round trip, answered at `at`: the time since the first, when
    /// the repeats went within an eighth of it. A wider spread leaves it
    /// unknown, since the answer may be to any of them (Karn's rule).
    pub fn rtt(&self, at: Instant) -> Option<Duration> {
        let rtt = at.saturating_duration_since(self.first);
        (self.last.saturating_duration_since(self.first) <= rtt / 8).then_some(rtt)
    }
}

/// RTO parameters; see [`crate::SessionConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RtoConfig {
    /// Multiplier of RTTVAR in the RTO (RFC 6298: 4).
    pub k: f64,
    /// Floor (RFC 6298 §2.4: 1 s; catchunks and braid: 200 ms).
    pub min_rto: Duration,
    /// Ceiling (RFC 6298 §2.5 allows ≥ 60 s).
    pub max_rto: Duration,
    /// RTO before the first sample (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// Factor applied per consecutive expiry (RFC 6298 §5.5: 2).
    pub backoff: f64,
}

impl RtoConfig {
    /// How long `expiries` RTOs in a row take when each doubles (by
    /// `backoff`) from `min_rto` up to `max_rto`: the time a transfer
    /// without progress is given before the retry limit ends it, modelled
    /// as Linux's `tcp_retries2` is (`tcp_model_timeout`: 15 expiries,
    /// 200 ms to 120 s, ~15 min). braid probes a connection that seems
    /// down at least every `max_probe_interval`, so counting expiries
    /// alone would give up within seconds on a flood that TCP outwaits.
    pub fn backoff_total(&self, expiries: u32) -> Duration {
        let factor = self.backoff.max(1.0);
        let max = self.max_rto.as_secs_f64();
        let mut rto = self.min_rto.as_secs_f64().min(max);
        let mut total = 0.0;
        for done in 0..expiries {
            if rto >= max {
                // The rest all wait the ceiling.
                total += max * f64::from(expiries - done);
                break;
            }
            total += rto;
            rto = (rto * factor).min(max);
        }
        Duration::from_secs_f64(total)
    }
}

impl Default for RtoConfig {
    fn default() -> Self {
        RtoConfig {
            k: 4.0,
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(1),
            backoff: 2.0,
        }
    }
}

/// RTT state of one path.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Duration,
    min: Duration,
    /// The least sample of each way the ACKs came back: on the connection
    /// itself, or copied onto a faster one (`session::ack_copy`). A copy's
    /// round trip is the connection's way out and the fast one's way back,
    /// shorter than its own; once copies stop, the connection's own is
    /// what its ACKs take again.
    route_min: [Duration; 2],
    /// Which way the latest sample came.
    route: AckRoute,
    max: Duration,
    sum_nanos: u128,
    samples: u64,
    /// Raw samples, for the percentiles in reports.
    histogram: RttHistogram,
    /// The connection's own round trips, for reports only.
    own: OwnRtt,
    /// The RTO's multiplier of RTTVAR, when its owner said it (see
    /// [`RttEstimator::set_var_factor`]).
    var_factor: Option<f64>,
    /// `rttvar.mul_f64(k)` as of the latest sample, with the bits of `k`:
    /// the RTO is read after every datagram, and the float product's exact
    /// conversion back was most of its cost.
    scaled_var: Option<(u64, Duration)>,
}

/// Which way an ACK came back (see [`RttEstimator::min`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckRoute {
    /// On the connection whose packets it acknowledges.
    #[default]
    Own,
    /// Copied onto another connection.
    Copy,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            latest: Duration::ZERO,
            min: Duration::MAX,
            route_min: [Duration::MAX; 2],
            route: AckRoute::Own,
            max: Duration::ZERO,
            sum_nanos: 0,
            samples: 0,
            histogram: RttHistogram::default(),
            own: OwnRtt::default(),
            var_factor: None,
            scaled_var: None,
        }
    }
}

impl RttEstimator {
    /// Folds in a sample measured from an unambiguous packet; `ack_delay` is
    /// the peer's reported hold time, removed when that keeps the sample
    /// above the minimum (RFC 9002 §5.3).
    pub fn update(&mut self, measured: Duration, ack_delay: Duration) {
        self.update_via(AckRoute::Own, measured, ack_delay);
    }

    /// [`Self::update`] for an ACK that came back by `route`.
    pub fn update_via(&mut self, route: AckRoute, measured: Duration, ack_delay: Duration) {
        self.min = self.min.min(measured);
        let min = &mut self.route_min[route as usize];
        *min = (*min).min(measured);
        self.route = route;
        self.max = self.max.max(measured);
        self.sum_nanos += measured.as_nanos();
        self.samples += 1;
        self.histogram.record(measured);
        let adjusted = if measured >= self.min() + ack_delay {
            measured - ack_delay
        } else {
            measured
        };
        self.latest = adjusted;
        match self.srtt {
            None => {
                self.srtt = Some(adjusted);
                self.rttvar = adjusted / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(adjusted);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((srtt * 7 + adjusted) / 8);
            }
        }
        self.scale_var();
    }

    /// The RTO's `k` (see [`RtoConfig::k`]): each sample then scales
    /// RTTVAR by it once, for every RTO read until the next.
    pub fn set_var_factor(&mut self, k: f64) {
        self.var_factor = Some(k);
        self.scale_var();
    }

    fn scale_var(&mut self) {
        if let Some(k) = self.var_factor {
            self.scaled_var = Some((k.to_bits(), self.rttvar.mul_f64(k)));
        }
    }

    /// Whether any sample has been taken.
    pub fn has_sample(&self) -> bool {
        self.srtt.is_some()
    }

    /// Smoothed RTT, or `fallback` before the first sample.
    pub fn srtt_or(&self, fallback: Duration) -> Duration {
        self.srtt.unwrap_or(fallback)
    }

    /// Latest sample, after ack-delay adjustment.
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// Minimum, average and maximum of all raw samples; `None` before any.
    pub fn min_avg_max(&self) -> Option<(Duration, Duration, Duration)> {
        (self.samples > 0).then(|| {
            let avg = Duration::from_nanos((self.sum_nanos / u128::from(self.samples)) as u64);
            (self.min, avg, self.max)
        })
    }

    /// 95th percentile of the raw samples (within ±2.2 %); `None` before any.
    pub fn p95(&self) -> Option<Duration> {
        self.histogram.quantile(0.95)
    }

    /// Smallest raw sample of the way the latest ACK came back (see
    /// [`AckRoute`]), zero before any.
    pub fn min(&self) -> Duration {
        if self.samples == 0 {
            Duration::ZERO
        } else {
            self.route_min[self.route as usize]
        }
    }

    /// Number of samples.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The round trips of the ACKs that came back on the connection
    /// itself, copies' originals included (see [`OwnRtt`]).
    pub(crate) fn own(&self) -> &OwnRtt {
        &self.own
    }

    pub(crate) fn own_mut(&mut self) -> &mut OwnRtt {
        &mut self.own
    }

    /// The RTO after `backoffs` consecutive expiries.
    pub fn rto(&self, cfg: &RtoConfig, backoffs: u32) -> Duration {
        let base = match self.srtt {
            None => cfg.initial_rto,
            Some(srtt) => {
                // RFC 6298 §2.3 uses max(G, K·RTTVAR); 1 ms stands in for the clock granularity G.
                let var = match self.scaled_var {
                    Some((k, var)) if k == cfg.k.to_bits() => var,
                    _ => self.rttvar.mul_f64(cfg.k),
                };
                let var = var.max(Duration::from_millis(1));
                (srtt + var).clamp(cfg.min_rto, cfg.max_rto)
            }
        };
        if backoffs == 0 {
            // What the float arithmetic below gives for a factor of 1, as
            // `Duration::from_secs_f64` never rounds up: this runs several
            // times per datagram, the float path is for backed-off timers.
            return base.min(cfg.max_rto);
        }
        backed_off(base, cfg, backoffs)
    }
}

/// `base` after `backoffs` expiries: grown by the backoff factor, capped
/// at the largest RTO, never below `base` (or the cap).
fn backed_off(base: Duration, cfg: &RtoConfig, backoffs: u32) -> Duration {
    let factor = cfg.backoff.max(1.0).powi(backoffs.min(64) as i32);
    Duration::from_secs_f64((base.as_secs_f64() * factor).min(cfg.max_rto.as_secs_f64()))
        .max(base.min(cfg.max_rto))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_rto_from_the_scaled_variation_is_the_one_computed_afresh() {
        let cfg = RtoConfig::default();
        let other = RtoConfig { k: 2.5, ..cfg };
        let (mut plain, mut scaled) = (RttEstimator::default(), RttEstimator::default());
        scaled.set_var_factor(cfg.k);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let sample = Duration::from_nanos(x % 3_000_000_000);
            plain.update(sample, Duration::ZERO);
            scaled.update(sample, Duration::ZERO);
            for backoffs in [0, 1, 5] {
                assert_eq!(plain.rto(&cfg, backoffs), scaled.rto(&cfg, backoffs));
            }
            // Another k than the one scaled by is computed afresh.
            assert_eq!(plain.rto(&other, 0), scaled.rto(&other, 0));
        }
    }

    #[test]
    fn an_rto_not_backed_off_is_the_float_paths_answer() {
        let cfg = RtoConfig::default();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let base = Duration::from_nanos(x % (2 * cfg.max_rto.as_nanos() as u64));
            assert_eq!(backed_off(base, &cfg, 0), base.min(cfg.max_rto), "{base:?}");
        }
    }

    #[test]
    fn repeats_close_together_still_date_the_round_trip() {
        let t0 = Instant::ZERO;
        let once = Exchange::sent(None, t0);
        let close = Exchange::sent(Some(once), t0 + MS);
        let apart = Exchange::sent(Some(once), t0 + 1000 * MS);
        // One request, or repeats 1 ms apart, answered after 100 ms.
        assert_eq!(once.rtt(t0 + 100 * MS), Some(100 * MS));
        assert_eq!(close.rtt(t0 + 100 * MS), Some(100 * MS));
        // A repeat a second later: the answer may be to either (Karn).
        assert_eq!(apart.rtt(t0 + 1100 * MS), None);
    }

    /// Linux's figure for tcp_retries2 = 15 (200 ms doubling to 120 s):
    /// 924.6 s; with braid's 60 s ceiling, 522.2 s.
    #[test]
    fn backoff_total_models_doubling_timeouts_up_to_the_ceiling() {
        let linux = RtoConfig {
            max_rto: Duration::from_secs(120),
            ..RtoConfig::default()
        };
        assert_eq!(linux.backoff_total(16).as_millis(), 924_600);
        assert_eq!(RtoConfig::default().backoff_total(16).as_millis(), 522_200);
        assert_eq!(RtoConfig::default().backoff_total(4).as_millis(), 3_000);
        assert_eq!(RtoConfig::default().backoff_total(0), Duration::ZERO);
        let flat = RtoConfig {
            backoff: 1.0,
            ..RtoConfig::default()
        };
        assert_eq!(flat.backoff_total(5).as_millis(), 1_000);
    }

    #[test]
    fn follows_rfc6298_and_clamps() {
        let cfg = RtoConfig::default();
        let mut rtt = RttEstimator::default();
        assert_eq!(rtt.rto(&cfg, 0), Duration::from_secs(1));
        rtt.update(100 * MS, Duration::ZERO);
        // SRTT = 100, RTTVAR = 50: RTO = 100 + 4·50 = 300 ms.
        assert_eq!(rtt.rto(&cfg, 0), 300 * MS);
        rtt.update(100 * MS, Duration::ZERO);
        // RTTVAR = 3/4·50 = 37.5: RTO = 250 ms.
        assert_eq!(rtt.rto(&cfg, 0), 250 * MS);
        assert_eq!(rtt.rto(&cfg, 1), 500 * MS);
        assert_eq!(rtt.rto(&cfg, 30), Duration::from_secs(60));
        let mut fast = RttEstimator::default();
        for _ in 0..50 {
            fast.update(MS, Duration::ZERO);
        }
        assert_eq!(fast.rto(&cfg, 0), cfg.min_rto);
    }

    #[test]
    fn k_and_backoff_are_configuration() {
        let cfg = RtoConfig {
            k: 8.0,
            backoff: 3.0,
            ..RtoConfig::default()
        };
        let mut rtt = RttEstimator::default();
        rtt.update(100 * MS, Duration::ZERO);
        assert_eq!(rtt.rto(&cfg, 0), 500 * MS);
        assert_eq!(rtt.rto(&cfg, 1), 1500 * MS);
    }

    /// A slow connection whose ACKs come back copied on a fast one has
    /// the copies' shorter minimum while they come, and its own again when
    /// they stop (the report keeps the least of all).
    #[test]
    fn each_way_back_has_its_own_minimum() {
        let mut rtt = RttEstimator::default();
        rtt.update(500 * MS, Duration::ZERO);
        for _ in 0..5 {
            rtt.update_via(AckRoute::Copy, 260 * MS, Duration::ZERO);
        }
        assert_eq!(rtt.min(), 260 * MS);
        rtt.update(510 * MS, Duration::ZERO);
        assert_eq!(rtt.min(), 500 * MS, "the copies stopped");
        assert_eq!(rtt.min_avg_max().unwrap().0, 260 * MS);
        // The ACK delay is judged against the way's own minimum.
        rtt.update(530 * MS, 20 * MS);
        assert_eq!(rtt.latest(), 510 * MS);
    }

    #[test]
    fn ack_delay_is_removed_only_above_the_minimum() {
        let mut rtt = RttEstimator::default();
        rtt.update(50 * MS, Duration::ZERO);
        rtt.update(60 * MS, 5 * MS);
        assert_eq!(rtt.latest(), 55 * MS);
        rtt.update(52 * MS, 5 * MS);
        assert_eq!(rtt.latest(), 52 * MS);
        let (min, _, max) = rtt.min_avg_max().unwrap();
        assert_eq!((min, max), (50 * MS, 60 * MS));
    }
}
