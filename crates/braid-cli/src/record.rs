//! The transfer record of `braid send --json` and `braid recv --json`: one
//! line of JSON per transfer, schema `braid.transfer/1`, documented field
//! by field in docs/transfer-json.md. Fields are added, never renamed or
//! given another meaning, within one schema version.

use crate::side::Side;
use crate::summary::{Connection, Report, Written};
use braid_proto::PathState;
use serde::Serialize;
use std::process::ExitCode;
use std::time::UNIX_EPOCH;

pub const SCHEMA: &str = "braid.transfer/1";

/// One transfer, as one side saw it. Figures the receiver does not measure
/// (it sends no data, only acknowledgements) are null on its side.
#[derive(Serialize)]
pub struct Record {
    pub schema: &'static str,
    /// "send" or "recv".
    pub role: Side,
    /// "verified" or "failed".
    pub outcome: &'static str,
    pub error: Option<ErrorRecord>,
    /// What was sent: the file or folder's name, or the first thing's
    /// name and how many more ("a and 2 more").
    pub file: Option<String>,
    /// How many files the transfer carries (null until known).
    pub files: Option<u64>,
    /// BLAKE3 of the list of what was sent; both ends give the same.
    pub manifest_blake3: Option<String>,
    /// Content bytes an earlier, interrupted transfer had brought; counted
    /// in `bytes`, not in `goodput_mbps`.
    pub resumed_bytes: u64,
    /// Receiver: the path written, "-" for stdout.
    pub written_to: Option<String>,
    /// Bytes announced by the sender (null: unknown, as for stdin).
    pub size: Option<u64>,
    /// Content bytes verified, or on failure acknowledged (send) or
    /// received (recv) so far.
    pub bytes: u64,
    pub blake3: Option<String>,
    pub peer: Option<String>,
    /// "code", "key" or "insecure".
    pub mode: Option<&'static str>,
    pub cc: Option<String>,
    pub started_unix_s: f64,
    pub duration_s: f64,
    pub goodput_mbps: f64,
    pub connections: Vec<ConnectionRecord>,
    pub retransmitted: Option<u64>,
    pub spurious_retransmits: Option<u64>,
    pub timeouts: Option<u64>,
    pub ecn_marks: Option<u64>,
    pub duplicate_packets: Option<u64>,
    /// Datagrams that did not authenticate (forged, corrupted, or a wrong
    /// key or code).
    pub forged_dropped: u64,
    /// How the two ends met at rendezvous relays (null without --relay).
    pub reach: Option<ReachRecord>,
}

#[derive(Serialize)]
pub struct ReachRecord {
    pub relays: Vec<RelayRecord>,
    /// The direct path hole punching opened, if any.
    pub direct: Option<DirectRecord>,
}

#[derive(Serialize)]
pub struct RelayRecord {
    pub relay: String,
    /// Our address as the relay saw it.
    pub reflexive: Option<String>,
    /// The peer's address as the relay saw it.
    pub peer: Option<String>,
    /// From the start of the meeting to the pairing.
    pub paired_ms: Option<f64>,
}

#[derive(Serialize)]
pub struct DirectRecord {
    pub remote: Option<String>,
    /// From the first pairing to the first authentic datagram on it.
    pub validated_ms: Option<f64>,
}

#[derive(Serialize)]
pub struct ErrorRecord {
    /// A stable string, e.g. "no_answer", "wrong_code" (failure::Kind::code).
    pub code: &'static str,
    pub message: String,
    pub exit_status: u8,
}

