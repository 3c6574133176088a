//! A relay's UDP worker: a thread that sleeps in poll(2) on its socket,
//! takes what arrived in batches (recvmmsg, GRO) until the socket is
//! empty, asks the core where each datagram goes under one lock per batch,
//! and sends each peer's run as one GSO call. No async runtime: at a paced
//! rate every datagram is a wake-up of its own, and a runtime's park,
//! timers and wakers cost about as much per wake-up as the forwarding.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use braid_proto::rendezvous::Server;
use braid_proto::Ecn;
use quinn_udp::{RecvMeta, Transmit, UdpSocketState};
use rustix::buffer::spare_capacity;
use rustix::event::{epoll, poll, PollFd, PollFlags, Timespec};

use super::relay_tcp::TcpEnds;
use crate::endpoint::lock;
use crate::udp::{self, RECV_BATCH, RECV_BUFFER};
use crate::{clock, Error, Result};

/// How often lapsed registrations and idle pairs are dropped.
const EXPIRE_EVERY: Duration = Duration::from_secs(1);

/// How long a send waits for room in a full socket buffer before the
/// datagrams are dropped (loss the peers' congestion control handles).
const SEND_WAIT: Duration = Duration::from_millis(50);

/// A running worker. Dropping it wakes and ends its thread, which closes
/// its socket.
#[derive(Debug)]
pub(super) struct Worker {
    _stop: UnixStream,
}

/// Sends from a relay's UDP socket; safe to share between threads.
#[derive(Debug)]
pub(crate) struct UdpOut {
    sock: std::net::UdpSocket,
    state: UdpSocketState,
    /// Longest wait for room in the socket's buffer.
    wait: Duration,
}

impl UdpOut {
    /// Sends on `sock` (non-blocking, from [`udp::bind_std`]).
    pub(super) fn new(sock: std::net::UdpSocket) -> io::Result<UdpOut> {
        let state = UdpSocketState::new((&sock).into())?;
        udp::forgo_destination_address(&sock);
        Ok(UdpOut {
            sock,
            state,
            wait: SEND_WAIT,
        })
    }

    /// Another sender on the same socket (a duplicate descriptor) that
    /// never waits for room: for a task on an async runtime.
    pub(super) fn try_clone_unwaiting(&self) -> io::Result<UdpOut> {
        let mut out = UdpOut::new(self.sock.try_clone()?)?;
        out.wait = Duration::ZERO;
        Ok(out)
    }

    /// Sends `contents` to `to`: one datagram, or datagrams of `segment`
    /// bytes (the last may be shorter) in as few GSO calls as allowed.
    /// Waits at most [`SEND_WAIT`] for room (see
    /// [`UdpOut::try_clone_unwaiting`]); stops at the first error.
    pub(crate) fn send(
        &self,
        to: SocketAddr,
        ecn: Ecn,
        contents: &[u8],
        segment: Option<usize>,
    ) -> io::Result<()> {
        let max_segments = self.state.max_gso_segments();
        for t in udp::gso_batches(to, ecn, contents, segment, max_segments) {
            match self.send_waiting(&t) {
                Err(e) if udp::refused_gso(&e, &t) => {
                    for single in udp::one_by_one(&t) {
                        self.send_waiting(&single)?;
                    }
                }
                r => r?,
            }
        }
        Ok(())
    }

    fn send_waiting(&self, t: &Transmit<'_>) -> io::Result<()> {
        match self.state.try_send((&self.sock).into(), t) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && !self.wait.is_zero() => {
                if writable(&self.sock, self.wait)? {
                    self.state.try_send((&self.sock).into(), t)
                } else {
                    Err(e)
                }
            }
            r => r,
        }
    }

    /// A batch from the socket, if it holds any.
    fn recv(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        self.state.recv((&self.sock).into(), bufs, meta)
    }

    /// Sends one small datagram now if the socket has room, or drops it.
    pub(crate) fn try_send_to(&self, to: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        self.sock.send_to(datagram, to).map(|_| ())
    }
}

/// Starts a worker serving `out`'s socket; `expire`: it also drops lapsed
/// registrations and idle pairs.
pub(super) fn spawn(
    out: UdpOut,
    server: Arc<Mutex<Server>>,
    tcp: Arc<TcpEnds>,
    expire: bool,
) -> Result<Worker> {
    let cannot = |e: &io::Error| Error::io("cannot start a relay worker", e);
    let (stop, stopped) = UnixStream::pair().map_err(|e| cannot(&e))?;
    let epoll = Epoll::new(out.sock.as_fd(), stopped.as_fd()).map_err(|e| cannot(&e))?;
    let run = move || {
        let mut w = Loop::new(out, server, tcp, expire);
        w.run(&epoll);
        drop(stopped);
    };
    std::thread::Builder::new()
        .name("braid-relay".into())
        .spawn(run)
        .map_err(|e| cannot(&e))?;
    Ok(Worker { _stop: stop })
}

/// Consecutive datagrams of one received buffer that go to the same peer:
/// one GSO send.
struct Run {
    to: SocketAddr,
    ecn: Ecn,
    buffer: usize,
    start: usize,
    end: usize,
    stride: usize,
}

/// A worker's state between batches.
struct Loop {
    out: UdpOut,
    server: Arc<Mutex<Server>>,
    tcp: Arc<TcpEnds>,
    expire: bool,
    replies: Vec<(SocketAddr, Vec<u8>)>,
    runs: Vec<Run>,
}

