//! The receiver's mirror of [`crate::lent`]: the session appends the
//! stream's in-order bytes straight from each packet into the writer
//! thread's own buffers (see [`braid_proto::ReceivedContent`]), which
//! spares copying every byte into the session's buffer first and out of
//! it again. Each full buffer goes to the writer thread as it is; once
//! written it comes back, and only then may the receive window advance
//! past its bytes. The buffers are few and made as needed, so they bound
//! what the sink holds; what they cannot take waits in the session,
//! within its window.

use crate::file_io::{GiveBack, WriteQueue, CHUNK};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// The application's handle on the buffers.
#[derive(Clone)]
pub struct Filled {
    state: Arc<Mutex<State>>,
    /// Told when a buffer came back or the writer stopped.
    returned: Arc<Notify>,
}

struct State {
    /// The buffer being filled and how many of its bytes are stream bytes.
    current: Option<(Vec<u8>, usize)>,
    /// Buffers back from the writer.
    free: Vec<Vec<u8>>,
    /// Buffers made so far, and the most that may be.
    made: usize,
    limit: usize,
    /// Bytes in a buffer that make it full.
    fill_to: usize,
    /// Where full buffers go; `None` once closed.
    writer: Option<WriteQueue>,
    /// Bytes written, not yet reported to the session.
    released: u64,
    /// All bytes written so far.
    written: u64,
    /// The writer thread stopped (done or failed).
    stopped: bool,
}

impl Filled {
    /// Buffers of [`CHUNK`] bytes, at most `limit`, each sent once
    /// `fill_to` bytes are in it (at most `CHUNK`), to the writer given by
    /// [`Filled::fill_for`] (nothing is taken before). A window smaller
    /// than a buffer would never fill one: `fill_to` must stay below it.
    pub fn new(limit: usize, fill_to: usize) -> Filled {
        Filled {
            state: Arc::new(Mutex::new(State {
                current: None,
                free: Vec::new(),
                made: 0,
                limit: limit.max(1),
                fill_to: fill_to.clamp(1, CHUNK),
                writer: None,
                released: 0,
                written: 0,
                stopped: false,
            })),
            returned: Arc::new(Notify::new()),
        }
    }

    /// Full buffers go to `writer` from now on.
    pub fn fill_for(&self, writer: WriteQueue) {
        self.lock().writer = Some(writer);
    }

    /// What the session appends to.
    pub fn content(&self) -> Box<dyn braid_proto::ReceivedContent> {
        Box::new(self.clone())
    }

    /// What the writer thread gives each buffer back to; dropped when it
    /// stops, which also counts as news.
    pub fn give_back(&self) -> GiveBack {
        let back = Returner(self.clone());
        Box::new(move |buf, len| back.0.returned_buffer(buf, len))
    }

    /// Waits until a buffer came back or the writer stopped since the last call.
    pub async fn returned(&self) {
        self.returned.notified().await;
    }

    /// Whether the writer thread stopped.
    pub fn writer_stopped(&self) -> bool {
        self.lock().stopped
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.lock().written
    }

    /// Sends the partly filled buffer to the writer, and no more after it.
    pub fn close(&self) {
        let mut s = self.lock();
        let current = s.current.take();
        if let (Some((buf, len)), Some(w)) = (current, s.writer.take()) {
            if len > 0 {
                let _ = w.push(buf, len);
            }
        }
    }

    /// Sends nothing more to the writer: without [`Filled::close`] first,
    /// it stops as abandoned.
    pub fn abandon(&self) {
        let mut s = self.lock();
        s.writer = None;
        s.current = None;
    }

