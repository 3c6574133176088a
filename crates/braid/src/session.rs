//! A session on real sockets: the application's handle, which behaves like
//! a `TcpStream` (tokio `AsyncRead` + `AsyncWrite`, full duplex), and the
//! state it shares with its driver task and the endpoints' receive loops.

use crate::route::Route;
use crate::{clock, Error};
use braid_proto::{Event, PathId, PathSample, PathState, SessionConfig, SessionStats};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{broadcast, Notify};

/// Per-connection samples buffered for a slow subscriber before the oldest
/// are dropped (25 s of one connection at the default 100 ms interval). The
/// channel is allocated with the session, half-open ones included.
const SAMPLE_CHANNEL: usize = 256;

/// One connection of a session: its id, state and addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathInfo {
    /// The connection's id.
    pub id: PathId,
    /// Whether it carries data, only probes, or is closed.
    pub state: PathState,
    /// The address of the socket it sends from, as bound (the IP is
    /// unspecified for a socket bound to any address).
    pub local: Option<SocketAddr>,
    /// The address it sends to: the peer, a relay, or a NAT's mapping.
    pub remote: Option<SocketAddr>,
    /// When its first authentic datagram arrived.
    pub answered_at: Option<std::time::Instant>,
}

/// Everything behind the session's lock.
pub(crate) struct Inner {
    pub proto: braid_proto::Session,
    pub routes: BTreeMap<PathId, Route>,
    /// When each connection's first authentic datagram arrived.
    pub first_heard: BTreeMap<PathId, std::time::Instant>,
    reader: Option<Waker>,
    writer: Option<Waker>,
    closer: Option<Waker>,
    /// The first failure; every later operation reports it.
    pub error: Option<Error>,
    /// `shutdown` was called: our direction ends after what was written.
    finish_requested: bool,
    /// The driver has stopped; nothing more will happen.
    pub done: bool,
    /// Where the core's events go, once the application asked for a qlog.
    pub qlog: Option<crate::qlog::QlogSink>,
}

impl Inner {
    /// Ends our direction after what was written, once: whether this call
    /// did (the driver then has a FIN to send).
    fn request_finish(&mut self) -> bool {
        let first = !self.finish_requested && self.error.is_none();
        if first {
            self.finish_requested = true;
            self.proto.finish();
        }
        first
    }

    /// The core's events since the last call, and where to send them, if
    /// a qlog is being written.
    pub(crate) fn take_trace(
        &mut self,
    ) -> Option<(
        tokio::sync::mpsc::Sender<Vec<braid_proto::trace::TraceEvent>>,
        Vec<braid_proto::trace::TraceEvent>,
    )> {
        self.qlog.as_mut()?.gather(&mut self.proto)
    }

    /// Turns the core's events into errors and wakes whoever can now progress.
    pub(crate) fn process_events(&mut self) {
        while let Some(event) = self.proto.poll_event() {
            if let Event::Failed(e) = event {
                // Silence while we had data to deliver means no path
                // carried it, not an idle peer.
                let stats = self.proto.stats();
                let all_down = stats.bytes_written > stats.bytes_acked
                    || stats
                        .paths
                        .iter()
                        .all(|(_, p)| p.state != PathState::Active);
                self.error.get_or_insert(Error::from_session(e, all_down));
            }
        }
        let failed = self.error.is_some() || self.done;
        if failed || self.proto.readable() > 0 || self.proto.is_recv_finished() {
            wake(&mut self.reader);
        }
        if failed || self.proto.writable() > 0 {
            wake(&mut self.writer);
        }
        if failed || self.proto.is_send_finished() {
            wake(&mut self.closer);
        }
    }
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

/// State shared by the handle, the driver and the receive loops.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    /// Wakes the driver: new input, new data to send, or a command.
    pub wake_driver: Notify,
    /// Signals a change of phase (connected, failed, closed) to waiters.
    pub changed: Notify,
    pub samples: broadcast::Sender<PathSample>,
    pub id: u64,
    /// The `tracing` span its driver and its datagrams' handling run in.
    pub span: tracing::Span,
}

