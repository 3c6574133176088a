//! The report as a document (sections, tables, notes, figures) that
//! report_md and report_html render.

use super::published::{
    default_segment_size, payload_ratio, stream_overhead, wire_bytes, Row, TCP_RATIO,
};
use super::real::KernelRatio;
use super::report_tally::Tally;
use super::stats::{CcResult, Spread};
use super::targets::{self, convergence_time, jain_time, of_target_text, pct, Mark, NEAR_MISS};
use super::Bench;
use braid_proto::cc::Algorithm;

/// "†": a run did not complete or verify.
pub const INCOMPLETE: &str = "†";

pub struct Doc {
    pub title: String,
    /// The verdict in one sentence, first thing under the title.
    pub verdict: String,
    /// One row per suite (first cell linked to its section), then a total.
    pub summary: Table,
    /// What the summary's columns mean, right under it.
    pub summary_notes: Vec<String>,
    /// The legend: bullet points after the summary.
    pub intro: Vec<String>,
    pub sections: Vec<Section>,
    pub footer: Vec<String>,
}

pub struct Section {
    pub title: String,
    /// The section's anchor (the id its summary row links to).
    pub anchor: String,
    pub paragraphs: Vec<String>,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    pub figures: Vec<Figure>,
}

pub struct Table {
    pub caption: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Per row: how it fares against its targets (None: no verdict).
    pub verdicts: Vec<Option<Mark>>,
    /// Per row, if not empty: the anchor its first cell links to.
    pub links: Vec<Option<String>>,
}

/// The anchor GitHub gives a heading: lower case, spaces to dashes,
/// punctuation other than `-` and `_` dropped.
pub fn anchor(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// A plot: its SVG (and PNG) relative to the output directory.
#[derive(Clone)]
pub struct Figure {
    pub suite: String,
    pub title: String,
    pub svg: String,
    pub png: Option<String>,
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(x) if x.is_nan() => "—".into(),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
    }
}

fn spread(s: Option<Spread>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.max - s.min < 0.05 => num(Some(s.mean)),
        Some(s) => format!(
            "{} ({}–{})",
            num(Some(s.mean)),
            num(Some(s.min)),
            num(Some(s.max))
        ),
    }
}

fn cell(r: &CcResult<'_>) -> String {
    let Some(g) = r.goodput else {
        return "ERR".into();
    };
    let s = match r.rev {
        Some(rev) => format!("{}⇄{}", num(Some(r.fwd)), num(Some(rev))),
        None => spread(Some(g)),
    };
    if r.complete {
        s
    } else {
        s + INCOMPLETE
    }
}

pub fn build(bench: &Bench, figures: &[Figure], kernel: &[KernelRatio]) -> Doc {
    let segment_size = default_segment_size();
    let mut sections = Vec::new();
    let mut summary = summary_table();
    let mut total = Tally::default();
    for (si, suite) in bench.suites.iter().enumerate() {
        let (sec, tally) = suite_section(bench, si, figures, kernel, segment_size);
        summary.rows.push(tally.cells(suite.name.clone()));
        summary.verdicts.push(None);
        summary.links.push(Some(sec.anchor.clone()));
        total.add(&tally);
        sections.push(sec);
    }
    summary.rows.push(total.cells("all suites".into()));
    summary.verdicts.push(None);
    summary.links.push(None);
    Doc {
        title: "braid benchmark suites".into(),
        verdict: verdict(&total),
        summary,
        summary_notes: summary_notes(bench, kernel),
        intro: legend(bench, segment_size),
        sections,
        footer: footer(bench),
    }
}

