//! The figures to reach: the `target_*` keys of a row's `[published]`
//! table, checked on its best controller.

use super::published::{Row, TCP_RATIO};
use super::stats::{best_of, mean, queue_estimate, CcResult};
use braid_proto::cc::Algorithm;
use braid_sim::report::SeriesPoint;
use braid_sim::{FlowResult, RunResult};
use std::collections::BTreeMap;

/// Another row of the suite by name: braid's best mean goodput there among
/// controllers whose runs all completed, and that controller (for
/// `alone_row`: a direction of a duplex row against braid alone at its best,
/// so a controller that is equally poor both ways does not pass).
pub type Alone<'a> = dyn Fn(&str) -> Option<(f64, Algorithm)> + 'a;

/// One target: met (None = cannot tell) and what was measured.
#[derive(Debug, Clone)]
pub struct Check {
    pub met: Option<bool>,
    pub text: String,
    /// Goodput targets only: the measured figure over the one required
    /// (1.0 = exactly on target), so a miss can say how close it came.
    pub of_target: Option<f64>,
}

impl Check {
    fn new(met: Option<bool>, text: impl Into<String>) -> Check {
        Check {
            met,
            text: text.into(),
            of_target: None,
        }
    }

    /// A goodput target: `measured` against `required` (higher is better).
    fn goodput(measured: f64, required: f64, text: impl Into<String>) -> Check {
        Check {
            met: Some(measured >= required),
            text: text.into(),
            of_target: (required > 0.0).then(|| measured / required),
        }
    }
}

/// A row that misses only goodput targets, each by reaching at least this
/// fraction of it, is shown as a near miss (still not a pass).
pub const NEAR_MISS: f64 = 0.98;

/// How a row fares: the verdict of [`verdict`], with its misses told apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    Met,
    /// Not met, but every missed target is a goodput target reached to at
    /// least [`NEAR_MISS`] of it; the worst such fraction.
    NearMiss(f64),
    Miss,
}

/// The row's mark; None when no target could be judged.
pub fn mark(checks: &[Check]) -> Option<Mark> {
    match verdict(checks)? {
        true => Some(Mark::Met),
        false => {
            let mut worst = f64::INFINITY;
            for c in checks.iter().filter(|c| c.met == Some(false)) {
                match c.of_target {
                    Some(f) if f >= NEAR_MISS => worst = worst.min(f),
                    _ => return Some(Mark::Miss),
                }
            }
            Some(Mark::NearMiss(worst))
        }
    }
}

/// A fraction of a target as a percentage with one decimal, rounded down
/// so that a miss never reads "100.0%".
pub fn of_target_text(f: f64) -> String {
    format!("{:.1}% of target", (f * 1000.0).floor() / 10.0)
}

/// The sampling period actually used: the median gap between sample
/// times (the first may fall at the handshake, off the grid), else the
/// file's sample_interval.
fn series_interval(row: &Row, flows: &[FlowResult]) -> f64 {
    let mut ts: Vec<f64> = flows
        .iter()
        .flat_map(|f| f.series.iter().map(|p| (p.t * 1e9).round() / 1e9))
        .collect();
    ts.sort_by(f64::total_cmp);
    ts.dedup();
    let mut gaps: Vec<f64> = ts
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 1e-9)
        .collect();
    gaps.sort_by(f64::total_cmp);
    gaps.get(gaps.len() / 2)
        .copied()
        .unwrap_or(row.scenario.sample_interval.as_secs_f64())
}

/// Sample index → connection → point.
fn by_time(flow: &FlowResult, interval: f64) -> BTreeMap<i64, BTreeMap<u8, SeriesPoint>> {
    let mut out: BTreeMap<i64, BTreeMap<u8, SeriesPoint>> = BTreeMap::new();
    for p in &flow.series {
        let k = (p.t / interval).round() as i64;
        out.entry(k).or_default().insert(p.path, *p);
    }
    out
}

