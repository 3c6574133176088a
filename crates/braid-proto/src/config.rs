//! Session configuration.

use crate::cc;
use crate::crypto::{Security, SecurityError};
use crate::rtt::RtoConfig;
use crate::Role;
use std::ops::RangeInclusive;
use std::time::Duration;
use thiserror::Error;

/// A configuration value out of range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The value named is outside its documented range.
    #[error("{field} out of range: {value} (allowed {allowed})")]
    OutOfRange {
        /// The field's name in [`SessionConfig`].
        field: &'static str,
        /// The value given, as text.
        value: String,
        /// The allowed range, as text.
        allowed: String,
    },
    /// The security settings do not fit together or do not fit the role.
    #[error("security: {0}")]
    Security(SecurityError),
}

/// Everything a session can be tuned with. Defaults are tuned for paths of
/// up to ~100 Mbit/s × 300 ms (a 4 MiB window, NCP's default).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Largest stream payload per packet, bytes
    /// ([`SessionConfig::SEGMENT_SIZE_RANGE`]): TCP's MSS, not an IP MTU.
    /// The default keeps a full datagram, with a piggybacked ACK, inside a
    /// 1500-byte IP MTU.
    pub segment_size: u16,
    /// Largest datagram (UDP payload, bytes, at most 65,527) path MTU
    /// discovery (RFC 8899) probes each connection for: the runtime takes
    /// it from the route's interface MTU. Data packets then grow from the
    /// size `segment_size` makes up to what the path carries. `None`: the
    /// runtime fills it in (the core then does no discovery); `Some(0)`:
    /// none, packets stay at `segment_size`.
    pub max_datagram: Option<u16>,
    /// Bytes written but not yet acknowledged, at most; also bounds
    /// segments in flight to `send_window / segment_size` (NKP-0024).
    pub send_window: u64,
    /// Bytes the peer may send beyond what the application has read.
    pub recv_window: u64,
    /// Both windows start at the values above and autotune up to this, so
    /// that they stay at least twice the bandwidth-delay product.
    pub max_window: u64,
    /// Connections the client opens (1..=255). The server accepts up to `max_paths`.
    pub paths: u8,
    /// Most connections a session accepts (1..=255).
    pub max_paths: u8,
    /// Congestion controller of every connection.
    pub cc: cc::Algorithm,
    /// Retransmission timeout parameters.
    pub rto: RtoConfig,
    /// Retransmission timeouts that may expire with data outstanding and
    /// nothing new acknowledged before the session fails, and no sooner
    /// than that many would take doubling from `min_rto` to `max_rto`
    /// ([`RtoConfig::backoff_total`]; 15: 522 s by default), as Linux
    /// counts `tcp_retries2`; `None` is unlimited (catchunks' `-1`).
    /// Losses that ACKs reveal on a path that still delivers do not count,
    /// however many.
    pub retry_limit: Option<u32>,
    /// Retransmission timeouts every usable connection may go through, in
    /// a row, while nothing at all arrives from the peer, before the peer is
    /// declared gone (a killed process, a pulled cable) if data of ours is
    /// outstanding or the peer's is still to come (then the timeouts are
    /// those of keep-alive probes): seconds instead of the idle timeout. A peer that
    /// answers anything, even only ACKs of old packets, is not silent. The
    /// silence must also have lasted 10 s (`MIN_SILENCE`). This is a floor: a
    /// connection that had lost much, or shown little, when the silence
    /// began needs more, as many as make it unlikely (under one in a
    /// million) that a live peer's answers were all lost. `None` leaves it to
    /// the retry limit and the idle timeout.
    pub silent_limit: Option<u32>,
    /// The session fails after this long without receiving anything.
    pub idle_timeout: Duration,
    /// The handshake fails after this long without an answer.
    pub handshake_timeout: Duration,
    /// A server's: a session in which neither side has written stream data
    /// this long after the client confirmed the handshake is closed (with
    /// a reason the client hears), so sessions that hold a listener's room
    /// and send nothing end; `None` leaves them to the idle timeout.
    pub first_data_timeout: Option<Duration>,
    /// Send a PING after this long without sending anything; `None` disables.
    pub keep_alive: Option<Duration>,
    /// ACK after this many ack-eliciting packets ...
    pub ack_every: u32,
    /// ... or this long after the first unacknowledged one.
    pub max_ack_delay: Duration,
    /// Packets acknowledged after a packet before it is declared lost (RFC 9002 §6.1.1: 3).
    pub packet_threshold: u32,
    /// Interval of the per-connection time series; `None` disables sampling.
    pub sample_interval: Option<Duration>,
    /// Record the session's events for [`Session::drain_trace`](crate::Session::drain_trace)
    /// (qlog); off by default, and then free.
    pub trace: bool,
    /// Longest interval between probes of a connection that seems down.
    pub max_probe_interval: Duration,
    /// Initial congestion window of each connection by id, packets of `segment_size`
    /// bytes; connections beyond the list, and controllers that keep no
    /// window of their own (bbr, mbecn), start at the controller's default.
    pub initial_windows: Vec<u32>,
    /// How the peer is authenticated and datagrams protected. The default
    /// chooses nothing, and sessions refuse to start with it.
    pub security: Security,
    /// Sealed sessions: packets one key seals in our direction, all
    /// connections together, before we start a new key phase
    /// ([`SessionConfig::KEY_UPDATE_PACKETS_RANGE`]; 2^22 by default, half
    /// of AES-GCM's 2^23 limit per key, RFC 9001 §6.6).
    pub key_update_packets: u64,
    /// Sealed sessions: or this long after the current phase began
    /// ([`SessionConfig::KEY_UPDATE_INTERVAL_RANGE`]; 120 s by default,
    /// WireGuard's rekey time). A new phase waits for the peer to show it
    /// has the current one, and for the previous phase's key to be gone.
    pub key_update_interval: Duration,
}

