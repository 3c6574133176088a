//! braid-sim: a deterministic discrete-event network simulator that drives
//! braid-proto sessions in virtual time.
//!
//! A run is a pure function of its scenario and seed: every source of
//! randomness has its own seeded RNG, nothing reads the wall clock except
//! the `wall_s` field of the report, and no result depends on hash order.

pub mod content;
mod flow_error;
pub mod in_flight;
pub mod link;
mod loss;
mod published;
pub mod report;
pub mod scenario;
pub mod seeds;
mod sim;
mod trace;
pub mod units;

pub use flow_error::FlowError;
pub use link::{Link, LinkConfig, LinkConfigError, LinkState, Offer, IP_UDP_OVERHEAD};
pub use loss::Gilbert;
pub use published::Published;
pub use report::{jain, write_delivery, Delivery, FlowResult, RunResult};
pub use scenario::{FlowSpec, PathSpec, Scenario, ScenarioError};
pub use sim::Sim;
pub use trace::{Trace, TraceError, OPPORTUNITY_BYTES};

/// Runs `scenario` with `seed` (None: the scenario's own).
pub fn run(scenario: &Scenario, seed: Option<u64>) -> RunResult {
    let seed = seed.unwrap_or(scenario.seed);
    Sim::new(scenario.clone(), seed).run()
}
