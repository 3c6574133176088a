//! The tasks that read an endpoint's socket: its datagrams, and the ICMP
//! errors of what it sent.

use std::io;
use std::sync::{Arc, Weak};

use braid_proto::rendezvous::Carrier;
use quinn_udp::RecvMeta;

use super::EndpointInner;
use crate::clock;
use crate::udp::{self, UdpIo, RECV_BATCH, RECV_BUFFER};

/// Reads the socket in batches and hands each datagram to its session,
/// waking each session it touched once per batch; ends with the endpoint.
pub(super) async fn recv_loop(io: Arc<UdpIo>, endpoint: Weak<EndpointInner>) {
    let mut storage = vec![0u8; RECV_BATCH * RECV_BUFFER];
    let mut meta = [RecvMeta::default(); RECV_BATCH];
    let mut touched = Vec::new();
    loop {
        let n = match io.recv_into(&mut storage, &mut meta).await {
            Ok(n) => n,
            // ICMP errors of earlier sends and the like: not fatal to a socket.
            Err(e) if is_transient(&e) => continue,
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                continue;
            }
        };
        let Some(ep) = endpoint.upgrade() else {
            return;
        };
        let (now, wall) = (clock::now(), clock::wall());
        for (m, buf) in meta.iter().zip(storage.chunks_mut(RECV_BUFFER)).take(n) {
            let stride = if m.stride == 0 { m.len } else { m.stride };
            // The kernel's stamp: a batch read late still shows its spacing.
            let received_at = clock::received_at(m.timestamp, now, wall);
            for datagram in buf[..m.len].chunks_mut(stride.max(1)) {
                ep.dispatch(
                    now,
                    received_at,
                    m.addr,
                    udp::from_codepoint(m.ecn),
                    datagram,
                    Carrier::Udp,
                    &mut touched,
                );
            }
        }
        for s in touched.drain(..) {
            s.wake_driver.notify_one();
        }
    }
}

/// Reads the ICMP errors the socket reports, for the sessions they
/// concern; ends with the endpoint.
pub(super) async fn error_loop(io: Arc<UdpIo>, endpoint: Weak<EndpointInner>) {
    loop {
        let unreachable = io.unreachable().await;
        let Some(ep) = endpoint.upgrade() else {
            return;
        };
        ep.on_unreachable(&unreachable);
    }
}

/// Errors after which the next receive goes on at once: an interrupted
/// call, or an ICMP error of some earlier datagram that this call reported
/// (anyone may forge one; the error task reads the details).
fn is_transient(e: &io::Error) -> bool {
    crate::udp_errors::is_icmp_report(e)
        || matches!(
            e.kind(),
            io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
        )
}
