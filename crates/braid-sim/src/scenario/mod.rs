//! Scenario files: the TOML contract that describes paths, flows and the
//! run, read into ready-to-use link configurations.
//!
//! Unknown keys are errors. Every error names the file and the key at
//! fault; see [`EXAMPLE_TOML`] for a complete small file.

mod build;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_proto::SessionConfig;

use crate::link::LinkConfig;
use crate::published::Published;
use crate::trace::TraceError;
use build::parse;

/// Root of the run's random choices when the file gives none.
const DEFAULT_SEED: u64 = 1;
/// Virtual run length when the file gives none.
const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(600);
/// Time-series sampling period when the file gives none.
const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Drop-tail queue when the file gives none, packets.
const DEFAULT_QUEUE_PACKETS: u32 = 1000;
/// A link's MTU when the file gives none: Ethernet's, IP packet bytes.
const DEFAULT_MTU: u32 = braid_link::ETHERNET_MTU;
/// The MTUs a file may give: IPv6's minimum up to the largest IP packet.
const MIN_MTU: u32 = 1280;
const MAX_MTU: u32 = 65_535;

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
    /// `paths` and `flows`, everything else as in a scenario file that
    /// gives only those (relative paths resolve against `.`).
    pub fn new(paths: Vec<PathSpec>, flows: Vec<FlowSpec>) -> Scenario {
        Scenario {
            name: None,
            seed: DEFAULT_SEED,
            time_limit: DEFAULT_TIME_LIMIT,
            sample_interval: DEFAULT_SAMPLE_INTERVAL,
            paths,
            flows,
            published: None,
            base_dir: PathBuf::from("."),
        }
    }

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

    /// Has flow `flow` probe for the path MTU as `braid send` does on a
    /// real route: up to the smallest MTU its links start with, less IP and
    /// UDP headers (a file's `pmtud = true`).
    pub fn discover_path_mtu(&mut self, flow: usize) {
        let f = &mut self.flows[flow];
        f.session.max_datagram = route_max_datagram(&self.paths, &f.paths);
    }

    /// The built-in example, parsed from [`EXAMPLE_TOML`].
    pub fn example() -> Scenario {
        parse(EXAMPLE_TOML, Path::new("."), "<example scenario>")
            .expect("the built-in example scenario is valid")
    }
}

/// The largest datagram a flow over `used` of `paths` can discover: the
/// smallest starting MTU of their links, less IP and UDP headers.
fn route_max_datagram(paths: &[PathSpec], used: &[usize]) -> Option<u16> {
    used.iter()
        .flat_map(|&p| [&paths[p].forward, &paths[p].reverse])
        .filter_map(|l| l.mtu)
        .min()
        .map(|m| m.saturating_sub(crate::IP_UDP_OVERHEAD).min(65_527) as u16)
}
