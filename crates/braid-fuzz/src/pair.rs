//! A client and a server in virtual time, moving a stream while an
//! attacker who sees every datagram injects its own.

use crate::configs;
use braid_proto::wire::Header;
use braid_proto::{Datagram, Instant, PathId, Session, SessionConfig};
use std::collections::BTreeMap;
use std::time::Duration;

const LATENCY: Duration = Duration::from_millis(5);
const PAYLOAD: usize = 64 << 10;
/// Far more steps than an undisturbed transfer takes.
const MAX_STEPS: usize = 200_000;

struct Net {
    now: Instant,
    /// (arrival, seq) -> (to_server, path, datagram)
    in_flight: BTreeMap<(Instant, u64), (bool, PathId, Vec<u8>)>,
    seq: u64,
    /// The last honest datagram each way, as an on-path attacker sees it.
    last_to_server: Vec<u8>,
    last_to_client: Vec<u8>,
    buf: Vec<u8>,
}

impl Net {
    /// Sends everything `s` has to send now (a bounded amount), each
    /// datagram remembered as the last honest one its way.
    fn send_all(&mut self, s: &mut Session, to_server: bool) {
        for _ in 0..10_000 {
            self.buf.clear();
            let Some(t) = s.poll_transmit(self.now, 1, &mut self.buf) else {
                break;
            };
            let d = self.buf[..t.size].to_vec();
            if to_server {
                self.last_to_server = d.clone();
            } else {
                self.last_to_client = d.clone();
            }
            self.send(to_server, t.path, d);
        }
    }

    fn send(&mut self, to_server: bool, path: PathId, d: Vec<u8>) {
        self.seq += 1;
        self.in_flight
            .insert((self.now + LATENCY, self.seq), (to_server, path, d));
    }
}

/// What one piece of the input makes the attacker send.
fn forge(net: &Net, piece: &[u8]) -> Option<(bool, Vec<u8>)> {
    let (&how, body) = piece.split_first()?;
    let to_server = how & 0x80 == 0;
    let seen = if to_server {
        &net.last_to_server
    } else {
        &net.last_to_client
    };
    let d = match how & 0x3 {
        0 => body.to_vec(),
        // A genuine header (session, path, a later packet number), any frames.
        1 | 2 if seen.len() >= braid_proto::wire::HEADER_LEN => {
            let (mut h, _) = Header::decode(seen).ok()?;
            h.packet_number += u64::from(how >> 2 & 0xf);
            let mut d = Vec::new();
            h.encode(&mut d);
            d.extend_from_slice(body);
            d
        }
        // A genuine datagram with bits flipped, or replayed as is.
        _ if !seen.is_empty() => {
            let mut d = seen.clone();
            for (i, &b) in body.iter().enumerate() {
                let at = (usize::from(b) * 31 + i) % d.len();
                d[at] ^= body.get(i + 1).copied().unwrap_or(1);
            }
            d
        }
        _ => return None,
    };
    Some((to_server, d))
}

/// A transfer of 64 KiB each way's worth of steps with attacker datagrams
/// from `data` interleaved (pieces separated by 0xff; the first byte picks
/// the protection mode). Sealed, the transfer must end exactly as without
/// the attacker; unprotected, it only must not panic or spin.
pub fn session_pair(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (server_cfg, client_cfg) = configs(mode);
    let sealed = client_cfg.security.is_sealed();
    let mut attacks = rest.split(|&b| b == 0xff).filter(|p| !p.is_empty());
    let content: Vec<u8> = (0..PAYLOAD).map(|i| (i * 13 % 251) as u8).collect();
    let mut pair = Pair::new(client_cfg, server_cfg, &content);
    for _ in 0..MAX_STEPS {
        pair.transmit();
        if let Some(piece) = attacks.next() {
            if let Some((to_server, d)) = forge(&pair.net, piece) {
                pair.net.send(to_server, PathId(0), d);
            }
        }
        let failed = pair.failed();
        if pair.done() || (failed && !sealed) {
            break;
        }
        assert!(
            !failed,
            "an attacker without the keys broke the session: {:?} / {:?}",
            pair.client.error(),
            pair.server.as_ref().and_then(|s| s.error())
        );
        if !pair.advance() {
            break;
        }
    }
    if sealed {
        assert!(
            pair.received == content,
            "the stream differs: {} of {} bytes",
            pair.received.len(),
            content.len()
        );
        assert!(
            pair.client.is_closed(),
            "the transfer did not end: {:?}",
            pair.client.error()
        );
    }
}

/// The client sending `content`, the server it makes, and the network
/// between them.
struct Pair {
    net: Net,
    client: Session,
    /// Made by the first datagram that reaches the server's side and opens a session.
    server: Option<Session>,
    server_cfg: SessionConfig,
    /// What the server read.
    received: Vec<u8>,
}

impl Pair {
    fn new(client_cfg: SessionConfig, server_cfg: SessionConfig, content: &[u8]) -> Pair {
        let net = Net {
            now: Instant::ZERO,
            in_flight: BTreeMap::new(),
            seq: 0,
            last_to_server: Vec::new(),
            last_to_client: Vec::new(),
            buf: Vec::new(),
        };
        let mut client = Session::connect(client_cfg, 42, net.now, [3; 32]).unwrap();
        client.write(content);
        client.finish();
        Pair {
            net,
            client,
            server: None,
            server_cfg,
            received: Vec::new(),
        }
    }

    /// Everything each side has to send now; the server reads what
    /// arrived and ends its direction once the client's has ended.
    fn transmit(&mut self) {
        self.net.send_all(&mut self.client, true);
        if let Some(s) = self.server.as_mut() {
            self.net.send_all(s, false);
            s.read_with(self.net.now, |c| self.received.extend_from_slice(c));
            if s.is_recv_finished() && !s.is_send_finished() {
                s.finish();
            }
        }
    }

    fn done(&self) -> bool {
        self.client.is_closed() && self.server.as_ref().is_some_and(|s| s.is_closed())
    }

    fn failed(&self) -> bool {
        self.client.error().is_some() || self.server.as_ref().is_some_and(|s| s.error().is_some())
    }

    /// Moves on to the next arrival or timer and serves it; false when
    /// neither is left.
    fn advance(&mut self) -> bool {
        let timers = [
            self.client.poll_timeout(),
            self.server.as_ref().and_then(|s| s.poll_timeout()),
        ];
        let next_timer = timers.into_iter().flatten().min();
        let next_packet = self.net.in_flight.keys().next().map(|k| k.0);
        let Some(next) = [next_timer, next_packet].into_iter().flatten().min() else {
            return false;
        };
        let now = self.net.now.max(next);
        self.net.now = now;
        if next_packet != Some(next) {
            self.client.handle_timeout(now);
            if let Some(s) = self.server.as_mut() {
                s.handle_timeout(now);
            }
            return true;
        }
        let (_, (to_server, path, mut d)) = self.net.in_flight.pop_first().unwrap();
        if !to_server {
            self.client
                .handle_datagram(now, Datagram::new(now, path, &mut d));
        } else if let Some(s) = self.server.as_mut() {
            s.handle_datagram(now, Datagram::new(now, path, &mut d));
        } else {
            self.server = Session::accept(self.server_cfg.clone(), now, path, &d, [4; 32]).ok();
        }
        true
    }
}
