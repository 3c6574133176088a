//! braid-proto: the sans-IO core of braid.
mod ecn;
mod time;
pub use ecn::Ecn;
pub use time::Instant;