impl Loop {
    fn new(out: UdpOut, server: Arc<Mutex<Server>>, tcp: Arc<TcpEnds>, expire: bool) -> Loop {
        Loop {
            out,
            server,
            tcp,
            expire,
            replies: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Until the stop signal in `epoll` comes.
    fn run(&mut self, epoll: &Epoll) {
        let mut storage = vec![0u8; RECV_BATCH * RECV_BUFFER];
        let mut bufs: Vec<IoSliceMut<'_>> = storage
            .chunks_mut(RECV_BUFFER)
            .map(IoSliceMut::new)
            .collect();
        let mut meta = [RecvMeta::default(); RECV_BATCH];
        let full = RECV_BATCH.min(quinn_udp::BATCH_SIZE);
        let mut next_expiry = Instant::now() + EXPIRE_EVERY;
        loop {
            let left = next_expiry.saturating_duration_since(Instant::now());
            match epoll.wait(left) {
                Ok(Woken::Stop) => return,
                Ok(_) => {}
                // Not expected of epoll; do not spin on it.
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
            let now = Instant::now();
            if now >= next_expiry {
                next_expiry = now + EXPIRE_EVERY;
                if self.expire {
                    lock(&self.server).expire(clock::now());
                    self.tcp.expire(clock::now());
                }
            }
            // Until a batch comes short (the socket is empty), or an error
            // (empty, or a report of an earlier send): back to epoll.
            while let Ok(n) = self.out.recv(&mut bufs, &mut meta) {
                self.forward(&bufs, &meta[..n]);
                if n < full {
                    break;
                }
            }
        }
    }

    /// One received batch: routed under one lock, then sent.
    fn forward(&mut self, bufs: &[IoSliceMut<'_>], meta: &[RecvMeta]) {
        self.route(bufs, meta);
        for (to, bytes) in self.replies.drain(..) {
            if !self.tcp.try_send(to, &bytes, None) {
                let _ = self.out.try_send_to(to, &bytes);
            }
        }
        for r in self.runs.drain(..) {
            let contents = &bufs[r.buffer][r.start..r.end];
            if self.tcp.try_send(r.to, contents, Some(r.stride)) {
                continue;
            }
            // A refused send is loss the peers' congestion control handles.
            let _ = self.out.send(r.to, r.ecn, contents, Some(r.stride));
        }
    }

    /// Asks the core where each datagram goes: answers to `replies`,
    /// forwards to `runs`.
    fn route(&mut self, bufs: &[IoSliceMut<'_>], meta: &[RecvMeta]) {
        let now = clock::now();
        let mut s = lock(&self.server);
        for (i, m) in meta.iter().enumerate() {
            if self.tcp.clashes(m.addr) {
                continue;
            }
            let buf = &bufs[i][..m.len];
            let stride = if m.stride == 0 { m.len } else { m.stride }.max(1);
            let ecn = udp::from_codepoint(m.ecn);
            for (k, datagram) in buf.chunks(stride).enumerate() {
                let Some(to) = s.handle(now, m.addr, datagram, &mut self.replies) else {
                    continue;
                };
                let start = k * stride;
                let end = start + datagram.len();
                match self.runs.last_mut() {
                    // The next datagram of the run's buffer, to the same peer.
                    Some(r) if r.to == to && r.buffer == i && r.end == start => r.end = end,
                    _ => self.runs.push(Run {
                        to,
                        ecn,
                        buffer: i,
                        start,
                        end,
                        stride,
                    }),
                }
            }
        }
    }
}

/// What an [`Epoll`] woke for.
enum Woken {
    Timeout,
    Readable,
    Stop,
}

/// An epoll set of a worker's socket and its stop signal, both level
/// triggered: registered once, where poll(2) would register both on every
/// call.
struct Epoll(OwnedFd);

impl Epoll {
    fn new(sock: BorrowedFd<'_>, stop: BorrowedFd<'_>) -> io::Result<Epoll> {
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        for (source, token) in [(sock, 0u64), (stop, 1)] {
            let data = epoll::EventData::new_u64(token);
            epoll::add(&fd, source, data, epoll::EventFlags::IN)?;
        }
        Ok(Epoll(fd))
    }

    fn wait(&self, limit: Duration) -> io::Result<Woken> {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(2);
        // At least a millisecond unless none was asked: no busy wait.
        let limit = if limit.is_zero() {
            limit
        } else {
            limit.max(Duration::from_millis(1))
        };
        match epoll::wait(&self.0, spare_capacity(&mut events), Some(&timespec(limit))) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(Woken::Timeout),
            Err(e) => return Err(e.into()),
        }
        Ok(if events.iter().any(|e| e.data.u64() == 1) {
            Woken::Stop
        } else if events.is_empty() {
            Woken::Timeout
        } else {
            Woken::Readable
        })
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// Waits up to `limit` for room to send on `sock`: whether there is.
fn writable(sock: &std::net::UdpSocket, limit: Duration) -> io::Result<bool> {
    let mut fds = [PollFd::new(sock, PollFlags::OUT)];
    match poll(&mut fds, Some(&timespec(limit))) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(fds[0].revents().contains(PollFlags::OUT)),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn epoll_tells_a_datagram_and_the_stop_signal_from_a_timeout() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (mut stop, stopped) = UnixStream::pair().unwrap();
        let epoll = Epoll::new(sock.as_fd(), stopped.as_fd()).unwrap();
        let waited = Instant::now();
        assert!(matches!(
            epoll.wait(Duration::from_millis(20)),
            Ok(Woken::Timeout)
        ));
        assert!(waited.elapsed() >= Duration::from_millis(15), "it slept");
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.send_to(b"x", sock.local_addr().unwrap()).unwrap();
        assert!(matches!(
            epoll.wait(Duration::from_secs(5)),
            Ok(Woken::Readable)
        ));
        stop.write_all(b"!").unwrap();
        assert!(matches!(
            epoll.wait(Duration::from_secs(5)),
            Ok(Woken::Stop)
        ));
        assert!(writable(&sock, Duration::from_millis(10)).unwrap());
    }
}
