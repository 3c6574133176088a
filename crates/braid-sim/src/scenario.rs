//! Scenario files: the TOML contract that describes paths, flows and the
//! run, read into ready-to-use link configurations.
//!
//! Unknown keys are errors. Every error names the file and the key at
//! fault; see [`EXAMPLE_TOML`] for a complete small file.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use braid_proto::{ConfigError, SessionConfig};

use crate::link::{EcnMode, LinkConfig, LinkEvent, LinkEventKind, QueueLimit};
use crate::loss::Gilbert;
use crate::published::Published;
use crate::trace::{Trace, TraceError};
use crate::units::{ByteSize, Probability, Rate, Span};

/// Virtual run length when the file gives none.
const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(600);
/// Time-series sampling period when the file gives none.
const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Drop-tail queue when the file gives none, packets.
const DEFAULT_QUEUE_PACKETS: u32 = 1000;

/// The built-in example: two heterogeneous paths and one 20 MB transfer.
pub const EXAMPLE_TOML: &str = r#"name = "two heterogeneous paths"
seed = 1
time_limit = "600s"

[[path]]
rate = "40Mbit"
delay = "20ms"
queue = 300

[[path]]
rate = "10Mbit"
delay = "40ms"
loss = 0.01
queue = 100

[[flow]]
bytes = "20MB"
"#;

/// A scenario file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario file itself could not be read.
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not valid TOML, or a key is unknown or of the wrong type.
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    /// A value is out of range or inconsistent with others.
    #[error("{file}: {key}: {message}")]
    Invalid {
        file: String,
        key: String,
        message: String,
    },
    /// A trace file named by the scenario could not be read.
    #[error("{file}: {key}: cannot read trace {path}: {source}")]
    TraceRead {
        file: String,
        key: String,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A trace file named by the scenario is malformed.
    #[error("{file}: {key}: trace {path}: {source}")]
    TraceParse {
        file: String,
        key: String,
        path: PathBuf,
        source: TraceError,
    },
}

/// A whole simulated experiment.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: Option<String>,
    /// Root of every random choice in the run.
    pub seed: u64,
    /// Virtual time after which the run stops.
    pub time_limit: Duration,
    /// How often per-connection time series are sampled.
    pub sample_interval: Duration,
    /// Index = path number, in file order.
    pub paths: Vec<PathSpec>,
    pub flows: Vec<FlowSpec>,
    /// Published figures and targets for benchmark reports.
    pub published: Option<Published>,
    /// Directory relative paths in the file are resolved against.
    pub base_dir: PathBuf,
}

/// One path: a link in each direction.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    /// Client → server (data of the main direction).
    pub forward: LinkConfig,
    /// Server → client (ACKs, and reverse-direction data).
    pub reverse: LinkConfig,
}

/// One transfer between a client and a server.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSpec {
    /// Bytes sent client → server.
    pub bytes: u64,
    /// Bytes sent server → client at the same time.
    pub reverse_bytes: u64,
    /// When the client connects, since the start of the run.
    pub start: Duration,
    /// Indices into [`Scenario::paths`], non-empty, no repeats.
    pub paths: Vec<usize>,
    /// Both ends' session configuration: [`SessionConfig::insecure`] with
    /// the file's `cc`, `segment_size`, windows, RTO keys, `retry_limit` and
    /// `initial_windows`, checked by [`SessionConfig::validate`] as the
    /// file is read (an error names the flow's key).
    /// The simulator sets `paths` (one connection per entry of
    /// [`FlowSpec::paths`]), `sample_interval` (the scenario's) and, for a
    /// sealed flow, `security`.
    pub session: SessionConfig,
    /// Seal datagrams (a pinned-key Noise handshake, then AES-256-GCM) as on real
    /// networks; off by default (the protocol's behaviour is the same, and
    /// plain runs are faster).
    pub sealed: bool,
    /// The reverse bytes are the receiver's verdict, as `braid recv`'s: the
    /// server writes them only once it has read the forward direction to its
    /// end, so the client's "read it all" means "the receiver has it all".
    pub verdict: bool,
}

impl Default for FlowSpec {
    /// Nothing to send, at time 0, over no path, with the default session.
    fn default() -> Self {
        FlowSpec {
            bytes: 0,
            reverse_bytes: 0,
            start: Duration::ZERO,
            paths: Vec::new(),
            session: SessionConfig::insecure(),
            sealed: false,
            verdict: false,
        }
    }
}

