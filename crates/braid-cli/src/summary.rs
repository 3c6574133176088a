//! The end of one transfer as one side saw it ([`Report`]), told to a
//! person: the error first and once, then only the figures that side
//! measured, each connection by its address, in human units.

use crate::failure::{Failure, Kind, Mode};
use crate::side::Side;
use braid::text;
use braid_proto::{PathId, PathState, PathStats, SessionStats};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// One connection of the session at its end.
#[derive(Debug, Clone)]
pub struct Connection {
    pub id: PathId,
    /// Our socket's address, when known.
    pub local: Option<SocketAddr>,
    /// The peer's address (`None`: never heard from).
    pub remote: Option<SocketAddr>,
    /// When its first authentic datagram arrived.
    pub answered_at: Option<std::time::Instant>,
    pub stats: PathStats,
}

impl Connection {
    /// The sender's figures show a connection that never brought anything
    /// back: a dead `--to` beside a live one.
    pub fn answered(&self) -> bool {
        self.stats.packets_received > 0
    }

    /// Whether it carried any of the transfer: stream bytes acknowledged
    /// whose latest transmission went on it (sender), or stream bytes that
    /// arrived on it (receiver).
    pub fn carried(&self, side: Side) -> bool {
        match side {
            Side::Send => self.stats.stream_bytes_acked > 0,
            Side::Recv => self.stats.stream_bytes_received > 0,
        }
    }

    /// Why a connection that carried nothing did not: it never answered
    /// or was closed (dead), or it was there and the transfer went on the
    /// others (`None`).
    pub fn dead(&self, side: Side) -> Option<&'static str> {
        if self.carried(side) {
            None
        } else if side == Side::Send && !self.answered() {
            Some("no answer")
        } else if self.stats.state == PathState::Closed {
            Some("closed")
        } else {
            None
        }
    }

    /// "127.0.0.1:7000", or "path 1" where the address is unknown.
    pub fn label(&self) -> String {
        self.remote
            .map_or_else(|| format!("path {}", self.id), |a| a.to_string())
    }

    /// [`Connection::label`], with our address first ("127.0.0.1:5001 ->
    /// 127.0.0.1:7000") when another of `all` goes to the same peer
    /// address: two `--bind`s to one `--to` are told apart.
    pub fn label_among(&self, all: &[Connection]) -> String {
        let shared = self.remote.is_some()
            && all
                .iter()
                .any(|o| o.id != self.id && o.remote == self.remote);
        match (shared, self.local) {
            (true, Some(local)) => format!("{local} -> {}", self.label()),
            _ => self.label(),
        }
    }
}

/// Where a receiver put the content.
#[derive(Debug, Clone)]
pub enum Written {
    File(PathBuf),
    Stdout,
}

/// Everything one side knows at the end of a transfer.
#[derive(Debug, Clone)]
pub struct Report {
    pub side: Side,
    pub mode: Option<Mode>,
    pub cc: Option<String>,
    /// What was sent: the file or folder's name, or the first and how
    /// many more.
    pub file: Option<String>,
    /// How many files the transfer carries (`None` until known).
    pub files: Option<u64>,
    /// BLAKE3 of the list of what was sent (names, sizes, permissions,
    /// times), as both ends have it.
    pub manifest_hash: Option<blake3::Hash>,
    /// Content bytes an earlier, interrupted transfer had brought: counted
    /// in `bytes`, not in the goodput.
    pub resumed: u64,
    pub written: Option<Written>,
    /// The size the sender announced (`None` for stdin).
    pub size: Option<u64>,
    /// Content bytes verified; on failure, acknowledged (sender) or
    /// received (receiver) so far.
    pub bytes: u64,
    pub hash: Option<blake3::Hash>,
    pub peer: Option<SocketAddr>,
    /// `None` until a session exists.
    pub session: Option<SessionStats>,
    pub connections: Vec<Connection>,
    pub started: SystemTime,
    pub duration: Duration,
    pub failure: Option<Failure>,
    /// How the two ends met, when they met at relays.
    pub reach: Option<braid::rendezvous::Reach>,
}

