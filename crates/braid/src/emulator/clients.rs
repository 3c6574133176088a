//! The emulator's clients: one upstream socket each, NAT-style, and the
//! tasks that read from the clients and from the target.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic;
use std::sync::Arc;
use std::time::Duration;

use quinn_udp::RecvMeta;
use tokio::task::JoinHandle;

use crate::udp::{self, UdpIo};

use super::direction::{send_runs, Received};
use super::{Shared, MAX_CLIENTS, UPSTREAM_BATCH};

/// A spawned task that is aborted when this handle is dropped.
#[derive(Debug)]
pub(super) struct Task(JoinHandle<()>);

impl Task {
    pub(super) fn spawn(f: impl std::future::Future<Output = ()> + Send + 'static) -> Task {
        Task(tokio::spawn(f))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A client and its own socket towards the target.
struct Client {
    upstream: Arc<UdpIo>,
    /// Receives the target's replies; stops when the client is forgotten.
    _replies: Task,
    /// Value of the client counter when it last sent, for eviction.
    last_active: u64,
}

/// Receives from clients and offers their datagrams to the forward link.
pub(super) async fn serve_clients(
    shared: Arc<Shared>,
    listen: Arc<UdpIo>,
    to: SocketAddr,
    socket_buffer: usize,
) {
    let mut clients: HashMap<SocketAddr, Client> = HashMap::new();
    let mut activity = 0u64;
    let mut receiver = Receiver::new(udp::RECV_BATCH);
    let mut runs = Vec::new();
    loop {
        let n = receiver.recv(&listen).await;
        for (from, received) in receiver.buffers(n) {
            activity += 1;
            if !clients.contains_key(&from) {
                if clients.len() >= MAX_CLIENTS {
                    evict_quietest(&mut clients);
                }
                match UdpIo::bind(unspecified(to), socket_buffer) {
                    Ok(upstream) => {
                        let upstream = Arc::new(upstream);
                        let replies = Task::spawn(serve_replies(
                            Arc::clone(&shared),
                            Arc::clone(&upstream),
                            Arc::clone(&listen),
                            from,
                            to,
                        ));
                        let client = Client {
                            upstream,
                            _replies: replies,
                            last_active: activity,
                        };
                        clients.insert(from, client);
                        shared
                            .clients
                            .store(clients.len(), atomic::Ordering::Relaxed);
                    }
                    Err(_) => {
                        // Out of sockets, most likely: the datagram is lost.
                        shared.forward.lock().send_errors += 1;
                        continue;
                    }
                }
            }
            let Some(client) = clients.get_mut(&from) else {
                continue;
            };
            client.last_active = activity;
            shared
                .forward
                .offer_buffer(&shared, received, to, &client.upstream, &mut runs);
        }
        send_runs(&shared.forward, &receiver.storage, &mut runs).await;
    }
}

fn evict_quietest(clients: &mut HashMap<SocketAddr, Client>) {
    let quietest = clients
        .iter()
        .min_by_key(|(_, c)| c.last_active)
        .map(|(&addr, _)| addr);
    if let Some(addr) = quietest {
        clients.remove(&addr);
    }
}

/// The wildcard address of `to`'s family, any port.
fn unspecified(to: SocketAddr) -> SocketAddr {
    match to {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

/// Receives the target's replies to one client and offers them to the
/// reverse link.
async fn serve_replies(
    shared: Arc<Shared>,
    upstream: Arc<UdpIo>,
    listen: Arc<UdpIo>,
    client: SocketAddr,
    to: SocketAddr,
) {
    let mut receiver = Receiver::new(UPSTREAM_BATCH);
    let mut runs = Vec::new();
    loop {
        let n = receiver.recv(&upstream).await;
        for (from, received) in receiver.buffers(n) {
            // Only the target may answer: the emulator is not an open proxy.
            if from == to {
                shared
                    .reverse
                    .offer_buffer(&shared, received, client, &listen, &mut runs);
            }
        }
        send_runs(&shared.reverse, &receiver.storage, &mut runs).await;
    }
}

/// Receive buffers for one socket, in one allocation.
struct Receiver {
    storage: Vec<u8>,
    meta: Vec<RecvMeta>,
}

impl Receiver {
    fn new(batch: usize) -> Receiver {
        Receiver {
            storage: vec![0; batch * udp::RECV_BUFFER],
            meta: vec![RecvMeta::default(); batch],
        }
    }

    /// Waits for a batch; returns how many buffers it filled.
    async fn recv(&mut self, socket: &UdpIo) -> usize {
        loop {
            match socket.recv_into(&mut self.storage, &mut self.meta).await {
                Ok(n) => return n,
                // Errors such as ICMP reports of an earlier send concern
                // one datagram; pause briefly in case one keeps recurring.
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }

    /// The first `n` buffers, with their sender.
    fn buffers(&mut self, n: usize) -> impl Iterator<Item = (SocketAddr, Received<'_>)> + '_ {
        self.storage
            .chunks_mut(udp::RECV_BUFFER)
            .zip(&self.meta)
            .take(n)
            .enumerate()
            .map(|(i, (buf, meta))| {
                let len = meta.len.min(buf.len());
                let received = Received {
                    buf: &mut buf[..len],
                    offset: i * udp::RECV_BUFFER,
                    stride: meta.stride,
                    ecn: udp::from_codepoint(meta.ecn),
                };
                (meta.addr, received)
            })
    }
}

/// The datagrams of a receive buffer that holds `stride`-byte datagrams
/// (the last may be shorter), including a single empty one.
pub(super) fn split_batch_mut(buf: &mut [u8], stride: usize) -> impl Iterator<Item = &mut [u8]> {
    let stride = if stride == 0 { buf.len() } else { stride };
    let empty = buf.is_empty();
    let (chunks, tail): (_, &mut [u8]) = if empty {
        (None, buf)
    } else {
        (Some(buf.chunks_mut(stride.max(1))), &mut [])
    };
    chunks.into_iter().flatten().chain(empty.then_some(tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_split_by_stride() {
        let mut buf: Vec<u8> = (0..10).collect();
        let whole = buf.clone();
        let parts: Vec<Vec<u8>> = split_batch_mut(&mut buf, 4).map(|d| d.to_vec()).collect();
        assert_eq!(parts, [&whole[..4], &whole[4..8], &whole[8..]]);
        assert_eq!(split_batch_mut(&mut buf, 0).count(), 1);
        let none: Vec<Vec<u8>> = split_batch_mut(&mut [], 0).map(|d| d.to_vec()).collect();
        assert_eq!(none, [Vec::<u8>::new()]);
    }
}
