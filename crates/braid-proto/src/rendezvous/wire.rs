//! The rendezvous messages: a 4-byte magic that no braid datagram starts
//! with, a kind, and a fixed-size body. Decoding never panics and checks
//! every length; anything else is not a rendezvous message.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// First bytes of every rendezvous message. The first byte's low seven
/// bits (127) are a version braid's packets never carry, so an endpoint
/// tells the two apart from the first byte alone; the last byte is this
/// protocol's own version.
pub const MAGIC: [u8; 4] = [0x7f, b'R', b'Z', 1];

/// Size of a client's REGISTER and JOIN, padded: every answer the relay
/// sends for one (to the sender and, on pairing, to the registered peer)
/// fits in it, so a forged source address gains an attacker nothing.
pub const REQUEST_LEN: usize = 160;

/// Length of a handle, a cookie and a pairing token.
pub const HANDLE_LEN: usize = 32;
/// See [`HANDLE_LEN`].
pub const COOKIE_LEN: usize = crate::crypto::RETRY_TOKEN_LEN;
/// See [`HANDLE_LEN`].
pub const TOKEN_LEN: usize = 16;

const ADDR_LEN: usize = 19;

/// Why a relay refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody registered under the handle (yet).
    Unknown,
    /// The handle is taken by another address, or its receiver is paired.
    Busy,
    /// The relay holds as many registrations or pairs as it may.
    Full,
}

impl Refusal {
    fn code(self) -> u8 {
        match self {
            Refusal::Unknown => 1,
            Refusal::Busy => 2,
            Refusal::Full => 3,
        }
    }

    fn from_code(c: u8) -> Option<Refusal> {
        Some(match c {
            1 => Refusal::Unknown,
            2 => Refusal::Busy,
            3 => Refusal::Full,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Unknown => "nobody is waiting under that code or key",
            Refusal::Busy => "that code or key is in use by another transfer",
            Refusal::Full => "the relay is full",
        })
    }
}

/// A rendezvous message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Client to relay: wait for a peer under `handle`. Without a valid
    /// cookie the relay answers [`Message::Cookie`] and keeps nothing.
    Register {
        /// What the peer will ask for.
        handle: [u8; HANDLE_LEN],
        /// The relay's proof that we receive at our address (zero at first).
        cookie: [u8; COOKIE_LEN],
        /// Once paired, the pair's token: a refresh from a new address (a
        /// NAT rebound) carrying it moves our end of the pair there.
        token: [u8; TOKEN_LEN],
    },
    /// Client to relay: pair with whoever registered `handle`.
    Join {
        /// What the peer registered.
        handle: [u8; HANDLE_LEN],
        /// As in [`Message::Register`].
        cookie: [u8; COOKIE_LEN],
        /// As in [`Message::Register`].
        token: [u8; TOKEN_LEN],
    },
    /// Relay to client: repeat the request with this cookie.
    Cookie([u8; COOKIE_LEN]),
    /// Relay to a registered client: the address it sees us at, and for
    /// how many seconds the registration lasts without a refresh.
    Registered {
        /// Our address as the relay sees it (server reflexive, RFC 8489).
        reflexive: SocketAddr,
        /// Seconds until the registration lapses unless refreshed.
        lifetime_s: u16,
    },
    /// Relay to both clients of a new pair: where each is seen, and the
    /// token their punches carry. From then on the relay forwards every
    /// datagram between the two addresses that is not a rendezvous message.
    Paired {
        /// Our address as the relay sees it.
        reflexive: SocketAddr,
        /// The peer's, where a direct path may reach it.
        peer: SocketAddr,
        /// Random, per pair: a punch carrying it comes from the peer (or
        /// from someone the relay told).
        token: [u8; TOKEN_LEN],
    },
    /// Relay to client: no.
    Refused(Refusal),
    /// Client to client, directly: a hole punch. `answer` is set on the
    /// reply to a punch, which proves the way there and back.
    Punch {
        /// The pair's token.
        token: [u8; TOKEN_LEN],
        /// Whether this answers a punch.
        answer: bool,
    },
}

const REGISTER: u8 = 1;
const JOIN: u8 = 2;
const COOKIE: u8 = 3;
const REGISTERED: u8 = 4;
const PAIRED: u8 = 5;
const REFUSED: u8 = 6;
const PUNCH: u8 = 7;

/// Whether `datagram` is meant as a rendezvous message (it may still be
/// malformed).
pub fn is_rendezvous(datagram: &[u8]) -> bool {
    datagram.starts_with(&MAGIC)
}

