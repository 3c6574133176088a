//! The files a session's event log becomes. The core (`braid-proto`)
//! records its events as plain values and knows no file format; this crate
//! holds the formats:
//!
//! - [`QlogWriter`]: qlog for qvis, JSON-SEQ (`write`, with each event's
//!   `data` in `event_data`);
//! - [`spill`]: a compact binary form a runtime stores events in while its
//!   session runs, and turns into qlog once it is over;
//! - [`read`]: a qlog read back into per-connection series, which the plots
//!   draw.

mod event_data;
mod json;
pub mod read;
pub mod spill;
mod write;

pub use write::{format_event, QlogHeader, QlogWriter};