#[derive(Serialize)]
pub struct ConnectionRecord {
    pub id: u8,
    pub local: Option<String>,
    pub remote: Option<String>,
    /// "active", "probing" or "closed".
    pub state: &'static str,
    /// Whether anything ever came back on it.
    pub answered: bool,
    /// Of the stream bytes acknowledged (send) or packets received (recv).
    pub share: f64,
    pub goodput_mbps: f64,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub data_packets_sent: Option<u64>,
    pub retransmitted: Option<u64>,
    pub lost_packets: Option<u64>,
    /// Data packets lost on this connection, wherever they were sent again
    /// (`retransmitted` counts the resends this connection carried).
    pub lost_data_packets: Option<u64>,
    pub timeouts: Option<u64>,
    /// The congestion controller's samples, which ACK copies returning on
    /// a faster connection shorten.
    pub rtt_ms: Option<RttRecord>,
    /// This connection's own round trip: out on it and back on it.
    pub own_rtt_ms: Option<RttRecord>,
    /// "relay" through a rendezvous relay, else "direct".
    pub via: &'static str,
}

#[derive(Serialize)]
pub struct RttRecord {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    /// 95th percentile of the raw samples, within ±2.2 %.
    pub p95: f64,
    pub smoothed: f64,
    pub samples: u64,
}

/// Prints the outcome: on failure the error first, on stderr; then the
/// record on stdout (`json`) or the summary on stderr.
pub fn print(r: &Report, json: bool) -> ExitCode {
    if let Some(f) = &r.failure {
        eprintln!("braid: {}", f.message);
    }
    if json {
        println!("{}", to_json(r));
    } else {
        eprint!("{}", r.summary());
    }
    r.exit_code()
}

pub fn to_json(r: &Report) -> String {
    serde_json::to_string(&record(r)).unwrap_or_default()
}

pub fn record(r: &Report) -> Record {
    let sender = r.side == Side::Send;
    let sender_only = |v: Option<u64>| if sender { v } else { None };
    let s = r.session.as_ref();
    let connections = r
        .connections
        .iter()
        .zip(r.shares())
        .map(|(c, share)| connection(r, c, share))
        .collect();
    Record {
        schema: SCHEMA,
        role: r.side,
        outcome: if r.verified() { "verified" } else { "failed" },
        error: r.failure.as_ref().map(|f| ErrorRecord {
            code: f.kind.code(),
            message: f.message.clone(),
            exit_status: f.kind.exit_status(),
        }),
        file: r.file.clone(),
        files: r.files,
        manifest_blake3: r.manifest_hash.map(|h| h.to_hex().to_string()),
        resumed_bytes: r.resumed,
        written_to: match &r.written {
            Some(Written::File(p)) => Some(p.display().to_string()),
            Some(Written::Stdout) => Some("-".to_owned()),
            None => None,
        },
        size: r.size,
        bytes: r.bytes,
        blake3: r.hash.map(|h| h.to_hex().to_string()),
        peer: r.peer.map(|a| a.to_string()),
        mode: r.mode.map(|m| m.name()),
        cc: r.cc.clone(),
        started_unix_s: r
            .started
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| round(d.as_secs_f64(), 3)),
        duration_s: round(r.duration.as_secs_f64(), 6),
        goodput_mbps: round(r.goodput_bps() / 1e6, 3),
        connections,
        retransmitted: sender_only(s.map(|s| s.retransmitted)),
        spurious_retransmits: sender_only(s.map(|s| s.spurious_retransmits)),
        timeouts: sender_only(s.map(|s| s.timeouts)),
        ecn_marks: sender_only(s.map(|s| s.ecn_marks)),
        duplicate_packets: s.map(|s| s.duplicate_packets),
        forged_dropped: s.map_or(0, |s| s.forged_dropped),
        reach: reach(r),
    }
}

fn reach(r: &Report) -> Option<ReachRecord> {
    let m = r.reach.as_ref()?;
    let ms = |d: std::time::Duration| round(d.as_secs_f64() * 1e3, 3);
    let relays = m
        .relays
        .iter()
        .map(|v| RelayRecord {
            relay: v.relay.to_string(),
            reflexive: v.reflexive.map(|a| a.to_string()),
            peer: v.peer.map(|a| a.to_string()),
            paired_ms: v
                .paired_at
                .map(|t| ms(t.saturating_duration_since(m.started))),
        })
        .collect();
    let direct = r.direct_path().map(|(c, after)| DirectRecord {
        remote: c.remote.map(|a| a.to_string()),
        validated_ms: after.map(ms),
    });
    Some(ReachRecord { relays, direct })
}