/// Seconds from `converge_from_s` until flow 0's window shares enter and
/// stay within `share_tolerance` (relative) of its paths' rate shares; None = never.
pub fn convergence_time(row: &Row, run: &RunResult) -> Option<f64> {
    let p = &row.published;
    let tol = p.share_tolerance.unwrap_or(0.1);
    let start = p.converge_from_s.unwrap_or(0.0);
    let spec = row.scenario.flows.first()?;
    let caps: Vec<f64> = spec
        .paths
        .iter()
        .map(|&p| row.path_capacity_mbps(p, false).unwrap_or(0.0))
        .collect();
    let total: f64 = caps.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let flow = run.flows.first()?;
    let interval = series_interval(row, std::slice::from_ref(flow));
    let series = by_time(flow, interval);
    let ok: Vec<(f64, bool)> = series
        .iter()
        .filter(|(k, _)| **k as f64 * interval >= start - 1e-9)
        .map(|(k, ent)| {
            let wt: f64 = ent.values().map(|p| p.window).sum();
            let good = wt > 0.0
                && caps.iter().enumerate().all(|(i, c)| {
                    let share = c / total;
                    ent.get(&(i as u8))
                        .is_some_and(|p| (p.window / wt - share).abs() <= tol * share)
                });
            (*k as f64 * interval, good)
        })
        .collect();
    settled(&ok, start)
}

/// The time from `start` at which the trailing run of good points began;
/// None if the last point is not good.
fn settled(points: &[(f64, bool)], start: f64) -> Option<f64> {
    if !points.last()?.1 {
        return None;
    }
    let mut t = points.last()?.0;
    for &(when, good) in points.iter().rev() {
        if !good {
            break;
        }
        t = when;
    }
    Some((t - start).max(0.0))
}

/// Seconds from `jain_from_s` until Jain's index of the flows' trailing
/// 100 ms mean throughputs reaches `target_jain` and stays there while all
/// flows run; None = never.
pub fn jain_time(row: &Row, run: &RunResult) -> Option<f64> {
    let p = &row.published;
    let target = p.target_jain.unwrap_or(0.99);
    let start = p.jain_from_s.unwrap_or(0.0);
    let interval = series_interval(row, &run.flows);
    let per_flow: Vec<BTreeMap<i64, f64>> = run
        .flows
        .iter()
        .map(|f| {
            by_time(f, interval)
                .into_iter()
                .map(|(k, v)| (k, v.values().map(|p| p.throughput_mbps).sum()))
                .collect()
        })
        .collect();
    if per_flow.is_empty() || per_flow.iter().any(BTreeMap::is_empty) {
        return None;
    }
    // The first flow to stop sampling ends the overlap; its last sample may
    // cover only part of an interval, so it is left out.
    let end = per_flow
        .iter()
        .map(|s| *s.keys().next_back().unwrap_or(&0))
        .min()?
        - 1;
    let k0 = (start / interval - 1e-9).ceil() as i64;
    let win = ((0.1 / interval).round() as i64).max(1);
    let points: Vec<(f64, bool)> = (k0..=end)
        .map(|k| {
            let lo = k0.max(k - win + 1);
            let xs: Vec<f64> = per_flow
                .iter()
                .map(|s| mean((lo..=k).map(|j| s.get(&j).copied().unwrap_or(0.0))))
                .collect();
            let sq: f64 = xs.iter().map(|x| x * x).sum();
            let sum: f64 = xs.iter().sum();
            let j = if sq > 0.0 {
                sum * sum / (xs.len() as f64 * sq)
            } else {
                0.0
            };
            (k as f64 * interval, j >= target)
        })
        .collect();
    settled(&points, start)
}

/// Every target of the row, checked on `best`; `alone` finds another row's
/// result with a controller (for `alone_row`).
pub fn check(row: &Row, best: Option<&CcResult<'_>>, alone: &Alone<'_>) -> Vec<Check> {
    let p = &row.published;
    let mut out = Vec::new();
    let Some(best) = best else {
        if p.has_targets() {
            out.push(Check::new(Some(false), "no run"));
        }
        return out;
    };
    if !best.complete && p.has_targets() {
        out.push(Check::new(Some(false), "no controller completed every run"));
    }
    goodput_checks(row, best, &mut out);
    retransmission_checks(row, best, &mut out);
    out.extend(alone_check(row, best, alone));
    out.extend(queue_check(row, best));
    timing_checks(row, best, &mut out);
    if let Some(m) = p.missing_feature.as_deref() {
        out.push(Check::new(None, format!("needs {m} (format lacks it)")));
    }
    out
}

