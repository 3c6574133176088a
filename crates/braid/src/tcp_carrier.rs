//! Datagrams over a TCP stream to a rendezvous relay, for networks that
//! let TCP out but not UDP: each datagram is one frame, a 2-byte
//! big-endian length then the datagram, at most [`MAX_FRAME`] bytes.
//!
//! An end's socket keeps one stream per relay the meeting's core moved to
//! TCP ([`braid_proto::rendezvous::Event::Carrier`]): every datagram the
//! socket would send to that relay goes as a frame on it instead (the
//! meeting's requests and the session's datagrams alike), and every frame
//! read from it is handled as a datagram from the relay's address. The
//! session sees no difference but the timing. Datagram semantics hold: a
//! full queue drops, as a full socket buffer would, and a lost stream is
//! opened again while wanted.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_proto::rendezvous::same_addr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::endpoint::lock;

/// The largest datagram a frame carries, bytes: an Ethernet-sized one
/// with room to spare. Larger ones are dropped (path MTU discovery then
/// stays below it, as it would under a smaller link MTU).
pub const MAX_FRAME: usize = 2048;
/// Frames queued for one stream; more are dropped.
pub(crate) const QUEUE_FRAMES: usize = 128;
/// Bytes gathered from the queue into one write.
const WRITE_BATCH: usize = 64 * 1024;
/// A write that makes no progress this long ends the stream: its peer
/// stopped reading.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// A stream that brought nothing this long is taken for dead: a relay
/// answers an end's refresh every 2 s, and an end sends one as often.
pub(crate) const READ_IDLE: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed or lost stream, before the next try.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// `datagram` as a frame; `None` if it is empty or larger than [`MAX_FRAME`].
pub(crate) fn frame(datagram: &[u8]) -> Option<Vec<u8>> {
    if datagram.is_empty() || datagram.len() > MAX_FRAME {
        return None;
    }
    let mut f = Vec::with_capacity(2 + datagram.len());
    f.extend_from_slice(&(datagram.len() as u16).to_be_bytes());
    f.extend_from_slice(datagram);
    Some(f)
}

/// Reads one frame into `buf` (at least [`MAX_FRAME`] bytes) and returns
/// its length; `None` at a clean end of the stream. A length of 0 or over
/// [`MAX_FRAME`] is an error: the stream is not braid's.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    let mut len = [0u8; 2];
    match r.read_exact(&mut len[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    r.read_exact(&mut len[1..]).await?;
    let n = usize::from(u16::from_be_bytes(len));
    if n == 0 || n > MAX_FRAME || n > buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {n} bytes"),
        ));
    }
    r.read_exact(&mut buf[..n]).await?;
    Ok(Some(n))
}

/// Writes the queued frames, several per write, until the queue closes
/// (then shuts the stream down and returns `Ok`), a write fails, or one
/// makes no progress for [`WRITE_TIMEOUT`].
pub(crate) async fn write_frames<W: AsyncWrite + Unpin>(
    w: &mut W,
    queue: &mut mpsc::Receiver<Vec<u8>>,
) -> io::Result<()> {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    while let Some(f) = queue.recv().await {
        batch.clear();
        batch.extend_from_slice(&f);
        while batch.len() < WRITE_BATCH {
            match queue.try_recv() {
                Ok(f) => batch.extend_from_slice(&f),
                Err(_) => break,
            }
        }
        tokio::time::timeout(WRITE_TIMEOUT, w.write_all(&batch))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading"))??;
    }
    w.shutdown().await
}

/// What to do with a datagram read from a stream.
pub(crate) type Deliver = Arc<dyn Fn(&mut [u8]) + Send + Sync>;

/// The streams of one socket, by relay.
#[derive(Default)]
pub(crate) struct Carriers {
    /// How many streams are open: sends skip the lock while there are none.
    open: AtomicUsize,
    streams: Mutex<Vec<Stream>>,
}

struct Stream {
    relay: SocketAddr,
    queue: mpsc::Sender<Vec<u8>>,
    task: tokio::task::AbortHandle,
}

