//! How a session ends on purpose: the codes the core puts in CLOSE frames
//! and the CLOSE still to send.

/// Times a CLOSE frame is sent when aborting (it is not retransmitted otherwise).
const CLOSE_REPEATS: u32 = 3;

/// The codes the core sends in CLOSE frames, as [`SessionError::PeerAborted`]
/// and [`SessionError::LocallyAborted`] report them. An application's own
/// codes ([`Session::abort`]) share the space and should avoid these.
///
/// [`SessionError::PeerAborted`]: crate::SessionError::PeerAborted
/// [`SessionError::LocallyAborted`]: crate::SessionError::LocallyAborted
/// [`Session::abort`]: crate::Session::abort
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// The peer speaks another protocol version.
    Version = 1,
    /// The peer asked for a congestion controller we do not know.
    Controller = 2,
    /// The peer broke the protocol ([`Violation`](crate::Violation)).
    Protocol = 3,
    /// The handshake's mode, key or client was refused, or the keys are
    /// spent.
    Security = 4,
}

impl CloseCode {
    /// Every code, in wire order.
    pub const ALL: [CloseCode; 4] = [
        CloseCode::Version,
        CloseCode::Controller,
        CloseCode::Protocol,
        CloseCode::Security,
    ];

    /// The code's value on the wire.
    pub const fn value(self) -> u64 {
        self as u64
    }

    /// The core's code with this wire value, if it is one.
    pub fn from_value(value: u64) -> Option<CloseCode> {
        CloseCode::ALL.into_iter().find(|c| c.value() == value)
    }
}

impl From<CloseCode> for u64 {
    fn from(code: CloseCode) -> u64 {
        code.value()
    }
}

/// A CLOSE frame still to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Close {
    /// The close code on the wire (the core's [`CloseCode`] or an
    /// application's).
    pub code: u64,
    /// The reason text.
    pub reason: String,
    /// Times it is still to be sent.
    pub left: u32,
}

impl Close {
    /// A CLOSE to send [`CLOSE_REPEATS`] times.
    pub fn new(code: u64, reason: String) -> Close {
        Close {
            code,
            reason,
            left: CLOSE_REPEATS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_their_wire_values() {
        let values: Vec<u64> = CloseCode::ALL.iter().map(|c| c.value()).collect();
        assert_eq!(values, [1, 2, 3, 4]);
        for c in CloseCode::ALL {
            assert_eq!(CloseCode::from_value(c.into()), Some(c));
        }
        assert_eq!(CloseCode::from_value(0), None);
        assert_eq!(CloseCode::from_value(16), None);
    }
}
