//! Reads a qlog (0.3, as `--qlog` writes it: JSON-SEQ, RFC 7464, each
//! record opened by 0x1E; also one JSON record per line, or the JSON form
//! with `traces[0].events`) into per-connection series, 100 ms a point.
//!
//! Of all the events, only these are read (the category before the ':' is
//! not checked, so a later draft's `quic:packet_sent` reads the same):
//!
//! | event                       | fields                                     | becomes                  |
//! |-----------------------------|--------------------------------------------|--------------------------|
//! | `recovery:metrics_updated`  | `congestion_window`, `bytes_in_flight` (B) | window, in flight (kB)   |
//! |                             | `smoothed_rtt` (ms)                        | smoothed RTT             |
//! | `braid:stream_acked`        | `bytes`                                    | throughput               |
//! | `transport:packet_sent`     | `raw.length`, a `stream` frame in `frames` | throughput, if no acks   |
//! | `transport:packet_received` | `raw.length`, a `stream` frame in `frames` | a receiver's throughput  |
//!
//! Every event's `data.path_id` names its connection (absent: 0). A
//! metrics update carries only what changed, so each connection's last
//! value of each field holds until the next. Throughput is the stream
//! bytes acknowledged whose last transmission went on the connection; a
//! qlog without `stream_acked` events gets the bytes of the data packets
//! sent instead, retransmissions included. A qlog that sent no data and
//! had none acknowledged is a receiver's: its throughput is the bytes of the data packets it
//! received, and its windows and RTTs (its ACKs') are not drawn.

use anyhow::{bail, Context as _};
use serde_json::Value;
use std::collections::BTreeMap;

/// One point per connection per bin, seconds.
const BIN_S: f64 = 0.1;
/// The bins a trace may span (about 12 days): past that, a broken time.
const MAX_BINS: u64 = 1 << 23;

/// A qlog's series: each connection's, in time order.
#[derive(Debug, Clone)]
pub struct QlogSeries {
    /// The trace's title (the header's, or the one `read` was given).
    pub title: String,
    /// Whether the side that wrote it sent the data: only its windows,
    /// bytes in flight and RTTs describe the transfer.
    pub sender: bool,
    /// By path id.
    pub paths: Vec<PathSeries>,
}

/// One connection's series.
#[derive(Debug, Clone)]
pub struct PathSeries {
    /// Its `path_id`.
    pub path: u64,
    /// A sample at the end of each bin.
    pub points: Vec<Sample>,
}

/// One connection at the end of a bin; NaN where the log did not say yet.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the trace began.
    pub t: f64,
    /// Congestion window, kB.
    pub window: f64,
    /// Smoothed RTT, milliseconds.
    pub srtt_ms: f64,
    /// Bytes in flight, kB.
    pub in_flight: f64,
    /// Stream bytes acknowledged (see above for the fallbacks) over the
    /// bin, Mbit/s.
    pub throughput_mbps: f64,
}

/// The series of a qlog; `fallback` titles it if the header has no title.
pub fn read(bytes: &[u8], fallback: &str) -> anyhow::Result<QlogSeries> {
    let text = std::str::from_utf8(bytes).context("not UTF-8 text")?;
    let (header, events) = records(text)?;
    let mut clock = Clock::of(&header);
    let mut bins = Bins::default();
    let (mut acks_seen, mut sent_data) = (false, false);
    for (i, e) in events.iter().enumerate() {
        let (Some(time), Some(name)) = (e["time"].as_f64(), e["name"].as_str()) else {
            continue;
        };
        let t = clock.seconds(time);
        let data = &e["data"];
        let Some(path) = path_id(data) else { continue };
        let kind = name.rsplit(':').next().unwrap_or(name);
        let state = bins
            .advance(t)
            .with_context(|| format!("event {}: time {time}", i + 1))?
            .entry(path)
            .or_default();
        match kind {
            "metrics_updated" => {
                let kb = |k: &str| data[k].as_f64().map(|b| b / 1e3);
                state.window = kb("congestion_window").unwrap_or(state.window);
                state.in_flight = kb("bytes_in_flight").unwrap_or(state.in_flight);
                state.srtt_ms = data["smoothed_rtt"].as_f64().unwrap_or(state.srtt_ms);
            }
            "stream_acked" => {
                acks_seen = true;
                state.acked += data["bytes"].as_f64().unwrap_or(0.0);
            }
            "packet_sent" if carries_stream(data) => {
                sent_data = true;
                state.sent += data["raw"]["length"].as_f64().unwrap_or(0.0);
            }
            "packet_received" if carries_stream(data) => {
                state.received += data["raw"]["length"].as_f64().unwrap_or(0.0);
            }
            _ => {}
        }
    }
    // Acknowledged data was sent here too.
    let sender = sent_data || acks_seen;
    let paths = bins.finish(acks_seen, sender);
    if paths.is_empty() {
        bail!("no events of any connection in it");
    }
    let title = header["title"]
        .as_str()
        .or_else(|| header["trace"]["title"].as_str())
        .filter(|t| !t.is_empty())
        .unwrap_or(fallback)
        .to_owned();
    Ok(QlogSeries {
        title,
        sender,
        paths,
    })
}