fn connection(r: &Report, c: &Connection, share: f64) -> ConnectionRecord {
    let p = &c.stats;
    let sender = r.side == Side::Send;
    let ms = |d: std::time::Duration| round(d.as_secs_f64() * 1e3, 3);
    let sender_only = |v: u64| sender.then_some(v);
    ConnectionRecord {
        id: c.id.0,
        local: c.local.map(|a| a.to_string()),
        remote: c.remote.map(|a| a.to_string()),
        state: match p.state {
            PathState::Active => "active",
            PathState::Probing => "probing",
            PathState::Closed => "closed",
        },
        answered: c.answered(),
        share: round(share, 4),
        goodput_mbps: round(r.goodput_bps() * share / 1e6, 3),
        packets_sent: p.packets_sent,
        packets_received: p.packets_received,
        data_packets_sent: sender_only(p.data_packets_sent),
        retransmitted: sender_only(p.retransmitted),
        lost_packets: sender_only(p.lost_packets),
        lost_data_packets: sender_only(p.lost_data_packets),
        timeouts: sender_only(p.timeouts),
        rtt_ms: (sender && p.rtt_samples > 0).then(|| RttRecord {
            min: ms(p.rtt_min),
            avg: ms(p.rtt_avg),
            max: ms(p.rtt_max),
            p95: ms(p.rtt_p95),
            smoothed: ms(p.srtt),
            samples: p.rtt_samples,
        }),
        own_rtt_ms: (sender && p.own_rtt_samples > 0).then(|| RttRecord {
            min: ms(p.own_rtt_min),
            avg: ms(p.own_rtt_avg),
            max: ms(p.own_rtt_max),
            p95: ms(p.own_rtt_p95),
            smoothed: ms(p.own_rtt_avg),
            samples: p.own_rtt_samples,
        }),
        via: if r.via_relay(c) { "relay" } else { "direct" },
    }
}

/// `v` to `places` decimals: a record says what was measured, not the
/// float arithmetic's last digits (microseconds, kbit/s).
fn round(v: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::{Failure, Kind};

    #[test]
    fn a_failure_before_any_session_is_still_a_record() {
        let mut r = Report::new(Side::Send);
        r.file = Some("f".into());
        r.failure = Some(Failure::new(Kind::NoAnswer, "no answer from 127.0.0.1:9"));
        let line = to_json(&r);
        // One line, as `--keep` prints one per transfer, schema first.
        assert!(!line.contains('\n') && line.starts_with(r#"{"schema":"braid.transfer/1","#));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["role"], "send");
        let recv = serde_json::to_value(record(&Report::new(Side::Recv))).unwrap();
        assert_eq!(recv["role"], "recv");
        assert_eq!(v["outcome"], "failed");
        assert_eq!(v["error"]["code"], "no_answer");
        assert_eq!(v["error"]["exit_status"], 3);
        assert_eq!(v["connections"], serde_json::json!([]));
        assert!(v["blake3"].is_null());
    }

    #[test]
    fn times_and_rates_are_rounded_to_what_was_measured() {
        let mut r = Report::new(Side::Send);
        r.duration = std::time::Duration::from_nanos(1_833_581_107);
        r.bytes = 123_456_789;
        let v = serde_json::to_value(record(&r)).unwrap();
        assert_eq!(v["duration_s"], 1.833581);
        let goodput = v["goodput_mbps"].to_string();
        let decimals = goodput.split('.').nth(1).map_or(0, str::len);
        assert!(decimals <= 3, "{goodput}");
    }
}
