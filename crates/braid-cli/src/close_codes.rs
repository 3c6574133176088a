//! The transfer's own close codes, shared by the code that closes a
//! session (transfer, send, recv) and the code that reads a peer's close
//! (failure). The core's own codes are below 16.

/// This side failed (the peer reads it as its own failure: `PeerFailed`).
pub const CLOSE_FAILED: u64 = 16;
/// This side was interrupted and gave up; what arrived is kept for the
/// same transfer sent again.
pub const CLOSE_INTERRUPTED: u64 = 17;
/// The sender has the receiver's verdict: the transfer is over, and the
/// receiver need not wait for the ACK of its verdict (QUIC's
/// CONNECTION_CLOSE after the application is done).
pub const CLOSE_DONE: u64 = 18;