impl Shared {
    pub(crate) fn new(proto: braid_proto::Session, routes: BTreeMap<PathId, Route>) -> Arc<Shared> {
        let span = tracing::info_span!(
            "session",
            id = %format_args!("{:016x}", proto.session_id()),
            role = proto.role().name()
        );
        Arc::new(Shared {
            span,
            id: proto.session_id(),
            inner: Mutex::new(Inner {
                proto,
                routes,
                first_heard: BTreeMap::new(),
                reader: None,
                writer: None,
                closer: None,
                error: None,
                finish_requested: false,
                done: false,
                qlog: None,
            }),
            wake_driver: Notify::new(),
            changed: Notify::new(),
            samples: broadcast::channel(SAMPLE_CHANNEL).0,
        })
    }

    fn stats(&self) -> SessionStats {
        self.lock().proto.stats()
    }

    pub(crate) fn paths(&self) -> Vec<PathInfo> {
        let g = self.lock();
        g.proto
            .path_states()
            .into_iter()
            .map(|(id, state)| {
                let route = g.routes.get(&id);
                PathInfo {
                    id,
                    state,
                    local: route.map(|r| r.socket.local_addr()),
                    remote: g.proto.remote(id),
                    answered_at: g.first_heard.get(&id).copied(),
                }
            })
            .collect()
    }

    /// The lock; a panic while holding it leaves the state usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready` holds or the session failed or ended.
    pub(crate) async fn wait_for(&self, ready: impl Fn(&Inner) -> bool) -> Result<(), Error> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let g = self.lock();
                if ready(&g) {
                    return Ok(());
                }
                if let Some(e) = &g.error {
                    return Err(e.clone());
                }
                if g.done {
                    return Err(Error::EndpointClosed);
                }
            }
            changed.await;
        }
    }
}

