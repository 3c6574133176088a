//! Mahimahi packet-delivery traces.
//!
//! Each non-empty line is a millisecond timestamp: one opportunity to deliver
//! up to [`OPPORTUNITY_BYTES`]; a repeated timestamp gives several in that
//! millisecond. The trace loops with a period equal to its last timestamp,
//! as in mahimahi, so a trace of one line "1" is 12 Mbit/s. A trace whose
//! last timestamp is 0 has no period of its own; it loops every 1 ms.
//!
//! Opportunities are numbered 0, 1, 2, … across loops; opportunity `n`
//! happens at `stamp[n % len] + (n / len) * period` ms, which never
//! decreases with `n`.

use std::fmt;

/// Bytes one delivery opportunity carries (one MTU-sized Ethernet frame).
pub const OPPORTUNITY_BYTES: u32 = 1500;

const NANOS_PER_MS: u64 = 1_000_000;

/// Why a trace file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// No timestamps at all.
    #[error("the trace has no timestamps")]
    Empty,
    /// A line is not a non-negative integer.
    #[error("line {line}: {text:?} is not a millisecond timestamp (a non-negative integer)")]
    NotANumber { line: usize, text: String },
    /// Timestamps must never go back in time.
    #[error("line {line}: timestamp {value} is before the previous one ({previous})")]
    Decreasing {
        line: usize,
        value: u64,
        previous: u64,
    },
    /// A timestamp so large that times in nanoseconds would overflow.
    #[error("line {line}: timestamp {value} is too large")]
    TooLarge { line: usize, value: u64 },
}

/// A parsed delivery trace, shared by every link that replays it.
#[derive(Clone, PartialEq, Eq)]
pub struct Trace {
    /// Opportunity timestamps within one loop, ms, non-decreasing.
    stamps: Vec<u64>,
    /// Loop period, ms, at least 1.
    period_ms: u64,
}

/// Largest timestamp accepted: about 58 days, far from u64 overflow in ns
/// even after many loops.
const MAX_STAMP_MS: u64 = 5_000_000_000;

impl Trace {
    /// Parses mahimahi trace text.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut stamps = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let t = raw.trim();
            if t.is_empty() {
                continue;
            }
            let value: u64 = t.parse().map_err(|_| TraceError::NotANumber {
                line,
                text: t.to_string(),
            })?;
            if value > MAX_STAMP_MS {
                return Err(TraceError::TooLarge { line, value });
            }
            if let Some(&previous) = stamps.last() {
                if value < previous {
                    return Err(TraceError::Decreasing {
                        line,
                        value,
                        previous,
                    });
                }
            }
            stamps.push(value);
        }
        let last = *stamps.last().ok_or(TraceError::Empty)?;
        Ok(Trace {
            stamps,
            period_ms: last.max(1),
        })
    }

    /// Opportunities per loop.
    pub fn opportunities_per_period(&self) -> usize {
        self.stamps.len()
    }

    /// Loop period.
    pub fn period_ms(&self) -> u64 {
        self.period_ms
    }

    /// Long-run capacity, bits per second.
    pub fn average_bits_per_sec(&self) -> f64 {
        let bits = self.stamps.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0;
        bits * 1000.0 / self.period_ms as f64
    }

    /// Time of opportunity `n`, ns since the trace's start (saturating).
    pub fn opportunity_nanos(&self, n: u64) -> u64 {
        let len = self.stamps.len() as u64;
        let loops = n / len;
        let idx = (n % len) as usize;
        let ms = loops
            .saturating_mul(self.period_ms)
            .saturating_add(self.stamps[idx]);
        ms.saturating_mul(NANOS_PER_MS)
    }

    /// Index of the first opportunity at or after `t_nanos`.
    pub fn first_at_or_after(&self, t_nanos: u64) -> u64 {
        let t_ms = t_nanos.div_ceil(NANOS_PER_MS);
        let len = self.stamps.len() as u64;
        let k = t_ms / self.period_ms;
        let r = t_ms % self.period_ms;
        // The end of loop k-1 may coincide with the start of loop k: a stamp
        // equal to the period happens at k * period.
        if r == 0 && k > 0 {
            let i = self.stamps.partition_point(|&s| s < self.period_ms);
            if i < self.stamps.len() {
                return (k - 1) * len + i as u64;
            }
        }
        let i = self.stamps.partition_point(|&s| s < r) as u64;
        k * len + i
    }
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace")
            .field("opportunities", &self.stamps.len())
            .field("period_ms", &self.period_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NANOS_PER_MS;

    #[test]
    fn parses_and_loops() {
        let t = Trace::parse("1\n1\n3\n\n5\n").unwrap();
        assert_eq!(t.period_ms(), 5);
        assert_eq!(t.opportunities_per_period(), 4);
        let times: Vec<u64> = (0..9).map(|n| t.opportunity_nanos(n) / MS).collect();
        assert_eq!(times, [1, 1, 3, 5, 6, 6, 8, 10, 11]);
    }

    #[test]
    fn one_line_of_one_is_twelve_megabit() {
        let t = Trace::parse("1").unwrap();
        assert_eq!(t.average_bits_per_sec(), 12_000_000.0);
        assert_eq!(t.opportunity_nanos(0), MS);
        assert_eq!(t.opportunity_nanos(999), 1000 * MS);
    }

    #[test]
    fn zero_last_timestamp_loops_every_millisecond() {
        let t = Trace::parse("0\n0").unwrap();
        assert_eq!(t.period_ms(), 1);
        let times: Vec<u64> = (0..6).map(|n| t.opportunity_nanos(n) / MS).collect();
        assert_eq!(times, [0, 0, 1, 1, 2, 2]);
        assert_eq!(t.first_at_or_after(MS + 1), 4);
    }

    #[test]
    fn first_at_or_after_matches_a_linear_scan() {
        for text in [
            "1",
            "1\n1\n3\n5",
            "0\n2\n2\n4",
            "0\n0\n3",
            "0",
            "2\n2\n7\n7",
        ] {
            let t = Trace::parse(text).unwrap();
            for ns in (0..40 * MS).step_by(250_000) {
                let expect = (0..).find(|&n| t.opportunity_nanos(n) >= ns).unwrap();
                assert_eq!(t.first_at_or_after(ns), expect, "trace {text:?} at {ns} ns");
            }
        }
    }

    #[test]
    fn rejects_bad_traces() {
        assert_eq!(Trace::parse(""), Err(TraceError::Empty));
        assert_eq!(Trace::parse("\n  \n"), Err(TraceError::Empty));
        let e = Trace::parse("1\nx2\n").unwrap_err();
        assert_eq!(
            e,
            TraceError::NotANumber {
                line: 2,
                text: "x2".into()
            }
        );
        assert!(e.to_string().contains("line 2"));
        assert!(Trace::parse("-1").is_err());
        assert!(Trace::parse("1.5").is_err());
        let e = Trace::parse("3\n2").unwrap_err();
        assert!(matches!(
            e,
            TraceError::Decreasing {
                line: 2,
                value: 2,
                previous: 3
            }
        ));
        assert!(Trace::parse("99999999999").is_err());
    }
}
