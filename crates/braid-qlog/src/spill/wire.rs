//! How each type an event holds is stored: one [`Wire`] impl per type, so
//! an event kind's form is no more than the list of its fields.
//!
//! Integers are LEB128 varints (seven bits a byte, the low ones first);
//! optional values and lengths go before what they count; enums are their
//! variant's number. Reading refuses whatever writing cannot produce: a
//! cut record, an unknown variant, a number too big for its field, text
//! that is not UTF-8.

use braid_proto::cc::Algorithm;
use braid_proto::trace::{
    AckSummary, FrameSummary, LossTimer, LossTrigger, Metrics, Parameters, StreamRange,
};
use braid_proto::{Instant, PathId, PathState, Role};
use std::time::Duration;

/// A value's form in the spill.
pub(crate) trait Wire: Sized {
    /// Appends the value to `out`.
    fn put(&self, out: &mut Vec<u8>);
    /// Reads a value from the front of `input`; `None` if what is there is
    /// not one (then `input` is left anywhere).
    fn take(input: &mut &[u8]) -> Option<Self>;
}

impl Wire for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        let mut v = *self;
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn take(input: &mut &[u8]) -> Option<u64> {
        let mut v = 0;
        // Ten bytes at most: 9 × 7 bits, and the tenth holds the last bit.
        for (i, &b) in input.iter().enumerate().take(10) {
            if i == 9 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                *input = &input[i + 1..];
                return Some(v);
            }
        }
        None
    }
}

/// Integers narrower than u64: a varint that must fit.
macro_rules! narrow_int {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut Vec<u8>) {
                (*self as u64).put(out);
            }

            fn take(input: &mut &[u8]) -> Option<$t> {
                <$t>::try_from(u64::take(input)?).ok()
            }
        }
    )*};
}

narrow_int!(u8, u16, usize);

/// Enums without fields: the variant's number.
macro_rules! wire_enum {
    ($($t:ident { $($variant:ident = $n:literal),* })*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut Vec<u8>) {
                let n: u64 = match self {
                    $($t::$variant => $n,)*
                };
                n.put(out);
            }

            fn take(input: &mut &[u8]) -> Option<$t> {
                match u64::take(input)? {
                    $($n => Some($t::$variant),)*
                    _ => None,
                }
            }
        }
    )*};
}

wire_enum! {
    Role { Client = 0, Server = 1 }
    LossTrigger { Threshold = 0, Timeout = 1, PathClosed = 2 }
    LossTimer { TailLossProbe = 0, Rto = 1 }
    PathState { Active = 0, Probing = 1, Closed = 2 }
}

impl Wire for bool {
    fn put(&self, out: &mut Vec<u8>) {
        u64::from(*self).put(out);
    }

    fn take(input: &mut &[u8]) -> Option<bool> {
        match u64::take(input)? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

impl Wire for PathId {
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
    }

    fn take(input: &mut &[u8]) -> Option<PathId> {
        Some(PathId(u8::take(input)?))
    }
}

impl Wire for Instant {
    fn put(&self, out: &mut Vec<u8>) {
        self.as_nanos().put(out);
    }

    fn take(input: &mut &[u8]) -> Option<Instant> {
        Some(Instant::from_nanos(u64::take(input)?))
    }
}

/// In nanoseconds; past 584 years, the longest that fits.
impl Wire for Duration {
    fn put(&self, out: &mut Vec<u8>) {
        u64::try_from(self.as_nanos()).unwrap_or(u64::MAX).put(out);
    }

    fn take(input: &mut &[u8]) -> Option<Duration> {
        Some(Duration::from_nanos(u64::take(input)?))
    }
}

/// Its length, then its bytes.
fn put_bytes(b: &[u8], out: &mut Vec<u8>) {
    b.len().put(out);
    out.extend_from_slice(b);
}

fn take_bytes<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = usize::take(input)?;
    let (head, rest) = (input.get(..n)?, input.get(n..)?);
    *input = rest;
    Some(head)
}

impl Wire for String {
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(self.as_bytes(), out);
    }

    fn take(input: &mut &[u8]) -> Option<String> {
        String::from_utf8(take_bytes(input)?.to_vec()).ok()
    }
}

/// The names events carry (controllers' and the session's states), which
/// read back as the same `&'static str`; a controller's name reads back
/// too, and any other as `other`.
const NAMES: [&str; 12] = [
    "",
    "slow_start",
    "congestion_avoidance",
    "startup",
    "drain",
    "probe_bw",
    "probe_rtt",
    "handshaking",
    "established",
    "draining",
    "closed",
    "failed",
];

impl Wire for &'static str {
    fn put(&self, out: &mut Vec<u8>) {
        put_bytes(self.as_bytes(), out);
    }

    fn take(input: &mut &[u8]) -> Option<&'static str> {
        let b = std::str::from_utf8(take_bytes(input)?).ok()?;
        let known = NAMES.iter().find(|&&n| n == b).copied();
        let cc = b.parse::<Algorithm>().ok().map(Algorithm::name);
        Some(known.or(cc).unwrap_or("other"))
    }
}

/// 0 for none, 1 before a value.
impl<T: Wire> Wire for Option<T> {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            None => 0u64.put(out),
            Some(v) => {
                1u64.put(out);
                v.put(out);
            }
        }
    }

    fn take(input: &mut &[u8]) -> Option<Option<T>> {
        match u64::take(input)? {
            0 => Some(None),
            1 => Some(Some(T::take(input)?)),
            _ => None,
        }
    }
}

/// Its length, then its items.
impl<T: Wire> Wire for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) {
        self.len().put(out);
        for v in self {
            v.put(out);
        }
    }

    fn take(input: &mut &[u8]) -> Option<Vec<T>> {
        let n = usize::take(input)?;
        // Every item takes a byte at least: a damaged length runs out of
        // input long before it runs out of memory.
        let mut items = Vec::with_capacity(n.min(input.len()));
        for _ in 0..n {
            items.push(T::take(input)?);
        }
        Some(items)
    }
}

impl<A: Wire, B: Wire> Wire for (A, B) {
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
        self.1.put(out);
    }

    fn take(input: &mut &[u8]) -> Option<(A, B)> {
        Some((A::take(input)?, B::take(input)?))
    }
}

impl<T: Wire> Wire for Box<T> {
    fn put(&self, out: &mut Vec<u8>) {
        (**self).put(out);
    }

    fn take(input: &mut &[u8]) -> Option<Box<T>> {
        Some(Box::new(T::take(input)?))
    }
}

/// Structs: their fields in the order listed. The literal that reads one
/// back names every field, so one left out of the list does not compile.
macro_rules! wire_struct {
    ($($t:ident { $($field:ident),* })*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$field.put(out);)*
            }

            fn take(input: &mut &[u8]) -> Option<$t> {
                // A struct literal's fields are evaluated in the order written.
                Some($t { $($field: Wire::take(input)?),* })
            }
        }
    )*};
}

wire_struct! {
    Parameters {
        role, session_id, cc, paths, segment_size, max_ack_delay, sealed, recv_window
    }
    Metrics {
        cwnd, in_flight, srtt, latest_rtt, min_rtt, rttvar, pacing_rate, ssthresh,
        slot_budget, slot_width
    }
    FrameSummary { stream, ack, others }
    StreamRange { offset, len, fin }
    AckSummary { path, ranges, ack_delay_us, cumulative }
}
