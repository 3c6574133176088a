//! When a paired sender opens its session, and over which connections.
//!
//! ICE (RFC 8445) checks candidate pairs before it nominates one; a sender
//! here does the same for a moment: once paired it waits up to
//! [`DIRECT_GRACE`] for a punch to be answered, so a peer on the same LAN
//! or nearby is in the handshake from its first packet and carries the
//! data from the start, instead of joining after a handshake through the
//! relays (several relay round trips, which on a LAN dwarf the transfer).

use std::net::SocketAddr;
use std::time::Duration;

use crate::Instant;

/// After the first relay paired a sender, how long the others get to pair
/// before its session opens without them (they join it later).
pub const OTHER_RELAYS_GRACE: Duration = Duration::from_millis(300);

/// After the first pairing, how long a sender waits for a punch to be
/// answered before opening through the relays alone. A LAN peer answers
/// a LAN round trip after the later of the two ends learned of the other
/// (each punches back at once when punched), and this leaves room for one
/// lost punch ([`super::PUNCH_INTERVAL`]); a peer without a direct way
/// costs this much more time to the first byte, against a handshake of
/// several relay round trips.
pub const DIRECT_GRACE: Duration = Duration::from_millis(25);

/// What a paired sender does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opening {
    /// Nothing yet: look again at this time (if any), or when the
    /// meeting finds something.
    Wait(Option<Instant>),
    /// Open the session with a connection to each of these, the direct
    /// addresses first; the rest join it as the meeting finds them.
    Open(Vec<SocketAddr>),
}

/// What the sender's meeting found so far.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// When the first relay paired us (`None`: none yet).
    pub first_paired: Option<Instant>,
    /// The relays that paired us.
    pub paired: &'a [SocketAddr],
    /// How many relays we were given.
    pub relays: usize,
    /// Addresses of the peer that answered a punch.
    pub direct: &'a [SocketAddr],
    /// Whether we punch at all (a direct path was not refused).
    pub punching: bool,
}

impl Found<'_> {
    /// Whether to open now, and with what.
    pub fn opening(&self, now: Instant) -> Opening {
        let Some(first) = self.first_paired else {
            return Opening::Wait(None);
        };
        let every_relay = self.paired.len() >= self.relays;
        let relays_done = every_relay || now >= first + OTHER_RELAYS_GRACE;
        let direct_done = !self.direct.is_empty() || !self.punching || now >= first + DIRECT_GRACE;
        if !self.direct.is_empty() || (relays_done && direct_done) {
            let mut to: Vec<SocketAddr> = self.direct.to_vec();
            for &relay in self.paired {
                if !to.contains(&relay) {
                    to.push(relay);
                }
            }
            return Opening::Open(to);
        }
        let relays_at = (!relays_done).then_some(first + OTHER_RELAYS_GRACE);
        let direct_at = (!direct_done).then_some(first + DIRECT_GRACE);
        Opening::Wait(relays_at.into_iter().chain(direct_at).min())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_direct_answer_opens_at_once_and_first() {
        let (relay, lan) = (sa("198.51.100.1:7000"), sa("192.168.1.20:5000"));
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let mut found = Found {
            first_paired: Some(t0),
            paired: &[relay],
            relays: 1,
            direct: &[],
            punching: true,
        };
        assert_eq!(found.opening(t0), Opening::Wait(Some(t0 + DIRECT_GRACE)));
        let direct = [lan];
        found.direct = &direct;
        let at = t0 + Duration::from_millis(2);
        assert_eq!(found.opening(at), Opening::Open(vec![lan, relay]));
    }

    #[test]
    fn without_a_direct_answer_the_relays_open_after_the_grace() {
        let relay = sa("198.51.100.1:7000");
        let t0 = Instant::ZERO;
        let found = Found {
            first_paired: Some(t0),
            paired: &[relay],
            relays: 1,
            direct: &[],
            punching: true,
        };
        let late = t0 + Duration::from_millis(24);
        assert!(matches!(found.opening(late), Opening::Wait(_)));
        assert_eq!(found.opening(t0 + DIRECT_GRACE), Opening::Open(vec![relay]));
        // Not punching: nothing to wait for.
        let found = Found {
            punching: false,
            ..found
        };
        assert_eq!(found.opening(t0), Opening::Open(vec![relay]));
    }

    #[test]
    fn other_relays_get_their_grace_unless_a_direct_way_is_found() {
        let (a, b, lan) = (
            sa("198.51.100.1:7000"),
            sa("198.51.100.2:7000"),
            sa("10.0.0.2:9"),
        );
        let t0 = Instant::ZERO;
        let mut found = Found {
            first_paired: Some(t0),
            paired: &[a],
            relays: 2,
            direct: &[],
            punching: true,
        };
        let mid = t0 + DIRECT_GRACE;
        assert_eq!(
            found.opening(mid),
            Opening::Wait(Some(t0 + OTHER_RELAYS_GRACE))
        );
        assert_eq!(
            found.opening(t0 + OTHER_RELAYS_GRACE),
            Opening::Open(vec![a])
        );
        let direct = [lan];
        found.direct = &direct;
        assert_eq!(found.opening(mid), Opening::Open(vec![lan, a]));
        let both = [a, b];
        found.paired = &both;
        found.direct = &[];
        assert_eq!(found.opening(mid), Opening::Open(vec![a, b]));
        assert_eq!(
            Found {
                first_paired: None,
                ..found
            }
            .opening(mid),
            Opening::Wait(None)
        );
    }
}