impl Report {
    /// What the report says of the transfer's manifest.
    pub fn describe(&mut self, m: &crate::manifest::Manifest) {
        self.file = Some(m.label());
        self.size = m.size();
        self.files = Some(m.files().count() as u64);
        self.manifest_hash = Some(m.hash());
    }

    /// What the report says of a transfer that completed.
    pub fn completed(&mut self, o: &crate::transfer::Outcome) {
        self.bytes = o.bytes;
        self.resumed = o.resumed;
        self.hash = Some(o.hash);
        self.duration = o.elapsed;
    }

    pub fn new(side: Side) -> Report {
        Report {
            side,
            mode: None,
            cc: None,
            file: None,
            files: None,
            manifest_hash: None,
            resumed: 0,
            written: None,
            size: None,
            bytes: 0,
            hash: None,
            peer: None,
            session: None,
            connections: Vec::new(),
            started: SystemTime::now(),
            duration: Duration::ZERO,
            failure: None,
            reach: None,
        }
    }

    /// Whether connection `c` runs through a rendezvous relay.
    pub fn via_relay(&self, c: &Connection) -> bool {
        let reach = self.reach.as_ref();
        c.remote
            .is_some_and(|r| reach.is_some_and(|m| m.is_relay(r)))
    }

    /// The first connection that is not a relay's, and how long after the
    /// first pairing it was first answered: the direct path punched open.
    pub fn direct_path(&self) -> Option<(&Connection, Option<Duration>)> {
        let paired = self.reach.as_ref()?.first_paired()?;
        let c = self
            .connections
            .iter()
            .filter(|c| !self.via_relay(c) && c.answered_at.is_some())
            .min_by_key(|c| c.answered_at)?;
        Some((
            c,
            c.answered_at.map(|a| a.saturating_duration_since(paired)),
        ))
    }

    /// Takes the session's figures and each connection's addresses.
    pub fn observe(&mut self, session: &braid::Session) {
        let stats = session.stats();
        let routes = session.paths();
        self.connections = stats
            .paths
            .iter()
            .map(|&(id, s)| {
                let route = routes.iter().find(|r| r.id == id);
                let remote = route.and_then(|r| r.remote);
                Connection {
                    id,
                    local: route
                        .and_then(|r| r.local)
                        .map(|l| canonical(concrete(l, remote))),
                    remote: remote.map(canonical),
                    answered_at: route.and_then(|r| r.answered_at),
                    stats: s,
                }
            })
            .collect();
        self.peer = self.peer.or_else(|| {
            let live = self.connections.iter().find(|c| c.answered());
            live.or(self.connections.first()).and_then(|c| c.remote)
        });
        self.cc = Some(session.config().cc.name().to_owned());
        self.session = Some(stats);
    }

    pub fn verified(&self) -> bool {
        self.failure.is_none() && self.hash.is_some()
    }

    /// Goodput in bit/s of what this run moved; zero for an empty interval.
    pub fn goodput_bps(&self) -> f64 {
        let s = self.duration.as_secs_f64();
        if s > 0.0 {
            self.bytes.saturating_sub(self.resumed) as f64 * 8.0 / s
        } else {
            0.0
        }
    }