impl Scenario {
    /// Reads a scenario file; traces are found relative to its directory.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        parse(&text, base, &path.display().to_string())
    }

    /// Reads scenario text; traces are found relative to `base_dir`.
    pub fn from_str(text: &str, base_dir: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        parse(text, base_dir.as_ref(), "<inline scenario>")
    }

    /// The built-in example, parsed from [`EXAMPLE_TOML`].
    pub fn example() -> Scenario {
        parse(EXAMPLE_TOML, Path::new("."), "<example scenario>")
            .expect("the built-in example scenario is valid")
    }
}

fn parse(text: &str, base_dir: &Path, file: &str) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
        file: file.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    Builder {
        file,
        base_dir,
        traces: HashMap::new(),
    }
    .build(raw)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    seed: Option<u64>,
    time_limit: Option<Span>,
    sample_interval: Option<Span>,
    #[serde(default)]
    path: Vec<RawPath>,
    #[serde(default)]
    flow: Vec<RawFlow>,
    published: Option<Published>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    rate: Option<Rate>,
    reverse_rate: Option<Rate>,
    trace: Option<PathBuf>,
    reverse_trace: Option<PathBuf>,
    delay: Option<Span>,
    jitter: Option<Span>,
    burst: Option<Span>,
    loss: Option<Probability>,
    reverse_loss: Option<Probability>,
    duplicate: Option<Probability>,
    gilbert: Option<Gilbert>,
    queue: Option<RawQueue>,
    ecn: Option<RawEcn>,
    #[serde(default)]
    events: Vec<RawEvent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: Span,
    #[serde(rename = "do")]
    action: Action,
    #[serde(rename = "for")]
    duration: Option<Span>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Action {
    Down,
    Up,
    Close,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    cc: Option<String>,
    bytes: Option<ByteSize>,
    reverse_bytes: Option<ByteSize>,
    start: Option<Span>,
    paths: Option<Vec<i64>>,
    /// `mtu` is its old name; giving both is a duplicate-key error.
    #[serde(alias = "mtu")]
    segment_size: Option<i64>,
    send_window: Option<ByteSize>,
    recv_window: Option<ByteSize>,
    rto_k: Option<f64>,
    min_rto: Option<Span>,
    max_rto: Option<Span>,
    initial_rto: Option<Span>,
    retry_limit: Option<i64>,
    initial_windows: Option<Vec<i64>>,
    sealed: Option<bool>,
    verdict: Option<bool>,
}

/// `queue = 300` or `"300"` (packets) or `queue = "256KB"` (bytes): the
/// syntax of [`QueueLimit`]'s `FromStr`, which the CLI's `--queue` also uses.
struct RawQueue(QueueLimit);

impl<'de> Deserialize<'de> for RawQueue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawQueue, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawQueue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a packet count like 300 or a byte size like \"256KB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawQueue, E> {
                QueueLimit::packets(v).map(RawQueue).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawQueue, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawQueue, E> {
                v.parse().map(RawQueue).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `ecn = "off" | "threshold:K" | "mbecn"`.
struct RawEcn(EcnMode);

impl<'de> Deserialize<'de> for RawEcn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawEcn, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map(RawEcn).map_err(de::Error::custom)
    }
}

/// Turns raw file values into a checked [`Scenario`].
struct Builder<'a> {
    file: &'a str,
    base_dir: &'a Path,
    /// Each trace file is read once, however many links replay it.
    traces: HashMap<PathBuf, Arc<Trace>>,
}

