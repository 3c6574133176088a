//! Reads time series back from JSON: a whole `braid sim --json --series`
//! result (`flows[].series`), the series file `send`/`recv --plot` write
//! (the same shape, one flow), or a bare array of series points.

use super::{Trace, WINDOW_UNITS};
use anyhow::{bail, Context as _};
use braid_sim::report::SeriesPoint;
use serde_json::Value;

/// The trace of a series document; `fallback` titles it if it has no
/// title (a file's name).
pub fn read(doc: &Value, fallback: &str) -> anyhow::Result<Trace> {
    let flows: Vec<(usize, &Value)> = match doc {
        Value::Array(_) => vec![(0, doc)],
        Value::Object(o) => match (o.get("flows"), o.get("series")) {
            (Some(Value::Array(flows)), _) => flows
                .iter()
                .enumerate()
                .filter_map(|(i, f)| {
                    let index = f["flow"].as_u64().map_or(i, |n| n as usize);
                    Some((index, f.get("series")?))
                })
                .collect(),
            (_, Some(series)) => vec![(0, series)],
            _ => bail!("no `flows` or `series` in it"),
        },
        _ => bail!("expected a JSON object or array"),
    };
    if flows.is_empty() {
        bail!("no time series in it (`braid sim` writes them with --json --series)");
    }
    let mut parsed = Vec::new();
    for (flow, series) in flows {
        let points = series
            .as_array()
            .with_context(|| format!("flow {flow}: `series` is not an array"))?
            .iter()
            .enumerate()
            .map(|(i, p)| point(p).with_context(|| format!("flow {flow}, point {i}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        parsed.push((flow, points));
    }
    let title = ["title", "scenario"]
        .iter()
        .find_map(|k| doc.get(k)?.as_str())
        .unwrap_or(fallback)
        .to_owned();
    // Only a unit this program writes: the field names an axis. Bytes
    // (what `--plot` writes) are drawn in kB, as a qlog's are.
    let unit = doc.get("window_unit").and_then(Value::as_str);
    let (unit, scale) = match unit {
        Some("bytes") => ("kB", 1e-3),
        u => (
            u.and_then(|u| WINDOW_UNITS.iter().find(|&&k| k == u))
                .copied()
                .unwrap_or("packets"),
            1.0,
        ),
    };
    for (_, points) in &mut parsed {
        for p in points.iter_mut() {
            p.window *= scale;
            p.in_flight *= scale;
        }
    }
    let flows = parsed.iter().map(|(f, p)| (*f, p.as_slice()));
    let mut trace = Trace::from_series(title, unit, flows);
    // A receiver's windows are its ACKs'.
    trace.sender = doc.get("side").and_then(Value::as_str) != Some("recv");
    if let Some(Value::Array(named)) = doc.get("connections") {
        trace.names = named
            .iter()
            .filter_map(|c| Some((c["path"].as_u64()?, c["name"].as_str()?.to_owned())))
            .collect();
    }
    Ok(trace)
}

/// One point; a missing number is NaN (not drawn), a missing time or path
/// an error.
fn point(p: &Value) -> anyhow::Result<SeriesPoint> {
    let num = |k: &str| p.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let t = p["t"].as_f64().context("no time `t`")?;
    let path = p["path"]
        .as_u64()
        .and_then(|n| u8::try_from(n).ok())
        .context("no connection `path` (0..=255)")?;
    Ok(SeriesPoint {
        t,
        path,
        window: num("window"),
        srtt_ms: num("srtt_ms"),
        rto_ms: num("rto_ms"),
        in_flight: num("in_flight"),
        throughput_mbps: num("throughput_mbps"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(t: f64, path: u8, w: f64) -> Value {
        json!({"t": t, "path": path, "window": w, "srtt_ms": 20.0, "rto_ms": 200.0,
               "in_flight": 3.0, "throughput_mbps": 8.0})
    }

    #[test]
    fn a_sim_result_gives_a_connection_per_flow_and_path() {
        let doc = json!({"scenario": "two", "flows": [
            {"flow": 0, "series": [p(0.1, 0, 10.0), p(0.1, 1, 20.0), p(0.2, 0, 11.0)]},
            {"flow": 1, "series": [p(0.1, 0, 5.0)]},
        ]});
        let t = read(&doc, "file").unwrap();
        assert_eq!(t.title, "two");
        let ids: Vec<(usize, u64, usize)> = t
            .conns
            .iter()
            .map(|c| (c.flow, c.path, c.points.len()))
            .collect();
        assert_eq!(ids, [(0, 0, 2), (0, 1, 1), (1, 0, 1)]);
        assert_eq!(t.conns[0].points[1].window, 11.0);
    }

    /// What `--plot` writes: windows in bytes, drawn in kB; the side.
    #[test]
    fn bytes_are_drawn_in_kb_and_a_receiver_is_told_apart() {
        let doc = json!({"window_unit": "bytes", "side": "recv",
                         "flows": [{"flow": 0, "series": [p(0.1, 0, 24_000.0)]}]});
        let t = read(&doc, "f").unwrap();
        assert_eq!(t.window_unit, "kB");
        assert_eq!(
            (t.conns[0].points[0].window, t.conns[0].points[0].in_flight),
            (24.0, 0.003)
        );
        assert!(!t.sender);
        let t = read(&json!([p(0.1, 0, 5.0)]), "f").unwrap();
        assert_eq!((t.window_unit, t.sender), ("packets", true));
        assert_eq!(t.conns[0].points[0].window, 5.0);
    }

    #[test]
    fn a_bare_array_is_one_flow_and_a_result_without_series_is_refused() {
        let t = read(&json!([p(0.1, 2, 1.0)]), "file").unwrap();
        assert_eq!((t.title.as_str(), t.conns[0].path), ("file", 2));
        let err = read(&json!({"flows": [{"flow": 0}]}), "f").unwrap_err();
        assert!(err.to_string().contains("--series"), "{err}");
        assert!(read(&json!([{"window": 1.0}]), "f").is_err());
    }
}
