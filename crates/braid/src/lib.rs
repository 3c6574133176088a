//! braid on real networks: the tokio runtime that drives the sans-IO core
//! ([`braid_proto`]) over UDP sockets, and the real-time link emulator that
//! applies the simulator's link model to real packets.
//!
//! ```no_run
//! # async fn demo() -> braid::Result<()> {
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let listener = braid::Listener::bind("127.0.0.1:0".parse().unwrap(), Default::default())?;
//! let to = listener.local_addr();
//! let server = tokio::spawn(async move {
//!     let mut s = listener.accept().await?;
//!     let mut got = Vec::new();
//!     s.read_to_end(&mut got).await.map_err(|e| braid::Error::io("read", &e))?;
//!     s.shutdown().await.map_err(|e| braid::Error::io("shutdown", &e))?;
//!     braid::Result::Ok(got)
//! });
//! let mut s = braid::connect(&[braid::PathSpec::to(to)], Default::default()).await?;
//! s.write_all(b"hello").await.map_err(|e| braid::Error::io("write", &e))?;
//! s.shutdown().await.map_err(|e| braid::Error::io("shutdown", &e))?;
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
