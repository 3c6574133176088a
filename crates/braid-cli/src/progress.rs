//! A progress bar on a terminal (bytes, rate, ETA, each connection's share;
//! decimal units as in the summary), or the live view in its place
//! (`--live`), and nothing at all when stderr is not a terminal. The
//! sender's bar counts bytes the receiver acknowledged, not bytes handed to
//! the transport (which run a window ahead), so its rate and ETA are the
//! transfer's.

use crate::live::{self, Live};
use crate::side::Side;
use braid::Monitor;
use braid_proto::PathId;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the per-connection shares are refreshed.
const REFRESH: Duration = Duration::from_millis(250);

#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    live: Option<Live>,
    files: Arc<Mutex<FileTrack>>,
}

/// Which file of several the bar is in, and the connections' shares,
/// which share its message.
#[derive(Default)]
struct FileTrack {
    /// Where each file's content ends in the transfer's, and its name.
    ends: Vec<(u64, String)>,
    current: Option<usize>,
    shares: String,
}

impl FileTrack {
    fn message(&self) -> String {
        let file = match self.current {
            Some(i) => format!(
                "{}/{} {}",
                i + 1,
                self.ends.len(),
                braid::text::escape(&self.ends[i].1)
            ),
            None => String::new(),
        };
        match (file.is_empty(), self.shares.is_empty()) {
            (false, false) => format!("{file}  {}", self.shares),
            (true, _) => self.shares.clone(),
            (false, true) => file,
        }
    }
}

impl Progress {
    /// A bar labelled `prefix` if `wanted` and stderr is a terminal.
    pub fn new(wanted: bool, total: Option<u64>, prefix: &str) -> Progress {
        if !wanted || !std::io::stderr().is_terminal() {
            return Progress::disabled();
        }
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr_with_hz(8));
        bar.set_style(style(total.is_some()));
        bar.set_prefix(prefix.to_owned());
        Progress {
            bar: Some(bar),
            live: None,
            files: Arc::default(),
        }
    }

    /// The live view if `live` too and it can take the terminal, else
    /// [`Progress::new`]'s bar.
    pub fn with_live(
        wanted: bool,
        live: bool,
        total: Option<u64>,
        prefix: &str,
        setup: impl FnOnce() -> live::Setup,
    ) -> Progress {
        Progress::live_view(wanted && live, total, setup)
            .unwrap_or_else(|| Progress::new(wanted, total, prefix))
    }

    /// The live view if `wanted`, stderr is a terminal and the view could
    /// take it.
    pub fn live_view(
        wanted: bool,
        total: Option<u64>,
        setup: impl FnOnce() -> live::Setup,
    ) -> Option<Progress> {
        if !wanted || !std::io::stderr().is_terminal() {
            return None;
        }
        let live = Live::start(setup(), total).ok()?;
        Some(Progress {
            bar: None,
            live: Some(live),
            files: Arc::default(),
        })
    }

    /// No bar at all.
    pub fn disabled() -> Progress {
        Progress {
            bar: None,
            live: None,
            files: Arc::default(),
        }
    }

    /// Whether the live view is up (it replaces any other live lines).
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// A bar drawn among other lines of `multi`, if `wanted`.
    pub fn in_multi(
        multi: &indicatif::MultiProgress,
        wanted: bool,
        total: Option<u64>,
        prefix: &str,
    ) -> Progress {
        let p = Progress::new(wanted, total, prefix);
        if let Some(b) = &p.bar {
            multi.add(b.clone());
        }
        p
    }

    pub fn set_position(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.set_position(n);
            let mut f = self.lock_files();
            if !f.ends.is_empty() {
                let i = f.ends.partition_point(|(end, _)| *end <= n);
                let i = i.min(f.ends.len() - 1);
                if f.current != Some(i) {
                    f.current = Some(i);
                    b.set_message(f.message());
                }
            }
        }
        if let Some(l) = &self.live {
            l.set_position(n);
        }
    }

    /// Shows which file the transfer is in, when it carries several.
    pub fn set_files(&self, manifest: &crate::manifest::Manifest) {
        if self.bar.is_none() || manifest.files().count() < 2 {
            return;
        }
        let mut end = 0u64;
        self.lock_files().ends = manifest
            .files()
            .map(|f| {
                end = end.saturating_add(f.size.unwrap_or(0));
                (end, f.path.clone())
            })
            .collect();
    }

    fn set_shares(&self, bar: &ProgressBar, shares: String) {
        let mut f = self.lock_files();
        f.shares = shares;
        bar.set_message(f.message());
    }

    fn lock_files(&self) -> std::sync::MutexGuard<'_, FileTrack> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The total became known (the receiver read the header): show the ETA.
    pub fn set_length(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.set_length(n);
            b.set_style(style(true));
        }
        if let Some(l) = &self.live {
            l.set_length(n);
        }
    }

    /// Clears the bar, or leaves the live view, so the summary prints on
    /// a clean line.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if let Some(l) = &self.live {
            l.finish();
        }
    }

    /// Moves the bar to the content bytes the peer holds (`from`, which
    /// it had before, and the session's acknowledged bytes less the `skip`
    /// that precede the content; at most `cap`) until the returned guard
    /// is dropped.
    pub fn follow_acked(
        &self,
        monitor: Monitor,
        skip: u64,
        from: u64,
        cap: u64,
    ) -> Option<Following> {
        if self.bar.is_none() && self.live.is_none() {
            return None;
        }
        let shown = self.clone();
        let task = tokio::spawn(async move {
            loop {
                let acked = monitor.stats().bytes_acked.saturating_sub(skip);
                let acked = acked.saturating_add(from).min(cap);
                shown.set_position(acked);
                tokio::time::sleep(ACKED_REFRESH).await;
            }
        });
        Some(Following(task))
    }

    /// Shows each connection's share of the traffic until the task is aborted.
    /// With the live view: draws it until aborted or finished.
    pub fn watch(&self, monitor: Monitor, side: Side) -> Option<tokio::task::JoinHandle<()>> {
        if let Some(l) = &self.live {
            return Some(l.watch(monitor));
        }
        let bar = self.bar.clone()?;
        let shown = self.clone();
        Some(tokio::spawn(async move {
            let mut last: Vec<(PathId, u64)> = Vec::new();
            loop {
                tokio::time::sleep(REFRESH).await;
                let now: Vec<(PathId, u64)> = monitor
                    .stats()
                    .paths
                    .iter()
                    .map(|&(id, p)| {
                        let v = match side {
                            Side::Send => p.stream_bytes_acked,
                            Side::Recv => p.stream_bytes_received,
                        };
                        (id, v)
                    })
                    .collect();
                let routes = monitor.paths();
                let label = |id: PathId| {
                    routes
                        .iter()
                        .find(|r| r.id == id)
                        .and_then(|r| r.remote)
                        .map_or_else(|| format!("path {id}"), |a| a.to_string())
                };
                // One connection has all of it: nothing to say.
                if now.len() > 1 {
                    shown.set_shares(&bar, shares(&last, &now, label));
                }
                last = now;
            }
        }))
    }
}

