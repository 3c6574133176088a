//! Replayed key-mode openings. A client's first handshake message carries
//! the date it was written (inside Noise, so nobody can change it), as
//! WireGuard's initiation carries TAI64N. A copy of a genuine opening
//! therefore repeats a date the listener has seen, or one older than the
//! dates it remembers for that key, and opens nothing: not even an answer
//! tells whoever replays it that the listener accepts that client.
//!
//! Per key the listener keeps the newest [`DATES_PER_KEY`] dates, not
//! just the newest one, so that several sessions a client opens at once
//! may arrive in any order; anything older than those is refused. At
//! most [`MAX_KEYS`] keys are remembered (the least recently seen goes,
//! found in logarithmic time), far more than the session ids an endpoint
//! remembers as closed: to make it forget a key, an attacker must have
//! that many openings of keys of its own admitted.
//!
//! The table lives in memory only, so a restarted listener has forgotten
//! every date: it refuses openings dated before it started (less a
//! tolerance for clocks that disagree, [`Freshness`]), and a copy captured
//! before the restart gets no answer either.
//!
//! As with WireGuard's timestamps, a client whose clock runs backwards
//! (or that opens more than [`DATES_PER_KEY`] sessions at once, arriving
//! out of order) finds its older-dated openings refused, in silence,
//! until its clock passes the dates the listener keeps.

use crate::PublicKey;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Opening dates remembered per client key.
pub const DATES_PER_KEY: usize = 8;
/// Client keys remembered: about 14 MB at most.
pub const MAX_KEYS: usize = 65_536;

#[derive(Debug, Default)]
struct KeyDates {
    recent: [u64; DATES_PER_KEY],
    len: usize,
    /// Dates at or below this were forgotten: refused.
    floor: Option<u64>,
    /// When the key was last seen, in openings checked.
    seen: u64,
}

impl KeyDates {
    /// Whether `date` would be recorded: neither seen nor older than all
    /// kept.
    fn admits(&self, date: u64) -> bool {
        let kept = &self.recent[..self.len];
        if self.floor.is_some_and(|f| date <= f) || kept.contains(&date) {
            return false;
        }
        // When full, one older than all kept would be the one forgotten.
        self.len < DATES_PER_KEY || kept.iter().any(|&d| d < date)
    }

    /// Records `date`; false if it was seen or is older than all kept.
    fn insert(&mut self, date: u64) -> bool {
        if !self.admits(date) {
            return false;
        }
        if self.len < DATES_PER_KEY {
            self.recent[self.len] = date;
            self.len += 1;
            return true;
        }
        let (oldest, &min) = self.recent[..self.len]
            .iter()
            .enumerate()
            .min_by_key(|(_, d)| **d)
            .expect("full");
        self.floor = Some(min);
        self.recent[oldest] = date;
        true
    }
}

/// The oldest opening date a listener accepts: its start, by the wall
/// clock, less the disagreement it tolerates between clocks. Both are
/// Unix times' offsets, as openings are dated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// When the listener started, since the Unix epoch.
    pub started: Duration,
    /// How far behind the listener's a client's clock may run: an
    /// opening dated up to this long before the start is still taken
    /// (and so is a replay captured that shortly before a restart).
    pub tolerance: Duration,
}

impl Freshness {
    /// The bound for a listener started at `started` (since the Unix
    /// epoch), with the [`OPENING_DATE_TOLERANCE`].
    pub fn since(started: Duration) -> Freshness {
        Freshness {
            started,
            tolerance: OPENING_DATE_TOLERANCE,
        }
    }

