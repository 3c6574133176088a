//! Random loss models, driven by the link's own seeded RNG so that a run is
//! reproducible from its seed.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Gilbert–Elliott two-state loss (the 4-parameter model of netem's
/// `gemodel`). Here `h` and `k` are *loss* probabilities, i.e. netem's
/// third and fourth arguments (which netem's manual writes as 1-h, 1-k).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gilbert {
    /// P(good → bad), evaluated once per packet.
    pub p: f64,
    /// P(bad → good), evaluated once per packet.
    pub r: f64,
    /// Loss probability in the bad state.
    #[serde(default = "one")]
    pub h: f64,
    /// Loss probability in the good state.
    #[serde(default)]
    pub k: f64,
}

fn one() -> f64 {
    1.0
}

impl Gilbert {
    /// Long-run loss rate: the stationary share of the bad state is
    /// p / (p + r), so loss = (r·k + p·h) / (p + r). With p = r = 0 the
    /// chain never leaves the good state it starts in.
    pub fn stationary_loss(&self) -> f64 {
        let sum = self.p + self.r;
        if sum <= 0.0 {
            return self.k;
        }
        (self.r * self.k + self.p * self.h) / sum
    }

    /// Names and values of the four probabilities, for validation.
    pub fn probabilities(&self) -> [(&'static str, f64); 4] {
        [("p", self.p), ("r", self.r), ("h", self.h), ("k", self.k)]
    }
}

/// Per-direction loss state: a Bernoulli probability and an optional
/// Gilbert–Elliott chain, applied to every packet that reaches the link.
#[derive(Debug, Clone)]
pub(crate) struct LossModel {
    bernoulli: f64,
    gilbert: Option<Gilbert>,
    /// Gilbert–Elliott state: starts good.
    bad: bool,
}

impl LossModel {
    pub(crate) fn new(bernoulli: f64, gilbert: Option<Gilbert>) -> LossModel {
        LossModel {
            bernoulli,
            gilbert,
            bad: false,
        }
    }

    /// Decides the fate of one packet. The Gilbert–Elliott chain steps first
    /// and then draws loss for its new state; the Bernoulli draw is
    /// independent. Draws are skipped for probabilities of 0 and 1.
    pub(crate) fn is_lost(&mut self, rng: &mut ChaCha8Rng) -> bool {
        let mut lost = chance(rng, self.bernoulli);
        if let Some(g) = self.gilbert {
            self.bad = if self.bad {
                !chance(rng, g.r)
            } else {
                chance(rng, g.p)
            };
            let p_loss = if self.bad { g.h } else { g.k };
            lost |= chance(rng, p_loss);
        }
        lost
    }
}

/// True with probability `p`; no draw when `p` is 0 or 1 (or outside).
pub(crate) fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    if p <= 0.0 {
        false
    } else if p >= 1.0 {
        true
    } else {
        rng.gen::<f64>() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rate(model: &mut LossModel, seed: u64, n: u32) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let lost = (0..n).filter(|_| model.is_lost(&mut rng)).count();
        lost as f64 / f64::from(n)
    }

    #[test]
    fn bernoulli_rate_is_close() {
        let r = rate(&mut LossModel::new(0.02, None), 7, 200_000);
        assert!((r - 0.02).abs() < 0.002, "{r}");
        assert_eq!(rate(&mut LossModel::new(0.0, None), 7, 1000), 0.0);
        assert_eq!(rate(&mut LossModel::new(1.0, None), 7, 1000), 1.0);
    }

    #[test]
    fn gilbert_elliott_long_run_matches_stationary_formula() {
        let cases = [
            Gilbert {
                p: 0.01,
                r: 0.3,
                h: 1.0,
                k: 0.0,
            },
            Gilbert {
                p: 0.05,
                r: 0.2,
                h: 0.7,
                k: 0.01,
            },
            Gilbert {
                p: 0.2,
                r: 0.2,
                h: 0.5,
                k: 0.1,
            },
        ];
        for g in cases {
            let want = g.stationary_loss();
            let got = rate(&mut LossModel::new(0.0, Some(g)), 11, 400_000);
            assert!(
                (got - want).abs() < 0.1 * want + 0.002,
                "{g:?}: {got} vs {want}"
            );
        }
        let g = Gilbert {
            p: 0.01,
            r: 0.3,
            h: 1.0,
            k: 0.0,
        };
        assert!((g.stationary_loss() - 0.01 / 0.31).abs() < 1e-12);
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        // Mean burst length in the bad state is 1/r = 5 packets with h = 1.
        let g = Gilbert {
            p: 0.01,
            r: 0.2,
            h: 1.0,
            k: 0.0,
        };
        let mut model = LossModel::new(0.0, Some(g));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut bursts, mut lost, mut prev) = (0u32, 0u32, false);
        for _ in 0..200_000 {
            let l = model.is_lost(&mut rng);
            if l && !prev {
                bursts += 1;
            }
            lost += u32::from(l);
            prev = l;
        }
        let mean = f64::from(lost) / f64::from(bursts);
        assert!((mean - 5.0).abs() < 0.5, "{mean}");
    }

    #[test]
    fn same_seed_same_losses() {
        let g = Some(Gilbert {
            p: 0.05,
            r: 0.3,
            h: 0.9,
            k: 0.01,
        });
        let run = || {
            let mut m = LossModel::new(0.01, g);
            let mut rng = ChaCha8Rng::seed_from_u64(42);
            (0..5000).map(|_| m.is_lost(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
