//! Reaching a peer behind a NAT or firewall: a rendezvous relay anyone can
//! run ([`RendezvousRelay`]), and the two ends that meet there
//! ([`connect_via`] for a sender, [`Listener::register_at`] for a
//! receiver). The session runs over every relay that paired the two ends
//! and over every direct path hole punching finds, at once; the relays
//! see only sealed datagrams. The protocol is in docs/reach.md.

mod candidates;
mod meeting;
mod relay;

use braid_proto::rendezvous::OTHER_RELAYS_GRACE;
pub use braid_proto::rendezvous::{
    code_handle, key_handle, Handle, Refusal, Refusals, ServerConfig, ServerStats,
};
pub(crate) use meeting::INBOX;
pub use meeting::{MeetRole, Meeting, Reach, RelayView};
pub use relay::RendezvousRelay;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::{Endpoint, Error, Listener, Result, Session, SessionConfig};

/// Where and how two ends meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// The relays, all of which both ends use.
    pub relays: Vec<SocketAddr>,
    /// What the receiver waits under ([`code_handle`], [`key_handle`]).
    pub handle: Handle,
    /// Whether to punch a direct path too. Without one, the peer never
    /// learns our address from us (the relays still see it).
    pub direct: bool,
}

impl Rendezvous {
    /// Meeting under `handle` at `relays`, directly where possible.
    pub fn new(relays: &[SocketAddr], handle: Handle) -> Rendezvous {
        Rendezvous {
            relays: relays.to_vec(),
            handle,
            direct: true,
        }
    }
}

/// Meets the receiver waiting under `at.handle` at `at.relays` and opens a
/// session, from a socket bound at `local` (`None`: any), with one
/// connection through each relay that paired us; hole punching adds direct
/// connections as it finds them. Gives up after `cfg.handshake_timeout`
/// without a pairing. Keep the [`Meeting`] while the session runs: it adds
/// the connections found later.
pub async fn connect_via(
    local: Option<SocketAddr>,
    at: &Rendezvous,
    cfg: SessionConfig,
) -> Result<(Session, Meeting)> {
    let relays = &at.relays[..];
    let local = local.unwrap_or(match relays.first() {
        Some(r) if r.is_ipv6() => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        _ => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
    });
    let endpoint = Endpoint::bind(local)?;
    let meeting = Meeting::start(&endpoint, at, MeetRole::Join);
    let give_up = tokio::time::Instant::now() + cfg.handshake_timeout;
    let mut grace_until = None;
    let paired = loop {
        let changed = meeting.changed();
        tokio::pin!(changed);
        let reach = meeting.reach();
        let paired: Vec<SocketAddr> = reach
            .relays
            .iter()
            .filter(|r| r.paired_at.is_some())
            .map(|r| r.relay)
            .collect();
        if paired.len() == relays.len() {
            break paired;
        }
        if !paired.is_empty() {
            grace_until.get_or_insert(tokio::time::Instant::now() + OTHER_RELAYS_GRACE);
        }
        let until = grace_until.unwrap_or(give_up).min(give_up);
        if tokio::time::timeout_at(until, changed).await.is_err() {
            if !paired.is_empty() {
                break paired;
            }
            return Err(no_pairing(&reach, relays, cfg.handshake_timeout));
        }
    };
    let waited = give_up.saturating_duration_since(tokio::time::Instant::now());
    let cfg = SessionConfig {
        handshake_timeout: waited.max(Duration::from_secs(1)),
        ..cfg
    };
    let session = endpoint.connect(&paired, cfg).await?;
    meeting.attach(&session);
    Ok((session, meeting))
}

fn no_pairing(reach: &Reach, relays: &[SocketAddr], waited: Duration) -> Error {
    let refused = reach.relays.iter().rev().find_map(|r| {
        r.refused
            .filter(|&why| why != Refusal::Unknown)
            .map(|refusal| (r.relay, refusal))
    });
    match refused {
        Some((relay, refusal)) => Error::RelayRefused { relay, refusal },
        None => Error::NoPeerAtRelays {
            relays: relays
                .iter()
                .map(SocketAddr::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            waited,
            relays_answered: reach
                .relays
                .iter()
                .any(|r| r.reflexive.is_some() || r.refused.is_some()),
        },
    }
}

impl Listener {
    /// Waits for senders under `at.handle` at `at.relays` as well as at the
    /// listener's own address, from the listener's socket: registers at
    /// each relay (and keeps the registration, and the NAT's mapping
    /// towards it, fresh), and punches towards every sender a relay pairs
    /// it with. Sessions arrive at [`Listener::accept`] as any others.
    /// Keep the [`Meeting`] while waiting and receiving.
    pub fn register_at(&self, at: &Rendezvous) -> Meeting {
        Meeting::start(self.endpoint(), at, MeetRole::Register)
    }
}
