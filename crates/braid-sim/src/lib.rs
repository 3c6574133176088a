//! braid-sim: a deterministic discrete-event network simulator that drives
//! braid-proto sessions in virtual time.
//!
//! A run is a pure function of its scenario and seed: every source of
//! randomness has its own seeded RNG, nothing reads the wall clock except
//! the `wall_s` field of the report, and no result depends on hash order.
//!
//! The links themselves are [`braid_link`]'s, the one model of a link that
//! the real-time relay and `braid link` apply too.

pub mod content;
mod flow_error;
mod published;
mod qlog_files;
mod queue;
pub mod reach;
pub mod report;
pub mod scenario;
mod sim;

pub use flow_error::FlowError;
pub use published::Published;
pub use report::{jain, write_delivery, Delivery, FlowResult, RunResult};
pub use scenario::{FlowSpec, PathSpec, Scenario, ScenarioError};
pub use sim::Sim;

// The link model lived in this crate until it became braid-link. Its
// modules and types stay reachable at their old paths, which the scenario
// parser still names; new code names `braid_link` directly.
pub use braid_link::{in_flight, seeds, units};
pub use braid_link::{
    Gilbert, Link, LinkConfig, LinkConfigError, LinkState, Offer, Trace, TraceError,
    IP_UDP_OVERHEAD, OPPORTUNITY_BYTES,
};

/// The link model's configuration and state, at their old path; see
/// [`braid_link`].
pub mod link {
    pub use braid_link::{
        state_changes, DropReason, EcnMode, Link, LinkConfig, LinkConfigError, LinkEvent,
        LinkEventKind, LinkState, LinkStats, Offer, QueueLimit, IP_UDP_OVERHEAD,
    };
}
mod loss {
    pub(crate) use braid_link::Gilbert;
}
mod trace {
    pub(crate) use braid_link::{Trace, TraceError};
}

/// Runs `scenario` with `seed` (None: the scenario's own).
pub fn run(scenario: &Scenario, seed: Option<u64>) -> RunResult {
    let seed = seed.unwrap_or(scenario.seed);
    Sim::new(scenario.clone(), seed).run()
}
