//! One row with one controller over all seeds: the figures the report
//! prints, each computed from the runs' [`RunResult`]s (the JSON of
//! `braid sim --json`).

use super::published::Row;
use braid_proto::cc::Algorithm;
use braid_sim::{Delivery, FlowResult, RunResult};

/// Mean, minimum and maximum over seeds.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(xs: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let xs: Vec<f64> = xs.into_iter().filter(|x| !x.is_nan()).collect();
        if xs.is_empty() {
            return None;
        }
        Some(Spread {
            mean: xs.iter().sum::<f64>() / xs.len() as f64,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

pub fn mean(xs: impl IntoIterator<Item = f64>) -> f64 {
    Spread::of(xs).map_or(f64::NAN, |s| s.mean)
}

/// The median; `None` for no values.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One run's outcome: its result, or why there is none.
pub type Outcome = Result<RunResult, String>;

/// A row's runs with one controller.
pub struct CcResult<'a> {
    pub row: &'a Row,
    pub cc: Algorithm,
    /// Runs that produced a result, in seed order.
    pub good: Vec<&'a RunResult>,
    /// Runs that failed outright (`seed: error`).
    pub errors: Vec<String>,
    /// Every run produced a result and every flow delivered and verified.
    pub complete: bool,
    /// Distinct errors the flows reported.
    pub flow_errors: Vec<String>,
    /// Aggregate goodput (see [`aggregate`]).
    pub goodput: Option<Spread>,
    pub fwd: f64,
    pub rev: Option<f64>,
    pub per_flow: Vec<f64>,
    pub jain: f64,
    /// Means over seeds, all flows and directions.
    pub retransmitted: f64,
    pub spurious: f64,
    pub decreases: f64,
    pub segments: f64,
    pub spurious_max: u64,
    /// Worst direction's p95 one-way and queueing delay, mean over seeds (ms).
    pub owd_p95_ms: Option<Spread>,
    pub queue_p95_ms: Option<Spread>,
    /// Datagrams the links dropped / offered, mean over seeds.
    pub loss_rate: f64,
}

fn deliveries(r: &RunResult) -> impl Iterator<Item = &Delivery> {
    r.flows
        .iter()
        .flat_map(|f| std::iter::once(&f.forward).chain(f.reverse.as_ref()))
}

fn flow_ok(f: &FlowResult) -> bool {
    f.forward.completed
        && f.forward.verified
        && f.reverse.as_ref().is_none_or(|r| r.completed && r.verified)
}

/// A run's goodput: one flow, its goodput (duplex: both directions);
/// several flows, all bytes over the span from the first start to the last end.
pub fn aggregate(row: &Row, r: &RunResult) -> f64 {
    if let [f] = r.flows.as_slice() {
        return f.forward.goodput_mbps + f.reverse.as_ref().map_or(0.0, |r| r.goodput_mbps);
    }
    let starts: Vec<f64> = row
        .scenario
        .flows
        .iter()
        .map(|s| s.start.as_secs_f64())
        .collect();
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let last = starts
        .iter()
        .zip(&r.flows)
        .map(|(s, f)| s + f.forward.duration_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let total: u64 = deliveries(r).map(|d| d.delivered).sum();
    let span = last - first;
    if span > 0.0 {
        total as f64 * 8.0 / 1e6 / span
    } else {
        f64::NAN
    }
}

/// The worst direction's p95 one-way delay of a run, ms.
pub fn run_owd_p95(r: &RunResult) -> Option<f64> {
    deliveries(r).filter_map(|d| d.owd_p95_ms).reduce(f64::max)
}

fn run_queue_p95(r: &RunResult) -> Option<f64> {
    deliveries(r)
        .filter_map(|d| d.queue_delay_p95_ms)
        .reduce(f64::max)
}

fn run_loss_rate(r: &RunResult) -> f64 {
    let (offered, dropped) = deliveries(r).fold((0, 0), |(o, d), x| {
        (
            o + x.datagrams_offered.unwrap_or(0),
            d + x.datagrams_dropped.unwrap_or(0),
        )
    });
    if offered > 0 {
        dropped as f64 / offered as f64
    } else {
        0.0
    }
}

impl<'a> CcResult<'a> {
    pub fn new(row: &'a Row, cc: Algorithm, runs: &[(u64, &'a Outcome)]) -> CcResult<'a> {
        let mut good = Vec::new();
        let mut errors = Vec::new();
        for (seed, o) in runs {
            match o {
                Ok(r) => good.push(r),
                Err(e) => errors.push(format!("seed {seed}: {e}")),
            }
        }
        let complete = !good.is_empty()
            && errors.is_empty()
            && good.iter().all(|r| r.flows.iter().all(flow_ok));
        let mut flow_errors: Vec<String> = good
            .iter()
            .flat_map(|r| r.flows.iter().filter_map(|f| f.error.as_ref()))
            .map(ToString::to_string)
            .collect();
        flow_errors.sort();
        flow_errors.dedup();
        let n = good.len().max(1) as f64;
        let sum = |f: &dyn Fn(&Delivery) -> u64| {
            good.iter().flat_map(|r| deliveries(r)).map(f).sum::<u64>() as f64 / n
        };
        let flows = good.first().map_or(0, |r| r.flows.len());
        CcResult {
            row,
            cc,
            goodput: Spread::of(good.iter().map(|r| aggregate(row, r))),
            fwd: mean(good.iter().map(|r| r.flows[0].forward.goodput_mbps)),
            rev: row.duplex.then(|| {
                mean(good.iter().map(|r| {
                    r.flows[0]
                        .reverse
                        .as_ref()
                        .map_or(f64::NAN, |d| d.goodput_mbps)
                }))
            }),
            per_flow: (0..flows)
                .map(|i| mean(good.iter().map(|r| r.flows[i].forward.goodput_mbps)))
                .collect(),
            jain: mean(good.iter().map(|r| r.jain_fairness)),
            retransmitted: sum(&|d| d.retransmitted),
            spurious: sum(&|d| d.spurious_retransmits),
            decreases: sum(&|d| d.window_decreases),
            segments: sum(&|d| d.segments),
            spurious_max: good
                .iter()
                .map(|r| deliveries(r).map(|d| d.spurious_retransmits).sum())
                .max()
                .unwrap_or(0),
            owd_p95_ms: Spread::of(good.iter().filter_map(|r| run_owd_p95(r))),
            queue_p95_ms: Spread::of(good.iter().filter_map(|r| run_queue_p95(r))),
            loss_rate: mean(good.iter().map(|r| run_loss_rate(r))),
            good,
            errors,
            complete,
            flow_errors,
        }
    }

    /// Mean goodput over seeds.
    pub fn mean(&self) -> Option<f64> {
        self.goodput.map(|g| g.mean)
    }

    /// The goodput a one-way target compares with (forward only in duplex rows).
    pub fn one_way(&self) -> f64 {
        if self.row.duplex {
            self.fwd
        } else {
            self.mean().unwrap_or(f64::NAN)
        }
    }
}