/// The header and the events, in the order written.
fn records(text: &str) -> anyhow::Result<(Value, Vec<Value>)> {
    let parse = |(i, r): (usize, &str)| {
        serde_json::from_str::<Value>(r).with_context(|| format!("record {} is not JSON", i + 1))
    };
    let mut records: Vec<Value> = if text.contains('\u{1e}') {
        text.split('\u{1e}')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .enumerate()
            .map(parse)
            .collect::<anyhow::Result<_>>()?
    } else if let Ok(doc) = serde_json::from_str::<Value>(text) {
        // The JSON form: the events inside the first trace.
        let trace = &doc["traces"][0];
        let events = trace["events"].as_array().cloned().unwrap_or_default();
        let mut header = doc.clone();
        header["trace"] = trace.clone();
        std::iter::once(header).chain(events).collect()
    } else {
        text.lines()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .enumerate()
            .map(parse)
            .collect::<anyhow::Result<_>>()?
    };
    if records.is_empty() || records[0].get("qlog_version").is_none() {
        bail!("not a qlog: its first record has no qlog_version");
    }
    let header = records.remove(0);
    Ok((header, records))
}

/// How event times read: milliseconds since the reference time
/// ("relative", the default), since the previous event ("delta"), or since
/// the Unix epoch ("absolute").
struct Clock {
    format: String,
    reference_ms: Option<f64>,
    /// The previous event's time, for "delta"; the first, for "absolute"
    /// without a reference time.
    last_ms: Option<f64>,
}

impl Clock {
    fn of(header: &Value) -> Clock {
        let common = &header["trace"]["common_fields"];
        Clock {
            format: common["time_format"]
                .as_str()
                .unwrap_or("relative")
                .to_owned(),
            reference_ms: common["reference_time"].as_f64(),
            last_ms: None,
        }
    }

    /// An event's time in seconds since the trace began.
    fn seconds(&mut self, time: f64) -> f64 {
        let ms = match self.format.as_str() {
            "delta" => *self.last_ms.insert(self.last_ms.unwrap_or(0.0) + time),
            "absolute" => {
                let zero = match self.reference_ms {
                    Some(r) => r,
                    None => *self.last_ms.get_or_insert(time),
                };
                time - zero
            }
            _ => time,
        };
        ms / 1e3
    }
}

