//! A suite row: its scenario file, the `[published]` figures beside it
//! (docs/scenarios.md) and what follows from the file alone: parameters,
//! the ideal goodput and braid's header overhead.

use anyhow::Context as _;
use braid_proto::cc::Algorithm;
use braid_proto::wire;
use braid_sim::{Published, Scenario};
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// braid's default payload per data packet.
pub fn default_segment_size() -> u64 {
    u64::from(braid_proto::SessionConfig::default().segment_size)
}
/// TCP's payload/wire ratio with 1500-byte packets and timestamps.
pub const TCP_RATIO: f64 = 1448.0 / 1500.0;

/// One scenario file of a suite.
pub struct Row {
    pub suite: String,
    /// The file name without `.toml`.
    pub name: String,
    pub path: PathBuf,
    pub scenario: Scenario,
    /// The file as TOML, for the parameters as written.
    raw: Table,
    /// Its `[published]` table (empty if none).
    pub published: Published,
    /// The controller the row is about, if it fixes one (`report_cc`).
    pub report_cc: Option<Algorithm>,
    pub segment_size: u64,
    /// Bytes of the first flow.
    pub bytes: u64,
    /// Some flow also sends server → client.
    pub duplex: bool,
    pub multi_flow: bool,
    /// Some used path's rate is in packets per second (header size costs nothing).
    pub pps: bool,
}

impl Row {
    pub fn load(suite: &str, path: &Path) -> anyhow::Result<Row> {
        let scenario = Scenario::from_file(path)?;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let raw: Table =
            toml::from_str(&text).with_context(|| format!("{} is not TOML", path.display()))?;
        let published = scenario.published.clone().unwrap_or_default();
        let report_cc = published
            .report_cc
            .as_deref()
            .map(str::parse::<Algorithm>)
            .transpose()
            .with_context(|| format!("{}: report_cc", path.display()))?;
        let first = scenario.flows.first();
        let pps = scenario.paths.iter().any(|p| {
            matches!(
                p.forward.rate,
                Some(braid_link::units::Rate::PacketsPerSec(_))
            )
        });
        Ok(Row {
            suite: suite.to_owned(),
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: path.to_owned(),
            segment_size: first
                .map_or_else(default_segment_size, |f| u64::from(f.session.segment_size)),
            bytes: first.map_or(0, |f| f.bytes),
            duplex: scenario.flows.iter().any(|f| f.reverse_bytes > 0),
            multi_flow: scenario.flows.len() > 1,
            pps,
            scenario,
            raw,
            published,
            report_cc,
        })
    }

    /// The seed's TCP figure in Mbit/s, from the row's `unit`.
    pub fn seed_tcp_mbps(&self) -> Option<f64> {
        self.in_mbps(self.published.seed_tcp)
    }

    /// The seed system's figure in Mbit/s, from the row's `unit`.
    pub fn seed_system_mbps(&self) -> Option<f64> {
        self.in_mbps(self.published.seed_system)
    }

    fn in_mbps(&self, v: Option<f64>) -> Option<f64> {
        let v = v?;
        unit_to_mbps(self.published.unit.as_deref()).map(|f| v * f)
    }

    /// The best of the published Linux TCP figures and its name.
    pub fn linux_best(&self) -> Option<(f64, &'static str)> {
        let cubic = self.published.linux_cubic;
        let bbr = self.published.linux_bbr;
        match (cubic, bbr) {
            (Some(c), Some(b)) if b > c => Some((b, "bbr")),
            (Some(c), _) => Some((c, "cubic")),
            (None, Some(b)) => Some((b, "bbr")),
            (None, None) => None,
        }
    }

    /// Scenario paths any flow uses, in order.
    pub fn used_paths(&self) -> Vec<usize> {
        let mut used: Vec<usize> = self
            .scenario
            .flows
            .iter()
            .flat_map(|f| f.paths.iter().copied())
            .collect();
        used.sort_unstable();
        used.dedup();
        used
    }

