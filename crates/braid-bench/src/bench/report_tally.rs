//! The summary's tally: how many rows of a suite pass, and how braid's
//! best goodput compares with the published figures.

use super::published::{Row, TCP_RATIO};
use super::stats::CcResult;
use super::targets::Mark;

/// The summary's figures for a suite (or all suites).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) rows: usize,
    pub(super) judged: usize,
    pub(super) met: usize,
    pub(super) near: usize,
    pub(super) miss: usize,
    /// (braid's best, the other's figure) per row that has both.
    pub(super) seed_system: Vec<(f64, f64)>,
    pub(super) seed_tcp: Vec<(f64, f64)>,
    pub(super) linux: Vec<(f64, f64)>,
    /// braid / best kernel TCP on a real link, per row of real.json.
    pub(super) kernel: Vec<f64>,
}

impl Tally {
    pub(super) fn add(&mut self, other: &Tally) {
        self.rows += other.rows;
        self.judged += other.judged;
        self.met += other.met;
        self.near += other.near;
        self.miss += other.miss;
        self.seed_system.extend(&other.seed_system);
        self.seed_tcp.extend(&other.seed_tcp);
        self.linux.extend(&other.linux);
        self.kernel.extend(&other.kernel);
    }

    /// Counts a row by how it fares against its targets.
    pub(super) fn count(&mut self, mark: Option<Mark>) {
        self.rows += 1;
        match mark {
            Some(Mark::Met) => self.met += 1,
            Some(Mark::NearMiss(_)) => self.near += 1,
            Some(Mark::Miss) => self.miss += 1,
            None => {}
        }
        self.judged += usize::from(mark.is_some());
    }

    /// Keeps braid's best goodput beside each published figure the row has.
    pub(super) fn compare(&mut self, row: &Row, best: Option<&CcResult<'_>>) {
        if let Some(g) = best.map(|b| b.one_way()).filter(|g| g.is_finite()) {
            if let Some(x) = row.seed_system_mbps() {
                self.seed_system.push((g, x));
            }
            // TCP's figures at braid's overhead, as the targets compare.
            let eq = row.payload_ratio() / TCP_RATIO;
            if let Some(x) = row.seed_tcp_mbps() {
                self.seed_tcp.push((g, x * eq));
            }
            if let Some((x, _)) = row.linux_best() {
                self.linux.push((g, x * eq));
            }
        }
    }

    pub(super) fn cells(&self, name: String) -> Vec<String> {
        let pairs = |v: &[(f64, f64)]| {
            ratios(
                &v.iter()
                    .filter(|(_, o)| *o > 0.0)
                    .map(|(b, o)| b / o)
                    .collect::<Vec<_>>(),
            )
        };
        let passed = if self.judged < self.rows {
            format!(
                "{} / {} (+{} not judged)",
                self.met,
                self.judged,
                self.rows - self.judged
            )
        } else {
            format!("{} / {}", self.met, self.judged)
        };
        vec![
            name,
            passed,
            self.near.to_string(),
            self.miss.to_string(),
            pairs(&self.seed_system),
            pairs(&self.seed_tcp),
            pairs(&self.linux),
            ratios(&self.kernel),
        ]
    }
}

/// "k of n ≥, median r×" for braid/other ratios; "—" for none.
fn ratios(v: &[f64]) -> String {
    let mut v: Vec<f64> = v.iter().copied().filter(|r| r.is_finite()).collect();
    if v.is_empty() {
        return "—".into();
    }
    let at_least = v.iter().filter(|r| **r >= 1.0).count();
    let n = v.len();
    let m = super::stats::median(&mut v).unwrap_or(f64::NAN);
    format!("≥ in {at_least} of {n}, median {m:.2}×")
}