    fn returned_buffer(&self, buf: Vec<u8>, len: usize) {
        let mut s = self.lock();
        s.released += len as u64;
        s.written += len as u64;
        if buf.len() == CHUNK {
            s.free.push(buf);
        }
        drop(s);
        self.returned.notify_one();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding it leaves plain bytes behind.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer thread's end: its drop says the thread stopped.
struct Returner(Filled);

impl Drop for Returner {
    fn drop(&mut self) {
        self.0.lock().stopped = true;
        self.0.returned.notify_one();
    }
}

impl State {
    /// The buffer to fill: the current one, a free one, or a new one
    /// while fewer than `limit` were made.
    fn room(&mut self) -> Option<&mut (Vec<u8>, usize)> {
        if self.current.is_none() {
            let buf = match self.free.pop() {
                Some(buf) => buf,
                None if self.made < self.limit => {
                    self.made += 1;
                    vec![0; CHUNK]
                }
                None => return None,
            };
            self.current = Some((buf, 0));
        }
        self.current.as_mut()
    }
}

impl braid_proto::ReceivedContent for Filled {
    fn append(&mut self, data: &[u8]) -> usize {
        let mut s = self.lock();
        let mut taken = 0;
        while taken < data.len() && s.writer.is_some() {
            let fill_to = s.fill_to;
            let Some((buf, len)) = s.room() else {
                break;
            };
            let n = (fill_to - *len).min(data.len() - taken);
            buf[*len..*len + n].copy_from_slice(&data[taken..taken + n]);
            *len += n;
            taken += n;
            if *len == fill_to {
                let (buf, len) = s.current.take().expect("being filled");
                let queued = s.writer.as_ref().map(|w| w.push(buf, len));
                if let Some(Err(_)) = queued {
                    // The writer stopped: nothing more is taken, and
                    // the transfer fails with the writer's error.
                    s.writer = None;
                }
            }
        }
        taken
    }

    fn take_released(&mut self) -> u64 {
        std::mem::take(&mut self.lock().released)
    }
}

impl fmt::Debug for Filled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("Filled")
            .field("made", &s.made)
            .field("free", &s.free.len())
            .field("written", &s.written)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_io::{HashingWriter, Sink};

    /// A writer holding back a 4-byte trailer, fed through `Filled`.
    fn setup(limit: usize, fill_to: usize) -> (Filled, HashingWriter, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("out")).unwrap();
        let filled = Filled::new(limit, fill_to);
        let writer = HashingWriter::spawn_with(
            Sink::File(file),
            blake3::Hasher::new(),
            limit + 1,
            4,
            filled.give_back(),
        );
        filled.fill_for(writer.queue());
        (filled, writer, dir)
    }

    #[tokio::test]
    async fn pieces_are_written_whole_and_the_trailer_held_back() {
        let (filled, writer, dir) = setup(3, 1000);
        let mut sink = filled.content();
        let data: Vec<u8> = (0..2500u32).map(|i| (i % 241) as u8).collect();
        let mut stream = data.clone();
        stream.extend_from_slice(b"HASH");
        // Packet-sized pieces that straddle the buffers' ends.
        for piece in stream.chunks(333) {
            let mut at = 0;
            while at < piece.len() {
                let n = sink.append(&piece[at..]);
                at += n;
                if n == 0 {
                    filled.returned().await;
                }
            }
        }
        filled.close();
        let (written, hash, tail) = writer.finish_holding_back().await.unwrap();
        assert_eq!((written, hash), (2500, blake3::hash(&data)));
        assert_eq!(tail, b"HASH");
        assert_eq!(std::fs::read(dir.path().join("out")).unwrap(), data);
        assert_eq!(sink.take_released(), 2504, "every byte came back");
        assert!(filled.lock().made <= 3);
    }

    #[tokio::test]
    async fn full_buffers_stop_the_sink_until_they_come_back() {
        let (filled, writer, _dir) = setup(2, 10);
        let mut sink = filled.content();
        // Two buffers of 10 bytes: the third byte run finds none free
        // unless the writer already gave one back.
        let taken = sink.append(&[1; 25]);
        assert!((20..=25).contains(&taken), "{taken}");
        while filled.written() < 20 {
            filled.returned().await;
        }
        assert_eq!(sink.take_released(), 20);
        assert_eq!(sink.take_released(), 0, "released once");
        assert_eq!(taken + sink.append(&[1; 25][taken..]), 25);
        filled.close();
        let (written, _, tail) = writer.finish_holding_back().await.unwrap();
        assert_eq!((written, tail.len()), (21, 4));
    }
}
