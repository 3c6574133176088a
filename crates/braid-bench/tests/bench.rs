//! `braid-bench` on a tiny suite set: well-formed reports, results that are
//! exactly `braid sim --json`'s, and valid SVG/PNG plots with their series.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const BENCH: &str = env!("CARGO_BIN_EXE_braid-bench");

/// The braid binary beside braid-bench, which braid-bench runs (`cargo
/// test --workspace` builds both).
fn braid() -> std::path::PathBuf {
    let path = Path::new(BENCH).with_file_name(format!("braid{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "no {}: build it first (cargo build -p braid-cli), or run cargo test --workspace",
        path.display()
    );
    path
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A suite's row, `{name}.toml` under `dir`: a 30 s run with the root
/// `keys` (its links and flows among them), and the `published` table that
/// makes it a row of a suite.
fn write_row(dir: &Path, name: &str, keys: &str, published: &str) {
    write(
        &dir.join(format!("{name}.toml")),
        &format!("name = \"{name}\"\ntime_limit = \"30s\"\n{keys}\n[published]\n{published}\n"),
    );
}

/// Two suites: "tiny" (a two-path convergence row and a two-flow row) and
/// "tiny-loss" (a swept loss, with TCP figures to plot beside braid's).
fn suites(dir: &Path) {
    write_row(
        dir,
        "tiny/1-two-paths",
        r#"sample_interval = "50ms"
path = [{ rate = "20Mbit", delay = "5ms" }, { rate = "10Mbit", delay = "5ms" }]
flow = [{ bytes = "2MB" }]"#,
        r#"source = "test"
seed_system = 3.0
target_fraction_of_ideal = 0.5
target_converge_within_s = 1.0"#,
    );
    write_row(
        dir,
        "tiny/2-two-flows",
        r#"sample_interval = "20ms"
path = [{ rate = "20Mbit", delay = "2ms", queue = 100 }]
flow = [{ bytes = "1MB" }, { bytes = "1MB", start = "200ms" }]"#,
        "target_jain = 0.99\njain_from_s = 0.2",
    );
    for (name, loss, cubic) in [("loss-0pct", "0.0", 19.0), ("loss-1pct", "0.01", 15.5)] {
        write_row(
            dir,
            &format!("tiny-loss/{name}"),
            &format!(
                r#"path = [{{ rate = "20Mbit", delay = "5ms", loss = {loss} }}]
flow = [{{ bytes = "1MB" }}]"#
            ),
            &format!(
                r#"unit = "Mbit/s"
seed_tcp = 12.0
seed_tcp_name = "iperf3"
linux_cubic = {cubic}
target_at_least_linux = true"#
            ),
        );
    }
    // A directory without [published] tables is no suite.
    write(
        &dir.join("other/x.toml"),
        "[[path]]\nrate = \"1Mbit\"\n[[flow]]\nbytes = 1000\n",
    );
}

/// `braid-bench ARGS` on the suites in `scen`, writing to `out`; it must succeed.
fn bench(args: &[&str], scen: &Path, out: &Path) {
    let mut cmd = Command::new(BENCH);
    cmd.args(args).arg("--suites-dir").arg(scen);
    assert_succeeded(&cmd.arg("--out").arg(out).output().unwrap());
}

/// Fails with the command's standard error unless it succeeded.
fn assert_succeeded(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `braid-bench transfers ARGS --out OUT`, as it ended.
fn transfers(args: &[&str], out: &Path) -> Output {
    Command::new(BENCH)
        .arg("transfers")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
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
    bench(
        &["--seeds", "2", "--cc", "aimd,bbr", "--jobs", "2"],
        &scen,
        &out,
    );

    // results.json: every run, each exactly what `braid sim --json` prints.
    let results = read_json(&out.join("results.json"));
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
    let sim = Command::new(braid())
        .arg("sim")
        .arg(scen.join("tiny-loss/loss-1pct.toml"))
        .args(["--cc", "bbr", "--seed", "2", "--json"])
        .output()
        .unwrap();
    let sim: Value = serde_json::from_slice(&sim.stdout).unwrap();
    assert_eq!(without_wall(sim), without_wall(pick["result"].clone()));

    // report.md: the verdict and summary first, whose counts are the rows'.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let summary = check_summary(&md);
    assert_eq!(
        summary.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["tiny", "tiny-loss"]
    );
    // report.md: a section and two tables per suite, marks, the footer.
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

    // report.html: self-contained, plots inline, the summary first.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    check_html_summary(&html);
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

/// A suite's summary row: name, passed, with a verdict, near misses, misses.
type SummaryRow = (String, usize, usize, usize, usize);

/// The cells of a markdown table line.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner
        .replace("\\|", "\u{1}")
        .split('|')
        .map(|c| c.trim().replace('\u{1}', "|"))
        .collect()
}

/// report.md opens with the verdict and the summary table, before the
/// legend and every suite; each suite's counts are those of its section's
/// target column, and the total row and the verdict add them up.
fn check_summary(md: &str) -> Vec<SummaryRow> {
    let mut lines = md.lines().filter(|l| !l.trim().is_empty());
    assert!(lines.next().unwrap().starts_with("# "), "{md}");
    let verdict = lines.next().unwrap();
    assert!(
        verdict.starts_with("**Verdict: "),
        "no verdict first:\n{md}"
    );
    let head = lines.next().unwrap();
    assert!(
        head.starts_with("| suite | rows passed | near misses | misses |"),
        "the summary table is not first: {head}"
    );
    let summary_at = md.find(head).unwrap();
    let legend_at = md.find("\n## Legend\n").expect("a legend");
    assert!(summary_at < legend_at);
    assert_eq!(
        md.find("\n## ").unwrap(),
        legend_at,
        "a section comes before the legend"
    );
    let body: Vec<&str> = md[summary_at..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let count = |s: &str| -> (usize, usize) {
        let (a, b) = s.split_once(" / ").unwrap();
        let b = b.split(' ').next().unwrap();
        (a.parse().unwrap(), b.parse().unwrap())
    };
    let mut rows: Vec<SummaryRow> = Vec::new();
    let mut total = (0, 0, 0, 0);
    for line in &body {
        let c = cells(line);
        let (met, judged) = count(&c[1]);
        let (near, miss): (usize, usize) = (c[2].parse().unwrap(), c[3].parse().unwrap());
        assert_eq!(met + near + miss, judged, "{line}");
        if c[0] == "all suites" {
            assert_eq!((met, judged, near, miss), total, "total row: {line}");
            assert!(
                verdict.starts_with(&format!(
                    "**Verdict: {met} of {judged} rows with targets pass; {near} near miss"
                )),
                "{verdict}"
            );
            assert!(verdict.contains(&format!(", {miss} miss")), "{verdict}");
            return rows;
        }
        // "[name](#anchor)", and the anchor is the section's heading.
        let name = c[0]
            .strip_prefix('[')
            .and_then(|r| r.split_once("](#"))
            .map(|(n, a)| {
                assert_eq!(a.trim_end_matches(')'), n, "anchor of {n}");
                n.to_owned()
            })
            .unwrap_or_else(|| panic!("no link in {line}"));
        let heading = format!("\n## {name}\n");
        let at = md
            .find(&heading)
            .unwrap_or_else(|| panic!("no {heading:?}"));
        assert!(at > legend_at);
        // The section's first table: its target column, row by row.
        let section = &md[at + heading.len()..];
        let table: Vec<&str> = section
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        let (mut m, mut n, mut x, mut j) = (0, 0, 0, 0);
        for r in &table {
            let c = cells(r);
            let target = c.last().unwrap();
            if target.starts_with('✓') {
                m += 1;
                j += 1;
            } else if target.starts_with("≈ near miss, ") {
                assert!(c[0].ends_with(" ≈"), "{r}");
                n += 1;
                j += 1;
            } else if target.starts_with("✗ MISS") {
                assert!(c[0].starts_with("**") && c[0].ends_with("** ✗"), "{r}");
                x += 1;
                j += 1;
            }
        }
        assert_eq!((met, judged, near, miss), (m, j, n, x), "{name}: {line}");
        total = (total.0 + m, total.1 + j, total.2 + n, total.3 + x);
        rows.push((name, met, judged, near, miss));
    }
    panic!("no total row in the summary:\n{md}");
}

/// report.html opens the same way: the verdict, then the summary table
/// linking to each suite's section, then the legend.
fn check_html_summary(html: &str) {
    let h1 = html.find("</h1>").unwrap();
    let verdict = html
        .find("<p class=\"verdict\">Verdict: ")
        .expect("a verdict");
    let table = html.find("<table").unwrap();
    let legend = html.find("<h2>Legend</h2>").expect("a legend");
    let first_section = html.find("<section").unwrap();
    assert!(h1 < verdict && verdict < table && table < legend, "order");
    assert!(html[h1..table].find("<h2").is_none());
    assert!(html[table..].find("<th>rows passed</th>").unwrap() < 200);
    assert!(table < first_section);
    let summary = &html[table..html[table..].find("</table>").unwrap() + table];
    for link in summary.split("<a href=\"#").skip(1) {
        let id = link.split('"').next().unwrap();
        assert!(
            html.contains(&format!("<section id=\"{id}\">")),
            "no section {id}"
        );
    }
}

/// A row's best goodput is measured first, then three rows ask for it
/// from just below (a pass), just above (a near miss) and well above (a
/// miss); the report says which is which, in the rows and the summary.
#[test]
fn a_near_miss_is_shown_as_one() {
    let tmp = tempfile::tempdir().unwrap();
    let scen = tmp.path().join("scenarios");
    let link = "path = [{ rate = \"20Mbit\", delay = \"5ms\" }]\nflow = [{ bytes = \"1MB\" }]";
    let probe = tmp.path().join("probe.toml");
    write(
        &probe,
        &format!("name = \"probe\"\ntime_limit = \"30s\"\n{link}\n"),
    );
    let sim = Command::new(braid())
        .arg("sim")
        .arg(&probe)
        .args(["--cc", "bbr", "--seed", "1", "--json"])
        .output()
        .unwrap();
    assert!(sim.status.success());
    let sim: Value = serde_json::from_slice(&sim.stdout).unwrap();
    let g = sim["flows"][0]["goodput_mbps"].as_f64().unwrap();
    assert!(g > 1.0, "{g}");
    for (name, target) in [
        ("a-pass", g * 0.99),
        ("b-near", g / 0.99),
        ("c-miss", g / 0.9),
    ] {
        write_row(
            &scen,
            &format!("near/{name}"),
            link,
            &format!("target_mbps = {target}"),
        );
    }
    let out = tmp.path().join("out");
    bench(
        &["--seeds", "1", "--cc", "bbr", "--jobs", "2", "--no-png"],
        &scen,
        &out,
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_eq!(
        check_summary(&md),
        [("near".to_owned(), 1, 3, 1, 1)],
        "{md}"
    );
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with("| ") && l.contains(name) && l.contains("(≥"))
            .unwrap_or_else(|| panic!("no row {name}"))
            .to_owned()
    };
    let pass = row("a-pass");
    assert!(cells(&pass).last().unwrap().starts_with("✓: ✓"), "{pass}");
    // g / (g / 0.99) = 99%, shown rounded down to a tenth.
    let near = row("b-near");
    let target = cells(&near).last().unwrap().clone();
    assert!(
        target.starts_with("≈ near miss, 99.0% of target")
            || target.starts_with("≈ near miss, 98.9% of target"),
        "{near}"
    );
    assert!(!near.contains("MISS") && !near.contains('✗'), "{near}");
    assert!(cells(&near)[0].ends_with(" ≈"), "{near}");
    let miss = row("c-miss");
    let target = cells(&miss).last().unwrap().clone();
    assert!(target.starts_with("✗ MISS: ✗"), "{miss}");
    assert!(
        target.contains("90.0% of target") || target.contains("89.9% of target"),
        "{miss}"
    );
    // The legend says where a near miss begins.
    assert!(md.contains("at least 98% of the required figure"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    check_html_summary(&html);
    assert_eq!(html.matches("<tr class=\"near\">").count(), 1);
    assert_eq!(html.matches("<tr class=\"miss\">").count(), 1);
}

#[test]
fn an_unknown_suite_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let st = Command::new(BENCH)
        .args(["no-such-suite", "--suites-dir"])
        .arg(tmp.path())
        .arg("--out")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    assert!(!st.status.success());
    assert!(String::from_utf8_lossy(&st.stderr).contains("no-such-suite"));
}

/// `braid bench transfers`: real transfers of this binary on loopback,
/// sealed and insecure, direct and through a relay, each verified; the
/// report has one row per case with its runs, and the JSON every run.
#[test]
fn transfers_on_loopback_report_each_case() {
    let out = tempfile::tempdir().unwrap();
    let o = transfers(
        &[
            "--size",
            "2MB",
            "--rounds",
            "2",
            "--via",
            "direct",
            "--via",
            "relay:--rate 400mbit",
        ],
        out.path(),
    );
    assert_succeeded(&o);
    let md = std::fs::read_to_string(out.path().join("transfers.md")).unwrap();
    for case in [
        "sealed, direct",
        "sealed, relay --rate 400mbit",
        "insecure, direct",
        "insecure, relay --rate 400mbit",
    ] {
        assert!(md.contains(&format!("| {case} | 2 |")), "{case}:\n{md}");
    }
    let v = read_json(&out.path().join("transfers.json"));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8);
    for r in runs {
        assert!(r["goodput_mbps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["sender_cpu_s_per_gb"].as_f64().unwrap() > 0.0, "{r}");
    }
    // Only the relayed cases have a relay's CPU.
    let relayed = runs.iter().filter(|r| r["relay_cpu_s_per_gb"].is_f64());
    assert_eq!(relayed.count(), 4);
}

/// With a null sink the receiver writes to its standard output (which the
/// bench discards) and the sender's record says whether it verified.
#[test]
fn transfers_to_a_null_sink_are_verified_too() {
    let out = tempfile::tempdir().unwrap();
    let o = transfers(
        &["--size", "1MB", "--rounds", "1", "--sink", "null"],
        out.path(),
    );
    assert_succeeded(&o);
    let md = std::fs::read_to_string(out.path().join("transfers.md")).unwrap();
    assert!(md.contains("| sealed, direct | 1 |"), "{md}");
    assert!(md.contains("| insecure, direct | 1 |"), "{md}");
}

/// An emulated link (the `relay` route) that cannot start (a bad flag)
/// fails the bench at once with its reason, and leaves no receiver waiting
/// behind.
#[test]
fn an_emulator_that_cannot_start_fails_the_run_at_once() {
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let o = transfers(
        &[
            "--size",
            "1MB",
            "--rounds",
            "1",
            "--kinds",
            "insecure",
            "--via",
            "relay:--no-such-flag",
        ],
        out.path(),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("braid emulate did not start"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

/// `--mtu 1500`: the processes run in a namespace whose loopback has that
/// MTU, kernel TCP takes its turn beside braid, the report says so and the
/// namespace is gone afterwards. Needs root; without it (or where no
/// namespace can be made) the error says why and the test checks only that.
#[test]
fn transfers_at_an_ethernet_mtu_run_beside_kernel_tcp() {
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(BENCH)
        .args([
            "transfers",
            "--mtu",
            "1500",
            "--size",
            "2MB",
            "--rounds",
            "1",
            "--kinds",
            "insecure",
            "--sink",
            "null",
            "--out",
        ])
        .arg(out.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            [
                "needs root",
                "needs iproute2",
                "cannot create a network namespace"
            ]
            .iter()
            .any(|m| err.contains(m)),
            "failed for another reason: {err}"
        );
        eprintln!("skipping: {}", err.trim());
        return;
    }
    let md = std::fs::read_to_string(out.path().join("transfers.md")).unwrap();
    assert!(md.contains("Loopback MTU 1500"), "{md}");
    assert!(md.contains("| insecure, direct | 1 |"), "{md}");
    assert!(md.contains("| kernel TCP | 1 |"), "{md}");
    let v = read_json(&out.path().join("transfers.json"));
    assert_eq!(v["mtu"], 1500);
    assert!(
        v["medians"][0]["goodput_vs_tcp"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(!listed.contains(&format!("braid-mtu-{pid}")), "{listed}");
}

/// Without root, `--mtu` fails at once and says what it needs.
#[test]
fn transfers_at_an_mtu_say_they_need_root() {
    // SAFETY: geteuid has no preconditions.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(BENCH);
        c
    } else {
        Command::new(BENCH)
    };
    let out = tempfile::tempdir().unwrap();
    let Ok(o) = cmd
        .args(["transfers", "--mtu", "1500", "--out"])
        .arg(out.path())
        .output()
    else {
        eprintln!("skipping: no setpriv");
        return;
    };
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("braid bench transfers --mtu needs root"),
        "{err}"
    );
}
