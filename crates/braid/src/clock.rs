//! The runtime's clock: real time as the protocol core's [`Instant`].
//!
//! Every session, endpoint and relay of a process shares one epoch, so
//! instants from different tasks compare correctly.

use braid_proto::Instant;
use std::sync::OnceLock;
use std::time::Duration;

static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

fn epoch() -> std::time::Instant {
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Now, as nanoseconds since the process's first use of the clock.
pub fn now() -> Instant {
    Instant::from_nanos(u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// A core instant as a tokio deadline.
pub fn deadline(at: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(epoch() + Duration::from_nanos(at.as_nanos()))
}

/// The wall clock (since the Unix epoch), read with [`now`] to place
/// kernel receive timestamps on this clock.
pub fn wall() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Kernel receive stamps older than this are not believed: the wall clock
/// stepped between the stamp and the read.
const MAX_STAMP_AGE: Duration = Duration::from_secs(1);

/// When a datagram arrived, from its kernel receive timestamp (wall clock,
/// as `SO_TIMESTAMPNS` reports it) and [`now`] with [`wall`] read together
/// after the read. Without a believable stamp it arrived `now`.
pub fn received_at(stamp: Option<Duration>, now: Instant, wall: Duration) -> Instant {
    stamp
        .and_then(|s| wall.checked_sub(s))
        .filter(|&age| age <= MAX_STAMP_AGE)
        .map_or(now, |age| now.saturating_sub(age))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_stamp_dates_the_arrival_before_the_read() {
        let now = Instant::from_nanos(5_000_000_000);
        let wall = Duration::from_secs(1_700_000_000);
        let stamp = wall - Duration::from_micros(300);
        assert_eq!(
            received_at(Some(stamp), now, wall),
            Instant::from_nanos(5_000_000_000 - 300_000)
        );
        // No stamp, one from the future, or one from before a clock step.
        assert_eq!(received_at(None, now, wall), now);
        assert_eq!(
            received_at(Some(wall + Duration::from_millis(1)), now, wall),
            now
        );
        assert_eq!(
            received_at(Some(wall - Duration::from_secs(5)), now, wall),
            now
        );
    }
}