/// One reliable byte stream each way over one or more connections.
///
/// Reads return 0 at the end of the peer's stream; `shutdown` ends ours and
/// returns once everything written was acknowledged. Dropping a session
/// before both directions finished aborts it, and the peer sees an error.
pub struct Session {
    shared: Arc<Shared>,
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>) -> Session {
        Session { shared }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The session id both sides share.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The configuration, with the values negotiated in the handshake.
    pub fn config(&self) -> SessionConfig {
        self.shared.lock().proto.config().clone()
    }

    /// A snapshot of every counter, per connection and for the session.
    pub fn stats(&self) -> SessionStats {
        self.shared.stats()
    }

    /// Each connection's id, state and addresses.
    pub fn paths(&self) -> Vec<PathInfo> {
        self.shared.paths()
    }

    /// A stream of per-connection samples (window, sRTT, throughput), one
    /// per connection every `sample_interval`, from now on.
    pub fn samples(&self) -> broadcast::Receiver<PathSample> {
        self.shared.samples.subscribe()
    }

    /// The failure that ended the session, if any.
    pub fn error(&self) -> Option<Error> {
        self.shared.lock().error.clone()
    }

    /// Aborts the session; the peer is told `reason`.
    pub fn abort(&self, code: u64, reason: &str) {
        self.shared.lock().proto.abort(code, reason);
        self.shared.wake_driver.notify_one();
    }

    /// Waits until the session's driver has stopped, having sent all it had
    /// to send (an abort's CLOSE included), whether the session succeeded
    /// or failed: what a process should await before it exits.
    pub async fn ended(&self) {
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.shared.lock().done {
                return;
            }
            changed.await;
        }
    }

    /// Says the stream we send will be `total` bytes long
    /// ([`braid_proto::Session::announce_len`]): near its end, a slow
    /// connection is left idle when the faster ones would deliver the rest
    /// first.
    pub fn announce_len(&self, total: u64) {
        self.shared.lock().proto.announce_len(total);
    }

    /// Ends our direction of the stream after what was written, without
    /// waiting for the peer to acknowledge it (`shutdown` waits). A side
    /// whose answer comes on the other direction (a verdict) reads it
    /// next: the answer proves the end arrived, whatever became of its ACK.
    pub fn finish(&self) {
        let requested = self.shared.lock().request_finish();
        if requested {
            self.shared.wake_driver.notify_one();
        }
    }

    /// Waits until both directions have finished (Ok) or the session failed
    /// (the error). The session then stays in the background, while the
    /// endpoint lives, to acknowledge the peer's retransmissions of its end
    /// (as a kernel keeps a TCP connection in TIME_WAIT); [`Session::ended`]
    /// waits for that too.
    pub async fn closed(&self) -> Result<(), Error> {
        let finished =
            |g: &Inner| g.done || (g.proto.is_send_finished() && g.proto.is_recv_finished());
        match self.shared.wait_for(finished).await {
            Err(Error::EndpointClosed) => Ok(()),
            r => r,
        }
    }

    /// Makes `content` the source of the bytes sent from now on, instead
    /// of a copy of each write: [`Session::write_generated`] then counts
    /// them and each packet reads its bytes from `content` (see
    /// [`braid_proto::GeneratedContent`]). Only before the first write;
    /// whether it was taken.
    pub fn use_generated_content(&self, content: Box<dyn braid_proto::GeneratedContent>) -> bool {
        self.shared.lock().proto.use_generated_content(content)
    }

    /// Counts up to `len` more bytes of the generated content as written,
    /// waiting while the send buffer is full; returns the count taken
    /// (at least one byte unless `len` is zero).
    pub async fn write_generated(&self, len: u64) -> io::Result<u64> {
        std::future::poll_fn(|cx| {
            self.poll_write_with(cx, len, |proto| {
                let n = proto.write_generated(len);
                if n == 0 && proto.writable() > 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "the session has no generated content",
                    ));
                }
                Ok(n)
            })
        })
        .await
    }

    /// What writing bytes and counting generated ones share: the session's
    /// failure or a shutdown answer first, then `write` takes up to `len`
    /// bytes (none: wait until the send buffer has room).
    fn poll_write_with(
        &self,
        cx: &mut Context<'_>,
        len: u64,
        write: impl FnOnce(&mut braid_proto::Session) -> io::Result<u64>,
    ) -> Poll<io::Result<u64>> {
        let mut g = self.shared.lock();
        if let Some(e) = self.fail(&g) {
            return Poll::Ready(Err(e));
        }
        if g.finish_requested {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "write after shutdown",
            )));
        }
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        match write(&mut g.proto) {
            Ok(0) => {
                g.writer = Some(cx.waker().clone());
                Poll::Pending
            }
            Ok(n) => {
                drop(g);
                self.shared.wake_driver.notify_one();
                Poll::Ready(Ok(n))
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Makes `content` take the peer's in-order bytes from now on, straight
    /// from each packet while it has room, instead of their being read
    /// (see [`braid_proto::ReceivedContent`]): reads then give nothing.
    /// Call [`Session::received_released`] whenever the application
    /// released some of them, or the window stays shut. Whether it was taken.
    pub fn use_received_content(&self, content: Box<dyn braid_proto::ReceivedContent>) -> bool {
        let taken = self
            .shared
            .lock()
            .proto
            .use_received_content(clock::now(), content);
        self.shared.wake_driver.notify_one();
        taken
    }

    /// The application released bytes its received content took: the
    /// receive window may open, which the driver tells the peer.
    pub fn received_released(&self) {
        self.shared.lock().proto.on_received_released(clock::now());
        self.shared.wake_driver.notify_one();
    }

    /// Waits until the peer's whole stream was taken by the received
    /// content (or read), or the session failed.
    pub async fn received_all(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            let mut g = self.shared.lock();
            if g.proto.is_recv_finished() {
                return Poll::Ready(Ok(()));
            }
            if let Some(e) = self.fail(&g) {
                return Poll::Ready(Err(e));
            }
            g.reader = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    fn fail(&self, g: &Inner) -> Option<io::Error> {
        if let Some(e) = &g.error {
            return Some(e.clone().into());
        }
        g.done.then(|| Error::EndpointClosed.into())
    }
}

impl Session {
    /// Writes the session's qlog (JSON-SEQ, for qvis) to `file`, titled
    /// `title`: the events since the session opened (the core keeps
    /// [`TRACE_CAPACITY`](braid_proto::trace::TRACE_CAPACITY) of them until
    /// a file takes them), then everything until it ends. The events wait
    /// in a compact spill beside `file` and the JSON is written when they
    /// end: call [`Session::finish_qlog`] (a dropped session's file is
    /// still written, unwaited). Needs [`SessionConfig::trace`].
    pub fn write_qlog(&self, file: &std::path::Path, title: &str) -> io::Result<()> {
        let mut g = self.shared.lock();
        if !g.proto.config().trace {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a qlog needs SessionConfig::trace",
            ));
        }
        if g.qlog.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the session already writes a qlog",
            ));
        }
        // The wall clock when the session's clock started.
        let since = clock::now().saturating_duration_since(g.proto.created_at());
        let reference = clock::wall().saturating_sub(since);
        let header = braid_qlog::QlogHeader {
            title: title.to_owned(),
            role: g.proto.role(),
            session_id: g.proto.session_id(),
            epoch: g.proto.created_at(),
            reference_unix_ms: reference.as_secs_f64() * 1000.0,
        };
        g.qlog = Some(crate::qlog::QlogSink::create(file, header)?);
        drop(g);
        self.shared.wake_driver.notify_one();
        Ok(())
    }

    /// Ends the qlog file with the events so far and waits until it is
    /// written; the first error writing it, if any. Nothing to do without
    /// [`Session::write_qlog`].
    pub async fn finish_qlog(&self) -> io::Result<()> {
        let sink = {
            let mut g = self.shared.lock();
            let Some(mut sink) = g.qlog.take() else {
                return Ok(());
            };
            sink.take_events(&mut g.proto);
            sink
        };
        sink.close().await
    }

    /// A handle that observes the session (stats, paths, samples) without
    /// owning it, for progress displays running beside the reader or writer.
    pub fn monitor(&self) -> Monitor {
        Monitor {
            shared: self.shared.clone(),
        }
    }
}

