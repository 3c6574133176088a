//! Where one connection's datagrams leave from: the socket that sends
//! them (the core says where they go), and the session table to leave
//! when the session ends. The bottom of the runtime's layers: sessions and their driver
//! hold routes, and only the endpoint knows what a table is.

use crate::udp::UdpIo;
use std::sync::Arc;

/// A table of sessions on one socket, which a session leaves when it ends.
pub(crate) trait SessionTable: Send + Sync {
    fn unregister(&self, session_id: u64);
}

#[derive(Clone)]
pub(crate) struct Route {
    pub socket: Arc<UdpIo>,
    /// The table of the socket's endpoint (kept alive while routed).
    pub table: Arc<dyn SessionTable>,
}
