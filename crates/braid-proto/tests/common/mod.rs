//! Two sessions wired back to back in virtual time.
#![allow(dead_code)]

use braid_proto::{Datagram, Event, Instant, Keypair, PathId, Security, Session, SessionConfig};
use std::collections::BTreeMap;
use std::time::Duration;

pub const MS: Duration = Duration::from_millis(1);

/// Decides, from (to_server, path, datagram), whether the network loses a datagram.
pub type DropRule = Box<dyn FnMut(bool, PathId, &[u8]) -> bool>;
/// Rewrites a datagram on its way, as an on-path attacker may.
pub type TamperRule = Box<dyn FnMut(bool, PathId, &mut [u8])>;
/// Extra delay of a datagram beyond the link's latency, from (to_server,
/// path, datagram): datagrams delayed differently arrive reordered.
pub type JitterRule = Box<dyn FnMut(bool, PathId, &[u8]) -> Duration>;

/// Client and server joined by per-path fixed-latency links; `drop` decides
/// which datagrams the network loses.
pub struct Pair {
    pub now: Instant,
    pub client: Session,
    pub server: Option<Session>,
    pub server_cfg: SessionConfig,
    pub latency: Duration,
    /// (arrival, seq) -> (to_server, path, bytes)
    pub in_flight: BTreeMap<(Instant, u64), (bool, PathId, Vec<u8>)>,
    pub seq: u64,
    pub drop: DropRule,
    pub tamper: TamperRule,
    pub jitter: JitterRule,
    pub client_events: Vec<Event>,
    pub server_events: Vec<Event>,
    pub received: Vec<u8>,
    pub received_by_client: Vec<u8>,
    pub server_reads: bool,
}

impl Pair {
    /// Configurations that choose no protection get a sealed pair: the
    /// server's key pinned by the client.
    pub fn new(
        mut client_cfg: SessionConfig,
        mut server_cfg: SessionConfig,
        latency: Duration,
    ) -> Pair {
        let server_key = Keypair::generate([9; 32]);
        if client_cfg.security == Security::default() {
            client_cfg.security = Security::pinned(server_key.public());
        }
        if server_cfg.security == Security::default() {
            server_cfg.security = Security::server(server_key);
        }
        Pair {
            now: Instant::ZERO,
            client: Session::connect(client_cfg, 42, Instant::ZERO, [1; 32]).unwrap(),
            server: None,
            server_cfg,
            latency,
            in_flight: BTreeMap::new(),
            seq: 0,
            drop: Box::new(|_, _, _| false),
            tamper: Box::new(|_, _, _| {}),
            jitter: Box::new(|_, _, _| Duration::ZERO),
            client_events: Vec::new(),
            server_events: Vec::new(),
            received: Vec::new(),
            received_by_client: Vec::new(),
            server_reads: true,
        }
    }

    pub fn flush(&mut self) {
        let mut buf = Vec::new();
        let now = self.now;
        for to_server in [true, false] {
            let s = if to_server {
                Some(&mut self.client)
            } else {
                self.server.as_mut()
            };
            let Some(s) = s else { continue };
            while let Some(t) = s.poll_transmit(now, 1, &mut buf) {
                if !(self.drop)(to_server, t.path, &buf[..t.size]) {
                    let mut datagram = buf[..t.size].to_vec();
                    (self.tamper)(to_server, t.path, &mut datagram);
                    let extra = (self.jitter)(to_server, t.path, &datagram);
                    self.seq += 1;
                    self.in_flight.insert(
                        (now + self.latency + extra, self.seq),
                        (to_server, t.path, datagram),
                    );
                }
            }
            while let Some(e) = s.poll_event() {
                if to_server {
                    &mut self.client_events
                } else {
                    &mut self.server_events
                }
                .push(e);
            }
            if to_server {
                s.read_with(now, |d| self.received_by_client.extend_from_slice(d));
            } else if self.server_reads {
                s.read_with(now, |d| self.received.extend_from_slice(d));
            }
        }
        if let Some(s) = self.server.as_mut() {
            while let Some(e) = s.poll_event() {
                self.server_events.push(e);
            }
        }
    }

    /// Advances to the next arrival or timer; false when nothing is left to do.
    pub fn step(&mut self) -> bool {
        self.flush();
        let timers = [
            self.client.poll_timeout(),
            self.server.as_ref().and_then(|s| s.poll_timeout()),
        ];
        let next_timer = timers.into_iter().flatten().min();
        let next_packet = self.in_flight.keys().next().map(|k| k.0);
        let Some(next) = [next_timer, next_packet].into_iter().flatten().min() else {
            return false;
        };
        self.now = self.now.max(next);
        if next_packet == Some(next) {
            let (_, (to_server, path, mut bytes)) = self.in_flight.pop_first().unwrap();
            if to_server {
                match self.server.as_mut() {
                    Some(s) => {
                        s.handle_datagram(self.now, Datagram::new(self.now, path, &mut bytes));
                    }
                    None => {
                        let cfg = self.server_cfg.clone();
                        if let Ok(s) = Session::accept(cfg, self.now, path, &bytes, [2; 32]) {
                            self.server = Some(s);
                        }
                    }
                }
            } else {
                self.client
                    .handle_datagram(self.now, Datagram::new(self.now, path, &mut bytes));
            }
        } else {
            self.client.handle_timeout(self.now);
            if let Some(s) = self.server.as_mut() {
                s.handle_timeout(self.now);
            }
        }
        true
    }

    pub fn drive_until(&mut self, limit: Duration, mut done: impl FnMut(&Pair) -> bool) {
        let end = Instant::ZERO + limit;
        while !done(self) && self.now < end {
            if !self.step() {
                break;
            }
        }
        self.flush();
    }

    pub fn server(&self) -> &Session {
        self.server.as_ref().expect("server exists")
    }
}

/// An unprotected pair whose server has received and read "hello".
pub fn greeted_pair() -> Pair {
    let mut pair = Pair::new(
        SessionConfig::insecure(),
        SessionConfig::insecure(),
        10 * MS,
    );
    pair.client.write(b"hello");
    pair.drive_until(Duration::from_secs(1), |p| p.received == b"hello");
    assert_eq!(pair.received, b"hello");
    pair
}
