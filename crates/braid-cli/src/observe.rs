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
    /// Show each connection's rate, window, RTT and losses live, full
    /// screen, instead of the progress bar (on a terminal; not with
    /// --quiet, --json or recv --keep). The default for `demo` on a
    /// terminal; --live=false there keeps the plain lines.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub live: Option<bool>,
}