    fn floor(&self) -> u64 {
        let floor = self.started.saturating_sub(self.tolerance);
        u64::try_from(floor.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Clocks kept by NTP agree within milliseconds; this allows for one
/// that is not, and is about as long as a listener takes to restart.
pub const OPENING_DATE_TOLERANCE: Duration = Duration::from_secs(10);

/// The opening dates of each client key the listener remembers.
#[derive(Debug, Default)]
pub(crate) struct OpeningDates {
    /// Dates below this (nanoseconds since the Unix epoch) are refused.
    floor: u64,
    keys: HashMap<PublicKey, KeyDates>,
    /// The keys by when they were last seen, least recent first.
    by_seen: BTreeMap<u64, PublicKey>,
    checked: u64,
}

impl OpeningDates {
    /// An empty table that refuses dates older than `fresh` allows.
    pub fn new(fresh: Option<Freshness>) -> OpeningDates {
        OpeningDates {
            floor: fresh.map_or(0, |f| f.floor()),
            ..OpeningDates::default()
        }
    }

    /// Whether [`OpeningDates::check`] would take `key`'s opening dated
    /// `date`, without recording it.
    pub fn admits(&self, key: PublicKey, date: u64) -> bool {
        date >= self.floor && self.keys.get(&key).is_none_or(|k| k.admits(date))
    }

    /// Records `key`'s opening dated `date` (nanoseconds since the Unix
    /// epoch, by the client's clock); false if it is a replay.
    pub fn check(&mut self, key: PublicKey, date: u64) -> bool {
        if date < self.floor {
            return false;
        }
        self.checked += 1;
        if !self.keys.contains_key(&key) && self.keys.len() >= MAX_KEYS {
            if let Some((_, oldest)) = self.by_seen.pop_first() {
                self.keys.remove(&oldest);
            }
        }
        let k = self.keys.entry(key).or_default();
        self.by_seen.remove(&k.seen);
        k.seen = self.checked;
        self.by_seen.insert(k.seen, key);
        k.insert(date)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> PublicKey {
        PublicKey([n; 32])
    }

    #[test]
    fn a_repeated_date_is_refused_and_order_within_the_window_is_free() {
        let mut t = OpeningDates::default();
        assert!(t.check(key(1), 100));
        assert!(!t.check(key(1), 100));
        // An earlier opening of a parallel session arriving second.
        assert!(t.check(key(1), 90));
        // Another key has its own dates.
        assert!(t.check(key(2), 100));
    }

    #[test]
    fn dates_before_the_start_less_the_tolerance_are_refused() {
        let started = Duration::from_secs(1000);
        let mut t = OpeningDates::new(Some(Freshness::since(started)));
        let at = |s: u64| Duration::from_secs(s).as_nanos() as u64;
        assert!(!t.check(key(1), at(1000) - at(11)));
        assert!(t.check(key(1), at(1000) - at(9)));
        assert!(t.check(key(2), at(2000)));
        assert!(OpeningDates::new(None).check(key(1), 1));
    }

    #[test]
    fn dates_older_than_the_remembered_ones_are_refused() {
        let mut t = OpeningDates::default();
        for date in 1..=DATES_PER_KEY as u64 {
            assert!(t.check(key(1), date * 10));
        }
        // One more pushes out 10: 10 and anything below is refused now.
        assert!(t.check(key(1), 1000));
        assert!(!t.check(key(1), 10));
        assert!(!t.check(key(1), 5));
        // Older than all it remembers: it would be forgotten at once.
        assert!(!t.check(key(1), 15));
        // Newer than the oldest kept (20): kept, and 20 is forgotten.
        assert!(t.check(key(1), 25));
        assert!(!t.check(key(1), 20));
        assert!(!t.check(key(1), 22));
    }

    #[test]
    fn keys_beyond_the_limit_push_out_the_least_recently_seen() {
        let mut t = OpeningDates::default();
        for n in 0..MAX_KEYS as u32 {
            let mut k = [0u8; 32];
            k[..4].copy_from_slice(&n.to_be_bytes());
            assert!(t.check(PublicKey(k), 1));
        }
        assert_eq!(t.keys.len(), MAX_KEYS);
        // Key 1 seen again: no longer the least recently seen.
        let mut one = [0u8; 32];
        one[..4].copy_from_slice(&1u32.to_be_bytes());
        assert!(t.check(PublicKey(one), 2));
        assert!(t.check(key(0xff), 1));
        assert_eq!((t.keys.len(), t.by_seen.len()), (MAX_KEYS, MAX_KEYS));
        assert!(t.keys.contains_key(&PublicKey(one)));
        // Key 0 was the least recently seen: forgotten, its time passes again.
        assert!(t.check(PublicKey([0; 32]), 1));
    }
}
