//! Reaching a peer behind a NAT or firewall: a rendezvous relay anyone can
//! run ([`RendezvousRelay`]), and the two ends that meet there
//! ([`connect_via`] for a sender, [`Listener::register_at`] for a
//! receiver). The session runs over every relay that paired the two ends
//! and over every direct path hole punching finds, at once; the relays
//! see only sealed datagrams. The protocol is in docs/reach.md.

mod candidates;
mod meeting;
mod relay;
mod relay_tcp;
mod relay_worker;

pub use crate::tcp_carrier::MAX_FRAME;
pub use braid_proto::rendezvous::{
    code_handle, key_handle, Handle, Refusal, Refusals, ServerConfig, ServerStats,
};
pub use braid_proto::rendezvous::{Carrier, TCP_AFTER};
use braid_proto::rendezvous::{Found, Opening};
pub(crate) use meeting::INBOX;
pub use meeting::{MeetRole, Meeting, Reach, RelayView, SPENT_GRACE};
pub use relay::RendezvousRelay;
pub use relay_tcp::{TcpOptions, TcpStats, CLOSED_FOR};

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::{clock, Endpoint, Error, Listener, Result, Session, SessionConfig};

/// How long an end waits for a first answer from any relay by default: a
/// relay answers within a round trip, and the requests are repeated at
/// 0.25, 0.75, 1.75 and 3.75 s, so five seconds of silence means the relay
/// is down, or UDP to it is blocked, rather than a lost datagram.
pub const RELAY_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// How long to wait for a first answer from any relay before giving
    /// up ([`Error::NoRelayAnswered`]); [`RELAY_TIMEOUT`] by default.
    pub relay_timeout: Duration,
    /// Reach the relays over TCP from the start, never over UDP (a
    /// network known to block UDP). Otherwise a relay whose UDP does not
    /// answer for [`TCP_AFTER`] is reached over TCP until it does.
    pub tcp_only: bool,
}

impl Rendezvous {
    /// Meeting under `handle` at `relays`, directly where possible.
    pub fn new(relays: &[SocketAddr], handle: Handle) -> Rendezvous {
        Rendezvous {
            relays: relays.to_vec(),
            handle,
            direct: true,
            relay_timeout: RELAY_TIMEOUT,
            tcp_only: false,
        }
    }
}

/// The address to bind for meeting at `relays` when none is given: IPv6's
/// any address (a dual-stack socket, which reaches IPv4 relays and peers
/// too, as IPv4-mapped addresses) if any relay is IPv6, else IPv4's.
pub fn any_local_for(relays: &[SocketAddr]) -> SocketAddr {
    if relays.iter().any(SocketAddr::is_ipv6) {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
    }
}

/// Meets the receiver waiting under `at.handle` at `at.relays` and opens a
/// session, from a socket bound at `local` (`None`: [`any_local_for`] the
/// relays), with one connection through each relay that paired us; hole
/// punching adds direct connections as it finds them. Gives up after
/// `at.relay_timeout` if no relay answered, and after
/// `cfg.handshake_timeout` without a pairing. Keep the [`Meeting`] while
/// the session runs: it adds the connections found later.
/// [`Meeting::join`] and [`Meeting::open`] are its two halves, for a
/// caller that watches the meeting meanwhile.
pub async fn connect_via(
    local: Option<SocketAddr>,
    at: &Rendezvous,
    cfg: SessionConfig,
) -> Result<(Session, Meeting)> {
    let meeting = Meeting::join(local, at)?;
    let session = meeting.open(cfg).await?;
    Ok((session, meeting))
}

impl Meeting {
    /// A sender's meeting: binds a socket at `local` (`None`:
    /// [`any_local_for`] the relays) and starts asking the relays to pair
    /// us with whoever waits under `at.handle`. [`Meeting::open`] then
    /// opens the session.
    pub fn join(local: Option<SocketAddr>, at: &Rendezvous) -> Result<Meeting> {
        let local = local.unwrap_or_else(|| any_local_for(&at.relays));
        let endpoint = Endpoint::bind(local)?;
        Ok(Meeting::start(&endpoint, at, MeetRole::Join))
    }

