//! The rendezvous messages: a 4-byte magic that no braid datagram starts
//! with, a kind, and a fixed-size body. Decoding never panics and checks
//! every length; anything else is not a rendezvous message. What the
//! fields mean, and which are sealed, is in [`super::seal`] and
//! docs/reach.md.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// First bytes of every rendezvous message. The first byte's low seven
/// bits (127) are a version braid's packets never carry, so an endpoint
/// tells the two apart from the first byte alone; the last byte is this
/// protocol's own version.
pub const MAGIC: [u8; 4] = [0x7f, b'R', b'Z', 3];

/// Size of a client's REGISTER and JOIN, padded: every answer the relay
/// sends for one (to the sender and, on pairing, to the registered peer)
/// fits in it, so a forged source address gains an attacker nothing.
pub const REQUEST_LEN: usize = 448;

/// Local addresses (ICE host candidates) an end offers its peer at most.
pub const MAX_CANDIDATES: usize = 4;

/// Length of a handle.
pub const HANDLE_LEN: usize = 32;
/// Length of a cookie.
pub const COOKIE_LEN: usize = crate::crypto::RETRY_TOKEN_LEN;
/// Length of a pair's punch secret.
pub const TOKEN_LEN: usize = 16;
/// Length of a client's key-agreement message (a Noise NN first message).
pub const HELLO_LEN: usize = 32;
/// Length of the relay's key-agreement answer (a Noise NN second message).
pub const KEYED_LEN: usize = 48;
/// Length of a MAC (HMAC-SHA256) on a request or a punch.
pub const MAC_LEN: usize = 32;
/// Length of a sealed answer's AEAD tag.
pub const TAG_LEN: usize = 16;
/// Length of an encoded address (family, 16 bytes of address, port).
pub const ADDR_LEN: usize = 19;

/// Request flags.
pub mod flags {
    /// Keep this end's address out of what the peer is told.
    pub const NO_DIRECT: u8 = 1;
    /// End the pair this end is in (its session is over, or never began).
    pub const RELEASE: u8 = 2;
    /// End the pair and the registration: this end is going away.
    pub const LEAVE: u8 = 4;
    /// With [`LEAVE`]: a code receiver goes away because wrong guesses
    /// spent its code; the relay tells later joiners so for a while.
    pub const SPENT: u8 = 8;
}

/// Why a relay refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody registered under the handle (yet).
    Unknown,
    /// The handle is taken by another address, or its receiver is paired.
    Busy,
    /// The relay holds as many registrations or pairs as it may, in all or
    /// for the requester's host.
    Full,
    /// The receiver that waited under the handle went away because wrong
    /// guesses spent its code.
    Spent,
}

impl Refusal {
    fn code(self) -> u8 {
        match self {
            Refusal::Unknown => 1,
            Refusal::Busy => 2,
            Refusal::Full => 3,
            Refusal::Spent => 4,
        }
    }

    fn from_code(c: u8) -> Option<Refusal> {
        Some(match c {
            1 => Refusal::Unknown,
            2 => Refusal::Busy,
            3 => Refusal::Full,
            4 => Refusal::Spent,
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
            Refusal::Spent => {
                "the receiver that waited under that code stopped after too many wrong guesses"
            }
        })
    }
}

/// A client's request: REGISTER (wait under the handle) or JOIN (pair with
/// whoever waits under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Whether this registers (a receiver) or joins (a sender).
    pub register: bool,
    /// What the two ends meet under.
    pub handle: [u8; HANDLE_LEN],
    /// The relay's proof that we receive at our address (zero at first).
    pub cookie: [u8; COOKIE_LEN],
    /// Fresh per request; every answer echoes it, so nobody who did not
    /// see the request can forge one.
    pub nonce: u64,
    /// [`flags`].
    pub flags: u8,
    /// Our half of the key agreement with this relay, the same in every
    /// request until the relay answered it.
    pub hello: [u8; HELLO_LEN],
    /// Our local addresses, for a peer on the same network (at most
    /// [`MAX_CANDIDATES`]; none with [`flags::NO_DIRECT`]).
    pub candidates: Vec<SocketAddr>,
    /// Once keyed, a MAC of everything above under our key with the relay
    /// (zero before): proves we are this end, from any address.
    pub proof: [u8; MAC_LEN],
}

/// Where the proof starts in an encoded request: it covers the bytes before.
pub const PROOF_AT: usize =
    5 + HANDLE_LEN + COOKIE_LEN + 8 + 1 + HELLO_LEN + 1 + MAX_CANDIDATES * ADDR_LEN;

