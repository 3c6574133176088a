//! A session's qlog file. The driver drains the core's events under the
//! session's lock and hands them over in batches to a thread of the file's
//! own. While the session runs, that thread only stores them in a compact
//! binary form (a spill file beside the qlog); when the session's events
//! end it writes the qlog's JSON from the spill and removes it. Formatting
//! JSON as events came cost a busy transfer 10-20 % of its goodput on two
//! cores, storing them a few varints each. Memory stays bounded either way:
//! the channel is bounded (a disk slower than the session slows the
//! session) and the spill is on disk.

use braid_proto::trace::TraceEvent;
use braid_qlog::{spill, QlogHeader, QlogWriter};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
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

/// Where `file`'s events wait for the session to end: beside it, hidden.
fn spill_path(file: &Path) -> PathBuf {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    file.with_file_name(format!(".{}.spill", name.unwrap_or_default()))
}

/// Writes the qlog `out` from the events stored in `spill`.
fn write_json(spill: &Path, out: File, header: &QlogHeader) -> io::Result<()> {
    let mut w = QlogWriter::new(BufWriter::with_capacity(1 << 20, out), header)?;
    let mut input = BufReader::with_capacity(1 << 20, File::open(spill)?);
    // Whole records only: refill when less than the largest one is left.
    const REFILL: usize = 1 << 16;
    let mut buf: Vec<u8> = Vec::with_capacity(4 * REFILL);
    let mut start = 0;
    let mut eof = false;
    loop {
        if !eof && buf.len() - start < REFILL {
            buf.drain(..start);
            start = 0;
            let before = buf.len();
            (&mut input).take(4 * REFILL as u64).read_to_end(&mut buf)?;
            eof = buf.len() == before;
        }
        let mut rest = &buf[start..];
        let Some(event) = spill::decode(&mut rest) else {
            break;
        };
        start = buf.len() - rest.len();
        w.write(&event)?;
    }
    if start != buf.len() {
        return Err(io::Error::other("the qlog's spill file is damaged"));
    }
    w.into_inner().flush()
}

impl QlogSink {
    /// Creates `file` (written when the events end) and its spill, and
    /// starts the writer.
    pub(crate) fn create(file: &Path, header: QlogHeader) -> io::Result<QlogSink> {
        let out = File::create(file)?;
        let spill_path = spill_path(file);
        let mut spilled = BufWriter::with_capacity(1 << 20, File::create(&spill_path)?);
        let (tx, mut rx) = mpsc::channel::<Vec<TraceEvent>>(BATCHES);
        let (give_back, spare) = std::sync::mpsc::sync_channel(BATCHES);
        let writer = std::thread::Builder::new()
            .name("braid-qlog".into())
            .spawn(move || {
                let mut bytes = Vec::with_capacity(1 << 16);
                let stored = (|| {
                    while let Some(mut batch) = rx.blocking_recv() {
                        bytes.clear();
                        for event in &batch {
                            spill::encode(event, &mut bytes);
                        }
                        spilled.write_all(&bytes)?;
                        batch.clear();
                        let _ = give_back.try_send(batch);
                    }
                    spilled.flush()
                })();
                drop(spilled);
                let written = stored.and_then(|()| write_json(&spill_path, out, &header));
                let _ = std::fs::remove_file(&spill_path);
                written
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
        self.take_events(proto);
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

    /// Takes the session's events recorded since the last call.
    pub(crate) fn take_events(&mut self, proto: &mut braid_proto::Session) {
        proto.drain_trace(&mut self.pending);
    }

    /// Ends the file after the events taken; returns the first error
    /// writing it. (Dropped instead, the writer still finishes the file,
    /// unwaited.)
    pub(crate) async fn close(self) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use braid_proto::trace::{EventKind, Metrics};
    use braid_proto::{Instant, PathId, Role};

    fn header() -> QlogHeader {
        QlogHeader {
            title: "test".into(),
            role: Role::Client,
            session_id: 7,
            epoch: Instant::ZERO,
            reference_unix_ms: 1.0,
        }
    }

    /// Enough events for several batches and a spill larger than one read.
    fn events() -> Vec<TraceEvent> {
        (0..3 * BATCH_EVENTS as u64 + 5)
            .map(|i| TraceEvent {
                at: Instant::from_nanos(i * 1000),
                kind: if i % 3 == 0 {
                    EventKind::Metrics {
                        path: PathId((i % 2) as u8),
                        metrics: Box::new(Metrics {
                            cwnd: Some(i * 1380),
                            ..Metrics::default()
                        }),
                    }
                } else {
                    EventKind::PacketsAcked {
                        path: PathId(0),
                        first: i,
                        last: i + 40,
                    }
                },
            })
            .collect()
    }

    #[tokio::test]
    async fn the_file_is_what_formatting_the_events_directly_gives() {
        let dir = tempfile_dir();
        let file = dir.join("send-7.sqlog");
        let mut sink = QlogSink::create(&file, header()).unwrap();
        let events = events();
        for chunk in events.chunks(1000) {
            sink.pending.extend(chunk.iter().cloned());
            if sink.pending.len() >= BATCH_EVENTS {
                let batch = std::mem::take(&mut sink.pending);
                sink.tx.send(batch).await.unwrap();
            }
        }
        sink.close().await.unwrap();
        let mut direct = QlogWriter::new(Vec::new(), &header()).unwrap();
        for e in &events {
            direct.write(e).unwrap();
        }
        assert_eq!(std::fs::read(&file).unwrap(), direct.into_inner());
        assert!(!spill_path(&file).exists(), "the spill is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("braid-qlog-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