/// RTOs in a row without a word from the peer, and at least
/// [`MIN_SILENCE`] of silence: 200 + 400 + 800 + 1,000 + 1,000 ms (probes of
/// a connection that seems down are at most `max_probe_interval` apart) is
/// only 3.4 s on a short path, shorter than outages a transfer should
/// outlast (a Wi-Fi handover, a tunnel), hence the floor. TCP's R2 (RFC 1122
/// §4.2.3.5) is "at least 100 s" because it cannot tell a peer's silence from
/// a long outage either; a transfer tool that reports its outcome is better
/// served by seconds. This is the limit of a connection known to deliver;
/// one that had lost much or shown little needs more (`path::loss_tally`).
pub const SILENT_LIMIT: u32 = 5;
/// The default handshake timeout: 4.4BSD's connection-establishment timer
/// (`TCPTV_KEEP_INIT`, 75 s), which also outlasts Linux's last SYN (sent
/// 63 s after the first, `tcp_syn_retries` = 6). A handshake that TCP
/// would complete, e.g. behind a flood that fills a small queue for 40 s,
/// must not fail here; HELLOs go out every `max_probe_interval` meanwhile.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(75);
/// The default [`SessionConfig::first_data_timeout`]: a sender writes
/// its first bytes (`braid send`'s file header) as soon as it connects;
/// this leaves room for a few handshake-length round trips and a slow
/// start of the application.
pub const FIRST_DATA_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// See [`SILENT_LIMIT`]: a third of the idle timeout.
pub const MIN_SILENCE: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            segment_size: 1380,
            max_datagram: None,
            send_window: 4 << 20,
            recv_window: 4 << 20,
            max_window: 64 << 20,
            paths: 1,
            max_paths: 16,
            cc: cc::Algorithm::default(),
            rto: RtoConfig::default(),
            retry_limit: Some(15),
            silent_limit: Some(SILENT_LIMIT),
            idle_timeout: Duration::from_secs(30),
            handshake_timeout: HANDSHAKE_TIMEOUT,
            first_data_timeout: Some(FIRST_DATA_TIMEOUT),
            keep_alive: Some(Duration::from_secs(10)),
            ack_every: 2,
            max_ack_delay: Duration::from_millis(10),
            packet_threshold: 3,
            sample_interval: Some(Duration::from_millis(100)),
            trace: false,
            max_probe_interval: Duration::from_secs(1),
            initial_windows: Vec::new(),
            security: Security::default(),
            key_update_packets: 1 << 22,
            key_update_interval: Duration::from_secs(120),
        }
    }
}