/// The goodput targets against the link: a fraction of ideal, Mbit/s, and
/// the published TCP figures taken at braid's overhead.
fn goodput_checks(row: &Row, best: &CcResult<'_>, out: &mut Vec<Check>) {
    let p = &row.published;
    let ideal = row.ideal_mbps();
    let ratio = row.payload_ratio();
    let g = best.one_way();
    if let (Some(f), Some(ideal)) = (p.target_fraction_of_ideal, ideal) {
        if let Some(rev) = best.rev {
            let worst = best.fwd.min(rev) / ideal;
            out.push(Check::goodput(
                worst,
                f,
                format!("each way {} of ideal (≥{})", pct(worst), pct(f)),
            ));
        } else {
            out.push(Check::goodput(
                g / ideal,
                f,
                format!("{} of ideal (≥{})", pct(g / ideal), pct(f)),
            ));
        }
    }
    if let Some(t) = p.target_mbps {
        out.push(Check::goodput(g, t, format!("{g:.1} (≥{t})")));
    }
    if p.target_at_least_seed_tcp == Some(true) {
        if let Some(tcp) = row.seed_tcp_mbps() {
            let eq = tcp * ratio / TCP_RATIO;
            out.push(Check::goodput(
                g,
                eq,
                format!("≥ seed TCP {tcp:.1} (= {eq:.1} at braid's overhead)"),
            ));
        }
    }
    if p.target_at_least_linux == Some(true) {
        if let Some((lin, _)) = row.linux_best() {
            let eq = lin * ratio / TCP_RATIO;
            out.push(Check::goodput(
                g,
                eq,
                format!("≥ Linux {lin:.1} (= {eq:.1} at braid's overhead)"),
            ));
        }
    }
}

/// The spurious-retransmission limits and the completion target.
fn retransmission_checks(row: &Row, best: &CcResult<'_>, out: &mut Vec<Check>) {
    let p = &row.published;
    if let Some(t) = p.target_spurious_max {
        out.push(Check::new(
            Some(best.spurious_max as f64 <= t),
            format!("spurious {} (≤{t})", best.spurious_max),
        ));
    }
    if let Some(t) = p.target_spurious_fraction_max {
        let frac = if best.segments > 0.0 {
            best.spurious / best.segments
        } else {
            0.0
        };
        out.push(Check::new(
            Some(frac < t),
            format!("spurious {:.2}% of segments (<{})", frac * 100.0, pct(t)),
        ));
    }
    if p.target_complete == Some(true) {
        let text = if best.complete {
            "completes"
        } else {
            "incomplete"
        };
        out.push(Check::new(Some(best.complete), text));
    }
}

/// Goodput as a fraction of what the row's alone row reached by itself
/// (undecided when that row did not run or complete).
fn alone_check(row: &Row, best: &CcResult<'_>, alone: &Alone<'_>) -> Option<Check> {
    let p = &row.published;
    let (Some(t), Some(name)) = (p.target_fraction_of_alone, p.alone_row.as_deref()) else {
        return None;
    };
    Some(match alone(name) {
        None => Check::new(None, format!("alone row {name} not run or incomplete")),
        Some((alone_g, alone_cc)) => {
            let worst = best.fwd.min(best.rev.unwrap_or(best.fwd)) / alone_g;
            Check::goodput(
                worst,
                t,
                format!(
                    "each way {} of alone {alone_g:.1} ({alone_cc}) (≥{})",
                    pct(worst),
                    pct(t)
                ),
            )
        }
    })
}

/// The standing queue, estimated from the RTT, against its limit.
fn queue_check(row: &Row, best: &CcResult<'_>) -> Option<Check> {
    let t = row.published.target_queue_max_packets?;
    Some(match queue_estimate(best) {
        None => Check::new(None, "queue unknown"),
        Some(q) => Check::new(Some(q <= t), format!("queue ≈{q:.0} pkts from RTT (≤{t})")),
    })
}

