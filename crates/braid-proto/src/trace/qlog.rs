//! The event log as qlog: JSON-SEQ (RFC 7464), one trace per file, in the
//! dialect qvis reads (qlog 0.3, `transport:`/`recovery:` event names,
//! times in ms relative to the session's start).
//!
//! Each connection's events carry its `path_id`, as multipath QUIC's qlog
//! does, and a `group_id` naming the connection, which qvis uses to show
//! each connection as a connection of its own (packet numbers are per
//! connection, so one graph of all of them would mix their numbers).
//! The session's own events are in group `session`. What QUIC has no word
//! for is in the `braid:` category.
//!
//! Written by hand rather than with the `qlog` crate: its types model
//! QUIC's packet headers and frames, not braid's, and its serde path costs
//! several times the formatting here, which runs at every datagram.

use super::{EventKind, FrameSummary, LossTimer, LossTrigger, Metrics, TraceEvent};
use crate::{Instant, PathId, Role};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

/// What the file's header says about the session.
#[derive(Debug, Clone)]
pub struct QlogHeader {
    /// A title for the trace, e.g. `braid send notes.pdf`.
    pub title: String,
    /// Which side wrote it.
    pub role: Role,
    /// The session's id.
    pub session_id: u64,
    /// The session clock's time that event times count from.
    pub epoch: Instant,
    /// The wall clock at `epoch`, ms since the Unix epoch (0 in the simulator).
    pub reference_unix_ms: f64,
}

/// Writes a session's events as a qlog JSON-SEQ file.
pub struct QlogWriter<W: Write> {
    out: W,
    epoch: Instant,
    line: String,
}

impl<W: Write> QlogWriter<W> {
    /// Starts the file with its header.
    pub fn new(mut out: W, header: &QlogHeader) -> io::Result<QlogWriter<W>> {
        let mut line = String::with_capacity(512);
        let vantage = header.role.name();
        let _ = write!(
            line,
            "\x1e{{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON-SEQ\",\"title\":"
        );
        json_str(&mut line, &header.title);
        let _ = write!(line, ",\"trace\":{{\"title\":");
        json_str(&mut line, &header.title);
        let _ = writeln!(
            line,
            ",\"vantage_point\":{{\"name\":\"braid\",\"type\":\"{vantage}\"}},\
             \"common_fields\":{{\"ODCID\":\"{id:016x}\",\"reference_time\":{reference:.3},\
             \"time_format\":\"relative\",\"protocol_type\":[\"braid\"]}}}}}}",
            id = header.session_id,
            reference = header.reference_unix_ms,
        );
        out.write_all(line.as_bytes())?;
        Ok(QlogWriter {
            out,
            epoch: header.epoch,
            line,
        })
    }

    /// Writes one event.
    pub fn write(&mut self, event: &TraceEvent) -> io::Result<()> {
        self.line.clear();
        format_event(&mut self.line, self.epoch, event);
        self.out.write_all(self.line.as_bytes())
    }

