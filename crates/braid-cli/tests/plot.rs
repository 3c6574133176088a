//! Plots of a run: `braid plot` of a simulator's series and of a qlog, and
//! `send`/`recv --plot` on loopback, checked in the SVGs' text (titles,
//! axes, legends) and lines (points per series).

mod common;

use common::*;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

const KINDS: [&str; 4] = ["window", "inflight", "throughput", "rtt"];

/// The points of each data line of an SVG (drawn 2 px wide; the legend's
/// samples are 3 px, the grid 1 px), in drawing order.
fn data_lines(svg: &str) -> Vec<usize> {
    svg.split("<polyline")
        .skip(1)
        .filter(|l| l.contains("stroke-width=\"2\""))
        .map(|l| {
            let points = l.split("points=\"").nth(1).unwrap_or("");
            points[..points.find('"').unwrap_or(0)]
                .split_whitespace()
                .count()
        })
        .collect()
}

fn svg(dir: &Path, stem: &str, kind: &str) -> String {
    let path = dir.join(format!("{stem}-{kind}.svg"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `braid plot FILE --out DIR --no-png`, which must succeed.
fn plot(file: &Path, out: &Path) -> String {
    let o = run(&[
        "plot",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-png",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    stderr(&o)
}

#[test]
fn a_simulated_runs_series_replots_with_each_connection_named() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["sim", "--json", "--series"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = dir.path().join("run.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let out = dir.path().join("plots");
    let said = plot(&file, &out);
    for kind in KINDS {
        let path = out.join(format!("run-{kind}.svg"));
        assert!(said.contains(&format!("plot {}", path.display())), "{said}");
        assert!(!out.join(format!("run-{kind}.png")).exists(), "--no-png");
        let text = svg(&out, "run", kind);
        // The built-in example: one flow over two connections.
        assert!(text.contains("two heterogeneous paths"), "{kind}");
        assert!(text.contains("path 0") && text.contains("path 1"), "{kind}");
        assert!(text.contains("time (s)"));
        let lines = data_lines(&text);
        assert!(lines.len() >= 2, "{kind}: {lines:?}");
        assert!(lines.iter().all(|&n| n > 10), "{kind}: {lines:?}");
    }
    assert!(svg(&out, "run", "window").contains("window (packets)"));
    assert!(svg(&out, "run", "rtt").contains("smoothed RTT (ms)"));
    let throughput = svg(&out, "run", "throughput");
    assert!(throughput.contains("session") && throughput.contains("throughput (Mbit/s)"));
    assert_eq!(
        data_lines(&throughput).len(),
        3,
        "two connections and the sum"
    );
}

#[test]
fn a_qlog_plots_its_connections_windows_rtts_and_acknowledged_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/two-paths.sqlog");
    plot(&fixture, dir.path());
    for kind in KINDS {
        let text = svg(dir.path(), "two-paths-qlog", kind);
        assert!(text.contains("braid send, hand-made fixture"), "{kind}");
        assert!(text.contains("path 0") && text.contains("path 1"), "{kind}");
        let lines = data_lines(&text);
        assert!(lines.len() >= 2, "{kind}: {lines:?}");
        // Events over 0.46 s: a point every 100 ms.
        assert!(lines.iter().all(|&n| n >= 4), "{kind}: {lines:?}");
    }
    assert!(svg(dir.path(), "two-paths-qlog", "window").contains("window (kB)"));
    assert!(svg(dir.path(), "two-paths-qlog", "inflight").contains("in flight (kB)"));
}

#[test]
fn a_file_without_series_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("summary.json");
    std::fs::write(&file, r#"{"scenario":"x","flows":[{"flow":0}]}"#).unwrap();
    fails(
        &["plot", file.to_str().unwrap(), "--out", "/nonexistent"],
        1,
        "--json --series",
    );
    let file = dir.path().join("x.sqlog");
    std::fs::write(&file, "\u{1e}{\"title\":\"no header\"}\n").unwrap();
    let o = run(&["plot", file.to_str().unwrap()]);
    assert!(stderr(&o).contains("not a qlog"), "{}", stderr(&o));
}

/// A receiver and a sender reading stdin, each plotting into its own
/// directory under `dir`.
fn transfer(dir: &Path) -> (Recv, Child, ChildStdin) {
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let recv_plots = dir.join("recv-plots");
    let recv = start_recv(&[
        "--output",
        out.to_str().unwrap(),
        "--plot",
        recv_plots.to_str().unwrap(),
    ]);
    let send_plots = dir.join("send-plots");
    let mut send = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(recv.send_args("-"))
        .args(["--name", "piped.bin", "--quiet"])
        .args(["--plot", send_plots.to_str().unwrap()])
        .args(["--qlog", send_plots.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = send.stdin.take().unwrap();
    (recv, send, stdin)
}

/// Writes 100 kB every 50 ms for `for_how_long`: several samples (one
/// every 100 ms) however fast the machine.
fn trickle(stdin: &mut ChildStdin, for_how_long: Duration) {
    let chunk = vec![7u8; 100_000];
    let start = std::time::Instant::now();
    while start.elapsed() < for_how_long {
        stdin.write_all(&chunk).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The series file a side wrote into `dir`, and its stem.
fn series(dir: &Path, side: &str) -> (Value, String) {
    let file: PathBuf = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(side) && name.ends_with("-series.json")
        })
        .unwrap_or_else(|| panic!("no {side} series in {}", dir.display()));
    let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    (doc, name.trim_end_matches("-series.json").to_owned())
}

/// At least `n` samples of connection 0, in time order, with windows
/// (in bytes).
fn check_samples(doc: &Value, n: usize) {
    assert_eq!(doc["window_unit"], "bytes");
    let points = doc["flows"][0]["series"].as_array().unwrap();
    assert!(points.len() >= n, "{} samples: {doc}", points.len());
    let times: Vec<f64> = points.iter().map(|p| p["t"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(points.iter().all(|p| p["path"] == 0));
    assert!(points.iter().all(|p| p["window"].as_f64().unwrap() > 0.0));
}

#[test]
fn a_transfer_plots_both_sides_from_its_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (recv, send, mut stdin) = transfer(dir.path());
    trickle(&mut stdin, Duration::from_millis(700));
    drop(stdin);
    let sent = send.wait_with_output().unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    // The receiver's windows are its ACKs': not drawn, and it says why.
    recv.said("its windows are those of its ACKs", Duration::from_secs(10));
    recv.said("braid recv: plot", Duration::from_secs(10));
    let addr = recv.addr.clone();
    assert!(wait(recv.child, Duration::from_secs(10)).success());

    let (doc, stem) = series(&dir.path().join("send-plots"), "send");
    check_samples(&doc, 4);
    // Named as the summary names them, titled by what was sent.
    assert_eq!(doc["title"], "braid send piped.bin");
    let said = stderr(&sent);
    for kind in KINDS {
        assert!(said.contains(&format!("{stem}-{kind}.svg")), "{said}");
        let text = svg(&dir.path().join("send-plots"), &stem, kind);
        assert!(text.contains(&addr), "{kind}: no {addr}");
        assert!(text.contains("braid send piped.bin"), "{kind}");
        assert!(data_lines(&text).iter().all(|&n| n >= 2), "{kind}");
        assert!(dir
            .path()
            .join("send-plots")
            .join(format!("{stem}-{kind}.png"))
            .exists());
    }
    // The receiver measured what it received; it has no RTT of its own.
    let (doc, recv_stem) = series(&dir.path().join("recv-plots"), "recv");
    assert_eq!(
        recv_stem.trim_start_matches("recv"),
        stem.trim_start_matches("send"),
        "one session"
    );
    check_samples(&doc, 4);
    let received: f64 = doc["flows"][0]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["throughput_mbps"].as_f64().unwrap())
        .sum();
    assert!(received > 0.0);
    let text = svg(&dir.path().join("recv-plots"), &recv_stem, "throughput");
    assert!(data_lines(&text).iter().all(|&n| n >= 2));
    assert_eq!(doc["side"], "recv");
    for kind in ["window", "inflight", "rtt"] {
        let file = format!("{recv_stem}-{kind}.svg");
        assert!(!dir.path().join("recv-plots").join(file).exists(), "{kind}");
    }

    // `braid plot` redraws the series file as --plot drew it.
    let again = dir.path().join("again");
    plot(
        &dir.path()
            .join("send-plots")
            .join(format!("{stem}-series.json")),
        &again,
    );
    for kind in KINDS {
        assert_eq!(
            svg(&again, &stem, kind),
            svg(&dir.path().join("send-plots"), &stem, kind)
        );
    }

    // The session's qlog, plotted beside: other files, the same units.
    let plots = dir.path().join("send-plots");
    let before = svg(&plots, &stem, "window");
    assert!(before.contains("window (kB)"), "{before}");
    plot(&plots.join(format!("{stem}.sqlog")), &plots);
    assert_eq!(svg(&plots, &stem, "window"), before, "--plot's kept");
    let from_qlog = svg(&plots, &format!("{stem}-qlog"), "window");
    assert!(from_qlog.contains("window (kB)"), "{from_qlog}");
}

#[test]
fn an_interrupted_transfer_is_plotted_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let (recv, send, mut stdin) = transfer(dir.path());
    trickle(&mut stdin, Duration::from_millis(500));
    let ok = Command::new("kill")
        .args(["-INT", &send.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let sent = send.wait_with_output().unwrap();
    assert_eq!(sent.status.code(), Some(130), "{}", stderr(&sent));
    assert!(
        stderr(&sent).contains("braid send: plot"),
        "{}",
        stderr(&sent)
    );
    recv.said("braid recv: plot", Duration::from_secs(10));
    assert_eq!(wait(recv.child, Duration::from_secs(10)).code(), Some(1));
    check_samples(&series(&dir.path().join("send-plots"), "send").0, 3);
    check_samples(&series(&dir.path().join("recv-plots"), "recv").0, 3);
}

/// `braid sim --plot DIR`: a two-flow run's windows and throughputs, in
/// SVG and PNG, each flow's connection named.
#[test]
fn sim_plot_draws_the_runs_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("2-two-flows.toml");
    std::fs::write(
        &scenario,
        r#"name = "tiny/2-two-flows"
time_limit = "30s"
sample_interval = "20ms"
[[path]]
rate = "20Mbit"
delay = "2ms"
queue = 100
[[flow]]
bytes = "1MB"
[[flow]]
bytes = "1MB"
start = "200ms"
"#,
    )
    .unwrap();
    let dir = tmp.path().join("plots");
    let st = Command::new(env!("CARGO_BIN_EXE_braid"))
        .arg("sim")
        .arg(&scenario)
        .arg("--plot")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    for (kind, names) in [
        ("window", &["flow 0 path 0", "flow 1 path 0"][..]),
        ("throughput", &["flow 0", "flow 1"][..]),
    ] {
        let svg =
            std::fs::read_to_string(dir.join(format!("tiny-2-two-flows-{kind}.svg"))).unwrap();
        assert!(svg.trim_end().ends_with("</svg>"), "{kind}");
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        for n in names {
            assert!(svg.contains(n), "the {kind} plot lacks series {n:?}");
        }
        let png = std::fs::read(dir.join(format!("tiny-2-two-flows-{kind}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{kind}");
    }
}
