//! The disk side of a transfer, on a thread of its own: reading or writing
//! and BLAKE3 run beside the runtime's thread, which is left to move
//! datagrams. The two meet through a few large buffers that go back and
//! forth, so a slow disk fills them and then holds the session back, and
//! nothing is allocated per chunk.

use std::io::{self, Read, Write};
use std::sync::mpsc as std_mpsc;
use tokio::sync::{mpsc, oneshot};

/// Bytes per buffer.
pub const CHUNK: usize = 1 << 20;
/// Buffers in flight between the thread and the session.
const BUFFERS: usize = 4;
/// A file's written bytes are handed to the disk every this many bytes, so
/// the final sync waits for the last few megabytes, not the whole file.
pub const WRITEBACK_EVERY: u64 = 8 << 20;

/// A buffer and how many of its bytes are content.
pub struct Piece {
    buf: Vec<u8>,
    len: usize,
}

impl Piece {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The buffer and how many of its bytes are content.
    pub fn into_parts(self) -> (Vec<u8>, usize) {
        (self.buf, self.len)
    }
}

/// Reads a source to its end on its own thread, hashing as it goes.
pub struct HashingReader {
    full: mpsc::Receiver<io::Result<Piece>>,
    empty: std_mpsc::Sender<Vec<u8>>,
    hash: oneshot::Receiver<blake3::Hash>,
}

impl HashingReader {
    #[cfg(test)]
    pub fn spawn(source: impl Read + Send + 'static) -> HashingReader {
        HashingReader::spawn_seeded(source, blake3::Hasher::new())
    }

    /// [`HashingReader::spawn`], going on from `hasher` (which has seen
    /// what came before `source`).
    pub fn spawn_seeded(
        mut source: impl Read + Send + 'static,
        hasher: blake3::Hasher,
    ) -> HashingReader {
        let (full_tx, full) = mpsc::channel(BUFFERS);
        let (empty, empty_rx) = std_mpsc::channel::<Vec<u8>>();
        let (hash_tx, hash) = oneshot::channel();
        std::thread::spawn(move || {
            let mut hasher = hasher;
            loop {
                let mut buf = empty_rx.try_recv().unwrap_or_else(|_| vec![0; CHUNK]);
                let len = match fill(&mut source, &mut buf) {
                    Ok(len) => len,
                    Err(e) => {
                        let _ = full_tx.blocking_send(Err(e));
                        return;
                    }
                };
                if len == 0 {
                    let _ = hash_tx.send(hasher.finalize());
                    return;
                }
                hasher.update(&buf[..len]);
                if full_tx.blocking_send(Ok(Piece { buf, len })).is_err() {
                    return; // The transfer ended early.
                }
            }
        });
        HashingReader { full, empty, hash }
    }

    /// The next piece of content; `None` at the end.
    pub async fn next(&mut self) -> io::Result<Option<Piece>> {
        self.full.recv().await.transpose()
    }

    /// Where buffers of [`CHUNK`] bytes go back for later reads, for a
    /// piece kept past the next one.
    pub fn recycler(&self) -> std_mpsc::Sender<Vec<u8>> {
        self.empty.clone()
    }

    /// The hash of everything read, once [`HashingReader::next`] gave `None`.
    pub async fn hash(self) -> io::Result<blake3::Hash> {
        self.hash
            .await
            .map_err(|_| io::Error::other("the input reader stopped"))
    }
}

/// Bytes read at once to hash what is already on disk: large enough for
/// BLAKE3 to spread one piece over every core.
const REHASH_PIECE: usize = 16 << 20;

/// Feeds `hasher` the first `len` bytes of `source` (fewer if it ends
/// first) on every core; returns how many there were. For content kept
/// from an interrupted transfer, whose hash both ends compute again.
pub fn hash_prefix(
    source: &mut impl Read,
    len: u64,
    hasher: &mut blake3::Hasher,
) -> io::Result<u64> {
    let mut buf = vec![0u8; REHASH_PIECE.min(usize::try_from(len).unwrap_or(usize::MAX))];
    let mut done = 0u64;
    while done < len {
        let want = buf
            .len()
            .min(usize::try_from(len - done).unwrap_or(usize::MAX));
        let n = fill(source, &mut buf[..want])?;
        if n == 0 {
            break;
        }
        hasher.update_rayon(&buf[..n]);
        done += n as u64;
    }
    Ok(done)
}

