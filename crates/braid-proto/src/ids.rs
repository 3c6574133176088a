//! The names every layer shares: a session's connections ([`PathId`]) and
//! its sides ([`Role`]). They live at the crate root so that the wire
//! format, the configuration and the statistics need not reach into
//! `path/` or `session/` for them.

use std::fmt;

/// One of a session's connections ("paths"), as every packet header names
/// it: connection `PathId(i)` is the i-th route the application gave the
/// session. Not a simulator link: a scenario's flow maps its connections
/// onto the scenario's links in any order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathId(pub u8);

impl PathId {
    /// The connection as an index into a per-connection list.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which side opened the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It connected.
    Client,
    /// It accepted.
    Server,
}

impl Role {
    /// `client` or `server`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// A session id as the logs print it: 16 hex digits.
pub(crate) struct Hex(pub u64);

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}
