//! A run's qlog: each flow's two sessions' events as JSON-SEQ files, in
//! virtual time (reference time 0), the same events a real transfer writes.

use braid_link::seeds::Side;
use braid_proto::trace::TraceEvent;
use braid_proto::{Instant, Role, Session};
use braid_qlog::{QlogHeader, QlogWriter};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

pub(crate) struct QlogFiles {
    dir: PathBuf,
    /// The scenario's name, which starts each file's.
    name: String,
    /// By flow and side (the server's is `true`).
    files: BTreeMap<(usize, bool), QlogWriter<BufWriter<File>>>,
    written: Vec<PathBuf>,
    events: Vec<TraceEvent>,
    /// The first failure to write; nothing more is written after it.
    error: Option<io::Error>,
}

impl QlogFiles {
    pub fn new(dir: &Path, scenario: &str) -> io::Result<QlogFiles> {
        std::fs::create_dir_all(dir)?;
        let name: String = scenario
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Ok(QlogFiles {
            dir: dir.to_owned(),
            name,
            files: BTreeMap::new(),
            written: Vec::new(),
            events: Vec::new(),
            error: None,
        })
    }

    /// Writes what `session`, `side` of `flow`, recorded since the last call.
    pub fn drain(&mut self, flow: usize, side: Side, session: &mut Session) {
        session.drain_trace(&mut self.events);
        if self.events.is_empty() || self.error.is_some() {
            self.events.clear();
            return;
        }
        let role = match side {
            Side::Client => Role::Client,
            Side::Server => Role::Server,
        };
        if let Err(e) = self.write(flow, role, session.session_id()) {
            self.error = Some(e);
        }
        self.events.clear();
    }

    fn write(&mut self, flow: usize, role: Role, session_id: u64) -> io::Result<()> {
        let w = match self.files.entry((flow, role == Role::Server)) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let side = if role == Role::Client {
                    "client"
                } else {
                    "server"
                };
                let path = self
                    .dir
                    .join(format!("{}-flow{flow}-{side}.sqlog", self.name));
                let header = QlogHeader {
                    title: format!("braid sim {} flow {flow} {side}", self.name),
                    role,
                    session_id,
                    epoch: Instant::ZERO,
                    reference_unix_ms: 0.0,
                };
                let file = BufWriter::with_capacity(1 << 16, File::create(&path)?);
                self.written.push(path);
                e.insert(QlogWriter::new(file, &header)?)
            }
        };
        for event in &self.events {
            w.write(event)?;
        }
        Ok(())
    }

    /// Flushes every file; the files written, or the first error.
    pub fn finish(mut self) -> io::Result<Vec<PathBuf>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for w in self.files.values_mut() {
            w.flush()?;
        }
        for w in std::mem::take(&mut self.files).into_values() {
            w.into_inner().flush()?;
        }
        Ok(self.written)
    }
}
