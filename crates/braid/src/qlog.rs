//! A session's qlog file. The driver drains the core's events under the
//! session's lock and hands them over in batches; a thread of the file's
//! own formats and writes them, so the session's task pays only for moving
//! them. The channel is bounded: a disk slower than the session slows the
//! session rather than growing memory.

use braid_proto::trace::qlog::{QlogHeader, QlogWriter};
use braid_proto::trace::TraceEvent;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::thread::JoinHandle;
use tokio::sync::mpsc;

/// Batches in the channel before the driver waits for the writer.
const BATCHES: usize = 64;

pub(crate) struct QlogSink {
    tx: mpsc::Sender<Vec<TraceEvent>>,
    writer: JoinHandle<io::Result<()>>,
}

impl QlogSink {
    /// Creates `file` and starts its writer.
    pub(crate) fn create(file: &Path, header: QlogHeader) -> io::Result<QlogSink> {
        let out = BufWriter::with_capacity(1 << 20, File::create(file)?);
        let mut w = QlogWriter::new(out, &header)?;
        let (tx, mut rx) = mpsc::channel::<Vec<TraceEvent>>(BATCHES);
        let writer = std::thread::Builder::new()
            .name("braid-qlog".into())
            .spawn(move || {
                while let Some(batch) = rx.blocking_recv() {
                    for event in &batch {
                        w.write(event)?;
                    }
                }
                w.flush()
            })?;
        Ok(QlogSink { tx, writer })
    }

    /// A sender for a batch the driver took under the lock.
    pub(crate) fn sender(&self) -> mpsc::Sender<Vec<TraceEvent>> {
        self.tx.clone()
    }

    /// Ends the file after `last`; returns the first error writing it.
    /// (Dropped instead, the writer still finishes the file, unwaited.)
    pub(crate) async fn close(self, last: Vec<TraceEvent>) -> io::Result<()> {
        if !last.is_empty() {
            // The writer may have stopped on an error, reported below.
            let _ = self.tx.send(last).await;
        }
        drop(self.tx);
        let writer = self.writer;
        match tokio::task::spawn_blocking(move || writer.join()).await {
            Ok(Ok(written)) => written,
            _ => Err(io::Error::other("the qlog writer panicked")),
        }
    }
}