/// Stops [`Progress::follow_acked`] when dropped.
pub struct Following(tokio::task::JoinHandle<()>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often the sender's bar reads the acknowledged bytes (the bar draws
/// at 8 Hz).
const ACKED_REFRESH: Duration = Duration::from_millis(100);

fn style(with_total: bool) -> ProgressStyle {
    let template = if with_total {
        "{prefix:>8} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} ETA {eta}  {msg}"
    } else {
        "{prefix:>8} {decimal_bytes} {decimal_bytes_per_sec}  {msg}"
    };
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// "10.0.0.1:7000 71% · 10.0.0.2:7000 29%" from two readings of
/// per-connection counters.
fn shares(
    before: &[(PathId, u64)],
    now: &[(PathId, u64)],
    label: impl Fn(PathId) -> String,
) -> String {
    let delta: Vec<(PathId, u64)> = now
        .iter()
        .map(|&(id, v)| {
            let old = before.iter().find(|(i, _)| *i == id).map_or(0, |&(_, o)| o);
            (id, v.saturating_sub(old))
        })
        .collect();
    let total: u64 = delta.iter().map(|&(_, d)| d).sum();
    delta
        .iter()
        .map(|&(id, d)| {
            let pct = (d * 100).checked_div(total).unwrap_or(0);
            format!("{} {pct:>3}%", label(id))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_file_and_the_shares() {
        let mut f = FileTrack {
            ends: vec![(10, "a/x".into()), (30, "a/y\u{1b}[2J".into())],
            current: Some(1),
            shares: String::new(),
        };
        assert_eq!(f.message(), "2/2 a/y\\u{1b}[2J");
        f.shares = "p 50%".into();
        assert!(f.message().ends_with("  p 50%"));
        f.current = None;
        assert_eq!(f.message(), "p 50%");
    }

    #[test]
    fn shares_are_of_the_last_interval() {
        let label = |id: PathId| format!("path {id}");
        let s = shares(
            &[(PathId(0), 100), (PathId(1), 100)],
            &[(PathId(0), 400), (PathId(1), 200)],
            label,
        );
        assert_eq!(s, "path 0  75% · path 1  25%");
        assert_eq!(shares(&[], &[(PathId(0), 0)], label), "path 0   0%");
    }
}
