//! What a transfer records besides its summary: a qlog per session, plots
//! of its connections, and the live view.

use crate::plot::Recorder;
use crate::side::Side;
use crate::summary::Report;
use braid::Session;
use braid_proto::SessionConfig;
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

impl ObserveArgs {
    /// What the sessions must record for these options.
    pub fn configure(&self, cfg: &mut SessionConfig) {
        cfg.trace |= self.qlog.is_some();
    }

    /// Starts the qlog and the plots of one transfer, as asked for.
    pub fn watch(&self, session: &Session, side: Side, title: &str) -> Watching {
        let short = match side {
            Side::Send => "send",
            Side::Recv => "recv",
        };
        Watching {
            recorder: Recorder::start(self.plot.as_deref(), session, side),
            recording: self.record(session, short, title),
        }
    }

    /// Starts the qlog of `session`, if asked for: `DIR/SIDE-ID.sqlog`,
    /// the session id shared by both sides' files (as the plots' names).
    pub fn record(&self, session: &Session, side: &str, title: &str) -> Recording {
        let Some(dir) = &self.qlog else {
            return Recording { file: None };
        };
        let file = dir.join(format!("{side}-{:016x}.sqlog", session.id()));
        let started = std::fs::create_dir_all(dir).and_then(|()| session.write_qlog(&file, title));
        match started {
            Ok(()) => Recording { file: Some(file) },
            Err(e) => {
                eprintln!("braid: cannot write the qlog {}: {e}", file.display());
                Recording { file: None }
            }
        }
    }
}

/// A qlog being written.
#[must_use = "finish it, or the file may be cut short at exit"]
pub struct Recording {
    file: Option<PathBuf>,
}

impl Recording {
    /// Ends the file and says where it is (on stderr, as the summary).
    pub async fn finish(self, session: &Session) {
        let Some(file) = self.file else { return };
        match session.finish_qlog().await {
            Ok(()) => eprintln!("braid: qlog {}", file.display()),
            Err(e) => eprintln!("braid: the qlog {} is incomplete: {e}", file.display()),
        }
    }
}

/// The qlog and the plots of one transfer, ended together after it.
#[must_use = "end it, or the qlog may be cut short and the plots unwritten"]
pub struct Watching {
    recording: Recording,
    recorder: Option<Recorder>,
}

impl Watching {
    /// Takes the session's figures into `report`, then ends the qlog and
    /// draws the plots.
    pub async fn end(self, session: &Session, report: &mut Report) {
        // The record's counts first, then the log's end: what the session
        // sends meanwhile (its CLOSE) is in the log, never only in the counts.
        report.observe(session);
        self.recording.finish(session).await;
        if let Some(r) = self.recorder {
            r.write(report).await;
        }
    }
}
