//! `--relay` on `braid send` and `braid recv`: where the two ends meet and
//! under which handle, from the options they were given.

use std::net::SocketAddr;
use std::time::Duration;

use braid::rendezvous::{
    any_local_for, code_handle, key_handle, Handle, Meeting, Reach, Rendezvous, RELAY_TIMEOUT,
};
use braid::Security;

use crate::usage::UsageError;

/// Where to meet, and the address to bind for it when none is given.
pub struct Meet {
    pub at: Rendezvous,
    /// IPv6's any address (dual-stack) if any relay has an IPv6 address,
    /// else IPv4's.
    pub local: SocketAddr,
}

/// Where to meet, if any `--relay` was given: the handle comes from the
/// code's number or the receiver's public key. A relay given by name is
/// asked at its first address in the system's order; every address it
/// has (A and AAAA) decides the family of the socket, so that a peer the
/// relay reports in either family can be punched. Without a relay
/// answer for `relay_timeout` (default [`RELAY_TIMEOUT`]) the meeting
/// fails. With `tcp_only`, the relays are reached over TCP from the start.
pub async fn meeting(
    relays: &[String],
    security: &Security,
    direct: bool,
    relay_timeout: Option<Duration>,
    tcp_only: bool,
) -> anyhow::Result<Option<Meet>> {
    if relays.is_empty() {
        return Ok(None);
    }
    let mut at = Vec::with_capacity(relays.len());
    let mut every = Vec::new();
    for r in relays {
        let found = crate::resolve_all(r).await?;
        at.push(found[0]);
        every.extend(found);
    }
    Ok(Some(Meet {
        at: Rendezvous {
            relays: at,
            handle: handle(security)?,
            direct,
            relay_timeout: relay_timeout.unwrap_or(RELAY_TIMEOUT),
            tcp_only,
        },
        local: any_local_for(&every),
    }))
}

impl Meet {
    /// The addresses to try binding, in order: [`Meet::local`], then
    /// IPv4's any address where every relay is asked over IPv4 (a host
    /// without IPv6 cannot bind `[::]`, and needs no IPv6 for them).
    pub fn binds(&self) -> Vec<SocketAddr> {
        let mut binds = vec![self.local];
        if self.local.is_ipv6() && self.at.relays.iter().all(SocketAddr::is_ipv4) {
            binds.push(SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0)));
        }
        binds
    }
}

impl Meet {
    /// A sender's meeting, from `bind` if given, else from the first of
    /// [`Meet::binds`] that binds.
    pub fn join(&self, bind: Option<SocketAddr>) -> Result<Meeting, braid::Error> {
        let binds = bind.map_or_else(|| self.binds(), |b| vec![b]);
        let mut failed = None;
        for local in binds {
            match Meeting::join(Some(local), &self.at) {
                Ok(m) => return Ok(m),
                Err(e) => failed = Some(e),
            }
        }
        Err(failed.expect("one address at least"))
    }
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

/// The relays as a list for a sentence: "a, b".
pub fn list(relays: impl IntoIterator<Item = SocketAddr>) -> String {
    relays
        .into_iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// "relay a" or "relays a, b".
pub fn named(relays: &[SocketAddr]) -> String {
    let s = if relays.len() == 1 { "" } else { "s" };
    format!("relay{s} {}", list(relays.iter().copied()))
}

/// A meeting kept alive while a transfer runs (none without --relay).
pub struct Kept(pub Option<Meeting>);

impl Kept {
    pub fn reach(&self) -> Option<Reach> {
        self.0.as_ref().map(Meeting::reach)
    }
}
