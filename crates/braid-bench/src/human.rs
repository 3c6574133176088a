//! Figures for people: three significant digits and a unit that fits
//! (decimal: kB and MB are powers of 1000), as braid prints them.

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
    fn sizes_have_three_digits_and_a_unit() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(3_000_000), "3.00 MB");
        assert_eq!(size(999_600), "1.00 MB");
    }
}
