#![warn(missing_docs)]
//! braid-proto: the sans-IO core of braid.
//!
//! Wire format, handshake, sessions over several connections, ACKs, loss
//! detection, RTO, congestion controllers, scheduling, flow control and
//! statistics. No sockets, no threads, no clock, no global RNG: time is an
//! argument ([`Instant`]) and the same code runs in the simulator and on
//! real sockets, so every run in virtual time is reproducible.

pub mod cc;
mod config;
mod counts;
pub mod crypto;
mod deque_map;
mod ecn;
mod endpoint;
mod error;
mod ids;
mod own_rtt;
mod path;
mod recv_stream;
pub mod rendezvous;
mod rtt;
mod rtt_histogram;
mod send_stream;
mod session;
mod stats;
mod time;
pub mod trace;
mod varint;
pub mod wire;

pub use config::{ConfigError, SessionConfig};
pub use crypto::{Keypair, PublicKey, Security, SecurityError};
pub use ecn::Ecn;
pub use endpoint::{
    DatagramEvent, Endpoint, EndpointConfig, EndpointStats, Freshness, Prefix, CODE_GUESS_LIMIT,
    OPENING_DATE_TOLERANCE,
};
pub use error::{SessionError, Violation};
pub use ids::{PathId, Role};
pub use recv_stream::ReceivedContent;
pub use rtt::RtoConfig;
pub use send_stream::GeneratedContent;
pub use session::{
    AcceptError, CloseCode, Datagram, Event, Handled, OfferError, Session, Transmit,
};
pub use stats::{PathSample, PathState, PathStats, SessionStats};
pub use time::Instant;