/// Observes a session; dropping it does nothing to the session.
#[derive(Clone)]
pub struct Monitor {
    shared: Arc<Shared>,
}

impl Monitor {
    /// See [`Session::stats`].
    pub fn stats(&self) -> SessionStats {
        self.shared.stats()
    }

    /// See [`Session::paths`].
    pub fn paths(&self) -> Vec<PathInfo> {
        self.shared.paths()
    }

    /// See [`Session::samples`].
    pub fn samples(&self) -> broadcast::Receiver<PathSample> {
        self.shared.samples.subscribe()
    }

    /// Resolves with the session's failure (a peer's abort, a timeout), so
    /// that a task busy elsewhere, such as reading its input, learns of it.
    /// Pending forever if the session ends well.
    pub async fn failed(&self) -> Error {
        // Nothing is "ready": this returns only with the error, or when the
        // session is done.
        match self.shared.wait_for(|_| false).await {
            Err(Error::EndpointClosed) | Ok(()) => std::future::pending().await,
            Err(e) => e,
        }
    }
}

impl AsyncRead for Session {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut g = self.shared.lock();
        let n = g.proto.read(clock::now(), buf.initialize_unfilled());
        if n > 0 {
            buf.advance(n);
            drop(g);
            // The read may open the receive window: let the driver tell the peer.
            self.shared.wake_driver.notify_one();
            return Poll::Ready(Ok(()));
        }
        if g.proto.is_recv_finished() || buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = self.fail(&g) {
            return Poll::Ready(Err(e));
        }
        g.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for Session {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let len = data.len() as u64;
        self.poll_write_with(cx, len, |proto| Ok(proto.write(data) as u64))
            .map_ok(|n| n as usize)
    }

    /// Written bytes are the session's to deliver: nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Ends our direction and waits until everything written is acknowledged.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut g = self.shared.lock();
        if g.request_finish() {
            self.shared.wake_driver.notify_one();
        }
        if g.proto.is_send_finished() {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = self.fail(&g) {
            return Poll::Ready(Err(e));
        }
        g.closer = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        let finished = g.proto.is_send_finished() && g.proto.is_recv_finished();
        if !finished && g.error.is_none() && !g.done {
            g.proto.abort(0, "session dropped by the application");
            drop(g);
            self.shared.wake_driver.notify_one();
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id()).finish()
    }
}