/// A rendezvous message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Client to relay.
    Request(Request),
    /// Relay to client: repeat the request with this cookie.
    Cookie {
        /// The request's nonce.
        echo: u64,
        /// The cookie.
        cookie: [u8; COOKIE_LEN],
    },
    /// Relay to client: no.
    Refused {
        /// The request's nonce.
        echo: u64,
        /// Why.
        why: Refusal,
    },
    /// Relay to a keyed client: REGISTERED or PAIRED, sealed under the
    /// client's key ([`super::seal`]).
    Sealed(Sealed),
    /// Client to client, directly: a hole punch, or the answer to one.
    Punch {
        /// Fresh per punched address; an answer echoes it.
        nonce: u64,
        /// Whether this answers a punch.
        answer: bool,
        /// MAC of the nonce and the answer flag under the pair's secret.
        mac: [u8; MAC_LEN],
    },
}

/// What a sealed answer says, once opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Registered: our address as the relay sees it (server reflexive, RFC
    /// 8489), and seconds until the registration lapses unless refreshed.
    Registered {
        /// Our address as the relay sees it.
        reflexive: SocketAddr,
        /// Seconds until the registration lapses unless refreshed.
        lifetime_s: u16,
    },
    /// Paired: where each is seen, and the pair's punch secret. From then
    /// on the relay forwards every datagram between the two addresses that
    /// is not a rendezvous message.
    Paired {
        /// Our address as the relay sees it.
        reflexive: SocketAddr,
        /// The peer's, where a direct path may reach it; `None` if the
        /// peer keeps its address to itself.
        peer: Option<SocketAddr>,
        /// Random, per pair, known to the two ends and the relay only.
        token: [u8; TOKEN_LEN],
        /// The peer's local addresses, unless it keeps its addresses to itself.
        candidates: Vec<SocketAddr>,
    },
}

/// A sealed relay answer on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The nonce of the request it answers (for a pairing the other end
    /// caused, that end's latest).
    pub echo: u64,
    /// The relay's counter for this client: the AEAD nonce.
    pub counter: u64,
    /// The relay's key-agreement answer, in the first answer to a client
    /// (and its repeats).
    pub keyed: Option<[u8; KEYED_LEN]>,
    /// The answer, sealed.
    pub body: Vec<u8>,
}

const REQUEST: u8 = 1;
const COOKIE: u8 = 3;
const SEALED: u8 = 4;
const REFUSED: u8 = 6;
const PUNCH: u8 = 7;
const REGISTERED: u8 = 1;
const PAIRED: u8 = 2;

/// Sealed body lengths: a kind, then the fields, then the AEAD tag.
const REGISTERED_LEN: usize = 1 + ADDR_LEN + 2;
const PAIRED_LEN: usize = 1 + 2 * ADDR_LEN + TOKEN_LEN + 1 + MAX_CANDIDATES * ADDR_LEN;
/// The longest sealed answer, on the wire.
pub const MAX_SEALED_LEN: usize = 5 + 8 + 8 + 1 + KEYED_LEN + PAIRED_LEN + TAG_LEN;

// A pairing's two answers (both still carrying the key agreement) fit in one JOIN.
const _: () = assert!(2 * MAX_SEALED_LEN <= REQUEST_LEN);

/// Whether `datagram` is meant as a rendezvous message (it may still be
/// malformed).
pub fn is_rendezvous(datagram: &[u8]) -> bool {
    datagram.starts_with(&MAGIC)
}

impl Request {
    /// The request's bytes, padded to [`REQUEST_LEN`].
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REQUEST_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(REQUEST | if self.register { 0 } else { 0x80 });
        out.extend_from_slice(&self.handle);
        out.extend_from_slice(&self.cookie);
        out.extend_from_slice(&self.nonce.to_be_bytes());
        out.push(self.flags);
        out.extend_from_slice(&self.hello);
        put_addrs(&mut out, &self.candidates);
        debug_assert_eq!(out.len(), PROOF_AT);
        out.extend_from_slice(&self.proof);
        out.resize(REQUEST_LEN, 0);
        out
    }
}

