//! What a transfer records besides its summary: a qlog per session, plots
//! of its connections, and the live view.

use clap::Args;
use std::path::PathBuf;

/// Options shared by `send`, `recv` and `demo` to see inside a session.
#[derive(Args, Clone, Debug, Default)]
pub struct ObserveArgs {
    /// Write the session's qlog (JSON-SEQ, .sqlog) into DIR, one file per
    /// session and side; open it in qvis. See docs/observability.md.
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,
    /// Draw the session's window, bytes in flight, throughput and smoothed
    /// RTT per connection into DIR (SVG and PNG) when it ends, and write
    /// its samples there as a series JSON for `braid plot`. See
    /// docs/observability.md.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}