/// The legend: what every column and mark of the suites' tables means.
fn legend(bench: &Bench, segment_size: u64) -> Vec<String> {
    let wb = wire_bytes(segment_size, 50_000_000);
    vec![
        format!(
            "Controllers: {}; seeds 1..={} per row and controller; rows whose file sets `report_cc` run only that controller.",
            super::names(&bench.ccs).join(", "),
            bench.seeds
        ),
        format!("Goodput in Mbit/s (application bytes): mean over seeds, (min–max) when the seeds differ by 0.05 or more. {INCOMPLETE} = a run did not complete or verify; ERR = no run produced a result; A⇄B = forward⇄reverse goodput (full duplex); rows with several flows show the aggregate (all bytes over first start to last end)."),
        "Seed figures come from each file's `[published]` table (docs/scenarios.md), converted to Mbit/s from its `unit`; Linux best = max of the published Linux cubic/bbr figures. best = the controller the row is judged on (see target), else the highest mean goodput among controllers whose runs all completed.".into(),
        "ideal = capacity × (1 − forward loss), before header overhead. Random loss drops at link entry, before the rate limit (like netem), so a loss row's goodput can exceed its ideal.".into(),
        format!(
            "braid header overhead at segment size {segment_size}: {segment_size} B payload / {wb:.0} B on the wire ({}-byte header + {:.0}-byte STREAM frame + {} IP/UDP) = {:.2}%, vs TCP 1448/1500 = {:.2}%. \"≥ seed TCP\" and \"≥ Linux\" targets compare at equal overhead: the TCP figure × {:.4} / {:.4}.",
            braid_proto::wire::data_datagram_overhead(false),
            stream_overhead(50_000_000, segment_size),
            braid_sim::IP_UDP_OVERHEAD,
            payload_ratio(segment_size, 50_000_000) * 100.0,
            TCP_RATIO * 100.0,
            payload_ratio(segment_size, 50_000_000),
            TCP_RATIO
        ),
        format!("target: ✓ when one controller meets every target of the row (its `target_*` keys) at once; best then shows the highest-goodput such controller. Otherwise the row does not pass and each target is listed for the highest-goodput controller: ≈ near miss when every target it misses is a goodput target (fraction of ideal, Mbit/s, ≥ seed TCP, ≥ Linux, fraction of alone) reached to at least {:.0}% of the required figure, shown as \"99.4% of target\" (measured / required, rounded down); ✗ MISS for any other miss (a goodput target below {:.0}% of it, or a time, queue, fairness, spurious or completion target). A near miss is not a pass.", NEAR_MISS * 100.0, NEAR_MISS * 100.0),
        "Metrics tables (per controller, means over seeds): p95 OWD / p95 queue = 95th percentile of the datagrams' one-way delay / time in link queues, of the worst direction; loss = datagrams the links dropped / offered; retx, spurious, decr = retransmissions, spurious retransmissions, window decreases summed over flows and directions; Jain = Jain's index of the flows' goodputs (multi-flow rows).".into(),
        "Every figure is what `braid sim FILE --cc CC --seed SEED --json` prints for the same file and seed (results.json holds each run's JSON).".into(),
    ]
}

/// A table with these columns and no rows yet.
fn empty_table(caption: String, head: Vec<String>) -> Table {
    Table {
        caption,
        head,
        rows: Vec::new(),
        verdicts: Vec::new(),
        links: Vec::new(),
    }
}

/// The summary's columns; `build` adds a row per suite and the total.
fn summary_table() -> Table {
    empty_table(
        "Summary: rows that pass, per suite".into(),
        [
            "suite",
            "rows passed",
            "near misses",
            "misses",
            "braid vs seed system",
            "braid vs seed TCP",
            "braid vs Linux (published)",
            "braid vs kernel TCP (real links)",
        ]
        .map(String::from)
        .to_vec(),
    )
}