fn check(
    ok: bool,
    field: &'static str,
    value: impl ToString,
    allowed: impl ToString,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            value: value.to_string(),
            allowed: allowed.to_string(),
        })
    }
}

impl SessionConfig {
    /// The [`SessionConfig::segment_size`]s a session accepts, bytes; a
    /// handshake never negotiates below the start.
    pub const SEGMENT_SIZE_RANGE: RangeInclusive<u16> = 64..=16384;
    /// The [`SessionConfig::key_update_packets`] a session accepts: at most
    /// half the packets AES-GCM may seal under one key, leaving the other
    /// half for the peer to take the new phase.
    pub const KEY_UPDATE_PACKETS_RANGE: RangeInclusive<u64> =
        1..=crate::crypto::AES_GCM_PACKET_LIMIT / 2;
    /// The [`SessionConfig::key_update_interval`]s a session accepts.
    pub const KEY_UPDATE_INTERVAL_RANGE: RangeInclusive<Duration> =
        Duration::from_millis(1)..=Duration::from_secs(24 * 3600);

    /// The defaults with unprotected datagrams (simulations, benchmarks,
    /// tests): anyone on the path can read, forge or end the session.
    pub fn insecure() -> SessionConfig {
        SessionConfig {
            security: Security::insecure(),
            ..SessionConfig::default()
        }
    }

    /// Checks every value and the security settings for `role`.
    pub(crate) fn validate_for(&self, role: Role) -> Result<(), ConfigError> {
        self.validate()?;
        self.security
            .validate(role == Role::Client)
            .map_err(ConfigError::Security)
    }