    /// Waits until the relays paired us (every relay, or the others for
    /// a short while after the first) and, for a moment, until a punch is
    /// answered; then opens a session through the relays and the direct
    /// addresses found ([`Found::opening`]) on the meeting's socket,
    /// handing it the connections found later.
    /// Fails with [`Error::NoRelayAnswered`] once no relay answered for
    /// the meeting's relay timeout, and after `cfg.handshake_timeout`
    /// (from the meeting's start) without a pairing with
    /// [`Error::RelayRefused`] or [`Error::NoPeerAtRelays`].
    pub async fn open(&self, cfg: SessionConfig) -> Result<Session> {
        let started = tokio::time::Instant::from_std(self.reach().started);
        let give_up = started + cfg.handshake_timeout;
        let silent_until = started + self.relay_timeout();
        let connections = loop {
            let changed = self.changed();
            tokio::pin!(changed);
            let reach = self.reach();
            let until = match self.opening(&reach) {
                Opening::Open(to) => break to,
                Opening::Wait(at) => at.map_or(give_up, |at| clock::deadline(at).min(give_up)),
            };
            let answered = reach.relays.iter().any(|r| r.answered);
            let until = if answered {
                until
            } else {
                until.min(silent_until)
            };
            // A relay said wrong guesses spent the code, and no other
            // answer from it has said otherwise for long enough.
            let spent = spent(&reach);
            if let Some((relay, _)) = spent.filter(|&(_, at)| at <= std::time::Instant::now()) {
                let refusal = Refusal::Spent;
                return Err(Error::RelayRefused { relay, refusal });
            }
            let until = spent.map_or(until, |(_, at)| {
                until.min(tokio::time::Instant::from_std(at))
            });
            if tokio::time::timeout_at(until, changed).await.is_err() {
                // Paired just before giving up: open rather than fail.
                if let Opening::Open(to) = self.opening(&self.reach()) {
                    break to;
                }
                let now = tokio::time::Instant::now();
                if now >= give_up || (!answered && now >= silent_until) {
                    return Err(no_pairing(&self.reach(), now - started));
                }
            }
        };
        let waited = give_up.saturating_duration_since(tokio::time::Instant::now());
        let cfg = SessionConfig {
            handshake_timeout: waited.max(Duration::from_secs(1)),
            ..cfg
        };
        let session = self.endpoint().connect(&connections, cfg).await?;
        self.attach(&session);
        Ok(session)
    }

    /// Whether to open the session yet, and with which connections
    /// ([`Found::opening`], the core's call).
    fn opening(&self, reach: &Reach) -> Opening {
        let now = clock::now();
        let at = |t: std::time::Instant| now.saturating_sub(t.elapsed());
        let paired: Vec<SocketAddr> = reach
            .relays
            .iter()
            .filter(|r| r.paired_at.is_some())
            .map(|r| r.relay)
            .collect();
        let direct: Vec<SocketAddr> = reach.direct.iter().map(|&(a, _)| a).collect();
        Found {
            first_paired: reach.first_paired().map(at),
            paired: &paired,
            relays: reach.relays.len(),
            direct: &direct,
            punching: self.punches() && reach.relays.iter().any(|r| r.peer.is_some()),
        }
        .opening(now)
    }

    /// A receiver's first wait: until every relay registered us or
    /// refused, or for the meeting's relay timeout. Then fails if no
    /// relay holds our registration: with [`Error::RelayRefused`] if one
    /// refused, else [`Error::NoRelayAnswered`]. Otherwise at least one
    /// relay holds it; the views of the others say why not (a refusal, or
    /// no answer yet: the meeting keeps asking them).
    pub async fn registered(&self) -> Result<Reach> {
        let settled = |r: &Reach| {
            r.relays
                .iter()
                .all(|v| v.reflexive.is_some() || v.refused.is_some())
        };
        let _ = tokio::time::timeout(self.relay_timeout(), self.wait_until(settled)).await;
        let reach = self.reach();
        if reach.relays.iter().any(|v| v.reflexive.is_some()) {
            return Ok(reach);
        }
        if let Some(v) = reach.relays.iter().find(|v| v.refused.is_some()) {
            return Err(Error::RelayRefused {
                relay: v.relay,
                refusal: v.refused.expect("found"),
            });
        }
        Err(silent(&reach, reach.started.elapsed()))
    }
}

/// The relay whose word that wrong guesses spent the code is believed
/// first, and from when ([`RelayView::spent_believed_at`]).
fn spent(reach: &Reach) -> Option<(SocketAddr, std::time::Instant)> {
    reach
        .relays
        .iter()
        .filter_map(|r| Some((r.relay, r.spent_believed_at()?)))
        .min_by_key(|&(_, at)| at)
}

/// Why a sender was not paired: no relay answered, one refused (other
/// than "nobody waits"), or nobody waited under the handle.
fn no_pairing(reach: &Reach, waited: Duration) -> Error {
    if !reach.relays.iter().any(|r| r.answered) {
        return silent(reach, waited);
    }
    let refused = reach.relays.iter().rev().find_map(|r| {
        r.refused
            .filter(|&why| why != Refusal::Unknown)
            .map(|refusal| (r.relay, refusal))
    });
    match refused {
        Some((relay, refusal)) => Error::RelayRefused { relay, refusal },
        None => Error::NoPeerAtRelays {
            relays: list(reach.relays.iter().map(|r| r.relay)),
            waited,
        },
    }
}

/// [`Error::NoRelayAnswered`], naming the relays that did not answer.
/// (All of them if each sent no more than a cookie.)
fn silent(reach: &Reach, waited: Duration) -> Error {
    let quiet = reach.relays.iter().filter(|r| !r.answered);
    let relays = if quiet.clone().next().is_some() {
        list(quiet.map(|r| r.relay))
    } else {
        list(reach.relays.iter().map(|r| r.relay))
    };
    let tcp_tried = reach.relays.iter().any(|r| r.tcp);
    Error::NoRelayAnswered {
        relays,
        waited,
        tcp_tried,
    }
}

fn list(relays: impl Iterator<Item = SocketAddr>) -> String {
    relays.map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
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
