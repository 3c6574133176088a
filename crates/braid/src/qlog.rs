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
use std::time::Duration;
use tokio::sync::mpsc;

/// Batches in the channel before the driver waits for the writer.
const BATCHES: usize = 16;
/// Events gathered before they go to the writer: each batch costs a
/// wake-up of its thread, which at every driver turn cost more than the
/// formatting itself.
const BATCH_EVENTS: usize = 4096;
/// Longest events wait for a batch to fill.
const BATCH_WAIT: Duration = Duration::from_millis(500);

pub(crate) struct QlogSink {
    tx: mpsc::Sender<Vec<TraceEvent>>,
    writer: JoinHandle<io::Result<()>>,
    /// Events not yet handed over.
    pending: Vec<TraceEvent>,
    /// When the last batch went.
    sent_at: std::time::Instant,
    /// Emptied batches coming back: a fresh one each time cost the
    /// session's thread a page fault per page (large allocations are new
    /// mappings).
    spare: std::sync::mpsc::Receiver<Vec<TraceEvent>>,
}

impl QlogSink {
    /// Creates `file` and starts its writer.
    pub(crate) fn create(file: &Path, header: QlogHeader) -> io::Result<QlogSink> {
        let out = BufWriter::with_capacity(1 << 20, File::create(file)?);
        let mut w = QlogWriter::new(out, &header)?;
        let (tx, mut rx) = mpsc::channel::<Vec<TraceEvent>>(BATCHES);
        let (give_back, spare) = std::sync::mpsc::sync_channel(BATCHES);
        let writer = std::thread::Builder::new()
            .name("braid-qlog".into())
            .spawn(move || {
                while let Some(mut batch) = rx.blocking_recv() {
                    for event in &batch {
                        w.write(event)?;
                    }
                    batch.clear();
                    let _ = give_back.try_send(batch);
                }
                w.flush()
            })?;
        Ok(QlogSink {
            tx,
            writer,
            pending: Vec::with_capacity(BATCH_EVENTS),
            sent_at: std::time::Instant::now(),
            spare,
        })
    }

    /// Gathers the session's new events; a full (or old enough) batch to
    /// send, with the sender to send it on, once the lock is released.
    pub(crate) fn gather(
        &mut self,
        proto: &mut braid_proto::Session,
    ) -> Option<(mpsc::Sender<Vec<TraceEvent>>, Vec<TraceEvent>)> {
        proto.drain_trace(&mut self.pending);
        let due = self.pending.len() >= BATCH_EVENTS
            || (!self.pending.is_empty() && self.sent_at.elapsed() >= BATCH_WAIT);
        if !due {
            return None;
        }
        self.sent_at = std::time::Instant::now();
        let fresh = (self.spare.try_recv()).unwrap_or_else(|_| Vec::with_capacity(BATCH_EVENTS));
        let batch = std::mem::replace(&mut self.pending, fresh);
        Some((self.tx.clone(), batch))
    }

    /// Ends the file after `last`; returns the first error writing it.
    /// (Dropped instead, the writer still finishes the file, unwaited.)
    pub(crate) async fn close(mut self, last: Vec<TraceEvent>) -> io::Result<()> {
        self.pending.extend(last);
        let last = self.pending;
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
