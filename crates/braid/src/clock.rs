//! The runtime's clock: real time as the protocol core's [`Instant`].
//!
//! Every session, endpoint and relay of a process shares one epoch, so
//! instants from different tasks compare correctly.

use braid_proto::Instant;
use std::sync::OnceLock;
use std::time::Duration;

static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

fn epoch() -> std::time::Instant {
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Now, as nanoseconds since the process's first use of the clock.
pub fn now() -> Instant {
    Instant::from_nanos(u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// A core instant as a tokio deadline.
pub fn deadline(at: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(epoch() + Duration::from_nanos(at.as_nanos()))
}
