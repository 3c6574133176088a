//! Shared by the simulator's property tests.

use proptest::test_runner::{Config, RngSeed};

/// `cases` cases from a fixed seed, so every run (CI's included) checks the
/// same ones. `BRAID_PROPTEST_SEED` and `BRAID_PROPTEST_CASES` explore
/// others: a failure found that way is saved in the test's regression file
/// and replayed first on every later run.
pub fn seeded(cases: u32) -> Config {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    Config {
        cases: var("BRAID_PROPTEST_CASES")
            .and_then(|c: u64| u32::try_from(c).ok())
            .unwrap_or(cases),
        rng_seed: RngSeed::Fixed(var("BRAID_PROPTEST_SEED").unwrap_or(13)),
        ..Config::default()
    }
}
