//! `braid plot FILE`: the per-run plots of a series JSON or a qlog.

use anyhow::Context as _;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct PlotArgs {
    /// A series JSON (`braid sim --json --series`, or the one `braid send`
    /// or `recv --plot DIR` writes) or a qlog (.sqlog, as `--qlog` writes).
    file: PathBuf,
    /// Where to write the plots.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Skip the PNG copies of the plots (SVG only).
    #[arg(long)]
    no_png: bool,
}

pub fn run(args: PlotArgs) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let mut stem = stem(&args.file);
    let qlog = is_qlog(&args.file, &bytes);
    let trace = if qlog {
        super::Trace::from_qlog(&bytes, &stem)
    } else {
        serde_json::from_slice(&bytes)
            .map_err(anyhow::Error::from)
            .and_then(|doc| super::series_read::read(&doc, &stem))
    }
    .with_context(|| format!("cannot plot {}", args.file.display()))?;
    if qlog {
        // Not the samples `--plot` draws (events binned, another
        // throughput): never the same file names.
        stem.push_str("-qlog");
    }
    super::charts::write(&trace, &args.out, &stem, !args.no_png, "braid plot")?;
    Ok(ExitCode::SUCCESS)
}

/// A qlog by its name or its first bytes: JSON-SEQ's record separator, or
/// a qlog header's field early on.
fn is_qlog(path: &Path, bytes: &[u8]) -> bool {
    let named = path
        .extension()
        .is_some_and(|e| e == "sqlog" || e == "qlog");
    let start = &bytes[..bytes.len().min(256)];
    let text = String::from_utf8_lossy(start);
    named || text.trim_start().starts_with('\u{1e}') || text.contains("\"qlog_version\"")
}

/// The plots' file names start with the input's name, less `-series`, so
/// that replotting a `--plot` directory's series rewrites its plots (a
/// qlog's add `-qlog`, so that they sit beside those).
fn stem(path: &Path) -> String {
    let s = path
        .file_stem()
        .map_or_else(|| "plot".into(), |s| s.to_string_lossy().into_owned());
    s.strip_suffix("-series").map_or(s.clone(), str::to_owned)
}
