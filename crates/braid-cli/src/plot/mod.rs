//! `braid plot`, and the plots a transfer draws as it runs (`--plot`):
//! the traces and charts themselves are braid-plot's.

mod cmd;
mod recorder;

pub use braid_plot::*;
pub use cmd::{run, PlotArgs};
pub use recorder::Recorder;

use anyhow::Context as _;
use std::path::Path;

/// Creates the directory a transfer's plots go to, if asked for, before
/// the transfer: a mistyped one fails now rather than after it.
pub fn ready(dir: Option<&Path>) -> anyhow::Result<()> {
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the plot directory {}", dir.display()))?;
    }
    Ok(())
}