impl Message {
    /// The message's bytes; requests are padded to [`REQUEST_LEN`].
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REQUEST_LEN);
        out.extend_from_slice(&MAGIC);
        match self {
            Message::Register {
                handle,
                cookie,
                token,
            }
            | Message::Join {
                handle,
                cookie,
                token,
            } => {
                out.push(if matches!(self, Message::Register { .. }) {
                    REGISTER
                } else {
                    JOIN
                });
                out.extend_from_slice(handle);
                out.extend_from_slice(cookie);
                out.extend_from_slice(token);
                out.resize(REQUEST_LEN, 0);
            }
            Message::Cookie(c) => {
                out.push(COOKIE);
                out.extend_from_slice(c);
            }
            Message::Registered {
                reflexive,
                lifetime_s,
            } => {
                out.push(REGISTERED);
                put_addr(&mut out, *reflexive);
                out.extend_from_slice(&lifetime_s.to_be_bytes());
            }
            Message::Paired {
                reflexive,
                peer,
                token,
            } => {
                out.push(PAIRED);
                put_addr(&mut out, *reflexive);
                put_addr(&mut out, *peer);
                out.extend_from_slice(token);
            }
            Message::Refused(r) => {
                out.push(REFUSED);
                out.push(r.code());
            }
            Message::Punch { token, answer } => {
                out.push(PUNCH);
                out.extend_from_slice(token);
                out.push(u8::from(*answer));
            }
        }
        out
    }

    /// The message in `datagram`, if it is a well-formed one.
    pub fn decode(datagram: &[u8]) -> Option<Message> {
        let rest = datagram.strip_prefix(&MAGIC)?;
        let (&kind, body) = rest.split_first()?;
        let mut r = Reader(body);
        let m = match kind {
            REGISTER | JOIN => {
                // Requests must be padded, or they could amplify.
                if datagram.len() < REQUEST_LEN {
                    return None;
                }
                let (handle, cookie, token) = (r.array()?, r.array()?, r.array()?);
                if kind == REGISTER {
                    Message::Register {
                        handle,
                        cookie,
                        token,
                    }
                } else {
                    Message::Join {
                        handle,
                        cookie,
                        token,
                    }
                }
            }
            COOKIE => Message::Cookie(r.array()?),
            REGISTERED => Message::Registered {
                reflexive: r.addr()?,
                lifetime_s: u16::from_be_bytes(r.array()?),
            },
            PAIRED => Message::Paired {
                reflexive: r.addr()?,
                peer: r.addr()?,
                token: r.array()?,
            },
            REFUSED => Message::Refused(Refusal::from_code(r.array::<1>()?[0])?),
            PUNCH => {
                let token = r.array()?;
                let answer = match r.array::<1>()?[0] {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                Message::Punch { token, answer }
            }
            _ => return None,
        };
        Some(m)
    }
}

fn put_addr(out: &mut Vec<u8>, a: SocketAddr) {
    let mut ip = [0u8; 16];
    match a.ip() {
        IpAddr::V4(v4) => {
            out.push(4);
            ip[..4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            out.push(6);
            ip = v6.octets();
        }
    }
    out.extend_from_slice(&ip);
    out.extend_from_slice(&a.port().to_be_bytes());
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }

    fn addr(&mut self) -> Option<SocketAddr> {
        let raw: [u8; ADDR_LEN] = self.array()?;
        let port = u16::from_be_bytes([raw[17], raw[18]]);
        let ip = match raw[0] {
            4 => IpAddr::V4(Ipv4Addr::new(raw[1], raw[2], raw[3], raw[4])),
            6 => IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&raw[1..17]).expect("16 bytes"),
            )),
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Message> {
        let a: SocketAddr = "198.18.0.1:4000".parse().unwrap();
        let b: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
        vec![
            Message::Register {
                handle: [1; 32],
                cookie: [2; COOKIE_LEN],
                token: [4; TOKEN_LEN],
            },
            Message::Join {
                handle: [3; 32],
                cookie: [0; COOKIE_LEN],
                token: [0; TOKEN_LEN],
            },
            Message::Cookie([9; COOKIE_LEN]),
            Message::Registered {
                reflexive: b,
                lifetime_s: 30,
            },
            Message::Paired {
                reflexive: a,
                peer: b,
                token: [7; 16],
            },
            Message::Refused(Refusal::Busy),
            Message::Punch {
                token: [5; 16],
                answer: true,
            },
        ]
    }

    #[test]
    fn every_message_round_trips_and_answers_fit_in_a_request() {
        for m in all() {
            let bytes = m.encode();
            assert!(is_rendezvous(&bytes));
            assert_eq!(Message::decode(&bytes), Some(m.clone()), "{m:?}");
            assert!(bytes.len() <= REQUEST_LEN);
        }
        let paired = all()[4].encode().len();
        assert!(
            2 * paired <= REQUEST_LEN,
            "a pairing's two answers fit in one JOIN"
        );
    }

    #[test]
    fn truncated_unpadded_or_unknown_messages_are_not_messages() {
        for m in all() {
            let bytes = m.encode();
            for cut in 0..bytes.len() {
                assert_eq!(Message::decode(&bytes[..cut]), None, "{m:?} cut at {cut}");
            }
        }
        let mut unknown = MAGIC.to_vec();
        unknown.push(99);
        assert_eq!(Message::decode(&unknown), None);
        // A braid packet (any version) is not one.
        let mut packet = vec![8u8; 40];
        packet[1] = 0;
        assert!(!is_rendezvous(&packet));
    }
}