impl Answer {
    /// The plaintext of a sealed answer.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PAIRED_LEN);
        match self {
            Answer::Registered {
                reflexive,
                lifetime_s,
            } => {
                out.push(REGISTERED);
                put_addr(&mut out, Some(*reflexive));
                out.extend_from_slice(&lifetime_s.to_be_bytes());
            }
            Answer::Paired {
                reflexive,
                peer,
                token,
                candidates,
            } => {
                out.push(PAIRED);
                put_addr(&mut out, Some(*reflexive));
                put_addr(&mut out, *peer);
                out.extend_from_slice(token);
                put_addrs(&mut out, candidates);
            }
        }
        out
    }

    /// The answer in an opened body, if well-formed.
    pub fn decode(plain: &[u8]) -> Option<Answer> {
        let (&kind, body) = plain.split_first()?;
        let mut r = Reader(body);
        let a = match kind {
            REGISTERED => Answer::Registered {
                reflexive: r.addr()??,
                lifetime_s: u16::from_be_bytes(r.array()?),
            },
            PAIRED => Answer::Paired {
                reflexive: r.addr()??,
                peer: r.addr()?,
                token: r.array()?,
                candidates: r.addrs()?,
            },
            _ => return None,
        };
        r.0.is_empty().then_some(a)
    }
}

impl Sealed {
    /// The bytes the AEAD authenticates besides the body: everything before it.
    pub fn header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + 8 + 8 + 1 + KEYED_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(SEALED);
        out.extend_from_slice(&self.echo.to_be_bytes());
        out.extend_from_slice(&self.counter.to_be_bytes());
        match &self.keyed {
            Some(k) => {
                out.push(1);
                out.extend_from_slice(k);
            }
            None => out.push(0),
        }
        out
    }
}

impl Message {
    /// The message's bytes; requests are padded to [`REQUEST_LEN`].
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        match self {
            Message::Request(r) => return r.encode(),
            Message::Cookie { echo, cookie } => {
                out.extend_from_slice(&MAGIC);
                out.push(COOKIE);
                out.extend_from_slice(&echo.to_be_bytes());
                out.extend_from_slice(cookie);
            }
            Message::Refused { echo, why } => {
                out.extend_from_slice(&MAGIC);
                out.push(REFUSED);
                out.extend_from_slice(&echo.to_be_bytes());
                out.push(why.code());
            }
            Message::Sealed(s) => {
                out = s.header();
                out.extend_from_slice(&s.body);
            }
            Message::Punch { nonce, answer, mac } => {
                out.extend_from_slice(&MAGIC);
                out.push(PUNCH);
                out.extend_from_slice(&nonce.to_be_bytes());
                out.push(u8::from(*answer));
                out.extend_from_slice(mac);
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
            REQUEST | 0x81 => {
                // Requests must be padded, or they could amplify.
                if datagram.len() != REQUEST_LEN {
                    return None;
                }
                let m = Message::Request(Request {
                    register: kind == REQUEST,
                    handle: r.array()?,
                    cookie: r.array()?,
                    nonce: u64::from_be_bytes(r.array()?),
                    flags: r.array::<1>()?[0],
                    hello: r.array()?,
                    candidates: r.addrs()?,
                    proof: r.array()?,
                });
                return Some(m);
            }
            COOKIE => Message::Cookie {
                echo: u64::from_be_bytes(r.array()?),
                cookie: r.array()?,
            },
            REFUSED => Message::Refused {
                echo: u64::from_be_bytes(r.array()?),
                why: Refusal::from_code(r.array::<1>()?[0])?,
            },
            SEALED => {
                let echo = u64::from_be_bytes(r.array()?);
                let counter = u64::from_be_bytes(r.array()?);
                let keyed = match r.array::<1>()?[0] {
                    0 => None,
                    1 => Some(r.array()?),
                    _ => return None,
                };
                let body = std::mem::take(&mut r.0);
                if !(REGISTERED_LEN + TAG_LEN..=PAIRED_LEN + TAG_LEN).contains(&body.len()) {
                    return None;
                }
                return Some(Message::Sealed(Sealed {
                    echo,
                    counter,
                    keyed,
                    body: body.to_vec(),
                }));
            }
            PUNCH => Message::Punch {
                nonce: u64::from_be_bytes(r.array()?),
                answer: match r.array::<1>()?[0] {
                    0 => false,
                    1 => true,
                    _ => return None,
                },
                mac: r.array()?,
            },
            _ => return None,
        };
        r.0.is_empty().then_some(m)
    }
}

