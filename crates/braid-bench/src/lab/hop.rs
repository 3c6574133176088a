//! A hop of the lab: two TUN devices in two namespaces joined by the
//! simulator's link model, one direction each way, on a thread of its own.
//! The forwarding is [`braid_netns::hop`]'s, the loop `braid link` runs
//! too (same model, same seeds per direction); this adds stopping and
//! taking the hop down and up while it runs: a down link loses what is
//! offered and what is in flight, as in the simulator.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use braid_link::{LinkConfig, LinkState};
use braid_netns::hop::{self, Lane};
use braid_netns::Tun;

/// A running hop; stops (and drops its devices) on drop.
pub struct Hop {
    pub name: String,
    stop: Arc<AtomicBool>,
    /// 0: as configured; 1: down; 2: back up (applied once by the thread).
    state: Arc<AtomicU8>,
    thread: Option<JoinHandle<()>>,
}

impl Hop {
    /// Starts moving packets between `a` and `b`: `ab` shapes what `a`'s
    /// side sends, `ba` the way back; `seeds` seed their randomness.
    pub fn start(
        name: &str,
        a: Tun,
        b: Tun,
        ab: LinkConfig,
        ba: LinkConfig,
        seeds: [u64; 2],
    ) -> anyhow::Result<Hop> {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(AtomicU8::new(0));
        let (s, st) = (stop.clone(), state.clone());
        let thread = std::thread::Builder::new()
            .name(format!("hop {name}"))
            .spawn(move || {
                let mut lanes = [Lane::new(ab, seeds[0]), Lane::new(ba, seeds[1])];
                let origin = std::time::Instant::now();
                // The lab's links mark nothing: ECN is left as the sender set
                // it. A device that fails went with its namespace: the hop ends.
                let _ = hop::forward([&a, &b], &mut lanes, origin, |turn| {
                    if s.load(Ordering::Relaxed) {
                        return ControlFlow::Break(());
                    }
                    let state = match st.swap(0, Ordering::Relaxed) {
                        1 => LinkState::Down,
                        2 => LinkState::Up,
                        _ => return ControlFlow::Continue(()),
                    };
                    for lane in turn.lanes.iter_mut() {
                        lane.set_state(turn.now, state);
                    }
                    ControlFlow::Continue(())
                });
            })?;
        Ok(Hop {
            name: name.to_owned(),
            stop,
            state,
            thread: Some(thread),
        })
    }

    /// Takes the hop down (both directions lose everything) or up again.
    pub fn set_up(&self, up: bool) {
        self.state.store(if up { 2 } else { 1 }, Ordering::Relaxed);
    }
}

impl Drop for Hop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