/// The best result: the highest mean goodput among complete ones, else among any.
pub fn best_of<'r, 'a>(results: &'r [CcResult<'a>]) -> Option<&'r CcResult<'a>> {
    let pick = |complete_only: bool| {
        results
            .iter()
            .filter(|r| r.goodput.is_some() && (r.complete || !complete_only))
            .max_by(|a, b| a.mean().unwrap_or(0.0).total_cmp(&b.mean().unwrap_or(0.0)))
    };
    pick(true).or_else(|| pick(false))
}

/// Mean standing queue in packets: (mean RTT − min RTT) × bottleneck rate.
pub fn queue_estimate(res: &CcResult<'_>) -> Option<f64> {
    use braid_link::units::Rate;
    let row = res.row;
    let mut bps = f64::INFINITY;
    for i in row.used_paths() {
        match row.scenario.paths[i].forward.rate {
            Some(Rate::BitsPerSec(b)) => bps = bps.min(b as f64),
            _ => return None,
        }
    }
    if !bps.is_finite() {
        return None;
    }
    let wire = super::published::wire_bytes(row.segment_size, row.bytes);
    let est: Vec<f64> = res
        .good
        .iter()
        .map(|r| {
            let rtt = r.flows[0].forward.rtt_ms;
            (rtt.avg - rtt.min) / 1e3 * bps / 8.0 / wire
        })
        .collect();
    (!est.is_empty()).then(|| mean(est))
}
