//! Shared by the simulator's property tests: the seeded runner and the
//! flows their scenarios are made of.

use braid_proto::cc::Algorithm;
use braid_proto::SessionConfig;
use braid_sim::FlowSpec;
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

/// `bytes` from client to server and `reverse_bytes` back, at time 0 over
/// `paths`, with controller `cc` and an insecure session otherwise at its
/// defaults.
pub fn flow(cc: Algorithm, bytes: u64, reverse_bytes: u64, paths: Vec<usize>) -> FlowSpec {
    FlowSpec {
        session: SessionConfig {
            cc,
            ..SessionConfig::insecure()
        },
        bytes,
        reverse_bytes,
        paths,
        ..FlowSpec::default()
    }
}
