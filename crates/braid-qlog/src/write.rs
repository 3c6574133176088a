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

use crate::event_data::data;
use crate::json::{json_str, push_ms, push_u64};
use braid_proto::trace::{EventKind, TraceEvent};
use braid_proto::{Instant, PathId, Role};
use std::fmt::Write as _;
use std::io::{self, Write};

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