    /// Each connection's share of the transfer: of the stream bytes
    /// acknowledged (sender) or arrived (receiver; copies included).
    pub fn shares(&self) -> Vec<f64> {
        let part = |c: &Connection| match self.side {
            Side::Send => c.stats.stream_bytes_acked,
            Side::Recv => c.stats.stream_bytes_received,
        };
        let total: u64 = self.connections.iter().map(part).sum();
        self.connections
            .iter()
            .map(|c| {
                if total > 0 {
                    part(c) as f64 / total as f64
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The exit status: 0 verified, else the failure's.
    pub fn exit_code(&self) -> ExitCode {
        match &self.failure {
            None => ExitCode::SUCCESS,
            Some(f) => ExitCode::from(f.kind.exit_status()),
        }
    }

    /// The human summary: nothing when a failure left nothing to show.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        if self.connections.is_empty() {
            return out;
        }
        self.headline(&mut out);
        let shares = self.shares();
        // Those that carried the transfer, then those that did not.
        for carried in [true, false] {
            for (c, &share) in self.connections.iter().zip(&shares) {
                if c.carried(self.side) != carried {
                    continue;
                }
                let via = if self.via_relay(c) { " (relay)" } else { "" };
                let line = match carried {
                    true => self.connection_line(c, share),
                    false => self.idle_line(c),
                };
                let label = c.label_among(&self.connections);
                let _ = writeln!(out, "  {label}{via}: {line}");
            }
        }
        if self.side == Side::Send && self.connections.iter().any(|c| c.carried(Side::Send)) {
            out.push_str(LEGEND);
        }
        self.reach_line(&mut out);
        if let Some(s) = &self.session {
            self.totals(&mut out, s);
        }
        if self.failure.is_none() {
            let place = match &self.written {
                Some(Written::File(p)) => {
                    format!(" -> {}", braid::text::escape(&p.display().to_string()))
                }
                Some(Written::Stdout) => " -> stdout".to_owned(),
                None => String::new(),
            };
            match self.hash {
                Some(h) => {
                    let _ = writeln!(out, "verified: BLAKE3 {}{place}", h.to_hex());
                }
                None => {
                    let _ = writeln!(out, "verified (BLAKE3){place}");
                }
            }
        }
        out
    }

    fn headline(&self, out: &mut String) {
        let verb = match self.side {
            Side::Send => "sent",
            Side::Recv => "received",
        };
        let count = match self.files {
            Some(n) if n != 1 => format!(" ({n} files)"),
            _ => String::new(),
        };
        let file = self
            .file
            .as_deref()
            .map(|f| format!(" {}{count}", braid::text::escape(f)))
            .unwrap_or_default();
        let resumed = if self.resumed > 0 {
            format!(", {} of it there before", text::size(self.resumed))
        } else {
            String::new()
        };
        let amount = match (self.failure.is_some(), self.size) {
            (true, Some(size)) => {
                format!("{} of {}", text::size(self.bytes), text::size(size))
            }
            _ => text::size(self.bytes),
        };
        let amount = amount + &resumed;
        let carried = |c: &&Connection| c.carried(self.side);
        let n = self.connections.iter().filter(carried).count();
        let dead = self
            .connections
            .iter()
            .filter(|c| c.dead(self.side).is_some())
            .count();
        let unused = self.connections.len() - n - dead;
        let mut cc = self
            .cc
            .as_deref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        for (count, what) in [(dead, "dead"), (unused, "unused")] {
            if count > 0 {
                let _ = write!(cc, ", {count} {what}");
            }
        }
        let _ = writeln!(
            out,
            "{verb}{file}: {amount} in {}{}, {} over {n} connection{}{cc}",
            text::duration(self.duration),
            if self.failure.is_some() {
                " before the failure"
            } else {
                ""
            },
            text::rate(self.goodput_bps()),
            if n == 1 { "" } else { "s" },
        );
    }

    /// A connection that carried nothing: dead, and why, or unused.
    fn idle_line(&self, c: &Connection) -> String {
        let mut line = match c.dead(self.side) {
            Some(why) => format!("dead ({why}), carried nothing"),
            None => "carried nothing (the others took the transfer)".to_owned(),
        };
        if self.side == Side::Send && c.stats.data_packets_sent > 0 {
            let n = c.stats.data_packets_sent;
            let _ = write!(line, "; {n} data packet{} sent on it", plural(n));
        }
        line
    }

    /// The figures this side measured on one connection that carried some
    /// of the transfer.
    fn connection_line(&self, c: &Connection, share: f64) -> String {
        let s = &c.stats;
        let mut line = format!(
            "{} ({:.0} %)",
            text::rate(self.goodput_bps() * share),
            share * 100.0
        );
        match self.side {
            Side::Send => {
                line.push_str(&rtt_figure(s));
                let lost = s.lost_data_packets;
                let _ = write!(
                    line,
                    ", {} data packets, {lost} lost ({} %)",
                    s.data_packets_sent,
                    text::sig3(percent(lost, s.data_packets_sent))
                );
                if s.retransmitted > 0 {
                    let _ = write!(line, ", {} resends sent on it", s.retransmitted);
                }
                if s.timeouts > 0 {
                    let _ = write!(line, ", {} timeouts", s.timeouts);
                }
            }
            Side::Recv => {
                let _ = write!(line, ", {} packets", s.packets_received);
            }
        }
        if s.state == PathState::Closed {
            line.push_str(", closed");
        }
        line
    }

    /// With relays: whether a direct path opened, and when.
    fn reach_line(&self, out: &mut String) {
        let Some(reach) = &self.reach else {
            return;
        };
        match self.direct_path() {
            Some((c, Some(after))) => {
                let _ = writeln!(
                    out,
                    "  direct path to {} open {} after the pairing",
                    c.label_among(&self.connections),
                    text::duration(after)
                );
            }
            _ if reach.relays.iter().any(|r| r.peer.is_some()) => {
                let _ = writeln!(
                    out,
                    "  no direct path (the NATs or firewalls between did not let one through): relays only"
                );
            }
            _ => {}
        }
    }

    fn totals(&self, out: &mut String, s: &SessionStats) {
        if self.side == Side::Send {
            if s.retransmitted > 0 || s.timeouts > 0 {
                let pct = percent(s.retransmitted, s.segments_sent);
                let _ = writeln!(
                    out,
                    "  retransmitted {} of {} segments ({} %), {} needlessly; {} timeouts",
                    s.retransmitted,
                    s.segments_sent,
                    text::sig3(pct),
                    s.spurious_retransmits,
                    s.timeouts
                );
            }
            if s.ecn_marks > 0 {
                let _ = writeln!(out, "  {} congestion marks (ECN)", s.ecn_marks);
            }
        } else if s.duplicate_packets > 0 {
            let _ = writeln!(out, "  {} packets arrived twice", s.duplicate_packets);
        }
        if s.forged_dropped > 0 {
            let n = s.forged_dropped;
            let _ = writeln!(
                out,
                "  dropped {n} datagram{} that did not authenticate (forged, corrupted, or a wrong key or code)",
                if n == 1 { "" } else { "s" }
            );
        }
    }
}

/// What the sender's figures per connection mean, below them.
const LEGEND: &str = "  (RTT: the connection's own round trips, min/avg/max; lost: its data \
packets lost on it; resends: retransmissions it carried, of any connection's losses)\n";

/// ", RTT min/avg/max ms" of the connection's own round trips; without
/// any (its ACKs all came back first as copies on a faster connection),
/// the controller's samples, said to be out on it and back on another.
fn rtt_figure(s: &PathStats) -> String {
    let ms = |a, b, c| format!("{}/{}/{} ms", text::ms(a), text::ms(b), text::ms(c));
    if s.own_rtt_samples > 0 {
        format!(", RTT {}", ms(s.own_rtt_min, s.own_rtt_avg, s.own_rtt_max))
    } else if s.rtt_samples > 0 {
        let rtt = ms(s.rtt_min, s.rtt_avg, s.rtt_max);
        format!(", RTT {rtt} out on it and back on a faster connection")
    } else {
        String::new()
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        part as f64 * 100.0 / whole as f64
    } else {
        0.0
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The demo's view of one side's end; shown as a [`Report`].
pub struct Ended {
    pub side: Side,
    pub cc: String,
    pub stats: SessionStats,
    /// Unused by the summary; kept so the demo's construction stands.
    #[allow(dead_code)]
    pub segment_size: u16,
    /// Content bytes announced (or transferred, when unknown).
    pub bytes: u64,
    /// Content bytes that arrived verified.
    pub delivered: u64,
    pub verified: bool,
    pub duration_s: f64,
    pub error: Option<String>,
}

impl Ended {
    pub fn summary(&self) -> String {
        let mut r = Report::new(self.side);
        r.cc = Some(self.cc.clone());
        r.size = Some(self.bytes);
        r.bytes = self.delivered;
        r.duration = Duration::from_secs_f64(self.duration_s.max(0.0));
        r.connections = self
            .stats
            .paths
            .iter()
            .map(|&(id, stats)| Connection {
                id,
                local: None,
                remote: None,
                answered_at: None,
                stats,
            })
            .collect();
        r.session = Some(self.stats.clone());
        r.failure = match (&self.error, self.verified) {
            (Some(e), _) => Some(Failure::new(Kind::Failed, e.clone())),
            (None, false) => Some(Failure::new(Kind::Corrupted, "not verified")),
            (None, true) => None,
        };
        let mut out = String::new();
        if let Some(f) = &r.failure {
            let _ = writeln!(out, "error: {}", f.message);
        }
        out + &r.summary()
    }
}

/// An address as its owner knows it: a dual-stack socket sees an IPv4
/// peer as `::ffff:a.b.c.d`, which is `a.b.c.d`.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// `local` with the IP the system sends to `remote` from, where the socket
/// was bound to any address (the port is the socket's own).
fn concrete(local: SocketAddr, remote: Option<SocketAddr>) -> SocketAddr {
    let Some(remote) = remote.filter(|_| local.ip().is_unspecified()) else {
        return local;
    };
    let any = SocketAddr::new(local.ip(), 0);
    // A connected UDP socket sends nothing; it only asks for a route.
    std::net::UdpSocket::bind(any)
        .and_then(|s| s.connect(remote).and_then(|()| s.local_addr()))
        .map_or(local, |a| SocketAddr::new(a.ip(), local.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(sent: u64, received: u64, acked: u64) -> PathStats {
        let mut p = PathStats::default();
        p.data_packets_sent = sent;
        p.packets_received = received;
        p.stream_bytes_acked = acked;
        p.stream_bytes_received = acked;
        p
    }

    fn report(side: Side) -> Report {
        let mut r = Report::new(side);
        r.file = Some("data.bin".into());
        r.size = Some(30_000_000);
        r.bytes = 30_000_000;
        r.duration = Duration::from_nanos(3_000_745_159);
        r.cc = Some("bbr".into());
        r.hash = Some(blake3::hash(b"x"));
        r.connections = vec![
            Connection {
                id: PathId(0),
                local: None,
                remote: Some("127.0.0.1:7000".parse().unwrap()),
                answered_at: None,
                stats: path(20_000, 20_000, 30_000_100),
            },
            Connection {
                id: PathId(1),
                local: None,
                remote: Some("127.0.0.1:7999".parse().unwrap()),
                answered_at: None,
                stats: path(12, 0, 0),
            },
        ];
        r.session = Some(SessionStats::default());
        r
    }

    #[test]
    fn a_dead_connection_is_named_by_its_address() {
        let s = report(Side::Send).summary();
        assert!(
            s.starts_with(
                "sent data.bin: 30.0 MB in 3.00 s, 80.0 Mbit/s over 1 connection (bbr), 1 dead\n"
            ),
            "{s}"
        );
        assert!(s.contains("  127.0.0.1:7000: 80.0 Mbit/s (100 %)"), "{s}");
        assert!(
            s.contains(
                "  127.0.0.1:7999: dead (no answer), carried nothing; 12 data packets sent on it\n"
            ),
            "{s}"
        );
        assert!(s.contains("verified: BLAKE3 "), "{s}");
    }

    /// The dead one is listed after those that carried the transfer,
    /// whatever its id; one that answered and carried nothing is unused,
    /// and a receiver's connection counts by the bytes it brought.
    #[test]
    fn only_connections_that_carried_data_are_counted() {
        let mut r = report(Side::Send);
        r.connections.swap(0, 1);
        r.connections.push(Connection {
            id: PathId(2),
            local: None,
            remote: Some("127.0.0.1:7002".parse().unwrap()),
            answered_at: None,
            stats: path(0, 5, 0),
        });
        let s = r.summary();
        assert!(
            s.contains(" over 1 connection (bbr), 1 dead, 1 unused\n"),
            "{s}"
        );
        let live = s.find("127.0.0.1:7000:").unwrap();
        assert!(live < s.find("127.0.0.1:7999:").unwrap(), "{s}");
        assert!(
            s.contains("  127.0.0.1:7002: carried nothing (the others took the transfer)\n"),
            "{s}"
        );
        let mut r = report(Side::Recv);
        r.connections[1].stats.packets_received = 3;
        r.connections[1].stats.state = PathState::Closed;
        let s = r.summary();
        assert!(s.contains(" over 1 connection (bbr), 1 dead\n"), "{s}");
        assert!(
            s.contains("  127.0.0.1:7999: dead (closed), carried nothing\n"),
            "{s}"
        );
        assert_eq!(r.shares(), [1.0, 0.0]);
    }

    /// Losses are the connection's own; resends are where they went; the
    /// RTT is the connection's own round trip, not the copies' shortcut.
    #[test]
    fn each_connection_shows_its_own_losses_and_round_trip() {
        let mut r = report(Side::Send);
        r.connections[1].stats = path(10_000, 500, 10_000_000);
        r.connections[0].stats.retransmitted = 28;
        let lossy = &mut r.connections[1].stats;
        lossy.lost_data_packets = 100;
        (lossy.rtt_min, lossy.rtt_avg, lossy.rtt_max) = (ms(310), ms(353), ms(420));
        lossy.rtt_samples = 400;
        (lossy.own_rtt_min, lossy.own_rtt_avg, lossy.own_rtt_max) = (ms(600), ms(612), ms(700));
        lossy.own_rtt_samples = 300;
        let s = r.summary();
        assert!(
            s.contains(", 20000 data packets, 0 lost (0 %), 28 resends sent on it"),
            "{s}"
        );
        assert!(
            s.contains(", RTT 600/612/700 ms, 10000 data packets, 100 lost (1.00 %)"),
            "{s}"
        );
        assert!(
            s.contains("\n  (RTT: the connection's own round trips, min/avg/max;"),
            "{s}"
        );
        // Without a sample of its own, the controller's, and what they are.
        r.connections[1].stats.own_rtt_samples = 0;
        let s = r.summary();
        assert!(
            s.contains(", RTT 310/353/420 ms out on it and back on a faster connection, "),
            "{s}"
        );
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn two_connections_to_one_address_are_told_apart_by_ours() {
        let mut r = report(Side::Send);
        r.connections[1].remote = r.connections[0].remote;
        r.connections[0].local = Some("127.0.0.1:5001".parse().unwrap());
        r.connections[1].local = Some("127.0.0.1:5002".parse().unwrap());
        let s = r.summary();
        assert!(s.contains("  127.0.0.1:5001 -> 127.0.0.1:7000: "), "{s}");
        assert!(s.contains("  127.0.0.1:5002 -> 127.0.0.1:7000: "), "{s}");
        // Distinct addresses stay short.
        let s = report(Side::Send).summary();
        assert!(s.contains("  127.0.0.1:7000: 80.0 Mbit/s"), "{s}");
    }

    #[test]
    fn the_receiver_shows_no_sender_figures() {
        let mut r = report(Side::Recv);
        r.connections.truncate(1);
        r.written = Some(Written::File("out/data.bin".into()));
        let s = r.summary();
        assert!(
            s.contains("over 1 connection\n") || s.contains("over 1 connection ("),
            "{s}"
        );
        assert!(
            !s.contains("RTT") && !s.contains("window") && !s.contains("retransmit"),
            "{s}"
        );
        assert!(s.contains("-> out/data.bin"), "{s}");
    }

    #[test]
    fn a_failure_says_how_far_it_got_and_nothing_when_no_session() {
        let mut r = report(Side::Send);
        r.bytes = 1_000_000;
        r.failure = Some(Failure::new(Kind::ConnectionLost, "lost"));
        let s = r.summary();
        assert!(
            s.starts_with("sent data.bin: 1.00 MB of 30.0 MB in 3.00 s before the failure"),
            "{s}"
        );
        assert!(!s.contains("verified"), "{s}");
        let mut none = Report::new(Side::Send);
        none.failure = Some(Failure::new(Kind::NoAnswer, "no answer"));
        assert_eq!(none.summary(), "");
    }

    #[test]
    fn datagrams_that_did_not_authenticate_are_shown() {
        let mut r = report(Side::Recv);
        assert!(!r.summary().contains("authenticate"));
        r.session.as_mut().unwrap().forged_dropped = 12;
        assert!(r
            .summary()
            .contains("dropped 12 datagrams that did not authenticate"));
        r.session.as_mut().unwrap().forged_dropped = 1;
        assert!(r.summary().contains("dropped 1 datagram that"));
    }
}
