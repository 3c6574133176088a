//! From a file's text to a checked [`Scenario`]: the file's shape (serde
//! structs that refuse unknown keys) and the builder that turns raw values
//! into link and session configurations, naming the key at fault.

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
use crate::trace::Trace;
use crate::units::{ByteSize, Probability, Rate, Span};

use super::{
    FlowSpec, PathSpec, Scenario, ScenarioError, DEFAULT_MTU, DEFAULT_QUEUE_PACKETS,
    DEFAULT_SAMPLE_INTERVAL, DEFAULT_SEED, DEFAULT_TIME_LIMIT, MAX_MTU, MIN_MTU,
};

pub(super) fn parse(text: &str, base_dir: &Path, file: &str) -> Result<Scenario, ScenarioError> {
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
    mtu: Option<u32>,
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
    /// With `do = "mtu"`: the new MTU.
    mtu: Option<u32>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Action {
    Down,
    Up,
    Close,
    Mtu,
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
    pmtud: Option<bool>,
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
            .map(|(i, f)| self.flow(i, f, &paths))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scenario {
            name: raw.name,
            seed: raw.seed.unwrap_or(DEFAULT_SEED),
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
        let mtu = raw.mtu.unwrap_or(DEFAULT_MTU);
        self.check_mtu(&key("mtu"), mtu)?;
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
            mtu: Some(mtu),
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

    fn check_mtu(&self, key: &str, mtu: u32) -> Result<(), ScenarioError> {
        if (MIN_MTU..=MAX_MTU).contains(&mtu) {
            Ok(())
        } else {
            Err(self.invalid(key, format!("{mtu}: expected {MIN_MTU}..={MAX_MTU} bytes")))
        }
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
            if (e.action == Action::Mtu) != e.mtu.is_some() {
                let key = format!("path[{path}].events[{j}].mtu");
                return Err(self.invalid(key, "give it exactly with do = \"mtu\""));
            }
            if let Some(m) = e.mtu {
                self.check_mtu(&format!("path[{path}].events[{j}].mtu"), m)?;
            }
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
                (Action::Mtu, None) => LinkEventKind::Mtu(e.mtu.expect("checked")),
            };
            events.push(LinkEvent { at: e.at.0, kind });
        }
        events.sort_by_key(|e| e.at);
        Ok(events)
    }

    fn flow_invalid(&self, i: usize, key: &str, message: impl Into<String>) -> ScenarioError {
        self.invalid(format!("flow[{i}].{key}"), message)
    }

    fn flow(&self, i: usize, raw: RawFlow, all: &[PathSpec]) -> Result<FlowSpec, ScenarioError> {
        let paths = match &raw.paths {
            None => (0..all.len()).collect(),
            Some(list) => self.flow_paths(i, list, all.len())?,
        };
        let mut session = self.session(i, &raw, paths.len())?;
        // A flow that asks for discovery probes up to the smallest MTU its
        // links start with, as the runtime reads its route's interface MTU.
        // Off by default: the suites' rows compare with published figures
        // and kernel TCP at the packet size they were set up with.
        if raw.pmtud.unwrap_or(false) {
            session.max_datagram = super::route_max_datagram(all, &paths);
        }
        self.check_session(i, &session)?;
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

    /// The indices of the paths a flow's `paths` key names: each one that
    /// exists, once.
    fn flow_paths(
        &self,
        i: usize,
        list: &[i64],
        n_paths: usize,
    ) -> Result<Vec<usize>, ScenarioError> {
        if list.is_empty() {
            return Err(self.flow_invalid(i, "paths", "must name at least one path"));
        }
        let mut out = Vec::with_capacity(list.len());
        for &p in list {
            let idx = usize::try_from(p)
                .ok()
                .filter(|&x| x < n_paths)
                .ok_or_else(|| {
                    self.flow_invalid(
                        i,
                        "paths",
                        format!("path {p} does not exist (paths are 0 to {})", n_paths - 1),
                    )
                })?;
            if out.contains(&idx) {
                return Err(self.flow_invalid(i, "paths", format!("path {p} is listed twice")));
            }
            out.push(idx);
        }
        Ok(out)
    }

    /// The flow's session: insecure, with the file's settings over the
    /// defaults. The file's integers become the configuration's types here;
    /// their ranges are [`Builder::check_session`]'s to check.
    fn session(
        &self,
        i: usize,
        raw: &RawFlow,
        connections: usize,
    ) -> Result<SessionConfig, ScenarioError> {
        let segment_size = match raw.segment_size {
            None => None,
            Some(m) => Some(u16::try_from(m).map_err(|_| {
                self.flow_invalid(
                    i,
                    "segment_size",
                    format!("{m} is out of range (not a 16-bit byte count)"),
                )
            })?),
        };
        let initial_windows = match &raw.initial_windows {
            None => Vec::new(),
            Some(ws) => self.initial_windows(i, ws, connections)?,
        };
        let retry_limit = match raw.retry_limit {
            None => None,
            Some(-1) => Some(None),
            Some(n) => Some(Some(u32::try_from(n).map_err(|_| {
                self.flow_invalid(
                    i,
                    "retry_limit",
                    format!("{n}: expected -1 (unlimited) or 0 and up"),
                )
            })?)),
        };
        let mut session = SessionConfig::insecure();
        if let Some(cc) = &raw.cc {
            session.cc = cc
                .parse()
                .map_err(|e: braid_proto::cc::UnknownController| {
                    self.flow_invalid(i, "cc", e.to_string())
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
        Ok(session)
    }

    /// `initial_windows` as packet counts, at most one per connection.
    fn initial_windows(
        &self,
        i: usize,
        ws: &[i64],
        connections: usize,
    ) -> Result<Vec<u32>, ScenarioError> {
        if ws.len() > connections {
            return Err(self.flow_invalid(
                i,
                "initial_windows",
                format!("{} windows for {} connections", ws.len(), connections),
            ));
        }
        ws.iter()
            .map(|&w| {
                u32::try_from(w).map_err(|_| {
                    self.flow_invalid(
                        i,
                        "initial_windows",
                        format!("{w}: expected a packet count"),
                    )
                })
            })
            .collect()
    }

    /// `SessionConfig::validate`, its errors naming the key in the file
    /// where a scenario can set the field.
    fn check_session(&self, i: usize, session: &SessionConfig) -> Result<(), ScenarioError> {
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
                Some((k, message)) => self.flow_invalid(i, k, message),
                None => self.invalid(format!("flow[{i}]"), e.to_string()),
            }
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