    /// Flushes what is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The writer, flushed by the caller.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One event as a JSON-SEQ record: RS, the JSON object, newline.
pub fn format_event(s: &mut String, epoch: Instant, event: &TraceEvent) {
    s.push_str("\x1e{\"time\":");
    push_ms(s, event.at.saturating_duration_since(epoch));
    let (name, path) = name_and_path(&event.kind);
    match path {
        Some(p) => {
            s.push_str(",\"group_id\":\"path ");
            push_u64(s, p.0.into());
            s.push_str("\",\"name\":\"");
            s.push_str(name);
            s.push_str("\",\"data\":{\"path_id\":");
            push_u64(s, p.0.into());
        }
        None => {
            s.push_str(",\"group_id\":\"session\",\"name\":\"");
            s.push_str(name);
            s.push_str("\",\"data\":{");
        }
    }
    // Each arm starts with a comma when it follows a path_id.
    let sep = if path.is_some() { "," } else { "" };
    data(s, sep, &event.kind);
    s.push_str("}}\n");
}

fn name_and_path(kind: &EventKind) -> (&'static str, Option<PathId>) {
    use EventKind::*;
    match *kind {
        Parameters(_) => ("transport:parameters_set", None),
        PacketSent { path, .. } => ("transport:packet_sent", Some(path)),
        PacketReceived { path, .. } => ("transport:packet_received", Some(path)),
        PacketsAcked { path, .. } => ("recovery:packets_acked", Some(path)),
        PacketLost { path, .. } => ("recovery:packet_lost", Some(path)),
        SpuriousLoss { path } => ("braid:spurious_loss", Some(path)),
        StreamAcked { path, .. } => ("braid:stream_acked", Some(path)),
        Metrics { path, .. } => ("recovery:metrics_updated", Some(path)),
        CongestionState { path, .. } => ("recovery:congestion_state_updated", Some(path)),
        TimerExpired { path, .. } => ("recovery:loss_timer_updated", Some(path)),
        PathState { path, .. } => ("braid:path_state_updated", Some(path)),
        PathValidated { path } => ("braid:path_validated", Some(path)),
        SessionState { .. } => ("connectivity:connection_state_updated", None),
        Closed { .. } => ("connectivity:connection_closed", None),
        WindowNormalised { path, .. } => ("braid:window_normalised", Some(path)),
        SchedulerPick { path, .. } => ("braid:scheduler_pick", Some(path)),
        AckCopy { via, .. } => ("braid:ack_copy", Some(via)),
        TailCopy { path, .. } => ("braid:tail_copy", Some(path)),
        MbEcn { path, .. } => ("braid:mbecn_feedback", Some(path)),
        Dropped { .. } => ("braid:events_dropped", None),
    }
}

fn data(s: &mut String, sep: &str, kind: &EventKind) {
    use EventKind::*;
    match kind {
        Parameters(p) => {
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
        } => {
            // The log's most frequent lines: written without `fmt`.
            s.push_str(sep);
            s.push_str("\"header\":{\"packet_type\":\"1RTT\",\"braid_header_form\":");
            s.push_str(if *short { "\"short\"" } else { "\"long\"" });
            s.push_str(",\"packet_number\":");
            push_u64(s, *pn);
            s.push_str("},\"raw\":{\"length\":");
            push_u64(s, *size as u64);
            s.push_str("},\"frames\":[");
            write_frames(s, frames);
            s.push(']');
        }
        PacketsAcked { first, last, .. } => {
            let _ = write!(s, "{sep}\"acked_ranges\":[[{first},{last}]]");
        }
        PacketLost {
            pn, bytes, trigger, ..
        } => {
            let trigger = match trigger {
                LossTrigger::Threshold => "threshold",
                LossTrigger::Timeout => "pto_expired",
                LossTrigger::PathClosed => "path_closed",
            };
            let _ = write!(
                s,
                "{sep}\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":{pn}}},\
                 \"trigger\":\"{trigger}\",\"braid_stream_bytes\":{bytes}"
            );
        }
        SpuriousLoss { .. } | PathValidated { .. } => {}
        StreamAcked { bytes, .. } => {
            let _ = write!(s, "{sep}\"bytes\":{bytes}");
        }
        Metrics { metrics, .. } => write_metrics(s, sep, metrics),
        CongestionState { old: "", new, .. } => {
            let _ = write!(s, "{sep}\"new\":\"{new}\"");
        }
        CongestionState { old, new, .. } => {
            let _ = write!(s, "{sep}\"old\":\"{old}\",\"new\":\"{new}\"");
        }
        TimerExpired { timer, .. } => {
            let timer = match timer {
                LossTimer::TailLossProbe => "braid_tail_loss_probe",
                LossTimer::Rto => "pto",
            };
            let _ = write!(
                s,
                "{sep}\"timer_type\":\"{timer}\",\"event_type\":\"expired\""
            );
        }
        PathState { state, .. } => {
            let state = match state {
                crate::PathState::Active => "active",
                crate::PathState::Probing => "probing",
                crate::PathState::Closed => "closed",
            };
            let _ = write!(s, "{sep}\"new\":\"{state}\"");
        }
        SessionState { new } => {
            let _ = write!(s, "\"new\":\"{new}\"");
        }
        Closed {
            code,
            reason,
            remote,
        } => {
            let owner = if *remote { "remote" } else { "local" };
            let _ = write!(
                s,
                "\"owner\":\"{owner}\",\"application_code\":{code},\"reason\":"
            );
            json_str(s, reason);
        }
        WindowNormalised { old, new, .. } => {
            let _ = write!(s, "{sep}\"old\":{old},\"new\":{new}");
        }
        SchedulerPick { previous, .. } => {
            if let Some(p) = previous {
                let _ = write!(s, "{sep}\"previous\":{}", p.0);
            }
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
    let mut sep = sep;
    let mut field = |s: &mut String, name: &str, value: std::fmt::Arguments<'_>| {
        let _ = write!(s, "{sep}\"{name}\":{value}");
        sep = ",";
    };
    if let Some(v) = m.cwnd {
        field(s, "congestion_window", format_args!("{v}"));
    }
    if let Some(v) = m.in_flight {
        field(s, "bytes_in_flight", format_args!("{v}"));
    }
    if let Some(v) = m.srtt {
        field(s, "smoothed_rtt", format_args!("{}", ms(v)));
    }
    if let Some(v) = m.latest_rtt {
        field(s, "latest_rtt", format_args!("{}", ms(v)));
    }
    if let Some(v) = m.min_rtt {
        field(s, "min_rtt", format_args!("{}", ms(v)));
    }
    if let Some(v) = m.rttvar {
        field(s, "rtt_variance", format_args!("{}", ms(v)));
    }
    if let Some(v) = m.pacing_rate {
        // qlog's pacing rate is in bits per second.
        field(s, "pacing_rate", format_args!("{}", v.saturating_mul(8)));
    }
    if let Some(v) = m.ssthresh {
        field(s, "ssthresh", format_args!("{v}"));
    }
    if let Some(v) = m.slot_budget {
        field(s, "braid_slot_budget", format_args!("{v}"));
    }
    if let Some(v) = m.slot_width {
        field(s, "braid_slot_width", format_args!("{}", ms(v)));
    }
}

fn push_u64(s: &mut String, v: u64) {
    s.push_str(itoa::Buffer::new().format(v));
}

/// A duration in ms with µs precision, as a JSON number.
fn push_ms(s: &mut String, d: Duration) {
    let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
    push_u64(s, us / 1000);
    let frac = us % 1000;
    s.push('.');
    if frac < 100 {
        s.push('0');
    }
    if frac < 10 {
        s.push('0');
    }
    push_u64(s, frac);
}

/// A duration in ms with µs precision, as a JSON number.
fn ms(d: Duration) -> MsFmt {
    MsFmt(d.as_micros())
}

struct MsFmt(u128);

impl std::fmt::Display for MsFmt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// `text` as a JSON string literal.
fn json_str(s: &mut String, text: &str) {
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}
