//! `braid bench` on a tiny suite set: well-formed reports, results that are
//! exactly `braid sim --json`'s, and valid SVG/PNG plots with their series.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const BRAID: &str = env!("CARGO_BIN_EXE_braid");

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Two suites: "tiny" (a two-path convergence row and a two-flow row) and
/// "tiny-loss" (a swept loss, with TCP figures to plot beside braid's).
fn suites(dir: &Path) {
    write(
        &dir.join("tiny/1-two-paths.toml"),
        r#"name = "tiny/1-two-paths"
time_limit = "30s"
sample_interval = "50ms"
[published]
source = "test"
seed_system = 3.0
target_fraction_of_ideal = 0.5
target_converge_within_s = 1.0
[[path]]
rate = "20Mbit"
delay = "5ms"
[[path]]
rate = "10Mbit"
delay = "5ms"
[[flow]]
bytes = "2MB"
"#,
    );
    write(
        &dir.join("tiny/2-two-flows.toml"),
        r#"name = "tiny/2-two-flows"
time_limit = "30s"
sample_interval = "20ms"
[published]
target_jain = 0.99
jain_from_s = 0.2
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
    );
    for (name, loss, cubic) in [("loss-0pct", "0.0", 19.0), ("loss-1pct", "0.01", 15.5)] {
        write(
            &dir.join(format!("tiny-loss/{name}.toml")),
            &format!(
                r#"name = "tiny-loss/{name}"
time_limit = "30s"
[published]
unit = "Mbit/s"
seed_tcp = 12.0
seed_tcp_name = "iperf3"
linux_cubic = {cubic}
target_at_least_linux = true
[[path]]
rate = "20Mbit"
delay = "5ms"
loss = {loss}
[[flow]]
bytes = "1MB"
"#
            ),
        );
    }
    // A directory without [published] tables is no suite.
    write(
        &dir.join("other/x.toml"),
        "[[path]]\nrate = \"1Mbit\"\n[[flow]]\nbytes = 1000\n",
    );
}

fn check_svg(path: &Path, names: &[&str]) {
    let text = std::fs::read_to_string(path).unwrap();
    let t = text.trim_start();
    assert!(
        t.starts_with("<svg") || t.starts_with("<?xml"),
        "{} is not SVG",
        path.display()
    );
    assert!(text.trim_end().ends_with("</svg>"), "{}", path.display());
    // Tags balance (a cheap well-formedness check).
    let opened = text.matches("<text").count();
    let closed = text.matches("</text>").count();
    assert_eq!(opened, closed, "{}", path.display());
    for n in names {
        assert!(text.contains(n), "{} lacks series {n:?}", path.display());
    }
}

fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.len() > 1000, "{} is tiny", path.display());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
}

fn without_wall(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("wall_s");
    v
}

#[test]
fn a_tiny_suite_makes_a_well_formed_report() {
    let tmp = tempfile::tempdir().unwrap();
    let scen = tmp.path().join("scenarios");
    suites(&scen);
    let out = tmp.path().join("out");
    let st = Command::new(BRAID)
        .args(["bench", "--seeds", "2", "--cc", "aimd,bbr", "--jobs", "2"])
        .arg("--suites-dir")
        .arg(&scen)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );

    // results.json: every run, each exactly what `braid sim --json` prints.
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4 * 2 * 2, "4 rows × 2 controllers × 2 seeds");
    for r in runs {
        let res = &r["result"];
        assert!(res["flows"].is_array(), "{r}");
        let f = &res["flows"][0];
        assert!(f["owd_p95_ms"].as_f64().unwrap() > 0.0, "{f}");
        assert!(f["queue_delay_p95_ms"].as_f64().is_some(), "{f}");
        assert!(f["datagrams_offered"].as_u64().unwrap() > 0, "{f}");
    }
    let pick = runs
        .iter()
        .find(|r| r["row"] == "loss-1pct" && r["cc"] == "bbr" && r["seed"] == 2)
        .unwrap();
    let sim = Command::new(BRAID)
        .arg("sim")
        .arg(scen.join("tiny-loss/loss-1pct.toml"))
        .args(["--cc", "bbr", "--seed", "2", "--json"])
        .output()
        .unwrap();
    let sim: Value = serde_json::from_slice(&sim.stdout).unwrap();
    assert_eq!(without_wall(sim), without_wall(pick["result"].clone()));

    // report.md: a section and two tables per suite, marks, the footer.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for s in [
        "## tiny\n",
        "## tiny-loss\n",
        "| row | parameters |",
        "| row | cc | goodput | p95 OWD ms |",
        "simulated seconds per wall second",
    ] {
        assert!(md.contains(s), "report.md lacks {s:?}\n{md}");
    }
    assert!(
        !md.contains("## other"),
        "a directory without [published] is no suite"
    );
    assert!(md.contains('✓') || md.contains("✗ MISS"));
    let table_lines: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    for l in &table_lines {
        assert!(l.ends_with('|'), "{l}");
    }
    // every row of the first table has as many cells as its header
    let head_cells = table_lines[0].matches(" | ").count();
    assert_eq!(
        table_lines[2].replace("\\|", "").matches(" | ").count(),
        head_cells
    );

    // report.html: self-contained, plots inline.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    assert!(html.contains("<svg"));
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http") && !html.contains("@import")
    );
    assert_eq!(
        html.matches("<table").count(),
        html.matches("</table>").count()
    );

    // Plots: each as SVG and PNG, with the expected series.
    let plots = out.join("plots");
    let expect: &[(&str, &[&str])] = &[
        ("tiny--1-two-paths--aimd-window", &["path 0", "path 1"]),
        ("tiny--1-two-paths--bbr-window", &["path 0", "path 1"]),
        ("tiny--2-two-flows--aimd-throughput", &["flow 0", "flow 1"]),
        ("tiny--throughput-delay", &["braid aimd", "braid bbr"]),
        (
            "tiny-loss--goodput",
            &[
                "braid aimd",
                "braid bbr",
                "seed TCP (iperf3)",
                "Linux cubic",
            ],
        ),
        ("tiny-loss--throughput-delay", &["braid aimd", "braid bbr"]),
    ];
    for (name, series) in expect {
        check_svg(&plots.join(format!("{name}.svg")), series);
        check_png(&plots.join(format!("{name}.png")));
        assert!(
            md.contains(&format!("plots/{name}.svg")),
            "report.md lacks {name}"
        );
    }
}

#[test]
fn sim_plot_draws_the_runs_plots() {
    let tmp = tempfile::tempdir().unwrap();
    suites(tmp.path());
    let dir = tmp.path().join("plots");
    let st = Command::new(BRAID)
        .arg("sim")
        .arg(tmp.path().join("tiny/2-two-flows.toml"))
        .arg("--plot")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    check_svg(
        &dir.join("tiny-2-two-flows-window.svg"),
        &["flow 0 path 0", "flow 1 path 0"],
    );
    check_svg(
        &dir.join("tiny-2-two-flows-throughput.svg"),
        &["flow 0", "flow 1"],
    );
    check_png(&dir.join("tiny-2-two-flows-window.png"));
    check_png(&dir.join("tiny-2-two-flows-throughput.png"));
}

#[test]
fn an_unknown_suite_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let st = Command::new(BRAID)
        .args(["bench", "no-such-suite", "--suites-dir"])
        .arg(tmp.path())
        .arg("--out")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    assert!(!st.status.success());
    assert!(String::from_utf8_lossy(&st.stderr).contains("no-such-suite"));
}