/// One suite's section (overhead paragraphs, the goodput and metrics
/// tables, notes, plots) and the figures it adds to the summary.
fn suite_section(
    bench: &Bench,
    si: usize,
    figures: &[Figure],
    kernel: &[KernelRatio],
    segment_size: u64,
) -> (Section, Tally) {
    let suite = &bench.suites[si];
    let mut tally = Tally {
        kernel: kernel
            .iter()
            .filter(|k| k.suite == suite.name)
            .map(|k| k.ratio)
            .collect(),
        ..Tally::default()
    };
    let mut sec = Section {
        title: suite.name.clone(),
        anchor: anchor(&suite.name),
        paragraphs: overhead_paragraphs(&suite.rows, segment_size),
        tables: Vec::new(),
        notes: Vec::new(),
        figures: figures
            .iter()
            .filter(|f| f.suite == suite.name)
            .cloned()
            .collect(),
    };
    let rows = &suite.rows;
    let cols = columns(bench, rows);
    let all: Vec<Vec<CcResult<'_>>> = rows
        .iter()
        .enumerate()
        .map(|(ri, row)| {
            bench
                .ccs_of(row)
                .iter()
                .map(|&cc| CcResult::new(row, cc, &bench.runs_of(si, ri, cc)))
                .collect()
        })
        .collect();
    // A row's best complete goodput, for targets relative to running alone.
    let alone = |name: &str| -> Option<(f64, Algorithm)> {
        let i = rows.iter().position(|r| r.name == name)?;
        all[i]
            .iter()
            .filter(|r| r.complete)
            .filter_map(|r| Some((r.mean()?, r.cc)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    let mut main = main_table(&suite.name, &cols);
    let mut metrics = metrics_table(&suite.name);
    for (row, res) in rows.iter().zip(&all) {
        let (best, checks) = targets::judge(row, res, &alone);
        let mark = targets::mark(&checks);
        main.rows
            .push(main_row(row, &cols, res, best, &checks, mark));
        main.verdicts.push(mark);
        tally.count(mark);
        tally.compare(row, best);
        for r in res {
            metrics.rows.push(metrics_row(row, r));
            metrics.verdicts.push(None);
            notes(row, r, &mut sec.notes);
        }
        if let (Some(note), Some(_)) = (&row.published.seed_system_note, row.published.seed_system)
        {
            sec.notes.push(format!("{}: seed system: {note}", row.name));
        }
    }
    sec.tables.push(main);
    sec.tables.push(metrics);
    (sec, tally)
}

/// Header overhead for each segment size the suite uses other than the
/// default (the legend gives that one), and a word on pps rows.
fn overhead_paragraphs(rows: &[Row], segment_size: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut segment_sizes: Vec<u64> = rows
        .iter()
        .filter(|r| !r.pps && r.segment_size != segment_size)
        .map(|r| r.segment_size)
        .collect();
    segment_sizes.sort_unstable();
    segment_sizes.dedup();
    for m in segment_sizes {
        let size = rows
            .iter()
            .filter(|r| r.segment_size == m)
            .map(|r| r.bytes)
            .max()
            .unwrap_or(50_000_000);
        out.push(format!(
            "braid header overhead at segment size {m}: {m} B / {:.0} B on the wire = {:.2}%.",
            wire_bytes(m, size),
            payload_ratio(m, size) * 100.0
        ));
    }
    if rows.iter().any(|r| r.pps) {
        out.push("pps rows: links count packets of any size, so header overhead costs nothing there; ideal = pps × segment size × 8 × (1 − loss).".into());
    }
    out
}

/// The controller columns: the bench's, then any a row's `report_cc` adds.
fn columns(bench: &Bench, rows: &[Row]) -> Vec<Algorithm> {
    let mut cols = bench.ccs.clone();
    for r in rows {
        if let Some(cc) = r.report_cc {
            if !cols.contains(&cc) {
                cols.push(cc);
            }
        }
    }
    cols
}

/// The goodput table's columns: the seed figures, one per controller, then
/// the best, the ideal and the verdict.
fn main_table(suite: &str, cols: &[Algorithm]) -> Table {
    let mut head: Vec<String> = ["row", "parameters", "seed TCP", "seed system", "Linux best"]
        .map(String::from)
        .to_vec();
    head.extend(cols.iter().map(ToString::to_string));
    head.extend(["best", "ideal", "best/ideal", "target"].map(String::from));
    empty_table(format!("{suite}: goodput, Mbit/s"), head)
}

/// The metrics table's columns: one row per row and controller.
fn metrics_table(suite: &str) -> Table {
    empty_table(
        format!("{suite}: metrics per controller"),
        [
            "row",
            "cc",
            "goodput",
            "p95 OWD ms",
            "p95 queue ms",
            "loss",
            "retx",
            "spurious",
            "decr",
            "Jain",
        ]
        .map(String::from)
        .to_vec(),
    )
}

/// The verdict sentence under the title, from the total of all suites.
fn verdict(total: &Tally) -> String {
    format!(
        "Verdict: {} of {} rows with targets pass; {} near {} (every missed target a goodput target reached to at least {:.0}% of it), {} {}.",
        total.met,
        total.judged,
        total.near,
        if total.near == 1 { "miss" } else { "misses" },
        NEAR_MISS * 100.0,
        total.miss,
        if total.miss == 1 { "miss" } else { "misses" },
    )
}

/// What the summary's columns mean, and where the kernel TCP figures come from.
fn summary_notes(bench: &Bench, kernel: &[KernelRatio]) -> Vec<String> {
    let mut summary_notes = vec![
        "rows passed = rows whose targets one controller meets at once / rows with targets; near misses and misses are the rest, as marked in each suite's target column (see the legend); not judged = rows without targets (or with none that can be checked).".to_owned(),
        "braid vs X: braid's best goodput (the row's best column; forward direction of duplex rows) over X's figure, in the rows that have X's figure: in how many braid is at least X, and the median ratio. Seed TCP and Linux figures are taken at equal overhead, as the ≥ seed TCP / ≥ Linux targets take them (see the legend); seed systems' figures as published.".to_owned(),
    ];
    if kernel.is_empty() {
        summary_notes.push("braid vs kernel TCP (real links): from real.json beside this report (`braid bench real`, which needs root); none here.".to_owned());
    } else {
        summary_notes.push(format!(
            "braid vs kernel TCP (real links): from real.json beside this report (`braid bench real`, measured separately, see real.md): braid's median goodput over the better of kernel TCP cubic and bbr sending the same file through `braid link`, per row; {} rows in all{}.",
            kernel.len(),
            {
                let other = kernel
                    .iter()
                    .filter(|k| !bench.suites.iter().any(|s| s.name == k.suite))
                    .count();
                if other > 0 {
                    format!(", {other} of them from scenarios outside these suites (in real.md only)")
                } else {
                    String::new()
                }
            }
        ));
    }
    summary_notes
}

/// How long the bench took, in wall and simulated time, and which build ran.
fn footer(bench: &Bench) -> Vec<String> {
    let virtual_s: f64 = bench
        .runs
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok())
        .map(|r| r.virtual_s)
        .sum();
    let sim_wall: f64 = bench
        .runs
        .iter()
        .filter_map(|r| r.outcome.as_ref().ok())
        .map(|r| r.wall_s)
        .sum();
    let failed = bench.runs.iter().filter(|r| r.outcome.is_err()).count();
    vec![
        format!(
            "{} runs ({} failed) in {:.1} s wall with {} job(s); {:.0} simulated seconds, {:.1} simulated seconds per wall second ({:.1} s of simulator time summed over runs).",
            bench.runs.len(),
            failed,
            bench.wall_s,
            bench.jobs,
            virtual_s,
            virtual_s / bench.wall_s.max(1e-9),
            sim_wall
        ),
        format!(
            "braid {}, release build: {}.",
            env!("CARGO_PKG_VERSION"),
            if cfg!(debug_assertions) { "no" } else { "yes" }
        ),
    ]
}

fn main_row(
    row: &Row,
    cols: &[Algorithm],
    res: &[CcResult<'_>],
    best: Option<&CcResult<'_>>,
    checks: &[targets::Check],
    verdict: Option<Mark>,
) -> Vec<String> {
    let ideal = row.ideal_mbps();
    let linux = row
        .linux_best()
        .map_or("—".into(), |(v, n)| format!("{v:.1} ({n})"));
    let mut cells = vec![
        row.name.clone(),
        row.params(),
        num(row.seed_tcp_mbps()),
        num(row.seed_system_mbps()),
        linux,
    ];
    for cc in cols {
        cells.push(res.iter().find(|r| r.cc == *cc).map_or("—".into(), cell));
    }
    match best {
        None => cells.extend(["—".into(), num(ideal), "—".into()]),
        Some(b) => {
            let g = b.mean().unwrap_or(f64::NAN);
            let mut s = match b.rev {
                Some(rev) => format!("{}⇄{}", num(Some(b.fwd)), num(Some(rev))),
                None => num(Some(g)),
            };
            if !b.complete {
                s += INCOMPLETE;
            }
            cells.push(format!("{s} {}", b.cc));
            cells.push(num(ideal));
            cells.push(match (ideal, b.rev) {
                (Some(i), Some(rev)) => format!("{} each way", pct(b.fwd.min(rev) / i)),
                (Some(i), None) => pct(g / i),
                (None, _) => "—".into(),
            });
        }
    }
    let mark = match verdict {
        Some(Mark::Met) => "✓".to_owned(),
        Some(Mark::NearMiss(f)) => format!("≈ near miss, {}", of_target_text(f)),
        Some(Mark::Miss) => "✗ MISS".to_owned(),
        None if checks.is_empty() => String::new(),
        None => "?".to_owned(),
    };
    let listed: Vec<String> = checks
        .iter()
        .map(|c| match (c.met, c.of_target) {
            (Some(true), _) => format!("✓{}", c.text),
            (Some(false), Some(f)) if f >= NEAR_MISS => {
                format!("≈ {}, {}", c.text, of_target_text(f))
            }
            (Some(false), Some(f)) if f.is_finite() => {
                format!("✗{}, {}", c.text, of_target_text(f))
            }
            (Some(false), _) => format!("✗{}", c.text),
            (None, _) => c.text.clone(),
        })
        .collect();
    cells.push(if listed.is_empty() {
        mark
    } else {
        format!("{mark}: {}", listed.join("; "))
    });
    cells
}

fn metrics_row(row: &Row, r: &CcResult<'_>) -> Vec<String> {
    let ms = |s: Option<Spread>| match s {
        None => "—".to_owned(),
        Some(s) if s.mean >= 100.0 => format!("{:.0}", s.mean),
        Some(s) => format!("{:.1}", s.mean),
    };
    let n = r.good.len();
    let count = |x: f64| {
        if n == 0 {
            "—".into()
        } else {
            format!("{x:.0}")
        }
    };
    vec![
        row.name.clone(),
        r.cc.to_string(),
        cell(r),
        ms(r.owd_p95_ms),
        ms(r.queue_p95_ms),
        if n == 0 {
            "—".into()
        } else {
            format!("{:.2}%", r.loss_rate * 100.0)
        },
        count(r.retransmitted),
        count(r.spurious),
        count(r.decreases),
        if row.multi_flow && n > 0 {
            format!("{:.4}", r.jain)
        } else {
            "—".into()
        },
    ]
}

fn notes(row: &Row, r: &CcResult<'_>, out: &mut Vec<String>) {
    for e in &r.errors {
        out.push(format!("{} / {}: error: {e}", row.name, r.cc));
    }
    for e in &r.flow_errors {
        out.push(format!("{} / {}: flow error: {e}", row.name, r.cc));
    }
    if r.good.is_empty() {
        return;
    }
    if row.multi_flow {
        let pf: Vec<String> = r
            .per_flow
            .iter()
            .enumerate()
            .map(|(i, g)| format!("flow {i}: {g:.1}"))
            .collect();
        let mut s = format!(
            "{} / {}: {} Mbit/s; Jain's index of whole-run goodputs {:.4}",
            row.name,
            r.cc,
            pf.join(", "),
            r.jain
        );
        if let Some(t) = row.published.target_jain {
            let times: Option<Vec<f64>> = r.good.iter().map(|x| jain_time(row, x)).collect();
            s += &match times {
                None => format!("; Jain ≥{t} reached never (sustained) after the second start"),
                Some(ts) => format!(
                    "; Jain ≥{t} reached {:.0} ms after the second start",
                    ts.iter().copied().fold(0.0, f64::max) * 1e3
                ),
            };
        }
        out.push(s);
    }
    if row.published.target_converge_within_s.is_some() {
        let times: Option<Vec<f64>> = r.good.iter().map(|x| convergence_time(row, x)).collect();
        let conv = match times {
            None => "never settle".to_owned(),
            Some(ts) => format!(
                "settle {:.2} s after {} s",
                ts.iter().copied().fold(0.0, f64::max),
                row.published.converge_from_s.unwrap_or(0.0)
            ),
        };
        let paths: Vec<String> = r.good[0].flows[0]
            .forward
            .paths
            .iter()
            .map(|p| {
                format!(
                    "path {}: {:.2} Mbit/s, final window {:.0}",
                    p.path, p.goodput_mbps, p.final_window
                )
            })
            .collect();
        out.push(format!(
            "{} / {}: window shares {conv} (seed 1: {})",
            row.name,
            r.cc,
            paths.join(", ")
        ));
    }
    if row.published.target_queue_max_packets.is_some() {
        if let Some(q) = super::stats::queue_estimate(r) {
            out.push(format!(
                "{} / {}: standing queue ≈{q:.1} packets ((mean RTT − min RTT) × rate)",
                row.name, r.cc
            ));
        }
    }
}
