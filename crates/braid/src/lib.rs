//! braid on real networks: the tokio runtime that drives the sans-IO core
//! ([`braid_proto`]) over UDP sockets, and the real-time link emulator that
//! applies the simulator's link model ([`braid_link`]) to real packets.
//!
//! ```no_run
//! use braid::{connect, Listener, PathSpec, Security, SessionConfig};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! // The server's long-term key; clients pin its public half.
//! let key = braid::random_keypair();
//! let client_cfg = SessionConfig {
//!     security: Security::pinned(key.public()),
//!     ..SessionConfig::default()
//! };
//! let server_cfg = SessionConfig {
//!     security: Security::server(key),
//!     ..SessionConfig::default()
//! };
//! let listener = Listener::bind("127.0.0.1:0".parse()?, server_cfg)?;
//! let to = listener.local_addr();
//! let server = tokio::spawn(async move {
//!     let mut s = listener.accept().await?;
//!     let mut got = Vec::new();
//!     s.read_to_end(&mut got).await?;
//!     s.shutdown().await?;
//!     anyhow::Ok(got)
//! });
//! // One connection; give several PathSpecs for several.
//! let mut s = connect(&[PathSpec::to(to)], client_cfg).await?;
//! s.write_all(b"hello").await?;
//! s.shutdown().await?; // returns once everything was acknowledged
//! assert_eq!(server.await??, b"hello");
//! # Ok(()) }
//! ```

#![warn(missing_docs, unreachable_pub)]

// The runtime's own clock and path-MTU figures: their items say `pub` as
// written for a public module, but nothing outside the crate uses them.
#[allow(unreachable_pub)]
mod clock;
mod driver;
pub mod emulator;
mod endpoint;
mod error;
#[allow(unreachable_pub)]
mod mtu;
pub mod process;
mod qlog;
pub mod rendezvous;
mod route;
mod session;
mod tcp_carrier;
pub mod text;
/// The UDP socket the runtime drives. Not part of the API: public only so
/// that the integration tests and `braid-bench pairings` can feed a relay
/// raw GSO batches.
#[doc(hidden)]
pub mod udp;
mod udp_errors;
mod udp_gather;

pub use braid_proto::{
    CloseCode, ConfigError, EndpointConfig, EndpointStats, Freshness, Keypair, PathId, PathSample,
    PathState, PublicKey, Security, SessionConfig, SessionError, SessionStats, Violation,
};
pub use emulator::{Emulator, EmulatorConfig, EmulatorStats};
pub use endpoint::{connect, Endpoint, Listener, PathSpec, CODE_GUESS_LIMIT};
pub use error::{Error, Result};
pub use session::{Monitor, PathInfo, Session};

/// A fresh key pair from the operating system's random source.
pub fn random_keypair() -> Keypair {
    Keypair::generate(endpoint::os_seed())
}
