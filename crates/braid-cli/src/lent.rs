//! The sender's send buffer made of the input reader's own buffers: each
//! piece read (and hashed) is lent to the session as it is, as generated
//! content (see [`braid_proto::GeneratedContent`]), and packets copy their
//! bytes straight out of it. This spares copying every byte into the
//! session's buffer first. A retransmission reads the same memory as the
//! first transmission, so it carries the very bytes that were hashed, even
//! if the file changes meanwhile; a piece goes back to the reader once all
//! its bytes are acknowledged.

use crate::file_io::CHUNK;
use std::collections::VecDeque;
use std::fmt;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};

/// The application's handle: appends pieces at the end of the stream.
#[derive(Clone)]
pub struct Lent {
    blocks: Arc<Mutex<Blocks>>,
}

/// Consecutive pieces of the stream, from the oldest not yet acknowledged.
struct Blocks {
    /// Stream offset of each block's first byte, and its bytes.
    blocks: VecDeque<(u64, Vec<u8>)>,
    /// Stream offset just past the last block.
    end: u64,
    /// Where a released reader buffer goes back to.
    give_back: Option<Sender<Vec<u8>>>,
}

impl Lent {
    /// An empty stream; released buffers of [`CHUNK`] bytes go to `give_back`.
    pub fn new(give_back: Option<Sender<Vec<u8>>>) -> Lent {
        Lent {
            blocks: Arc::new(Mutex::new(Blocks {
                blocks: VecDeque::new(),
                end: 0,
                give_back,
            })),
        }
    }

    /// From now on, released buffers of [`CHUNK`] bytes go to `give_back`
    /// (a reader made after the stream began).
    pub fn give_back_to(&self, give_back: Sender<Vec<u8>>) {
        self.lock().give_back = Some(give_back);
    }

    /// What the session reads packets from.
    pub fn content(&self) -> Box<dyn braid_proto::GeneratedContent> {
        Box::new(self.clone())
    }

    /// Appends the first `len` bytes of `buf` to the stream; the rest of
    /// `buf` is only capacity, kept so that the buffer can go back.
    pub fn push(&self, mut buf: Vec<u8>, len: usize) {
        let mut b = self.lock();
        if len == 0 {
            b.recycle(buf);
            return;
        }
        if len < buf.len() && buf.len() != CHUNK {
            buf.truncate(len);
        }
        let at = b.end;
        b.end += len as u64;
        // The length is the offset of the next block, or `end`.
        b.blocks.push_back((at, buf));
    }

    /// Stream bytes held (appended, not yet released).
    #[cfg(test)]
    fn held(&self) -> u64 {
        let b = self.lock();
        b.blocks.front().map_or(0, |&(at, _)| b.end - at)
    }

    fn lock(&self) -> MutexGuard<'_, Blocks> {
        // A panic elsewhere while holding it leaves plain bytes behind.
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Blocks {
    /// Where block `i` ends.
    fn block_end(&self, i: usize) -> u64 {
        self.blocks.get(i + 1).map_or(self.end, |&(at, _)| at)
    }

    fn recycle(&self, buf: Vec<u8>) {
        if let (Some(tx), CHUNK) = (&self.give_back, buf.len()) {
            let _ = tx.send(buf);
        }
    }
}

impl Lent {
    /// Hands the held bytes from `offset` on to `f`, a block's slice at a
    /// time, until `len` bytes; returns how many it found.
    fn visit(&self, offset: u64, len: usize, mut f: impl FnMut(&[u8])) -> usize {
        let b = self.lock();
        // The block holding `offset`: the last one starting at or before it.
        let mut i = b.blocks.partition_point(|&(at, _)| at <= offset);
        let mut done = 0;
        let mut pos = offset;
        while done < len && i > 0 && i <= b.blocks.len() {
            let (at, buf) = &b.blocks[i - 1];
            let end = b.block_end(i - 1);
            if pos >= end {
                break;
            }
            let from = (pos - at) as usize;
            let n = ((end - pos) as usize).min(len - done);
            f(&buf[from..from + n]);
            done += n;
            pos += n as u64;
            i += 1;
        }
        // The session reads only bytes written and not released, so this
        // is unreachable; were it not, the receiver's hash check would
        // report the zeros that take their place as corruption.
        debug_assert_eq!(done, len, "bytes at {offset} are not held");
        done
    }
}

impl braid_proto::GeneratedContent for Lent {
    fn read_at(&self, offset: u64, out: &mut [u8]) {
        let mut filled = 0;
        self.visit(offset, out.len(), |s| {
            out[filled..filled + s.len()].copy_from_slice(s);
            filled += s.len();
        });
        out[filled..].fill(0);
    }

    fn extend_at(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        let at = out.len();
        self.visit(offset, len, |s| out.extend_from_slice(s));
        out.resize(at + len, 0);
    }

    fn release(&self, offset: u64) {
        let mut b = self.lock();
        while !b.blocks.is_empty() && b.block_end(0) <= offset {
            if let Some((_, buf)) = b.blocks.pop_front() {
                b.recycle(buf);
            }
        }
    }
}

impl fmt::Debug for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.lock();
        f.debug_struct("Lent")
            .field("blocks", &b.blocks.len())
            .field("end", &b.end)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_proto::GeneratedContent;

    fn read(l: &Lent, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0xee; len];
        l.read_at(offset, &mut out);
        out
    }

    #[test]
    fn reads_span_blocks_and_release_gives_full_buffers_back() {
        let (tx, rx) = std::sync::mpsc::channel();
        let l = Lent::new(Some(tx));
        l.push(b"head".to_vec(), 4);
        let mut chunk = vec![7u8; CHUNK];
        chunk[..3].copy_from_slice(b"abc");
        l.push(chunk, 3);
        l.push(b"xyz!".to_vec(), 3);
        assert_eq!(read(&l, 0, 10), b"headabcxyz");
        assert_eq!(read(&l, 3, 5), b"dabcx");
        let mut packet = b"hdr".to_vec();
        l.extend_at(2, 6, &mut packet);
        assert_eq!(packet, b"hdradabcx");
        // Released bytes are never read again; partly released blocks stay.
        l.release(5);
        assert_eq!(l.held(), 6, "the block holding byte 5 stays");
        assert_eq!(read(&l, 5, 5), b"bcxyz");
        assert!(
            rx.try_recv().is_err(),
            "the short header is not a reader buffer"
        );
        l.release(7);
        assert_eq!(l.held(), 3);
        let back = rx.try_recv().expect("the reader's buffer comes back");
        assert_eq!(back.len(), CHUNK);
        assert_eq!(read(&l, 7, 3), b"xyz");
        l.release(10);
        assert_eq!(l.held(), 0);
    }
}
