//! braid on real networks: the tokio runtime that drives the sans-IO core
//! ([`braid_proto`]) over UDP sockets, and the real-time link emulator that
//! applies the simulator's link model to real packets.
//!
//! ```no_run
//! use braid::{connect, Listener, PathSpec, SessionConfig};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let listener = Listener::bind("127.0.0.1:0".parse()?, SessionConfig::default())?;
//! let to = listener.local_addr();
//! let server = tokio::spawn(async move {
//!     let mut s = listener.accept().await?;
//!     let mut got = Vec::new();
//!     s.read_to_end(&mut got).await?;
//!     s.shutdown().await?;
//!     anyhow::Ok(got)
//! });
//! // One connection; give several PathSpecs for several.
//! let mut s = connect(&[PathSpec::to(to)], SessionConfig::default()).await?;
//! s.write_all(b"hello").await?;
//! s.shutdown().await?; // returns once everything was acknowledged
//! assert_eq!(server.await??, b"hello");
//! # Ok(()) }
//! ```

pub mod clock;
mod driver;
mod endpoint;
mod error;
pub mod relay;
mod session;
pub mod udp;

pub use braid_proto::{PathSample, PathState, SessionConfig, SessionStats};
pub use endpoint::{connect, Endpoint, Listener, PathSpec};
pub use error::{Error, Result};
pub use relay::{Relay, RelayConfig, RelayStats};
pub use session::{Monitor, Session};
