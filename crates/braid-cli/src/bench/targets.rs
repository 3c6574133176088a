//! Issue 3's figures to reach: the `target_*` keys of a row's
//! `[published]` table, checked on its best controller.

use super::published::{Row, TCP_RATIO};
use super::stats::{best_of, mean, queue_estimate, CcResult};
use braid_sim::report::SeriesPoint;
use braid_sim::{FlowResult, RunResult};
use std::collections::BTreeMap;

/// Another row of the suite by name: braid's best mean goodput there among
/// controllers whose runs all completed, and that controller (for
/// `alone_row`: a direction of a duplex row against braid alone at its best,
/// so a controller that is equally poor both ways does not pass).
pub type Alone<'a> = dyn Fn(&str) -> Option<(f64, String)> + 'a;

/// One target: met (None = cannot tell) and what was measured.
pub type Check = (Option<bool>, String);

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
            out.push((Some(false), "no run".into()));
        }
        return out;
    };
    if !best.complete && p.has_targets() {
        out.push((Some(false), "no controller completed every run".into()));
    }
    let ideal = row.ideal_mbps();
    let ratio = row.payload_ratio();
    let g = best.one_way();
    if let (Some(f), Some(ideal)) = (p.target_fraction_of_ideal, ideal) {
        if let Some(rev) = best.rev {
            let worst = best.fwd.min(rev) / ideal;
            out.push((
                Some(worst >= f),
                format!("each way {} of ideal (≥{})", pct(worst), pct(f)),
            ));
        } else {
            out.push((
                Some(g / ideal >= f),
                format!("{} of ideal (≥{})", pct(g / ideal), pct(f)),
            ));
        }
    }
    if let Some(t) = p.target_mbps {
        out.push((Some(g >= t), format!("{g:.1} (≥{t})")));
    }
    if p.target_at_least_seed_tcp == Some(true) {
        if let Some(tcp) = row.seed_tcp_mbps() {
            let eq = tcp * ratio / TCP_RATIO;
            out.push((
                Some(g >= eq),
                format!("≥ seed TCP {tcp:.1} (= {eq:.1} at braid's overhead)"),
            ));
        }
    }
    if p.target_at_least_linux == Some(true) {
        if let Some((lin, _)) = row.linux_best() {
            let eq = lin * ratio / TCP_RATIO;
            out.push((
                Some(g >= eq),
                format!("≥ Linux {lin:.1} (= {eq:.1} at braid's overhead)"),
            ));
        }
    }
    if let Some(t) = p.target_spurious_max {
        out.push((
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
        out.push((
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
        out.push((Some(best.complete), text.into()));
    }
    if let (Some(t), Some(name)) = (p.target_fraction_of_alone, p.alone_row.as_deref()) {
        match alone(name) {
            None => out.push((None, format!("alone row {name} not run or incomplete"))),
            Some((alone_g, alone_cc)) => {
                let worst = best.fwd.min(best.rev.unwrap_or(best.fwd)) / alone_g;
                out.push((
                    Some(worst >= t),
                    format!(
                        "each way {} of alone {alone_g:.1} ({alone_cc}) (≥{})",
                        pct(worst),
                        pct(t)
                    ),
                ));
            }
        }
    }
    if let Some(t) = p.target_queue_max_packets {
        match queue_estimate(best) {
            None => out.push((None, "queue unknown".into())),
            Some(q) => out.push((Some(q <= t), format!("queue ≈{q:.0} pkts from RTT (≤{t})"))),
        }
    }
    if let Some(t) = p.target_converge_within_s {
        let times: Option<Vec<f64>> = best.good.iter().map(|r| convergence_time(row, r)).collect();
        match times {
            None => out.push((Some(false), "window shares never settle in the band".into())),
            Some(ts) => {
                let worst = ts.iter().copied().fold(0.0, f64::max);
                out.push((
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
            None => out.push((Some(false), format!("Jain ≥{j} never sustained"))),
            Some(ts) => {
                let worst = ts.iter().copied().fold(0.0, f64::max);
                out.push((
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
    if let Some(m) = p.missing_feature.as_deref() {
        out.push((None, format!("needs {m} (format lacks it)")));
    }
    out
}

/// The row's verdict: Some(true) when every checkable target is met.
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
        .filter(|(_, c)| !c.is_empty() && c.iter().all(|(m, _)| *m == Some(true)))
        .max_by(|(a, _), (b, _)| a.mean().unwrap_or(0.0).total_cmp(&b.mean().unwrap_or(0.0)));
    match passing {
        Some((r, checks)) => (Some(r), checks),
        None => {
            let best = best_of(results);
            (best, check(row, best, alone))
        }
    }
}

pub fn verdict(checks: &[Check]) -> Option<bool> {
    let met: Vec<bool> = checks.iter().filter_map(|c| c.0).collect();
    (!met.is_empty()).then(|| met.iter().all(|m| *m))
}

pub fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}