    /// A path's capacity in Mbit/s (payload-sized packets for pps rates),
    /// times (1 − loss) if asked; None for trace-driven paths.
    pub fn path_capacity_mbps(&self, i: usize, with_loss: bool) -> Option<f64> {
        use braid_link::units::Rate;
        let link = &self.scenario.paths.get(i)?.forward;
        let mbps = match link.rate? {
            Rate::BitsPerSec(b) => b as f64 / 1e6,
            Rate::PacketsPerSec(p) => p * self.segment_size as f64 * 8.0 / 1e6,
        };
        Some(if with_loss {
            mbps * (1.0 - link.loss)
        } else {
            mbps
        })
    }

    /// Capacity × (1 − loss) over the used paths, before header overhead.
    pub fn ideal_mbps(&self) -> Option<f64> {
        self.used_paths()
            .into_iter()
            .map(|i| self.path_capacity_mbps(i, true))
            .sum()
    }

    /// braid's payload/wire ratio for this row (1 on pps links).
    pub fn payload_ratio(&self) -> f64 {
        if self.pps {
            1.0
        } else {
            payload_ratio(self.segment_size, self.bytes)
        }
    }

    /// The round-trip time of the first used path, seconds (2 × delay).
    pub fn rtt_s(&self) -> f64 {
        self.used_paths()
            .first()
            .and_then(|&i| self.scenario.paths.get(i))
            .map_or(0.0, |p| (p.forward.delay + p.reverse.delay).as_secs_f64())
    }

    /// Forward random loss of the first used path.
    pub fn loss(&self) -> f64 {
        self.used_paths()
            .first()
            .and_then(|&i| self.scenario.paths.get(i))
            .map_or(0.0, |p| p.forward.loss)
    }

    /// The first used path's queue as written (packets), if it is a number.
    pub fn queue_packets(&self) -> Option<f64> {
        let i = *self.used_paths().first()?;
        match self.raw_paths().get(i)?.get("queue")? {
            Value::Integer(q) => Some(*q as f64),
            _ => None,
        }
    }

    /// The first used path's rate as written.
    pub fn rate_text(&self) -> String {
        let i = self.used_paths().first().copied().unwrap_or(0);
        self.raw_paths()
            .get(i)
            .and_then(|p| p.get("rate"))
            .map(value_text)
            .unwrap_or_else(|| "trace".into())
    }

    fn raw_paths(&self) -> Vec<&Table> {
        raw_array(&self.raw, "path")
    }

    /// The row's parameters as written: each used path, then each flow's size.
    pub fn params(&self) -> String {
        let paths = self.raw_paths();
        let mut out = Vec::new();
        for i in self.used_paths() {
            let Some(p) = paths.get(i) else { continue };
            let spec = &self.scenario.paths[i].forward;
            let mut bits = vec![p
                .get("rate")
                .or_else(|| p.get("trace"))
                .map_or_else(|| "trace".into(), value_text)];
            let mut rtt = format!("RTT {}", fmt_ms(2.0 * spec.delay.as_secs_f64()));
            if !spec.jitter.is_zero() {
                rtt += &format!("±{}", fmt_ms(2.0 * spec.jitter.as_secs_f64()));
            }
            bits.push(rtt);
            let rloss = self.scenario.paths[i].reverse.loss;
            if spec.loss > 0.0 || rloss > 0.0 {
                let mut s = format!("loss {}%", trim(spec.loss * 100.0));
                if rloss > 0.0 {
                    s += &format!("/{}% rev", trim(rloss * 100.0));
                }
                bits.push(s);
            }
            if let Some(q) = p.get("queue") {
                bits.push(format!("q {}", value_text(q)));
            }
            if let Some(e) = p.get("ecn").map(value_text).filter(|e| e != "off") {
                bits.push(format!("ecn {e}"));
            }
            for e in p
                .get("events")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let get = |k: &str| e.get(k).map(value_text).unwrap_or_default();
                let mut s = format!("{} at {}", get("do"), get("at"));
                if e.get("for").is_some() {
                    s += &format!(" for {}", get("for"));
                }
                bits.push(s);
            }
            out.push(bits.join(" "));
        }
        let flows: Vec<String> = raw_array(&self.raw, "flow")
            .iter()
            .zip(&self.scenario.flows)
            .map(|(raw, spec)| {
                let mut b = raw.get("bytes").map(value_text).unwrap_or_default();
                if spec.reverse_bytes > 0 {
                    b += &format!(
                        " ⇄ {}",
                        raw.get("reverse_bytes").map(value_text).unwrap_or_default()
                    );
                }
                if !spec.start.is_zero() {
                    b += &format!(" @{}", raw.get("start").map(value_text).unwrap_or_default());
                }
                if raw.contains_key("rto_k") {
                    b += &format!(" k={}", trim(spec.session.rto.k));
                }
                b
            })
            .collect();
        format!("{}; {}", out.join(" + "), flows.join(", "))
    }
}

