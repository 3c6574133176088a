//! Quantities with units as people write them in scenario files and on
//! command lines: rates ("50Mbit", "1024pps"), durations ("20ms", "1.5s"),
//! sizes ("4MiB") and probabilities (0.01, "1%").
//!
//! Numbers are parsed as exact decimals, so "1.5Mbit" is exactly 1 500 000
//! bit/s; a result that is not a whole number of the base unit (bit/s, ns,
//! byte) is rounded to the nearest one.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const RATE_EXPECTED: &str = "a rate such as \"50Mbit\", \"1.5Mbps\", \"800bit\" or \"1024pps\"";
const DURATION_EXPECTED: &str = "a duration such as \"20ms\", \"1.5s\", \"250us\" or 0";
const SIZE_EXPECTED: &str = "a size such as 1200, \"1200B\", \"50MB\" or \"4MiB\"";
const PROBABILITY_EXPECTED: &str =
    "a probability from 0 to 1 such as 0.01, or a percentage such as \"1%\"";

/// A value that could not be read as the quantity it stands for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {value:?}: {problem}; expected {expected}")]
pub struct UnitError {
    kind: &'static str,
    value: String,
    problem: String,
    expected: &'static str,
}

impl UnitError {
    fn new(kind: &'static str, value: &str, problem: impl Into<String>) -> Self {
        let expected = match kind {
            "rate" => RATE_EXPECTED,
            "duration" => DURATION_EXPECTED,
            "probability" => PROBABILITY_EXPECTED,
            _ => SIZE_EXPECTED,
        };
        UnitError {
            kind,
            value: value.to_string(),
            problem: problem.into(),
            expected,
        }
    }
}

/// A link's service rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Bits per second of wire bytes (IP header included).
    BitsPerSec(u64),
    /// Packets per second whatever their size, as NKP-0024's mockconn.
    PacketsPerSec(f64),
}

impl Rate {
    /// Megabits per second.
    pub fn mbit(n: u64) -> Rate {
        Rate::BitsPerSec(n.saturating_mul(1_000_000))
    }

    /// Whether the rate can serve anything at all (non-zero and finite).
    pub fn is_positive(&self) -> bool {
        match *self {
            Rate::BitsPerSec(b) => b > 0,
            Rate::PacketsPerSec(p) => p.is_finite() && p > 0.0,
        }
    }
}

