//! The listener's memory budget, drawn on as receive windows grow rather
//! than reserved in full for each session: a session that holds nothing
//! costs its initial window, one that carries a fast transfer grows its
//! window only while the budget has room, and whatever a session drew
//! returns when the session is dropped.
//!
//! The budget is shared by sessions that the runtime drives on several
//! threads, so its count is atomic; the simulator drives them in turn,
//! and runs stay deterministic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of receive window that a listener's sessions may hold together.
#[derive(Debug, Clone)]
pub(crate) struct MemoryBudget(Arc<Ledger>);

#[derive(Debug)]
struct Ledger {
    limit: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget(Arc::new(Ledger {
            limit,
            used: AtomicU64::new(0),
        }))
    }

    /// Bytes drawn now.
    pub fn used(&self) -> u64 {
        self.0.used.load(Ordering::Relaxed)
    }

    /// Whether `bytes` more would fit now.
    pub fn has_room(&self, bytes: u64) -> bool {
        self.used().saturating_add(bytes) <= self.0.limit
    }

    fn take(&self, bytes: u64) -> bool {
        let ledger = &self.0;
        ledger
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                let after = used.checked_add(bytes)?;
                (after <= ledger.limit).then_some(after)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.0.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// What one session drew from the budget; returned when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: MemoryBudget,
    bytes: u64,
}

impl Reservation {
    /// A reservation that holds nothing yet.
    pub fn empty(budget: &MemoryBudget) -> Reservation {
        Reservation {
            budget: budget.clone(),
            bytes: 0,
        }
    }

    /// Draws up to `bytes` in all; whether the reservation holds them.
    pub fn grow_to(&mut self, bytes: u64) -> bool {
        if bytes <= self.bytes {
            return true;
        }
        let more = bytes - self.bytes;
        if !self.budget.take(more) {
            return false;
        }
        self.bytes = bytes;
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_draw_on_the_budget_and_give_back_when_dropped() {
        let budget = MemoryBudget::new(100);
        let mut a = Reservation::empty(&budget);
        let mut b = Reservation::empty(&budget);
        let mut c = Reservation::empty(&budget);
        assert!(a.grow_to(40) && b.grow_to(40));
        assert!(!c.grow_to(40));
        assert!(!a.grow_to(80));
        assert!(a.grow_to(60));
        assert_eq!(budget.used(), 100);
        assert!(a.grow_to(50), "holds more than asked");
        drop(b);
        assert_eq!(budget.used(), 60);
        assert!(budget.has_room(40) && !budget.has_room(41));
        drop(a);
        assert_eq!(budget.used(), 0);
    }
}