    /// Checks every value but the role-specific security settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_sizes()?;
        self.validate_timers()?;
        self.validate_key_updates()
    }

    /// The segment, the windows and the path counts.
    fn validate_sizes(&self) -> Result<(), ConfigError> {
        let range = Self::SEGMENT_SIZE_RANGE;
        check(
            range.contains(&self.segment_size),
            "segment_size",
            self.segment_size,
            format!("{}..={}", range.start(), range.end()),
        )?;
        if let Some(v) = self.max_datagram {
            check(v <= 65_527, "max_datagram", v, "<= 65527")?;
        }
        let min_window = u64::from(self.segment_size);
        check(
            self.send_window >= min_window,
            "send_window",
            self.send_window,
            ">= segment_size",
        )?;
        check(
            self.recv_window >= min_window,
            "recv_window",
            self.recv_window,
            ">= segment_size",
        )?;
        check(
            self.send_window <= 1 << 40,
            "send_window",
            self.send_window,
            "<= 1 TiB",
        )?;
        check(
            self.recv_window <= 1 << 40,
            "recv_window",
            self.recv_window,
            "<= 1 TiB",
        )?;
        check(
            self.max_window >= self.send_window.max(self.recv_window) && self.max_window <= 1 << 40,
            "max_window",
            self.max_window,
            ">= send_window and recv_window, <= 1 TiB",
        )?;
        check(self.paths >= 1, "paths", self.paths, "1..=255")?;
        check(self.max_paths >= 1, "max_paths", self.max_paths, "1..=255")?;
        Ok(())
    }

    /// Loss recovery's and the session's timers and thresholds.
    fn validate_timers(&self) -> Result<(), ConfigError> {
        check(
            self.rto.k >= 0.0 && self.rto.k.is_finite(),
            "rto.k",
            self.rto.k,
            ">= 0",
        )?;
        check(
            self.rto.backoff >= 1.0 && self.rto.backoff <= 16.0,
            "rto.backoff",
            self.rto.backoff,
            "1..=16",
        )?;
        check(
            !self.rto.min_rto.is_zero(),
            "rto.min_rto",
            format!("{:?}", self.rto.min_rto),
            "> 0",
        )?;
        check(
            self.rto.min_rto <= self.rto.max_rto,
            "rto.max_rto",
            format!("{:?}", self.rto.max_rto),
            ">= min_rto",
        )?;
        check(!self.idle_timeout.is_zero(), "idle_timeout", "0", "> 0")?;
        check(
            !self.handshake_timeout.is_zero(),
            "handshake_timeout",
            "0",
            "> 0",
        )?;
        check(self.ack_every >= 1, "ack_every", self.ack_every, ">= 1")?;
        check(
            self.packet_threshold >= 1,
            "packet_threshold",
            self.packet_threshold,
            ">= 1",
        )?;
        check(
            !self.max_probe_interval.is_zero(),
            "max_probe_interval",
            "0",
            "> 0",
        )?;
        Ok(())
    }

    /// How often keys change, and the controller's initial windows.
    fn validate_key_updates(&self) -> Result<(), ConfigError> {
        let packets = Self::KEY_UPDATE_PACKETS_RANGE;
        check(
            packets.contains(&self.key_update_packets),
            "key_update_packets",
            self.key_update_packets,
            format!("{}..={}", packets.start(), packets.end()),
        )?;
        let interval = Self::KEY_UPDATE_INTERVAL_RANGE;
        check(
            interval.contains(&self.key_update_interval),
            "key_update_interval",
            format!("{:?}", self.key_update_interval),
            format!("{:?}..={:?}", interval.start(), interval.end()),
        )?;
        if let Some(w) = self.initial_windows.iter().find(|w| **w == 0) {
            return Err(ConfigError::OutOfRange {
                field: "initial_windows",
                value: w.to_string(),
                allowed: ">= 1 packet".into(),
            });
        }
        Ok(())
    }

    /// NKP-0024's `sendWindowPacketCount`.
    pub(crate) fn send_window_packets(&self) -> u64 {
        (self.send_window / u64::from(self.segment_size.max(1))).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_bad_values_are_named() {
        SessionConfig::default().validate().unwrap();
        let cfg = SessionConfig {
            segment_size: 10,
            ..SessionConfig::default()
        };
        assert!(cfg
            .validate()
            .unwrap_err()
            .to_string()
            .contains("segment_size"));
    }

    #[test]
    fn segment_size_range_is_inclusive_and_named() {
        let with = |segment_size| SessionConfig {
            segment_size,
            ..SessionConfig::default()
        };
        let range = SessionConfig::SEGMENT_SIZE_RANGE;
        with(*range.start()).validate().unwrap();
        with(*range.end()).validate().unwrap();
        let e = with(range.start() - 1).validate().unwrap_err();
        assert!(e.to_string().contains("(allowed 64..=16384)"), "{e}");
        with(range.end() + 1).validate().unwrap_err();
    }

    #[test]
    fn key_update_limits_stay_within_aes_gcms() {
        let d = SessionConfig::default();
        assert!(d.key_update_packets <= crate::crypto::AES_GCM_PACKET_LIMIT / 2);
        let packets = |key_update_packets| SessionConfig {
            key_update_packets,
            ..SessionConfig::default()
        };
        packets(1).validate().unwrap();
        packets(1 << 22).validate().unwrap();
        for bad in [0, (1 << 22) + 1] {
            let e = packets(bad).validate().unwrap_err();
            assert!(e.to_string().contains("key_update_packets"), "{e}");
        }
        let interval = |key_update_interval| SessionConfig {
            key_update_interval,
            ..SessionConfig::default()
        };
        interval(Duration::from_millis(1)).validate().unwrap();
        for bad in [Duration::ZERO, Duration::from_secs(24 * 3600 + 1)] {
            let e = interval(bad).validate().unwrap_err();
            assert!(e.to_string().contains("key_update_interval"), "{e}");
        }
    }
}