/// Reads until `buf` is full or the source ends.
fn fill(source: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = 0;
    while len < buf.len() {
        match source.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

/// Where received content goes.
pub enum Sink {
    /// A file, made durable (synced) before [`HashingWriter::finish`] returns.
    #[cfg(test)]
    File(std::fs::File),
    /// The files of a transfer, made durable (synced) before
    /// [`HashingWriter::finish`] returns.
    Files(crate::staging::TreeWriter),
    /// A stream such as stdout, flushed at the end.
    Stream(Box<dyn Write + Send>),
    /// Nowhere (the content is only hashed).
    Discard,
}

/// What the writer thread is told.
enum Order {
    Write(Piece),
    /// Everything was queued: sync and report. Without it (the transfer
    /// failed) the thread stops at once.
    Finish,
}

/// What the writer thread reports at the end: bytes written, their
/// hash, and the bytes held back at the end (see [`HashingWriter::spawn_with`]).
type Written = (u64, blake3::Hash, Vec<u8>);

/// Where the writer thread puts each buffer it is done with (and how many
/// bytes of it were content); dropped when the thread stops.
pub type GiveBack = Box<dyn FnMut(Vec<u8>, usize) + Send>;

/// Writes and hashes content on its own thread.
pub struct HashingWriter {
    full: mpsc::Sender<Order>,
    /// Buffers back from the thread, for [`HashingWriter::buffer`].
    #[cfg(test)]
    empty: std_mpsc::Receiver<Vec<u8>>,
    done: oneshot::Receiver<io::Result<Written>>,
}

impl HashingWriter {
    /// A writer whose buffers come back for [`HashingWriter::buffer`], to
    /// be queued with [`HashingWriter::write`]: the plain way to drive the
    /// thread, which its tests use (the receiver fills buffers through a
    /// [`WriteQueue`] instead).
    #[cfg(test)]
    pub fn spawn(sink: Sink) -> HashingWriter {
        let (empty_tx, empty) = std_mpsc::channel();
        let give_back: GiveBack = Box::new(move |buf, _| {
            let _ = empty_tx.send(buf);
        });
        let mut w = HashingWriter::spawn_with(sink, blake3::Hasher::new(), BUFFERS, 0, give_back);
        w.empty = empty;
        w
    }

    /// A writer that takes up to `queue` buffers at once, hands each one
    /// back to `give_back` once written, and holds back the last
    /// `hold_back` bytes it is given: neither hashed nor written, they come
    /// out of [`HashingWriter::finish_holding_back`] (a trailer that only
    /// the stream's end tells from content). The hash goes on from
    /// `hasher` (which has seen the content before this).
    pub fn spawn_with(
        sink: Sink,
        hasher: blake3::Hasher,
        queue: usize,
        hold_back: usize,
        mut give_back: GiveBack,
    ) -> HashingWriter {
        let (full, mut full_rx) = mpsc::channel::<Order>(queue.max(1));
        let (done_tx, done) = oneshot::channel();
        std::thread::spawn(move || {
            let mut sink = sink;
            let mut hasher = hasher;
            let mut written = 0u64;
            let mut tail = Vec::with_capacity(hold_back);
            let result = (|| {
                loop {
                    let piece = match full_rx.blocking_recv() {
                        Some(Order::Write(piece)) => piece,
                        Some(Order::Finish) => break,
                        None => return Err(io::Error::other("transfer abandoned")),
                    };
                    let mut emit = |bytes: &[u8]| -> io::Result<()> {
                        hasher.update(bytes);
                        match &mut sink {
                            #[cfg(test)]
                            Sink::File(f) => f.write_all(bytes)?,
                            Sink::Files(w) => w.write_all(bytes)?,
                            Sink::Stream(w) => w.write_all(bytes)?,
                            Sink::Discard => {}
                        }
                        written += bytes.len() as u64;
                        Ok(())
                    };
                    hold_back_tail(&mut tail, hold_back, piece.bytes(), &mut emit)?;
                    give_back(piece.buf, piece.len);
                }
                match &mut sink {
                    #[cfg(test)]
                    Sink::File(f) => f.sync_all()?,
                    Sink::Files(w) => w.finish()?,
                    Sink::Stream(w) => w.flush()?,
                    Sink::Discard => {}
                }
                Ok((written, hasher.finalize(), std::mem::take(&mut tail)))
            })();
            drop(give_back);
            let _ = done_tx.send(result);
        });
        HashingWriter {
            full,
            #[cfg(test)]
            empty: std_mpsc::channel().1,
            done,
        }
    }

    /// Queues a piece without waiting, from code that cannot; fails if the
    /// queue is full (more buffers than the writer was spawned for) or the
    /// thread stopped.
    pub fn queue(&self) -> WriteQueue {
        WriteQueue(self.full.clone())
    }

    /// An empty buffer of [`CHUNK`] bytes (plus `extra`) to fill.
    #[cfg(test)]
    pub fn buffer(&self, extra: usize) -> Vec<u8> {
        match self.empty.try_recv() {
            Ok(buf) if buf.len() == CHUNK + extra => buf,
            _ => vec![0; CHUNK + extra],
        }
    }

    /// Queues the first `len` bytes of `buf`; waits while all buffers are
    /// in use. Fails if the thread stopped (its error comes from `finish`).
    #[cfg(test)]
    pub async fn write(&mut self, buf: Vec<u8>, len: usize) -> Result<(), WriterStopped> {
        self.full
            .send(Order::Write(Piece { buf, len }))
            .await
            .map_err(|_| WriterStopped)
    }

    /// Waits until everything is written (and a file synced): the bytes
    /// written and their hash, or the first error.
    #[cfg(test)]
    pub async fn finish(self) -> io::Result<(u64, blake3::Hash)> {
        let (written, hash, _) = self.finish_holding_back().await?;
        Ok((written, hash))
    }

    /// Stops the thread once it wrote what was queued, without the sync
    /// and checks of a finish: what arrived stays as far as it got.
    pub async fn stop(self) {
        drop(self.full);
        let _ = self.done.await;
    }

    /// [`HashingWriter::finish`], with the bytes held back at the end.
    pub async fn finish_holding_back(self) -> io::Result<Written> {
        // If the thread already stopped, `done` holds its error.
        let _ = self.full.send(Order::Finish).await;
        self.done
            .await
            .map_err(|_| io::Error::other("the output writer stopped"))?
    }
}

/// A handle that queues pieces for a [`HashingWriter`] without waiting.
#[derive(Clone)]
pub struct WriteQueue(mpsc::Sender<Order>);

impl WriteQueue {
    /// Queues the first `len` bytes of `buf`; gives it back if it cannot.
    pub fn push(&self, buf: Vec<u8>, len: usize) -> Result<(), Vec<u8>> {
        self.0
            .try_send(Order::Write(Piece { buf, len }))
            .map_err(|e| match e.into_inner() {
                Order::Write(piece) => piece.buf,
                Order::Finish => Vec::new(),
            })
    }
}

/// Hands `bytes` to `emit`, except that the last `hold` bytes seen so far
/// stay in `tail`: what `tail` held before goes out first as far as the
/// new bytes replace it.
fn hold_back_tail(
    tail: &mut Vec<u8>,
    hold: usize,
    bytes: &[u8],
    emit: &mut impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    if bytes.len() >= hold {
        let cut = bytes.len() - hold;
        if !tail.is_empty() {
            emit(tail)?;
        }
        emit(&bytes[..cut])?;
        tail.clear();
        tail.extend_from_slice(&bytes[cut..]);
    } else {
        let out = (tail.len() + bytes.len()).saturating_sub(hold);
        emit(&tail[..out])?;
        tail.drain(..out);
        tail.extend_from_slice(bytes);
    }
    Ok(())
}

/// The writer thread stopped; [`HashingWriter::finish`] says why.
#[derive(Debug)]
#[cfg(test)]
pub struct WriterStopped;

/// Asks the kernel to start writing a range to disk without waiting for it.
pub fn start_writeback(file: &std::fs::File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the call; the kernel only reads
        // the arguments. Failure only means a longer final sync.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reader_hashes_what_it_hands_out() {
        let data: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i * 7) as u8).collect();
        let mut r = HashingReader::spawn(io::Cursor::new(data.clone()));
        let mut got = Vec::new();
        while let Some(p) = r.next().await.unwrap() {
            got.extend_from_slice(p.bytes());
            let _ = r.recycler().send(p.into_parts().0);
        }
        assert_eq!(got, data);
        assert_eq!(r.hash().await.unwrap(), blake3::hash(&data));
    }

    #[tokio::test]
    async fn writer_writes_syncs_and_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut w = HashingWriter::spawn(Sink::File(std::fs::File::create(&path).unwrap()));
        let mut expected = Vec::new();
        for i in 0..20u8 {
            let mut buf = w.buffer(0);
            let len = CHUNK / 2 + usize::from(i);
            buf[..len].fill(i);
            expected.extend_from_slice(&buf[..len]);
            w.write(buf, len).await.unwrap();
        }
        let (n, hash) = w.finish().await.unwrap();
        assert_eq!(n, expected.len() as u64);
        assert_eq!(hash, blake3::hash(&expected));
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[tokio::test]
    async fn a_write_error_reaches_finish() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut w = HashingWriter::spawn(Sink::Stream(Box::new(Full)));
        // The thread stops at the first piece; later writes may fail.
        for _ in 0..2 * BUFFERS {
            let buf = w.buffer(0);
            if w.write(buf, 10).await.is_err() {
                break;
            }
        }
        let e = w.finish().await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
    }
}
