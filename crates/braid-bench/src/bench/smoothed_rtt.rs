//! The p95 RTT `braid bench real` sets side by side: of the smoothed RTT
//! read at a fixed interval through the transfer, for every sender. Kernel
//! TCP's is `tcpi_rtt` every 10 ms (`tcp_file`); braid's and the
//! simulator's the session's own samples, every 100 ms (`send --plot`'s
//! series). p95 over ACKs instead weighs a fast spell's many ACKs over a
//! slow spell's few, when the queue is longest: on the Verizon LTE trace
//! (simulator, 10 MB) braid's raw samples gave 1.39 s, its smoothed RTT
//! over time 1.88 s. The raw figure stays in real.json for reference.

use braid_sim::report::SeriesPoint;
use std::collections::BTreeMap;
use std::path::Path;

/// Nearest-rank 95th percentile of each connection's smoothed RTT (ms;
/// 0 before its first measurement, skipped), the highest of theirs.
pub(super) fn p95_over_time(points: impl IntoIterator<Item = (u8, f64)>) -> Option<f64> {
    let mut by_path: BTreeMap<u8, Vec<f64>> = BTreeMap::new();
    for (path, ms) in points {
        if ms > 0.0 {
            by_path.entry(path).or_default().push(ms);
        }
    }
    by_path
        .into_values()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            // As `tcp_file` ranks the kernel's samples.
            v[(v.len() * 95).div_ceil(100).max(1) - 1]
        })
        .reduce(f64::max)
}

/// Of a simulated flow's series.
pub(super) fn of_series(series: &[SeriesPoint]) -> Option<f64> {
    p95_over_time(series.iter().map(|p| (p.path, p.srtt_ms)))
}

/// Of the series a `braid send --plot DIR` wrote there (one transfer).
pub(super) fn of_plot_dir(dir: &Path) -> anyhow::Result<Option<f64>> {
    use anyhow::Context as _;
    let Some(file) = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-series.json"))
    else {
        return Ok(None);
    };
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&file)?)
        .with_context(|| format!("{}", file.display()))?;
    let points = doc["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["series"].as_array())
        .flatten()
        .filter_map(|p| Some((p["path"].as_u64()? as u8, p["srtt_ms"].as_f64()?)));
    Ok(p95_over_time(points))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p95_is_over_time_per_connection_and_the_highest_counts() {
        // Path 0: 19 samples at 50 ms and one at 900: the 95th of 20 is
        // the 19th. Path 1: ten at 100 ms, ten at 300 ms.
        let mut points: Vec<(u8, f64)> = (0..19).map(|_| (0, 50.0)).collect();
        points.push((0, 900.0));
        points.extend((0..10).map(|_| (1, 100.0)));
        points.extend((0..10).map(|_| (1, 300.0)));
        assert_eq!(p95_over_time(points), Some(300.0));
        // Before the first measurement (0) nothing counts.
        assert_eq!(p95_over_time([(0, 0.0), (0, 40.0)]), Some(40.0));
        assert_eq!(p95_over_time([(0, 0.0)]), None);
    }

    #[test]
    fn a_plot_directory_s_series_is_read() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(of_plot_dir(dir.path()).unwrap(), None);
        let series: Vec<_> = (1..=20)
            .map(|i| serde_json::json!({"t": i, "path": 0, "srtt_ms": f64::from(i) * 10.0}))
            .collect();
        let doc = serde_json::json!({"flows": [{"flow": 0, "series": series}]});
        std::fs::write(dir.path().join("send-00ab-series.json"), doc.to_string()).unwrap();
        assert_eq!(of_plot_dir(dir.path()).unwrap(), Some(190.0));
    }
}
