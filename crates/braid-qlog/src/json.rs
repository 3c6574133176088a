//! The few JSON forms the writer needs, written by hand (see `write`).

use std::fmt::Write as _;
use std::time::Duration;

pub(crate) fn push_u64(s: &mut String, v: u64) {
    s.push_str(itoa::Buffer::new().format(v));
}

/// A duration in ms with µs precision, as a JSON number.
pub(crate) fn push_ms(s: &mut String, d: Duration) {
    let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
    push_u64(s, us / 1000);
    let frac = us % 1000;
    s.push('.');
    if frac < 100 {
        s.push('0');
    }
    if frac < 10 {
        s.push('0');
    }
    push_u64(s, frac);
}

/// A duration in ms with µs precision, as a JSON number.
pub(crate) fn ms(d: Duration) -> MsFmt {
    MsFmt(d.as_micros())
}

pub(crate) struct MsFmt(u128);

impl std::fmt::Display for MsFmt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// `text` as a JSON string literal.
pub(crate) fn json_str(s: &mut String, text: &str) {
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}
