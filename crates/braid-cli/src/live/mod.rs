//! `--live`: a full-screen view of a running transfer, one box per
//! connection with its rate, window, sRTT and losses over the last seconds,
//! for seeing which connection is slow and when. [`model`] turns readings
//! of the session into series, [`draw`] renders them into a buffer of any
//! size, and [`screen`] owns the terminal while the view is up.

mod draw;
mod model;
mod screen;

use crate::side::Side;
use braid::Monitor;
use braid_proto::PathId;
use model::{Model, Reading, TICK};
use screen::Screen;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the view says about the session besides its figures.
#[derive(Debug, Clone)]
pub struct Setup {
    pub side: Side,
    /// "braid send data.bin", first in the header.
    pub title: String,
    /// By connection id, what it is ("40mbit 20ms RTT" in the demo); a
    /// connection without one is named by its address.
    pub notes: Vec<String>,
    /// Rendezvous relays: a connection to one is marked as through it.
    pub relays: Vec<SocketAddr>,
}

/// Content size not known yet.
const UNKNOWN: u64 = u64::MAX;

/// The view; clones share it. Drawn by the task [`Live::watch`] starts,
/// put away by [`Live::finish`] or when the last clone is dropped.
#[derive(Clone)]
pub struct Live {
    shared: Arc<Shared>,
}

struct Shared {
    setup: Setup,
    content: AtomicU64,
    total: AtomicU64,
    started: Instant,
    view: Mutex<View>,
}

struct View {
    model: Model,
    /// `None` once finished.
    screen: Option<Screen>,
}

impl Live {
    /// Takes over stderr's terminal; an error leaves it as it was.
    pub fn start(setup: Setup, total: Option<u64>) -> std::io::Result<Live> {
        let model = Model::new(setup.side, setup.title.clone(), total);
        let mut screen = Screen::enter()?;
        screen.draw(&model)?;
        Ok(Live {
            shared: Arc::new(Shared {
                setup,
                content: AtomicU64::new(0),
                total: AtomicU64::new(total.unwrap_or(UNKNOWN)),
                started: Instant::now(),
                view: Mutex::new(View {
                    model,
                    screen: Some(screen),
                }),
            }),
        })
    }

    /// Content bytes acknowledged (sender) or received (receiver).
    pub fn set_position(&self, n: u64) {
        self.shared.content.store(n, Ordering::Relaxed);
    }

    /// The size, once the receiver has read it.
    pub fn set_length(&self, n: u64) {
        self.shared.total.store(n, Ordering::Relaxed);
    }

    /// Reads the session every tick and redraws, until aborted or finished.
    pub fn watch(&self, monitor: Monitor) -> tokio::task::JoinHandle<()> {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                if !shared.tick(&monitor) {
                    return;
                }
            }
        })
    }

    /// Leaves the view and gives the terminal back, before the summary.
    pub fn finish(&self) {
        if let Ok(mut v) = self.shared.view.lock() {
            v.screen = None;
        }
    }
}

impl Shared {
    /// One reading and one frame; false once the view is gone.
    fn tick(&self, monitor: &Monitor) -> bool {
        let stats = monitor.stats();
        let routes = monitor.paths();
        let label = |id: PathId| {
            let remote = routes.iter().find(|r| r.id == id).and_then(|r| r.remote);
            label(&self.setup, id, remote)
        };
        let content = self.content.load(Ordering::Relaxed);
        let at = self.started.elapsed();
        let reading = Reading::of(self.setup.side, at, content, &stats, label);
        let Ok(mut v) = self.view.lock() else {
            return false;
        };
        let total = self.total.load(Ordering::Relaxed);
        v.model.total = (total != UNKNOWN).then_some(total);
        v.model.record(reading);
        let View { model, screen } = &mut *v;
        let Some(s) = screen else {
            return false;
        };
        if s.draw(model).is_err() {
            // The terminal went away: nothing more to show.
            *screen = None;
            return false;
        }
        true
    }
}

/// "path 0 · 40Mbit 20ms RTT", "203.0.113.7:7000 (relay)" or "path 2".
fn label(setup: &Setup, id: PathId, remote: Option<SocketAddr>) -> String {
    if let Some(note) = setup.notes.get(id.index()) {
        return format!("path {id} · {note}");
    }
    match remote {
        Some(r)
            if setup
                .relays
                .iter()
                .any(|&a| braid_proto::rendezvous::same_addr(a, r)) =>
        {
            format!("{r} (relay)")
        }
        Some(r) => r.to_string(),
        None => format!("path {id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_named_by_note_then_address() {
        let mut setup = Setup {
            side: Side::Send,
            title: String::new(),
            notes: vec!["40Mbit 20ms RTT".into()],
            relays: vec!["203.0.113.7:7000".parse().unwrap()],
        };
        let relay = "[::ffff:203.0.113.7]:7000".parse().ok();
        assert_eq!(label(&setup, PathId(0), relay), "path 0 · 40Mbit 20ms RTT");
        assert_eq!(
            label(&setup, PathId(1), relay),
            "[::ffff:203.0.113.7]:7000 (relay)"
        );
        let direct = "198.51.100.2:7000".parse().ok();
        assert_eq!(label(&setup, PathId(1), direct), "198.51.100.2:7000");
        assert_eq!(label(&setup, PathId(2), None), "path 2");
        setup.notes.clear();
        assert_eq!(label(&setup, PathId(0), direct), "198.51.100.2:7000");
    }
}
