//! Text for people, shared by the `braid` and `braid-bench` binaries:
//! text from the peer made safe to print (a file name or a close reason
//! may carry terminal escapes, line breaks or bidirectional overrides),
//! and figures with three significant digits and a unit that fits
//! (decimal throughout: kB, MB and Mbit/s are all powers of 1000), and a
//! timeout read back from the command line.

use std::time::Duration;

/// Escapes control characters (C0, DEL, C1), Unicode characters that
/// reorder, hide or break text, and the backslash itself (so an escape in
/// the output is always ours), as `\u{..}`; everything else is kept.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || c == '\\' || is_invisible_format(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Bidirectional marks, overrides and isolates, zero-width and invisible
/// characters, line and paragraph separators, variation selectors, tags.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FE00}'..='\u{FE0F}'
        | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}')
}

/// `x` with three significant digits ("7.97", "94.4", "3870"), no exponent.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return "0".into();
    }
    let mut magnitude = x.abs().log10().floor() as i32;
    // 9.996 rounds to 10.0, a digit more: take the magnitude after rounding.
    let step = 10f64.powi(magnitude - 2);
    if ((x.abs() / step).round() * step) >= 10f64.powi(magnitude + 1) {
        magnitude += 1;
    }
    let decimals = (2 - magnitude).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A size in B, kB, MB, GB or TB: "3.00 MB", "512 B".
pub fn size(bytes: u64) -> String {
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    scaled(bytes as f64, &["B", "kB", "MB", "GB", "TB"])
}

/// A rate in bit/s, kbit/s, Mbit/s or Gbit/s: "7.97 Mbit/s".
pub fn rate(bits_per_s: f64) -> String {
    scaled(
        bits_per_s,
        &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"],
    )
}

/// "3.00 s", "16.9 s", "123 s", "90.1 ms".
pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{} ms", sig3(s * 1e3))
    } else {
        format!("{} s", sig3(s))
    }
}

/// Milliseconds, three significant digits: "0.257", "11.7".
pub fn ms(d: Duration) -> String {
    sig3(d.as_secs_f64() * 1e3)
}

/// A timeout from the command line ("90s", "500ms"): zero would fail at once.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    match braid_link::units::parse_duration(s).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("a timeout must be longer than 0".into()),
        d => Ok(d),
    }
}

fn scaled(mut x: f64, units: &[&str]) -> String {
    let mut unit = 0;
    // Compare the rounded text so that 999.6 kB shows as "1.00 MB".
    while unit + 1 < units.len() && sig3(x).trim_start_matches('-').len() > 3 && x.abs() >= 999.5 {
        x /= 1000.0;
        unit += 1;
    }
    format!("{} {}", sig3(x), units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_reordering_characters_are_escaped() {
        assert_eq!(escape("report.pdf"), "report.pdf");
        assert_eq!(escape("naïve café.txt"), "naïve café.txt");
        assert_eq!(escape("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape("line\nbreak\r"), "line\\u{a}break\\u{d}");
        assert_eq!(escape("gpj.\u{202E}exe"), "gpj.\\u{202e}exe");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("a\u{2028}b\u{2066}c"), "a\\u{2028}b\\u{2066}c");
        // A backslash in the text cannot pass for one of our escapes.
        assert_eq!(escape("\\u{1b}"), "\\u{5c}u{1b}");
    }

    #[test]
    fn three_significant_digits() {
        assert_eq!(sig3(7.970135), "7.97");
        assert_eq!(sig3(94.41), "94.4");
        assert_eq!(sig3(0.2571), "0.257");
        assert_eq!(sig3(0.18), "0.180");
        assert_eq!(sig3(0.0999), "0.0999");
        assert_eq!(sig3(9.996), "10.0");
        assert_eq!(sig3(999.6), "1000");
        assert_eq!(sig3(0.0), "0");
    }

    #[test]
    fn units_fit_the_figure() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(3_000_000), "3.00 MB");
        assert_eq!(size(999_600), "1.00 MB");
        assert_eq!(size(104_857_600), "105 MB");
        assert_eq!(rate(7_970_135.0), "7.97 Mbit/s");
        assert_eq!(rate(3_871_770_850.0), "3.87 Gbit/s");
        assert_eq!(rate(0.0), "0 bit/s");
        assert_eq!(duration(Duration::from_nanos(3_000_745_159)), "3.00 s");
        assert_eq!(duration(Duration::from_millis(16_984)), "17.0 s");
        assert_eq!(duration(Duration::from_micros(90_120)), "90.1 ms");
        assert_eq!(ms(Duration::from_micros(257)), "0.257");
    }

    #[test]
    fn a_timeout_is_longer_than_zero() {
        assert_eq!(parse_timeout("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("soon").is_err());
    }
}