/// How soon the flows share fairly: window shares settle in their band,
/// Jain's index stays high; the worst seed counts.
fn timing_checks(row: &Row, best: &CcResult<'_>, out: &mut Vec<Check>) {
    let p = &row.published;
    if let Some(t) = p.target_converge_within_s {
        let times: Option<Vec<f64>> = best.good.iter().map(|r| convergence_time(row, r)).collect();
        match times {
            None => out.push(Check::new(
                Some(false),
                "window shares never settle in the band",
            )),
            Some(ts) => {
                let worst = ts.iter().copied().fold(0.0, f64::max);
                out.push(Check::new(
                    Some(worst <= t),
                    format!("shares converge in {worst:.2} s (≤{t})"),
                ));
            }
        }
    }
    if let Some(j) = p.target_jain {
        let within = p.target_jain_within_s.unwrap_or(0.1);
        let times: Option<Vec<f64>> = best.good.iter().map(|r| jain_time(row, r)).collect();
        match times {
            None => out.push(Check::new(
                Some(false),
                format!("Jain ≥{j} never sustained"),
            )),
            Some(ts) => {
                let worst = ts.iter().copied().fold(0.0, f64::max);
                out.push(Check::new(
                    Some(worst <= within),
                    format!(
                        "Jain ≥{j} after {:.0} ms (≤{:.0})",
                        worst * 1e3,
                        within * 1e3
                    ),
                ));
            }
        }
    }
}

/// The controller a row is judged on, with its checks: the highest-goodput
/// one that meets every target at once, else the highest-goodput one (so a
/// miss is listed against braid's best figure). Meeting each target with a
/// different controller does not count.
pub fn judge<'r, 'a>(
    row: &Row,
    results: &'r [CcResult<'a>],
    alone: &Alone<'_>,
) -> (Option<&'r CcResult<'a>>, Vec<Check>) {
    let passing = results
        .iter()
        .filter(|r| r.complete && r.goodput.is_some())
        .map(|r| (r, check(row, Some(r), alone)))
        // Every check decided and met: a target that cannot be judged for
        // this controller (say, its alone row failed) does not pass it.
        .filter(|(_, c)| !c.is_empty() && c.iter().all(|c| c.met == Some(true)))
        .max_by(|(a, _), (b, _)| a.mean().unwrap_or(0.0).total_cmp(&b.mean().unwrap_or(0.0)));
    match passing {
        Some((r, checks)) => (Some(r), checks),
        None => {
            let best = best_of(results);
            (best, check(row, best, alone))
        }
    }
}

/// The row's verdict: Some(true) when every checkable target is met.
pub fn verdict(checks: &[Check]) -> Option<bool> {
    let met: Vec<bool> = checks.iter().filter_map(|c| c.met).collect();
    (!met.is_empty()).then(|| met.iter().all(|m| *m))
}

pub fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goodput(measured: f64, required: f64) -> Check {
        Check::goodput(measured, required, "goodput")
    }

    #[test]
    fn a_near_miss_is_a_goodput_miss_within_two_percent_and_never_a_pass() {
        // Passing is untouched: met only at or above the figure.
        assert_eq!(mark(&[goodput(1.0, 1.0)]), Some(Mark::Met));
        assert_eq!(verdict(&[goodput(0.999, 1.0)]), Some(false));
        assert_eq!(mark(&[goodput(0.999, 1.0)]), Some(Mark::NearMiss(0.999)));
        assert_eq!(mark(&[goodput(0.98, 1.0)]), Some(Mark::NearMiss(0.98)));
        assert_eq!(mark(&[goodput(0.979, 1.0)]), Some(Mark::Miss));
        // The worst of several near misses.
        assert_eq!(
            mark(&[goodput(0.99, 1.0), goodput(1.0, 1.0), goodput(0.985, 1.0)]),
            Some(Mark::NearMiss(0.985))
        );
        // Any other missed target makes it a miss, however close the rest.
        let slow = Check::new(Some(false), "shares converge in 1.01 s (≤1)");
        assert_eq!(mark(&[goodput(0.999, 1.0), slow]), Some(Mark::Miss));
        assert_eq!(mark(&[goodput(f64::NAN, 1.0)]), Some(Mark::Miss));
        // Nothing judged: no mark.
        assert_eq!(mark(&[Check::new(None, "queue unknown")]), None);
        assert_eq!(mark(&[]), None);
    }

    #[test]
    fn of_target_rounds_down() {
        assert_eq!(of_target_text(0.9996), "99.9% of target");
        assert_eq!(of_target_text(0.994), "99.4% of target");
        assert_eq!(of_target_text(0.5), "50.0% of target");
    }
}
