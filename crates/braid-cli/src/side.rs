//! Which end of a transfer a process is: below everything that words a
//! transfer's end (summary, failure, record, live view), so they can all
//! name it without naming each other.

/// Which side of a transfer: `braid send` or `braid recv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Send,
    Recv,
}

impl Side {
    /// This side, in words.
    pub fn name(self) -> &'static str {
        match self {
            Side::Send => "sender",
            Side::Recv => "receiver",
        }
    }

    /// The other side, in words.
    pub fn peer(self) -> &'static str {
        match self {
            Side::Send => "the receiver",
            Side::Recv => "the sender",
        }
    }
}