impl Carriers {
    /// Carries datagrams to `relay` over a TCP stream to it from now on
    /// (nothing if one does already); `deliver` takes each datagram read
    /// from it. Needs a tokio runtime.
    pub(crate) fn open(&self, relay: SocketAddr, deliver: Deliver) {
        let mut streams = lock(&self.streams);
        if streams.iter().any(|s| same_addr(s.relay, relay)) {
            return;
        }
        let (queue, rx) = mpsc::channel(QUEUE_FRAMES);
        let to = SocketAddr::new(relay.ip().to_canonical(), relay.port());
        let task = tokio::spawn(carry(to, rx, deliver)).abort_handle();
        streams.push(Stream { relay, queue, task });
        self.open.store(streams.len(), Ordering::Release);
    }

    /// Datagrams to `relay` go by UDP again; what is queued for the stream
    /// is still written, then it closes.
    pub(crate) fn close(&self, relay: SocketAddr) {
        let mut streams = lock(&self.streams);
        streams.retain(|s| !same_addr(s.relay, relay));
        self.open.store(streams.len(), Ordering::Release);
    }

    fn queue(&self, to: SocketAddr) -> Option<mpsc::Sender<Vec<u8>>> {
        if self.open.load(Ordering::Acquire) == 0 {
            return None;
        }
        lock(&self.streams)
            .iter()
            .find(|s| same_addr(s.relay, to))
            .map(|s| s.queue.clone())
    }

    /// If a stream carries datagrams to `to`, queues `contents` on it (one
    /// datagram, or several of `segment` bytes each: a GSO batch) and
    /// returns `true`; what does not fit the queue, or a frame, is
    /// dropped. `false`: send it by UDP.
    pub(crate) fn try_send(&self, to: SocketAddr, contents: &[u8], segment: Option<usize>) -> bool {
        let Some(queue) = self.queue(to) else {
            return false;
        };
        let segment = segment.filter(|&s| s > 0).unwrap_or(contents.len()).max(1);
        for datagram in contents.chunks(segment) {
            if let Some(f) = frame(datagram) {
                if queue.try_send(f).is_err() {
                    break;
                }
            }
        }
        true
    }
}

impl Drop for Carriers {
    fn drop(&mut self) {
        for s in lock(&self.streams).drain(..) {
            s.task.abort();
        }
    }
}

/// Keeps a stream to `relay` open while the queue is: writes what is
/// queued, hands what is read to `deliver`, and connects again after a
/// failure. Frames queued while it is down wait (or the queue drops them).
async fn carry(relay: SocketAddr, mut queue: mpsc::Receiver<Vec<u8>>, deliver: Deliver) {
    let mut buf = vec![0u8; MAX_FRAME];
    loop {
        let connected =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(relay));
        if let Ok(Ok(stream)) = connected.await {
            // Datagrams are not to wait for more bytes to fill a segment.
            let _ = stream.set_nodelay(true);
            let (mut rd, mut wr) = stream.into_split();
            let reading = async {
                loop {
                    let frame = tokio::time::timeout(READ_IDLE, read_frame(&mut rd, &mut buf));
                    match frame.await {
                        Ok(Ok(Some(n))) => deliver(&mut buf[..n]),
                        _ => return,
                    }
                }
            };
            tokio::select! {
                written = write_frames(&mut wr, &mut queue) => {
                    if written.is_ok() {
                        // The queue closed: UDP again.
                        return;
                    }
                }
                () = reading => {}
            }
        }
        if queue.is_closed() && queue.is_empty() {
            return;
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_bad_lengths_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(64 * 1024);
        let (tx, mut rx) = mpsc::channel(8);
        tx.send(frame(b"one").unwrap()).await.unwrap();
        tx.send(frame(&[7u8; MAX_FRAME]).unwrap()).await.unwrap();
        drop(tx);
        write_frames(&mut a, &mut rx).await.unwrap();
        let mut buf = vec![0u8; MAX_FRAME];
        assert_eq!(read_frame(&mut b, &mut buf).await.unwrap(), Some(3));
        assert_eq!(&buf[..3], b"one");
        assert_eq!(read_frame(&mut b, &mut buf).await.unwrap(), Some(MAX_FRAME));
        assert_eq!(read_frame(&mut b, &mut buf).await.unwrap(), None);
        assert!(frame(&[0u8; MAX_FRAME + 1]).is_none());
        assert!(frame(&[]).is_none());
        for bad in [[0u8, 0], (MAX_FRAME as u16 + 1).to_be_bytes()] {
            let (mut a, mut b) = tokio::io::duplex(1024);
            a.write_all(&bad).await.unwrap();
            let e = read_frame(&mut b, &mut buf).await.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        }
    }
}