impl Builder<'_> {
    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.to_string(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn build(mut self, raw: RawScenario) -> Result<Scenario, ScenarioError> {
        let time_limit = raw.time_limit.map_or(DEFAULT_TIME_LIMIT, |s| s.0);
        if time_limit.is_zero() {
            return Err(self.invalid("time_limit", "must be longer than 0"));
        }
        let sample_interval = raw.sample_interval.map_or(DEFAULT_SAMPLE_INTERVAL, |s| s.0);
        if sample_interval.is_zero() {
            return Err(self.invalid("sample_interval", "must be longer than 0"));
        }
        if raw.path.is_empty() {
            return Err(self.invalid("path", "no [[path]] given; a scenario needs at least one"));
        }
        if raw.flow.is_empty() {
            return Err(self.invalid("flow", "no [[flow]] given; a scenario needs at least one"));
        }
        let mut paths = Vec::with_capacity(raw.path.len());
        for (i, p) in raw.path.into_iter().enumerate() {
            paths.push(self.path(i, p)?);
        }
        let flows = raw
            .flow
            .into_iter()
            .enumerate()
            .map(|(i, f)| self.flow(i, f, paths.len()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scenario {
            name: raw.name,
            seed: raw.seed.unwrap_or(1),
            time_limit,
            sample_interval,
            paths,
            flows,
            published: raw.published,
            base_dir: self.base_dir.to_path_buf(),
        })
    }

    fn path(&mut self, i: usize, raw: RawPath) -> Result<PathSpec, ScenarioError> {
        let key = |k: &str| format!("path[{i}].{k}");
        let probability = |p: Option<Probability>| p.map_or(0.0, |p| p.0);
        if raw.rate.is_some() && raw.trace.is_some() {
            return Err(self.invalid(key("trace"), "give either rate or trace, not both"));
        }
        if raw.reverse_rate.is_some() && raw.reverse_trace.is_some() {
            return Err(self.invalid(
                key("reverse_trace"),
                "give either reverse_rate or reverse_trace, not both",
            ));
        }
        let trace = match &raw.trace {
            Some(t) => Some(self.trace(&key("trace"), t)?),
            None => None,
        };
        let reverse_trace = match &raw.reverse_trace {
            Some(t) => Some(self.trace(&key("reverse_trace"), t)?),
            None => None,
        };
        if raw.rate.is_none() && trace.is_none() {
            return Err(self.invalid(
                key("rate"),
                "missing: each path needs a rate (e.g. \"50Mbit\") or a trace",
            ));
        }
        // The reverse direction has its own service if either reverse key is
        // given, else it mirrors the forward one.
        let (reverse_rate, reverse_trace) = if raw.reverse_rate.is_some() || reverse_trace.is_some()
        {
            (raw.reverse_rate, reverse_trace)
        } else {
            (raw.rate, trace.clone())
        };
        let events = self.events(i, &raw.events)?;
        let shared = LinkConfig {
            rate: raw.rate,
            trace,
            delay: raw.delay.map_or(Duration::ZERO, |s| s.0),
            jitter: raw.jitter.map_or(Duration::ZERO, |s| s.0),
            loss: probability(raw.loss),
            gilbert: raw.gilbert,
            duplicate: probability(raw.duplicate),
            queue: raw
                .queue
                .map_or(QueueLimit::Packets(DEFAULT_QUEUE_PACKETS), |q| q.0),
            ecn: raw.ecn.map_or(EcnMode::Off, |e| e.0),
            events,
            burst: raw.burst.map_or(Duration::ZERO, |s| s.0),
        };
        let reverse = LinkConfig {
            rate: reverse_rate,
            trace: reverse_trace,
            loss: probability(raw.reverse_loss),
            gilbert: None,
            ..shared.clone()
        };
        // The file's keys for the reverse link's own settings.
        let reverse_key = |field: &str| match field {
            "rate" => "reverse_rate".to_owned(),
            "loss" => "reverse_loss".to_owned(),
            other => other.to_owned(),
        };
        shared
            .validate()
            .map_err(|e| self.invalid(key(&e.field), e.problem))?;
        reverse
            .validate()
            .map_err(|e| self.invalid(key(&reverse_key(&e.field)), e.problem))?;
        Ok(PathSpec {
            forward: shared,
            reverse,
        })
    }

    fn trace(&mut self, key: &str, rel: &Path) -> Result<Arc<Trace>, ScenarioError> {
        let path = self.base_dir.join(rel);
        if let Some(t) = self.traces.get(&path) {
            return Ok(Arc::clone(t));
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ScenarioError::TraceRead {
            file: self.file.to_string(),
            key: key.to_string(),
            path: path.clone(),
            source,
        })?;
        let trace = Trace::parse(&text).map_err(|source| ScenarioError::TraceParse {
            file: self.file.to_string(),
            key: key.to_string(),
            path: path.clone(),
            source,
        })?;
        let trace = Arc::new(trace);
        self.traces.insert(path, Arc::clone(&trace));
        Ok(trace)
    }

    /// Checks events and puts them in time order (ties keep file order).
    fn events(&self, path: usize, raw: &[RawEvent]) -> Result<Vec<LinkEvent>, ScenarioError> {
        let mut events = Vec::with_capacity(raw.len());
        for (j, e) in raw.iter().enumerate() {
            let key = format!("path[{path}].events[{j}].for");
            let kind = match (e.action, e.duration) {
                (Action::Down, Some(d)) if d.0.is_zero() => {
                    return Err(self.invalid(key, "must be longer than 0"));
                }
                (Action::Down, d) => LinkEventKind::Down {
                    duration: d.map(|d| d.0),
                },
                (_, Some(_)) => {
                    return Err(self.invalid(key, "only applies to do = \"down\""));
                }
                (Action::Up, None) => LinkEventKind::Up,
                (Action::Close, None) => LinkEventKind::Close,
            };
            events.push(LinkEvent { at: e.at.0, kind });
        }
        events.sort_by_key(|e| e.at);
        Ok(events)
    }

    fn flow(&self, i: usize, raw: RawFlow, n_paths: usize) -> Result<FlowSpec, ScenarioError> {
        let key = |k: &str| format!("flow[{i}].{k}");
        let paths = match raw.paths {
            None => (0..n_paths).collect(),
            Some(list) => {
                if list.is_empty() {
                    return Err(self.invalid(key("paths"), "must name at least one path"));
                }
                let mut out = Vec::with_capacity(list.len());
                for p in list {
                    let idx = usize::try_from(p)
                        .ok()
                        .filter(|&x| x < n_paths)
                        .ok_or_else(|| {
                            self.invalid(
                                key("paths"),
                                format!("path {p} does not exist (paths are 0 to {})", n_paths - 1),
                            )
                        })?;
                    if out.contains(&idx) {
                        return Err(self.invalid(key("paths"), format!("path {p} is listed twice")));
                    }
                    out.push(idx);
                }
                out
            }
        };
        // The file's integers become the configuration's types here; their
        // ranges are `SessionConfig::validate`'s to check, below.
        let segment_size = match raw.segment_size {
            None => None,
            Some(m) => Some(u16::try_from(m).map_err(|_| {
                self.invalid(
                    key("segment_size"),
                    format!("{m} is out of range (not a 16-bit byte count)"),
                )
            })?),
        };
        let initial_windows = match raw.initial_windows {
            None => Vec::new(),
            Some(ws) => {
                if ws.len() > paths.len() {
                    return Err(self.invalid(
                        key("initial_windows"),
                        format!("{} windows for {} connections", ws.len(), paths.len()),
                    ));
                }
                ws.iter()
                    .map(|&w| {
                        u32::try_from(w).map_err(|_| {
                            self.invalid(
                                key("initial_windows"),
                                format!("{w}: expected a packet count"),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        let retry_limit = match raw.retry_limit {
            None => None,
            Some(-1) => Some(None),
            Some(n) => Some(Some(u32::try_from(n).map_err(|_| {
                self.invalid(
                    key("retry_limit"),
                    format!("{n}: expected -1 (unlimited) or 0 and up"),
                )
            })?)),
        };
        let mut session = SessionConfig::insecure();
        if let Some(cc) = raw.cc {
            session.cc = cc
                .parse()
                .map_err(|e: braid_proto::cc::UnknownController| {
                    self.invalid(key("cc"), e.to_string())
                })?;
        }
        if let Some(segment_size) = segment_size {
            session.segment_size = segment_size;
        }
        if let Some(w) = raw.send_window {
            session.send_window = w.0;
        }
        if let Some(w) = raw.recv_window {
            session.recv_window = w.0;
        }
        if let Some(k) = raw.rto_k {
            session.rto.k = k;
        }
        if let Some(d) = raw.min_rto {
            session.rto.min_rto = d.0;
        }
        if let Some(d) = raw.max_rto {
            session.rto.max_rto = d.0;
        }
        if let Some(d) = raw.initial_rto {
            session.rto.initial_rto = d.0;
        }
        if let Some(limit) = retry_limit {
            session.retry_limit = limit;
        }
        session.initial_windows = initial_windows;
        session.validate().map_err(|e| {
            let named = match &e {
                ConfigError::OutOfRange {
                    field,
                    value,
                    allowed,
                } => flow_key(field)
                    .map(|k| (k, format!("{value} is out of range (allowed {allowed})"))),
                _ => None,
            };
            match named {
                Some((k, message)) => self.invalid(key(k), message),
                None => self.invalid(format!("flow[{i}]"), e.to_string()),
            }
        })?;
        Ok(FlowSpec {
            bytes: raw.bytes.map_or(0, |b| b.0),
            reverse_bytes: raw.reverse_bytes.map_or(0, |b| b.0),
            start: raw.start.map_or(Duration::ZERO, |s| s.0),
            paths,
            session,
            sealed: raw.sealed.unwrap_or(false),
            verdict: raw.verdict.unwrap_or(false),
        })
    }
}

/// The flow key that sets a [`SessionConfig`] field, if a scenario can set
/// it, so that `validate`'s errors name the key in the file.
fn flow_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "segment_size" => "segment_size",
        "send_window" => "send_window",
        "recv_window" => "recv_window",
        "rto.k" => "rto_k",
        "rto.min_rto" => "min_rto",
        "rto.max_rto" => "max_rto",
        "initial_windows" => "initial_windows",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Scenario {
        Scenario::from_str(text, ".").unwrap()
    }

    fn parse_err(text: &str) -> String {
        Scenario::from_str(text, ".").unwrap_err().to_string()
    }

    const MIN: &str = "[[path]]\nrate = \"10Mbit\"\n[[flow]]\n";

    #[test]
    fn initial_windows_are_packets_per_connection() {
        let two = "[[path]]\nrate = \"1Mbit\"\n[[path]]\nrate = \"1Mbit\"\n[[flow]]\n";
        let s = parse_ok(&format!("{two}initial_windows = [1, 4095]\n"));
        assert_eq!(s.flows[0].session.initial_windows, [1, 4095]);
        assert!(parse_ok(two).flows[0].session.initial_windows.is_empty());
        let e = parse_err(&format!("{two}initial_windows = [0, 4]\n"));
        assert!(e.contains("flow[0].initial_windows"), "{e}");
        let e = parse_err(&format!("{two}initial_windows = [1, 2, 3]\n"));
        assert!(e.contains("3 windows for 2 connections"), "{e}");
    }

    #[test]
    fn flow_keys_set_the_session_config() {
        let s = parse_ok(&format!(
            "{MIN}cc = \"aimd\"\nrto_k = 6.0\nmin_rto = \"100ms\"\nmax_rto = \"10s\"\ninitial_rto = \"5s\"\nretry_limit = -1\n"
        ));
        let want = SessionConfig {
            cc: braid_proto::cc::Algorithm::Aimd,
            rto: braid_proto::RtoConfig {
                k: 6.0,
                min_rto: Duration::from_millis(100),
                max_rto: Duration::from_secs(10),
                initial_rto: Duration::from_secs(5),
                ..SessionConfig::insecure().rto
            },
            retry_limit: None,
            ..SessionConfig::insecure()
        };
        assert_eq!(s.flows[0].session, want);
        let s = parse_ok(&format!("{MIN}retry_limit = 3\n"));
        assert_eq!(s.flows[0].session.retry_limit, Some(3));
    }

    #[test]
    fn example_parses() {
        let s = Scenario::example();
        assert_eq!(s.name.as_deref(), Some("two heterogeneous paths"));
        assert_eq!(s.paths.len(), 2);
        let p0 = &s.paths[0].forward;
        assert_eq!(p0.rate, Some(Rate::mbit(40)));
        assert_eq!(p0.delay, Duration::from_millis(20));
        assert_eq!(p0.queue, QueueLimit::Packets(300));
        let p1 = &s.paths[1];
        assert_eq!(p1.forward.rate, Some(Rate::mbit(10)));
        assert_eq!(p1.forward.delay, Duration::from_millis(40));
        assert_eq!(p1.forward.loss, 0.01);
        assert_eq!(p1.reverse.loss, 0.0);
        assert_eq!(p1.reverse.delay, Duration::from_millis(40));
        assert_eq!(p1.forward.queue, QueueLimit::Packets(100));
        assert_eq!(s.flows.len(), 1);
        assert_eq!(s.flows[0].bytes, 20_000_000);
        assert_eq!(s.flows[0].session, SessionConfig::insecure());
        assert_eq!(s.flows[0].paths, [0, 1]);
    }

    #[test]
    fn defaults_apply() {
        let s = parse_ok(MIN);
        assert_eq!(s.seed, 1);
        assert_eq!(s.time_limit, Duration::from_secs(600));
        assert_eq!(s.sample_interval, Duration::from_millis(100));
        let f = &s.paths[0].forward;
        assert_eq!(f.queue, QueueLimit::Packets(1000));
        assert_eq!(
            (f.delay, f.jitter, f.loss, f.duplicate),
            (Duration::ZERO, Duration::ZERO, 0.0, 0.0)
        );
        assert_eq!(f.ecn, EcnMode::Off);
        assert_eq!(s.paths[0].reverse.rate, Some(Rate::mbit(10)));
        assert_eq!(
            s.flows[0],
            FlowSpec {
                paths: vec![0],
                ..FlowSpec::default()
            }
        );
    }

    #[test]
    fn full_file_parses() {
        let s = parse_ok(
            r#"
name = "full"
seed = 7
time_limit = "30s"
sample_interval = "10ms"

[[path]]
rate = "1024pps"
reverse_rate = "1Mbit"
delay = "20ms"
jitter = "2ms"
loss = 0.02
reverse_loss = 0.01
duplicate = 0.001
gilbert = { p = 0.01, r = 0.3 }
queue = "256KB"
ecn = "threshold:20"
events = [{ at = "9s", do = "up" }, { at = "5s", do = "down", for = "1s" }, { at = "20s", do = "close" }]

[[path]]
rate = "5Mbit"
ecn = "mbecn"

[[flow]]
cc = "ncp"
bytes = "50MB"
reverse_bytes = 1000
start = "1.5s"
paths = [1, 0]
segment_size = 1024
send_window = "4MiB"
recv_window = 65536

[published]
seed_tcp = 47.5
source = "NKP-0024"
"#,
        );
        assert_eq!((s.seed, s.time_limit), (7, Duration::from_secs(30)));
        let p = &s.paths[0];
        assert_eq!(p.forward.rate, Some(Rate::PacketsPerSec(1024.0)));
        assert_eq!(p.reverse.rate, Some(Rate::mbit(1)));
        assert_eq!((p.forward.loss, p.reverse.loss), (0.02, 0.01));
        assert_eq!(p.reverse.duplicate, 0.001);
        assert_eq!(
            p.forward.gilbert,
            Some(Gilbert {
                p: 0.01,
                r: 0.3,
                h: 1.0,
                k: 0.0
            })
        );
        assert_eq!(p.reverse.gilbert, None);
        assert_eq!(p.forward.queue, QueueLimit::Bytes(256_000));
        assert_eq!(p.reverse.ecn, EcnMode::Threshold(20));
        assert_eq!(p.reverse.jitter, Duration::from_millis(2));
        let kinds: Vec<_> = p
            .forward
            .events
            .iter()
            .map(|e| (e.at.as_secs(), e.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    5,
                    LinkEventKind::Down {
                        duration: Some(Duration::from_secs(1))
                    }
                ),
                (9, LinkEventKind::Up),
                (20, LinkEventKind::Close)
            ]
        );
        assert_eq!(p.reverse.events, p.forward.events);
        assert_eq!(s.paths[1].forward.ecn, EcnMode::MbEcn);
        let f = &s.flows[0];
        assert_eq!(f.session.cc, braid_proto::cc::Algorithm::Ncp);
        assert_eq!((f.bytes, f.reverse_bytes), (50_000_000, 1000));
        assert_eq!(f.start, Duration::from_millis(1500));
        assert_eq!(f.paths, [1, 0]);
        assert_eq!(f.session.segment_size, 1024);
        assert_eq!(
            (f.session.send_window, f.session.recv_window),
            (4 << 20, 65536)
        );
        let published = s.published.unwrap();
        assert_eq!(published.source.as_deref(), Some("NKP-0024"));
        assert_eq!(published.seed_tcp, Some(47.5));
    }

    #[test]
    fn mtu_is_an_alias_of_segment_size() {
        let new = parse_ok(&format!("{MIN}segment_size = 1024\n"));
        let old = parse_ok(&format!("{MIN}mtu = 1024\n"));
        assert_eq!(new.flows[0].session.segment_size, 1024);
        assert_eq!(old.flows[0].session, new.flows[0].session);
        let e = parse_err(&format!("{MIN}segment_size = 1024\nmtu = 1024\n"));
        assert!(e.contains("duplicate field `segment_size`"), "{e}");
    }

    #[test]
    fn segment_size_range_is_the_session_configs() {
        let range = SessionConfig::SEGMENT_SIZE_RANGE;
        for (size, ok) in [
            (range.start() - 1, false),
            (*range.start(), true),
            (*range.end(), true),
            (range.end() + 1, false),
        ] {
            let file = Scenario::from_str(&format!("{MIN}segment_size = {size}\n"), ".");
            assert_eq!(file.is_ok(), ok, "{size}");
            let cfg = SessionConfig {
                segment_size: size,
                ..SessionConfig::insecure()
            };
            assert_eq!(cfg.validate().is_ok(), ok, "{size}");
        }
    }

    #[test]
    fn queue_is_packets_or_bytes_as_on_the_command_line() {
        let queue = |q: &str| {
            parse_ok(&format!(
                "[[path]]\nrate = \"1Mbit\"\nqueue = {q}\n[[flow]]\n"
            ))
            .paths[0]
                .forward
                .queue
        };
        assert_eq!(queue("300"), QueueLimit::Packets(300));
        assert_eq!(queue("\"300\""), QueueLimit::Packets(300));
        assert_eq!(queue("\"64KB\""), QueueLimit::Bytes(64_000));
        for text in ["300", "64KB", "1500B"] {
            assert_eq!(queue(&format!("{text:?}")), text.parse().unwrap(), "{text}");
        }
    }

    #[test]
    fn probabilities_are_fractions_or_percentages() {
        let s = parse_ok("[[path]]\nrate = \"1Mbit\"\nloss = \"1%\"\nreverse_loss = 0.5\nduplicate = 1\n[[flow]]\n");
        let p = &s.paths[0];
        assert_eq!((p.forward.loss, p.reverse.loss), (0.01, 0.5));
        assert_eq!((p.forward.duplicate, p.reverse.duplicate), (1.0, 1.0));
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = parse_err(&format!("{MIN}colour = 3\n"));
        assert!(e.contains("colour"), "{e}");
        let e = parse_err("[[path]]\nrate = \"1Mbit\"\nlatency = \"2ms\"\n[[flow]]\n");
        assert!(
            e.contains("latency") && e.contains("<inline scenario>"),
            "{e}"
        );
        let e = parse_err("seeed = 1\n");
        assert!(e.contains("seeed"), "{e}");
        let e = parse_err(&format!("{MIN}[published]\ntarget_mpbs = 36\n"));
        assert!(e.contains("target_mpbs"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let cases = [
            ("", "no [[path]]"),
            ("[[path]]\nrate = \"1Mbit\"\n", "no [[flow]]"),
            ("[[path]]\ndelay = \"1ms\"\n[[flow]]\n", "path[0].rate: missing"),
            ("[[path]]\nrate = \"0Mbit\"\n[[flow]]\n", "path[0].rate: 0bit must be above zero"),
            ("[[path]]\nrate = \"1Mbit\"\nloss = 1.5\n[[flow]]\n", "path[0].loss: 1.5 is not a probability"),
            ("[[path]]\nrate = \"1Mbit\"\nreverse_loss = \"150%\"\n[[flow]]\n", "path[0].reverse_loss: 1.5 is not"),
            ("[[path]]\nrate = \"1Mbit\"\nloss = \"lots\"\n[[flow]]\n", "expected a probability"),
            ("[[path]]\nrate = \"1Mbit\"\nreverse_rate = \"0pps\"\n[[flow]]\n", "path[0].reverse_rate: 0pps must be above zero"),
            (
                "[[path]]\nrate = \"1Mbit\"\ngilbert = { p = 0.1, r = -0.3 }\n[[flow]]\n",
                "path[0].gilbert.r",
            ),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\npaths = [2]\n", "flow[0].paths: path 2 does not exist"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\npaths = []\n", "flow[0].paths: must name"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\npaths = [0, 0]\n", "listed twice"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nsegment_size = 20\n", "flow[0].segment_size: 20 is out of range"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nsegment_size = 70000\n", "flow[0].segment_size: 70000"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nmtu = 20\n", "flow[0].segment_size: 20 is out of range"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nsend_window = 0\n", "flow[0].send_window: 0 is out of range (allowed >= segment_size)"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nrto_k = -1.0\n", "flow[0].rto_k: -1 is out of range"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nmin_rto = \"2s\"\nmax_rto = \"1s\"\n", "flow[0].max_rto: 1s is out of range (allowed >= min_rto)"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\ninitial_windows = [-1]\n", "flow[0].initial_windows: -1: expected a packet count"),
            (
                "[[path]]\nrate = \"1Mbit\"\nevents = [{ at = \"1s\", do = \"up\", for = \"1s\" }]\n[[flow]]\n",
                "path[0].events[0].for: only applies",
            ),
            ("[[path]]\nrate = \"1Mbit\"\nqueue = 0\n[[flow]]\n", "at least 1"),
            ("[[path]]\nrate = \"1Mbit\"\nqueue = -3\n[[flow]]\n", "queue of -3 packets"),
            ("[[path]]\nrate = \"1Mbit\"\nqueue = \"0\"\n[[flow]]\n", "at least 1"),
            ("[[path]]\nrate = \"1Mbit\"\nqueue = \"0KB\"\n[[flow]]\n", "at least one byte"),
            ("[[path]]\nrate = \"1Mbit\"\necn = \"red\"\n[[flow]]\n", "unknown ECN mode"),
            ("[[path]]\nrate = \"1Mbit\"\necn = \"threshold:0\"\n[[flow]]\n", "bad ECN threshold"),
            ("[[path]]\nrate = \"50 furlongs\"\n[[flow]]\n", "unknown unit"),
            ("[[path]]\nrate = 50\n[[flow]]\n", "needs a unit"),
            ("[[path]]\nrate = \"1Mbit\"\n[[flow]]\nbytes = \"-1MB\"\n", "negative"),
            ("time_limit = 0\n[[path]]\nrate = \"1Mbit\"\n[[flow]]\n", "time_limit: must be longer"),
            (
                "[[path]]\nrate = \"1Mbit\"\nevents = [{ at = \"1s\", do = \"explode\" }]\n[[flow]]\n",
                "unknown variant",
            ),
            ("[[path]]\nrate = \"1Mbit\"\ntrace = \"x\"\n[[flow]]\n", "either rate or trace"),
        ];
        for (text, want) in cases {
            let e = parse_err(text);
            assert!(e.contains(want), "{text:?}\n  gave: {e}\n  wanted: {want}");
        }
    }

    #[test]
    fn traces_load_relative_to_the_scenario_file() {
        let dir = std::env::temp_dir().join(format!("braid-scenario-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("traces")).unwrap();
        std::fs::write(dir.join("traces/one.trace"), "1\n").unwrap();
        std::fs::write(dir.join("traces/bad.trace"), "1\nfast\n").unwrap();
        let file = dir.join("s.toml");
        std::fs::write(
            &file,
            "[[path]]\ntrace = \"traces/one.trace\"\n[[path]]\ntrace = \"traces/one.trace\"\nreverse_rate = \"1Mbit\"\n[[flow]]\n",
        )
        .unwrap();
        let s = Scenario::from_file(&file).unwrap();
        assert_eq!(s.base_dir, dir);
        let t0 = s.paths[0].forward.trace.as_ref().unwrap();
        assert_eq!(t0.average_bits_per_sec(), 12e6);
        assert!(Arc::ptr_eq(t0, s.paths[0].reverse.trace.as_ref().unwrap()));
        assert!(Arc::ptr_eq(t0, s.paths[1].forward.trace.as_ref().unwrap()));
        assert_eq!(s.paths[1].reverse.trace, None);
        assert_eq!(s.paths[1].reverse.rate, Some(Rate::mbit(1)));

        std::fs::write(&file, "[[path]]\ntrace = \"traces/bad.trace\"\n[[flow]]\n").unwrap();
        let e = Scenario::from_file(&file).unwrap_err().to_string();
        assert!(
            e.contains("s.toml") && e.contains("path[0].trace") && e.contains("line 2"),
            "{e}"
        );
        std::fs::write(&file, "[[path]]\ntrace = \"traces/none.trace\"\n[[flow]]\n").unwrap();
        let e = Scenario::from_file(&file).unwrap_err().to_string();
        assert!(
            e.contains("cannot read trace") && e.contains("none.trace"),
            "{e}"
        );
        let e = Scenario::from_file(dir.join("missing.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot read scenario file") && e.contains("missing.toml"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
