//! Where one connection's datagrams leave from: the socket that sends
//! them (the core says where they go), and the session table to leave
//! when the session ends. The bottom of the runtime's layers: sessions and their driver
//! hold routes, and only the endpoint knows what a table is.

use crate::tcp_carrier::Carriers;
use crate::udp::UdpIo;
use braid_proto::Ecn;
use std::net::SocketAddr;
use std::sync::Arc;

/// A table of sessions on one socket, which a session leaves when it ends.
pub(crate) trait SessionTable: Send + Sync {
    fn unregister(&self, session_id: u64);
}

#[derive(Clone)]
pub(crate) struct Route {
    pub socket: Arc<UdpIo>,
    /// The socket's TCP streams to relays whose UDP does not answer.
    pub carriers: Arc<Carriers>,
    /// The table of the socket's endpoint (kept alive while routed).
    pub table: Arc<dyn SessionTable>,
}

impl Route {
    /// Sends `contents` to `to` (a GSO batch of `segment`-byte datagrams,
    /// or one): over the TCP stream that carries datagrams to `to` if
    /// there is one (a full stream drops, as a full socket buffer does),
    /// else from the socket.
    pub(crate) async fn send(
        &self,
        to: SocketAddr,
        ecn: Ecn,
        contents: &[u8],
        segment: Option<usize>,
    ) -> std::io::Result<()> {
        if self.carriers.try_send(to, contents, segment) {
            return Ok(());
        }
        self.socket.send(to, ecn, contents, segment).await
    }
}
