//! braid on real networks: the tokio runtime that drives the sans-IO core
//! ([`braid_proto`]) over UDP sockets, and the real-time link emulator that
//! applies the simulator's link model to real packets.

pub mod clock;
mod error;
pub mod relay;
pub mod udp;

pub use error::{Error, Result};
pub use relay::{Relay, RelayConfig, RelayStats};