impl FromStr for Rate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Rate, UnitError> {
        let err = |p: &str| UnitError::new("rate", s, p);
        let (num, unit) = split_number(s).map_err(|p| err(&p))?;
        if unit.is_empty() {
            return Err(err("a rate needs a unit"));
        }
        if unit == "pps" {
            let pps: f64 = num.parse().map_err(|_| err("not a number"))?;
            if !pps.is_finite() {
                return Err(err("too large"));
            }
            return Ok(Rate::PacketsPerSec(pps));
        }
        let prefix = unit
            .strip_suffix("bit")
            .or_else(|| unit.strip_suffix("bps"))
            .ok_or_else(|| err(&format!("unknown unit {unit:?}")))?;
        let mult: u64 = match prefix {
            "" => 1,
            "k" | "K" => 1_000,
            "m" | "M" => 1_000_000,
            "g" | "G" => 1_000_000_000,
            "t" | "T" => 1_000_000_000_000,
            _ => return Err(err(&format!("unknown unit {unit:?}"))),
        };
        let dec = Decimal::parse(num).map_err(|p| err(&p))?;
        dec.scaled(mult).map(Rate::BitsPerSec).map_err(|p| err(&p))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rate::BitsPerSec(b) => {
                let (n, unit) =
                    largest_exact(b, &[(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "K")]);
                write!(f, "{n}{unit}bit")
            }
            Rate::PacketsPerSec(p) => write!(f, "{p}pps"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(RATE_EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                Err(E::custom(UnitError::new(
                    "rate",
                    &v.to_string(),
                    "a rate needs a unit",
                )))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Err(E::custom(UnitError::new(
                    "rate",
                    &v.to_string(),
                    "a rate needs a unit",
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
                Err(E::custom(UnitError::new(
                    "rate",
                    &v.to_string(),
                    "a rate needs a unit",
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses "20ms", "1.5s", "250us", "10ns", "2min" or a plain "0".
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let err = |p: &str| UnitError::new("duration", s, p);
    let (num, unit) = split_number(s).map_err(|p| err(&p))?;
    let dec = Decimal::parse(num).map_err(|p| err(&p))?;
    let mult: u64 = match unit {
        "" if dec.is_zero() => 1,
        "" => return Err(err("a non-zero duration needs a unit (ns, us, ms, s, min)")),
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        _ => return Err(err(&format!("unknown unit {unit:?}"))),
    };
    dec.scaled(mult)
        .map(Duration::from_nanos)
        .map_err(|p| err(&p))
}

/// Canonical text for a duration: the largest of s, ms, us, ns that divides
/// it exactly ("20ms", "1500ms", "600s"); zero is "0ms".
pub fn format_duration(d: Duration) -> String {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if ns == 0 {
        return "0ms".to_string();
    }
    let (n, unit) = largest_exact(
        ns,
        &[(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")],
    );
    if unit.is_empty() {
        format!("{n}ns")
    } else {
        format!("{n}{unit}")
    }
}

/// Parses a byte count: "1200", "1200B", "4KB", "50MB", "1GB" (powers of
/// 10), "256KiB", "4MiB", "1GiB" (powers of 2), or "1.5MB".
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = |p: &str| UnitError::new("size", s, p);
    let (num, unit) = split_number(s).map_err(|p| err(&p))?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return Err(err(&format!("unknown unit {unit:?}"))),
    };
    let dec = Decimal::parse(num).map_err(|p| err(&p))?;
    dec.scaled(mult).map_err(|p| err(&p))
}

/// Canonical text for a byte count: the largest unit that divides it
/// exactly ("50MB", "4MiB", "1200B").
pub fn format_size(bytes: u64) -> String {
    let (n, unit) = largest_exact(
        bytes,
        &[
            (1 << 40, "TiB"),
            (1_000_000_000_000, "TB"),
            (1 << 30, "GiB"),
            (1_000_000_000, "GB"),
            (1 << 20, "MiB"),
            (1_000_000, "MB"),
            (1 << 10, "KiB"),
            (1_000, "KB"),
        ],
    );
    if unit.is_empty() {
        format!("{n}B")
    } else {
        format!("{n}{unit}")
    }
}

/// A duration that deserialises from a string with units or the integer 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Span, UnitError> {
        parse_duration(s).map(Span)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(DURATION_EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Span, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Span, E> {
                if v == 0 {
                    return Ok(Span(Duration::ZERO));
                }
                let p = "a non-zero duration needs a unit, written as a string";
                Err(E::custom(UnitError::new("duration", &v.to_string(), p)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Span, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Span, E> {
                let p = "a duration needs a unit, written as a string";
                Err(E::custom(UnitError::new("duration", &v.to_string(), p)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A byte count that deserialises from a string with units or a bare
/// non-negative integer (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<ByteSize, UnitError> {
        parse_size(s).map(ByteSize)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(SIZE_EXPECTED)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).map(ByteSize).map_err(|_| {
                    E::custom(UnitError::new(
                        "size",
                        &v.to_string(),
                        "a size cannot be negative",
                    ))
                })
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ByteSize, E> {
                let p = "a fractional size needs a unit, written as a string";
                Err(E::custom(UnitError::new("size", &v.to_string(), p)))
            }
        }
        d.deserialize_any(V)
    }
}

/// The one range rule of probabilities (loss, duplication, Gilbert–Elliott
/// transitions): from 0 to 1, both included; never NaN.
pub fn is_probability(p: f64) -> bool {
    (0.0..=1.0).contains(&p)
}

/// Parses a probability as a fraction ("0.01") or a percentage ("1%",
/// "0.5 %"), within [`is_probability`]'s range.
pub fn parse_probability(s: &str) -> Result<f64, UnitError> {
    let p = probability_value(s)?;
    if !is_probability(p) {
        return Err(UnitError::new("probability", s, "out of range"));
    }
    Ok(p)
}

/// The number "0.01" or "1%" stands for, range unchecked.
fn probability_value(s: &str) -> Result<f64, UnitError> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim_end(), 100.0),
        None => (t, 1.0),
    };
    let v: f64 = number
        .parse()
        .map_err(|_| UnitError::new("probability", s, "not a number"))?;
    Ok(v / scale)
}

/// A probability as a scenario file writes it: a number (0.01) or a string
/// with a percentage ("1%"). Its range is checked where it is used
/// ([`LinkConfig::validate`](crate::LinkConfig::validate)), so that the
/// error can name the key.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Probability(pub f64);

impl<'de> Deserialize<'de> for Probability {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Probability, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Probability;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(PROBABILITY_EXPECTED)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Probability, E> {
                Ok(Probability(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Probability, E> {
                Ok(Probability(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Probability, E> {
                Ok(Probability(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Probability, E> {
                probability_value(v).map(Probability).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `#[serde(with = "units::duration_serde")]` for a plain `Duration` field.
pub mod duration_serde {
    use super::Span;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    /// Writes the canonical string form.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        Span(*d).serialize(s)
    }

    /// Reads a string with units or the integer 0.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Span::deserialize(d).map(|s| s.0)
    }
}

/// `#[serde(with = "units::size_serde")]` for a plain `u64` byte-count field.
pub mod size_serde {
    use super::ByteSize;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the integer byte count.
    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v)
    }

    /// Reads a string with units or a bare integer of bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        ByteSize::deserialize(d).map(|b| b.0)
    }
}

/// Splits "1.5 Mbit" into ("1.5", "Mbit"); rejects signs and empty input.
fn split_number(s: &str) -> Result<(&str, &str), String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty value".to_string());
    }
    if t.starts_with('-') {
        return Err("cannot be negative".to_string());
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    if num.is_empty() {
        return Err("missing number".to_string());
    }
    Ok((num, unit.trim_start()))
}

/// A non-negative decimal `mantissa / 10^scale`, kept exact.
struct Decimal {
    mantissa: u128,
    scale: u32,
}

/// Enough digits for any u64 times any unit, without u128 overflow.
const MAX_DIGITS: u32 = 24;

impl Decimal {
    fn parse(num: &str) -> Result<Decimal, String> {
        let (int, frac) = match num.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num, ""),
        };
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(format!("{num:?} is not a number"));
        }
        let mut mantissa: u128 = 0;
        let mut digits = 0u32;
        for c in int.chars().chain(frac.chars()) {
            let d = c
                .to_digit(10)
                .ok_or_else(|| format!("{num:?} is not a number"))?;
            if mantissa > 0 || d > 0 {
                digits += 1;
            }
            if digits > MAX_DIGITS {
                return Err("too many digits".to_string());
            }
            mantissa = mantissa * 10 + u128::from(d);
        }
        let scale = u32::try_from(frac.len()).unwrap_or(u32::MAX);
        if scale > MAX_DIGITS {
            return Err("too many digits".to_string());
        }
        Ok(Decimal { mantissa, scale })
    }

    fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// `self * mult`, rounded to the nearest integer.
    fn scaled(&self, mult: u64) -> Result<u64, String> {
        let div = 10u128.pow(self.scale);
        let v = self.mantissa * u128::from(mult);
        let rounded = (v + div / 2) / div;
        u64::try_from(rounded).map_err(|_| "too large".to_string())
    }
}

/// The largest `(unit, name)` that divides `v` exactly, else `(v, "")`.
fn largest_exact(v: u64, units: &[(u64, &'static str)]) -> (u64, &'static str) {
    if v == 0 {
        return (0, "");
    }
    units
        .iter()
        .find(|(u, _)| v.checked_rem(*u) == Some(0))
        .map(|&(u, name)| (v / u, name))
        .unwrap_or((v, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(s: &str) -> Rate {
        s.parse().unwrap()
    }

    #[test]
    fn rates_parse() {
        assert_eq!(rate("50Mbit"), Rate::BitsPerSec(50_000_000));
        assert_eq!(rate("10Kbit"), Rate::BitsPerSec(10_000));
        assert_eq!(rate("1Gbit"), Rate::BitsPerSec(1_000_000_000));
        assert_eq!(rate("1.5Mbit"), Rate::BitsPerSec(1_500_000));
        assert_eq!(rate("800bit"), Rate::BitsPerSec(800));
        assert_eq!(rate("50Mbps"), Rate::BitsPerSec(50_000_000));
        assert_eq!(rate("10Kbps"), Rate::BitsPerSec(10_000));
        assert_eq!(rate("2Gbps"), Rate::BitsPerSec(2_000_000_000));
        assert_eq!(rate("50 mbit"), Rate::BitsPerSec(50_000_000));
        assert_eq!(rate("1024pps"), Rate::PacketsPerSec(1024.0));
        assert_eq!(rate("0.5pps"), Rate::PacketsPerSec(0.5));
    }

    #[test]
    fn rates_reject() {
        for bad in [
            "",
            "Mbit",
            "50",
            "50 furlongs",
            "-1Mbit",
            "50MBps",
            "1.2.3Mbit",
            "pps",
        ] {
            let e = bad.parse::<Rate>().unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
            assert!(e.contains("expected a rate"), "{e}");
        }
        assert!("99999999999999999999Gbit".parse::<Rate>().is_err());
    }

    #[test]
    fn rates_display_round_trip() {
        for s in ["50Mbit", "1500Kbit", "800bit", "1Gbit", "1024pps", "0.5pps"] {
            assert_eq!(rate(s).to_string(), s);
        }
        assert_eq!(rate("1.5Mbps").to_string(), "1500Kbit");
        assert!(rate("1Kbit").is_positive());
        assert!(!rate("0Kbit").is_positive());
        assert!(!rate("0pps").is_positive());
    }

    #[test]
    fn durations_parse() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("20ms").unwrap(), ms(20));
        assert_eq!(parse_duration("1.5s").unwrap(), ms(1500));
        assert_eq!(parse_duration("0ms").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
        assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0.1s").unwrap(), ms(100));
        assert_eq!(parse_duration(".5s").unwrap(), ms(500));
    }

    #[test]
    fn durations_reject() {
        for bad in ["", "20", "ms", "-1s", "20 furlongs", "1.5.s", "1e3ms", "."] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains("expected a duration"), "{e}");
        }
    }

    #[test]
    fn durations_display() {
        let f = |s: &str| format_duration(parse_duration(s).unwrap());
        assert_eq!(f("20ms"), "20ms");
        assert_eq!(f("1.5s"), "1500ms");
        assert_eq!(f("600s"), "600s");
        assert_eq!(f("0"), "0ms");
        assert_eq!(f("250us"), "250us");
        assert_eq!(f("3ns"), "3ns");
        assert_eq!(f("2min"), "120s");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("50MB").unwrap(), 50_000_000);
        assert_eq!(parse_size("4KB").unwrap(), 4_000);
        assert_eq!(parse_size("4kB").unwrap(), 4_000);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("256KiB").unwrap(), 256 << 10);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("1200B").unwrap(), 1200);
        assert_eq!(parse_size("1200").unwrap(), 1200);
        assert_eq!(parse_size("1.5MB").unwrap(), 1_500_000);
        assert_eq!(parse_size("0.5KiB").unwrap(), 512);
    }

    #[test]
    fn sizes_reject() {
        for bad in [
            "",
            "50 furlongs",
            "-1MB",
            "MB",
            "1.5.MB",
            "4mb",
            "99999999999TB",
        ] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains("expected a size"), "{e}");
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        let e = parse_size("-1MB").unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
    }

    #[test]
    fn sizes_display() {
        assert_eq!(format_size(50_000_000), "50MB");
        assert_eq!(format_size(4 << 20), "4MiB");
        assert_eq!(format_size(1200), "1200B");
        assert_eq!(format_size(1_500_000), "1500KB");
        assert_eq!(format_size(0), "0B");
        assert_eq!(ByteSize(256 << 10).to_string(), "256KiB");
    }

    #[test]
    fn probabilities_are_fractions_or_percentages() {
        assert_eq!(parse_probability("0.01").unwrap(), 0.01);
        assert_eq!(parse_probability("1%").unwrap(), 0.01);
        assert_eq!(parse_probability(" 7.5 % ").unwrap(), 0.075);
        assert_eq!(parse_probability("100%").unwrap(), 1.0);
        assert_eq!(parse_probability("0").unwrap(), 0.0);
        for bad in ["1.5", "150%", "-1%", "-0.1", "lots", "NaN", "inf", "", "%"] {
            let e = parse_probability(bad).unwrap_err().to_string();
            assert!(e.contains("expected a probability"), "{e}");
        }
        assert!(is_probability(0.0) && is_probability(1.0));
        assert!(!is_probability(f64::NAN) && !is_probability(1.0 + f64::EPSILON));
    }

    #[derive(Debug, Deserialize, Serialize)]
    struct Doc {
        rate: Option<Rate>,
        size: Option<ByteSize>,
        span: Option<Span>,
        #[serde(default, with = "duration_serde")]
        plain: Duration,
        #[serde(skip_serializing)]
        p: Option<Probability>,
    }

    fn doc(text: &str) -> Result<Doc, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn serde_accepts_strings_and_integers() {
        let d = doc("rate = \"50Mbit\"\nsize = 1200\nspan = \"20ms\"\nplain = \"1s\"").unwrap();
        assert_eq!(d.rate, Some(Rate::BitsPerSec(50_000_000)));
        assert_eq!(d.size, Some(ByteSize(1200)));
        assert_eq!(d.span, Some(Span(Duration::from_millis(20))));
        assert_eq!(d.plain, Duration::from_secs(1));
        assert_eq!(
            doc("size = \"4MiB\"").unwrap().size,
            Some(ByteSize(4 << 20))
        );
        assert_eq!(doc("span = 0").unwrap().span, Some(Span(Duration::ZERO)));
        assert_eq!(doc("p = 0.01").unwrap().p, Some(Probability(0.01)));
        assert_eq!(doc("p = \"1%\"").unwrap().p, Some(Probability(0.01)));
        assert_eq!(doc("p = 1").unwrap().p, Some(Probability(1.0)));
        let back = toml::to_string(&d).unwrap();
        assert!(back.contains("rate = \"50Mbit\""), "{back}");
        assert!(back.contains("span = \"20ms\""), "{back}");
    }

    #[test]
    fn serde_rejects_bare_numbers_where_units_are_needed() {
        let e = doc("rate = 50").unwrap_err();
        assert!(e.contains("needs a unit"), "{e}");
        let e = doc("span = 20").unwrap_err();
        assert!(e.contains("needs a unit"), "{e}");
        let e = doc("size = -1").unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = doc("size = \"50 furlongs\"").unwrap_err();
        assert!(e.contains("unknown unit"), "{e}");
        let e = doc("p = \"lots\"").unwrap_err();
        assert!(e.contains("expected a probability"), "{e}");
    }
}