/// An address, or all zeros for none.
fn put_addr(out: &mut Vec<u8>, a: Option<SocketAddr>) {
    let mut ip = [0u8; 16];
    let Some(a) = a else {
        out.extend_from_slice(&[0; ADDR_LEN]);
        return;
    };
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

/// Up to [`MAX_CANDIDATES`] addresses: a count, then that many slots,
/// the unused ones zero (a fixed length).
fn put_addrs(out: &mut Vec<u8>, addrs: &[SocketAddr]) {
    let n = addrs.len().min(MAX_CANDIDATES);
    out.push(n as u8);
    for i in 0..MAX_CANDIDATES {
        put_addr(out, addrs.get(i).filter(|_| i < n).copied());
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }

    /// The addresses [`put_addrs`] wrote; `None` if malformed.
    fn addrs(&mut self) -> Option<Vec<SocketAddr>> {
        let n = usize::from(self.array::<1>()?[0]);
        if n > MAX_CANDIDATES {
            return None;
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..MAX_CANDIDATES {
            match (self.addr()?, i < n) {
                (Some(a), true) => out.push(a),
                (None, false) => {}
                _ => return None,
            }
        }
        Some(out)
    }

    /// `None` if malformed, `Some(None)` for the all-zero "none".
    fn addr(&mut self) -> Option<Option<SocketAddr>> {
        let raw: [u8; ADDR_LEN] = self.array()?;
        let port = u16::from_be_bytes([raw[17], raw[18]]);
        let ip = match raw[0] {
            0 if raw == [0; ADDR_LEN] => return Some(None),
            4 => IpAddr::V4(Ipv4Addr::new(raw[1], raw[2], raw[3], raw[4])),
            6 => IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&raw[1..17]).expect("16 bytes"),
            )),
            _ => return None,
        };
        Some(Some(SocketAddr::new(ip, port)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Message> {
        vec![
            Message::Request(Request {
                register: true,
                handle: [1; 32],
                cookie: [2; COOKIE_LEN],
                nonce: 7,
                flags: flags::NO_DIRECT,
                hello: [4; HELLO_LEN],
                candidates: Vec::new(),
                proof: [5; MAC_LEN],
            }),
            Message::Request(Request {
                register: false,
                handle: [3; 32],
                cookie: [0; COOKIE_LEN],
                nonce: 8,
                flags: 0,
                hello: [6; HELLO_LEN],
                candidates: vec![
                    "192.168.1.20:4000".parse().unwrap(),
                    "[2001:db8::20]:4000".parse().unwrap(),
                ],
                proof: [0; MAC_LEN],
            }),
            Message::Cookie {
                echo: 9,
                cookie: [9; COOKIE_LEN],
            },
            Message::Refused {
                echo: 1,
                why: Refusal::Busy,
            },
            Message::Sealed(Sealed {
                echo: 2,
                counter: 3,
                keyed: Some([8; KEYED_LEN]),
                body: vec![1; PAIRED_LEN + TAG_LEN],
            }),
            Message::Sealed(Sealed {
                echo: 2,
                counter: 4,
                keyed: None,
                body: vec![1; REGISTERED_LEN + TAG_LEN],
            }),
            Message::Punch {
                nonce: 5,
                answer: true,
                mac: [5; MAC_LEN],
            },
        ]
    }

    #[test]
    fn every_message_round_trips_and_fits_in_a_request() {
        for m in all() {
            let bytes = m.encode();
            assert!(is_rendezvous(&bytes));
            assert_eq!(Message::decode(&bytes), Some(m.clone()), "{m:?}");
            assert!(bytes.len() <= REQUEST_LEN);
        }
        assert_eq!(all()[4].encode().len(), MAX_SEALED_LEN);
    }

    #[test]
    fn answers_round_trip_and_a_withheld_address_is_none() {
        let a: SocketAddr = "198.18.0.1:4000".parse().unwrap();
        let b: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
        for ans in [
            Answer::Registered {
                reflexive: b,
                lifetime_s: 30,
            },
            Answer::Paired {
                reflexive: a,
                peer: Some(b),
                token: [7; TOKEN_LEN],
                candidates: vec![a, b, a, b],
            },
            Answer::Paired {
                reflexive: a,
                peer: None,
                token: [7; TOKEN_LEN],
                candidates: Vec::new(),
            },
        ] {
            assert_eq!(Answer::decode(&ans.encode()), Some(ans.clone()));
        }
        // A count past the bound, or an address beyond the count, is malformed.
        let mut too_many = Answer::Paired {
            reflexive: a,
            peer: None,
            token: [7; TOKEN_LEN],
            candidates: vec![a],
        }
        .encode();
        let count_at = 1 + 2 * ADDR_LEN + TOKEN_LEN;
        too_many[count_at] = MAX_CANDIDATES as u8 + 1;
        assert_eq!(Answer::decode(&too_many), None);
        too_many[count_at] = 0;
        assert_eq!(Answer::decode(&too_many), None);
    }

    #[test]
    fn truncated_unpadded_or_unknown_messages_are_not_messages() {
        for m in all() {
            let bytes = m.encode();
            let shortest = match &m {
                // A shorter body is another answer's length.
                Message::Sealed(s) => s.header().len() + REGISTERED_LEN + TAG_LEN,
                _ => bytes.len(),
            };
            for cut in 0..shortest {
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
