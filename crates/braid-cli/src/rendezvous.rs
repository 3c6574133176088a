//! `--relay` on `braid send` and `braid recv`: where the two ends meet and
//! under which handle, from the options they were given.

use braid::rendezvous::{code_handle, key_handle, Handle, Meeting, Reach, Rendezvous};
use braid::Security;

use crate::UsageError;

/// Where to meet, if any `--relay` was given: the handle comes from the
/// code's number or the receiver's public key.
pub async fn meeting(
    relays: &[String],
    security: &Security,
    direct: bool,
) -> anyhow::Result<Option<Rendezvous>> {
    if relays.is_empty() {
        return Ok(None);
    }
    let mut at = Vec::with_capacity(relays.len());
    for r in relays {
        at.push(crate::resolve(r).await?);
    }
    Ok(Some(Rendezvous {
        relays: at,
        handle: handle(security)?,
        direct,
        relay_timeout: braid::rendezvous::RELAY_TIMEOUT,
    }))
}

fn handle(security: &Security) -> anyhow::Result<Handle> {
    match security {
        Security::Code(code) => Ok(code_handle(code)),
        Security::Pinned { peer, .. } => Ok(key_handle(peer)),
        Security::Server { identity, .. } => Ok(key_handle(&identity.public())),
        _ => Err(UsageError::new(
            "--relay pairs the two ends by a code or a key: give --code, --peer or --key, not --insecure",
        )
        .into()),
    }
}

/// A meeting kept alive while a transfer runs (none without --relay).
pub struct Kept(pub Option<Meeting>);

impl Kept {
    pub fn reach(&self) -> Option<Reach> {
        self.0.as_ref().map(Meeting::reach)
    }
}