/// The connection an event's data names: `path_id`, a number or a numeric
/// string; absent means path 0. Anything else: not one we can place.
fn path_id(data: &Value) -> Option<u64> {
    match &data["path_id"] {
        Value::Null => Some(0),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Whether a sent packet carried stream data (the throughput fallback
/// counts only those).
fn carries_stream(data: &Value) -> bool {
    data["frames"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f["frame_type"] == "stream"))
}

/// One connection: its last metrics and this bin's bytes.
struct PathState {
    window: f64,
    in_flight: f64,
    srtt_ms: f64,
    acked: f64,
    sent: f64,
    received: f64,
    /// The finished bins: a point, and the rates of data sent and
    /// received in its bin.
    points: Vec<(Sample, [f64; 2])>,
}

impl Default for PathState {
    fn default() -> Self {
        PathState {
            window: f64::NAN,
            in_flight: f64::NAN,
            srtt_ms: f64::NAN,
            acked: 0.0,
            sent: 0.0,
            received: 0.0,
            points: Vec::new(),
        }
    }
}

/// The bin being filled, and every connection seen so far.
#[derive(Default)]
struct Bins {
    /// The bin's index (its start over BIN_S), once an event came.
    current: Option<u64>,
    paths: BTreeMap<u64, PathState>,
}

impl Bins {
    /// Closes the bins before the one `t` falls in (an event out of order
    /// counts in the current one); returns the connections to update.
    fn advance(&mut self, t: f64) -> anyhow::Result<&mut BTreeMap<u64, PathState>> {
        if !t.is_finite() || t < 0.0 || t / BIN_S >= MAX_BINS as f64 {
            bail!("not a time since the trace began");
        }
        let bin = (t / BIN_S) as u64;
        let current = *self.current.get_or_insert(bin);
        for b in current..bin {
            self.close((b + 1) as f64 * BIN_S);
        }
        self.current = Some(current.max(bin));
        Ok(&mut self.paths)
    }

    /// A point of each connection at `t`, the end of a bin.
    fn close(&mut self, t: f64) {
        for s in self.paths.values_mut() {
            let p = Sample {
                t,
                window: s.window,
                srtt_ms: s.srtt_ms,
                in_flight: s.in_flight,
                throughput_mbps: s.acked * 8.0 / BIN_S / 1e6,
            };
            let rate = |bytes: f64| bytes * 8.0 / BIN_S / 1e6;
            s.points.push((p, [rate(s.sent), rate(s.received)]));
            s.acked = 0.0;
            s.sent = 0.0;
            s.received = 0.0;
        }
    }

    /// Closes the last bin and returns the series, with the sent rate as
    /// throughput if no acknowledgements were logged, or the received rate
    /// if nothing was sent (a receiver's trace). The last bin counts
    /// as a whole one, though the trace may end early in it: a transfer's
    /// rate falling at its end is no surprise, a spike would mislead.
    fn finish(mut self, acks_seen: bool, sent_data: bool) -> Vec<PathSeries> {
        if let Some(b) = self.current {
            self.close((b + 1) as f64 * BIN_S);
        }
        self.paths
            .into_iter()
            .map(|(path, s)| PathSeries {
                path,
                points: s
                    .points
                    .into_iter()
                    .map(|(mut p, [sent, received])| {
                        if !sent_data {
                            p.throughput_mbps = received;
                        } else if !acks_seen {
                            p.throughput_mbps = sent;
                        }
                        p
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"qlog_version":"0.3","qlog_format":"JSON-SEQ","title":"t","trace":{"vantage_point":{"type":"client"},"common_fields":{"reference_time":1764200000000.0,"time_format":"relative"}}}"#;

    fn seq(events: &[&str]) -> Vec<u8> {
        let mut out = format!("\u{1e}{HEADER}\n");
        for e in events {
            out += &format!("\u{1e}{e}\n");
        }
        out.into_bytes()
    }

    #[test]
    fn metrics_hold_until_changed_and_acks_fill_their_bin() {
        let t = read(
            &seq(&[
                r#"{"time":10,"name":"recovery:metrics_updated","data":{"congestion_window":20000,"smoothed_rtt":30}}"#,
                r#"{"time":50,"name":"braid:stream_acked","data":{"bytes":12500}}"#,
                r#"{"time":150,"name":"recovery:metrics_updated","data":{"path_id":0,"bytes_in_flight":5000}}"#,
                r#"{"time":250,"name":"recovery:metrics_updated","data":{"path_id":1,"smoothed_rtt":40}}"#,
            ]),
            "f",
        )
        .unwrap();
        assert_eq!(t.title, "t");
        let p0 = &t.paths[0].points;
        assert_eq!(p0.len(), 3);
        assert_eq!((p0[0].t, p0[0].window, p0[0].srtt_ms), (0.1, 20.0, 30.0));
        assert!(p0[0].in_flight.is_nan());
        // 12 500 B in 100 ms = 1 Mbit/s.
        assert!((p0[0].throughput_mbps - 1.0).abs() < 1e-9);
        assert_eq!((p0[1].window, p0[1].in_flight), (20.0, 5.0));
        assert_eq!(p0[1].throughput_mbps, 0.0);
        let p1 = &t.paths[1];
        assert_eq!(
            (p1.path, p1.points.len(), p1.points[0].srtt_ms),
            (1, 1, 40.0)
        );
    }

    #[test]
    fn without_acks_the_data_packets_sent_are_the_throughput() {
        let t = read(
            &seq(&[
                r#"{"time":0,"name":"transport:packet_sent","data":{"raw":{"length":1250},"frames":[{"frame_type":"stream"}]}}"#,
                r#"{"time":1,"name":"transport:packet_sent","data":{"raw":{"length":900},"frames":[{"frame_type":"ack"}]}}"#,
                r#"{"time":120,"name":"transport:packet_sent","data":{"raw":{"length":1250},"frames":[{"frame_type":"stream"}]}}"#,
            ]),
            "f",
        )
        .unwrap();
        let p = &t.paths[0].points;
        assert!((p[0].throughput_mbps - 0.1).abs() < 1e-9, "{p:?}");
        assert!(t.sender);
    }

    /// A receiver's qlog: it sent no data, so its throughput is what it
    /// received, and its own windows are not the transfer's.
    #[test]
    fn a_qlog_that_sent_no_data_is_a_receivers() {
        let t = read(
            &seq(&[
                r#"{"time":0,"name":"recovery:metrics_updated","data":{"congestion_window":20000}}"#,
                r#"{"time":1,"name":"transport:packet_received","data":{"raw":{"length":1250},"frames":[{"frame_type":"stream"}]}}"#,
                r#"{"time":2,"name":"transport:packet_sent","data":{"raw":{"length":60},"frames":[{"frame_type":"ack"}]}}"#,
            ]),
            "f",
        )
        .unwrap();
        assert!(!t.sender);
        let p = &t.paths[0].points;
        assert!((p[0].throughput_mbps - 0.1).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn a_file_that_is_not_a_qlog_says_so() {
        let err = read(b"\x1e{\"title\":\"x\"}\n", "f").unwrap_err();
        assert!(err.to_string().contains("qlog_version"), "{err}");
        assert!(read(b"\x1e{not json\n", "f").is_err());
    }
}
