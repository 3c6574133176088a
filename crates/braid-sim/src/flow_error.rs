//! Why a flow failed, typed from the session that failed to the report
//! (and its JSON, which carries the message).

use braid_proto::{ConfigError, SessionError};
use serde::{Serialize, Serializer};

/// Why a flow ended without delivering everything, or never started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The session refused the flow's configuration (the scenario's
    /// fault, say an unknown controller); the flow never started.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A session failed: the client's error, else the server's.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The run processed more events than any run should: a livelock.
    #[error("simulation exceeded its event budget (livelock)")]
    Livelock,
    /// A real transfer's failure as the tool that ran it words it (the
    /// JSON of `braid send`/`braid recv`, in the shape of a run's).
    #[error("{0}")]
    Transfer(String),
}

/// In JSON, the message.
impl Serialize for FlowError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