fn raw_array<'a>(t: &'a Table, key: &str) -> Vec<&'a Table> {
    t.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_table).collect())
        .unwrap_or_default()
}

/// A TOML value as a person wrote it (strings unquoted).
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A float without trailing zeros (like Python's `%g` for short values).
pub fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

fn fmt_ms(s: f64) -> String {
    let ms = s * 1e3;
    if ms >= 1.0 || ms == 0.0 {
        format!("{}ms", trim(ms))
    } else {
        format!("{}us", trim(ms * 1e3))
    }
}

/// Factor converting a `[published]` unit to Mbit/s; None if unknown.
pub fn unit_to_mbps(unit: Option<&str>) -> Option<f64> {
    let Some(u) = unit.map(str::trim) else {
        return Some(1.0);
    };
    if u.is_empty() || u.starts_with("Mbit/s") || u.starts_with("Mbps") {
        Some(1.0)
    } else if u.starts_with("Gbit/s") {
        Some(1000.0)
    } else if u.starts_with("MB/s") {
        Some(if u.contains("2^20") {
            8.0 * 1_048_576.0 / 1e6
        } else {
            8.0
        })
    } else if u.starts_with("KB/s") || u.starts_with("kB/s") {
        Some(8e-3)
    } else {
        None
    }
}

/// Mean STREAM frame overhead over a transfer of `total` bytes in `segment_size`
/// segments, as the core encodes it within the default receive window.
pub fn stream_overhead(total: u64, segment_size: u64) -> f64 {
    let segment_size = segment_size.max(1);
    let n = total.div_ceil(segment_size).max(1);
    let window = braid_proto::SessionConfig::default().recv_window;
    let sum: u64 = (0..n)
        .map(|k| wire::stream_frame_overhead_within(k * segment_size, window) as u64)
        .sum();
    sum as f64 / n as f64
}

/// Wire bytes of one full data packet: payload, braid header, STREAM frame, IP/UDP.
pub fn wire_bytes(segment_size: u64, total: u64) -> f64 {
    segment_size as f64
        + wire::data_datagram_overhead(false) as f64
        + stream_overhead(total, segment_size)
        + f64::from(braid_sim::IP_UDP_OVERHEAD)
}

pub fn payload_ratio(segment_size: u64, total: u64) -> f64 {
    segment_size as f64 / wire_bytes(segment_size, total)
}

/// Orders file names with numbers by value ("2-x" before "10-x").
pub fn natural_key(name: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut digits = String::new();
    let mut text = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !text.is_empty() {
                out.push((u64::MAX, std::mem::take(&mut text)));
            }
            digits.push(c);
        } else {
            if !digits.is_empty() {
                out.push((digits.parse().unwrap_or(u64::MAX), String::new()));
                digits.clear();
            }
            text.push(c);
        }
    }
    if !digits.is_empty() {
        out.push((digits.parse().unwrap_or(u64::MAX), String::new()));
    }
    if !text.is_empty() {
        out.push((u64::MAX, text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_matches_the_wire_format() {
        // 50 MB in 1380-byte segments: offsets truncated to 3 bytes within
        // the default window, after the frame type; the data runs to the
        // end, so no length field.
        assert_eq!(stream_overhead(50_000_000, 1380), 4.0);
        // 1380 + a short header 4 (a 2-byte packet number) + frame 4 +
        // IPv4/UDP 28.
        assert_eq!(wire_bytes(1380, 50_000_000), 1416.0);
    }

    #[test]
    fn units_convert() {
        assert_eq!(unit_to_mbps(None), Some(1.0));
        assert_eq!(unit_to_mbps(Some("MB/s")), Some(8.0));
        assert_eq!(unit_to_mbps(Some("furlongs")), None);
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["10-a", "2-b", "1-c"];
        v.sort_by_key(|s| natural_key(s));
        assert_eq!(v, ["1-c", "2-b", "10-a"]);
    }
}
