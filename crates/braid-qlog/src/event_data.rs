//! Each event's `data`, the part of a qlog record that differs by kind.

use crate::json::{json_str, ms, push_u64};
use braid_proto::trace::{EventKind, FrameSummary, LossTimer, LossTrigger, Metrics, Parameters};
use braid_proto::PathState;
use std::fmt::Write as _;
use std::time::Duration;

/// The fields of `kind`'s `data`; `sep` goes before the first when it
/// follows the `path_id` already written.
pub(crate) fn data(s: &mut String, sep: &str, kind: &EventKind) {
    use EventKind::*;
    match kind {
        Parameters(p) => write_parameters(s, p),
        PacketSent {
            pn,
            size,
            short,
            frames,
            ..
        }
        | PacketReceived {
            pn,
            size,
            short,
            frames,
            ..
        } => write_packet(s, sep, *pn, *size, *short, frames),
        PacketsAcked { first, last, .. } => {
            let _ = write!(s, "{sep}\"acked_ranges\":[[{first},{last}]]");
        }
        PacketLost {
            pn, bytes, trigger, ..
        } => {
            let trigger = trigger_name(*trigger);
            let _ = write!(
                s,
                "{sep}\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":{pn}}},\
                 \"trigger\":\"{trigger}\",\"braid_stream_bytes\":{bytes}"
            );
        }
        Metrics { metrics, .. } => write_metrics(s, sep, metrics),
        CongestionState { old: "", new, .. } => {
            let _ = write!(s, "{sep}\"new\":\"{new}\"");
        }
        CongestionState { old, new, .. } => {
            let _ = write!(s, "{sep}\"old\":\"{old}\",\"new\":\"{new}\"");
        }
        TimerExpired { timer, .. } => {
            let timer = timer_name(*timer);
            let _ = write!(
                s,
                "{sep}\"timer_type\":\"{timer}\",\"event_type\":\"expired\""
            );
        }
        SessionState { new } => {
            let _ = write!(s, "\"new\":\"{new}\"");
        }
        Closed {
            code,
            reason,
            remote,
        } => write_closed(s, *code, reason, *remote),
        other => braid_data(s, sep, other),
    }
}

/// The `data` of the events in braid's own category (`braid:`).
fn braid_data(s: &mut String, sep: &str, kind: &EventKind) {
    use EventKind::*;
    match kind {
        SpuriousLoss { .. } | PathValidated { .. } | SchedulerPick { previous: None, .. } => {}
        StreamAcked { bytes, .. } => {
            let _ = write!(s, "{sep}\"bytes\":{bytes}");
        }
        PathState { state, .. } => {
            let _ = write!(s, "{sep}\"new\":\"{}\"", state_name(*state));
        }
        WindowNormalised { old, new, .. } => {
            let _ = write!(s, "{sep}\"old\":{old},\"new\":{new}");
        }
        SchedulerPick {
            previous: Some(p), ..
        } => {
            let _ = write!(s, "{sep}\"previous\":{}", p.0);
        }
        AckCopy { of, .. } => {
            let _ = write!(s, "{sep}\"of_path_id\":{}", of.0);
        }
        TailCopy { offset, .. } => {
            let _ = write!(s, "{sep}\"offset\":{offset}");
        }
        MbEcn { level, .. } => {
            let _ = write!(s, "{sep}\"level\":{level}");
        }
        Dropped { count } => {
            let _ = write!(s, "\"count\":{count}");
        }
        // qlog's own categories, written by `data`.
        _ => {}
    }
}

fn write_parameters(s: &mut String, p: &Parameters) {
    let owner = "local";
    let role = p.role.name();
    let _ = write!(
        s,
        "\"owner\":\"{owner}\",\"braid_role\":\"{role}\",\"braid_session_id\":\"{:016x}\",\
         \"braid_cc\":\"{}\",\"braid_paths\":{},\"braid_segment_size\":{},\
         \"max_ack_delay\":{},\"braid_sealed\":{},\"initial_max_data\":{}",
        p.session_id,
        p.cc,
        p.paths,
        p.segment_size,
        ms(p.max_ack_delay),
        p.sealed,
        p.recv_window
    );
}

/// A packet sent or received: the log's most frequent lines, written
/// without `fmt`.
fn write_packet(s: &mut String, sep: &str, pn: u64, size: usize, short: bool, f: &FrameSummary) {
    s.push_str(sep);
    s.push_str("\"header\":{\"packet_type\":\"1RTT\",\"braid_header_form\":");
    s.push_str(if short { "\"short\"" } else { "\"long\"" });
    s.push_str(",\"packet_number\":");
    push_u64(s, pn);
    s.push_str("},\"raw\":{\"length\":");
    push_u64(s, size as u64);
    s.push_str("},\"frames\":[");
    write_frames(s, f);
    s.push(']');
}

fn write_closed(s: &mut String, code: u64, reason: &str, remote: bool) {
    let owner = if remote { "remote" } else { "local" };
    let _ = write!(
        s,
        "\"owner\":\"{owner}\",\"application_code\":{code},\"reason\":"
    );
    json_str(s, reason);
}

fn trigger_name(trigger: LossTrigger) -> &'static str {
    match trigger {
        LossTrigger::Threshold => "threshold",
        LossTrigger::Timeout => "pto_expired",
        LossTrigger::PathClosed => "path_closed",
    }
}

fn timer_name(timer: LossTimer) -> &'static str {
    match timer {
        LossTimer::TailLossProbe => "braid_tail_loss_probe",
        LossTimer::Rto => "pto",
    }
}

fn state_name(state: PathState) -> &'static str {
    match state {
        PathState::Active => "active",
        PathState::Probing => "probing",
        PathState::Closed => "closed",
    }
}

fn write_frames(s: &mut String, f: &FrameSummary) {
    let mut first = true;
    let mut comma = |s: &mut String| {
        if !std::mem::take(&mut first) {
            s.push(',');
        }
    };
    if let Some(a) = &f.ack {
        comma(s);
        // qvis matches an "ack" frame's ranges against the packets of the
        // connection it arrived on; a copy names its own.
        let _ = write!(
            s,
            "{{\"frame_type\":\"ack\",\"ack_delay\":{},\"acked_ranges\":[",
            ms(Duration::from_micros(a.ack_delay_us))
        );
        for (i, (lo, hi)) in a.ranges.iter().rev().enumerate() {
            let _ = write!(s, "{}[{lo},{hi}]", if i == 0 { "" } else { "," });
        }
        let _ = write!(s, "],\"braid_cumulative\":{}", a.cumulative);
        s.push('}');
    }
    for name in f.other_names() {
        comma(s);
        let _ = write!(s, "{{\"frame_type\":\"{name}\"}}");
    }
    if let Some(d) = &f.stream {
        comma(s);
        s.push_str("{\"frame_type\":\"stream\",\"stream_id\":0,\"offset\":");
        push_u64(s, d.offset);
        s.push_str(",\"length\":");
        push_u64(s, d.len);
        s.push_str(if d.fin {
            ",\"fin\":true}"
        } else {
            ",\"fin\":false}"
        });
    }
}

fn write_metrics(s: &mut String, sep: &str, m: &Metrics) {
    use Figure::{Count, Ms};
    // qlog's pacing rate is in bits per second.
    let pacing_bits = m.pacing_rate.map(|v| Count(v.saturating_mul(8)));
    let fields = [
        ("congestion_window", m.cwnd.map(Count)),
        ("bytes_in_flight", m.in_flight.map(Count)),
        ("smoothed_rtt", m.srtt.map(Ms)),
        ("latest_rtt", m.latest_rtt.map(Ms)),
        ("min_rtt", m.min_rtt.map(Ms)),
        ("rtt_variance", m.rttvar.map(Ms)),
        ("pacing_rate", pacing_bits),
        ("ssthresh", m.ssthresh.map(Count)),
        ("braid_slot_budget", m.slot_budget.map(Count)),
        ("braid_slot_width", m.slot_width.map(Ms)),
    ];
    let mut sep = sep;
    for (name, value) in fields {
        if let Some(value) = value {
            let _ = write!(s, "{sep}\"{name}\":{value}");
            sep = ",";
        }
    }
}

/// A metric's value as qlog writes it.
enum Figure {
    Count(u64),
    /// In ms, with µs precision.
    Ms(Duration),
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Figure::Count(v) => write!(f, "{v}"),
            Figure::Ms(d) => write!(f, "{}", ms(*d)),
        }
    }
}
