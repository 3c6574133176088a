//! real.md: what `braid bench real` measured, row by row, beside the
//! simulator's figures and with the command that reproduces it.

use std::path::Path;

use super::{Kind, RealArgs, RealRow, RUN_LIMIT_S};

pub(super) fn markdown(rows: &[RealRow], args: &RealArgs) -> String {
    let mut s = intro(args);
    s += &command(args);
    let has = |k| args.kinds.contains(&k);
    s += "| # | row | link | simulator | braid | tcp cubic | tcp bbr | braid / best TCP \
          | iperf3 cubic | iperf3 bbr | braid / best iperf3 | braid real / sim \
          | retransmitted sim / braid / tcp cubic / tcp bbr \
          | p95 RTT (ms) sim / braid / tcp cubic / tcp bbr |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (i, r) in rows.iter().enumerate() {
        s += &table_row(i, r, &has);
    }
    s += FOOTNOTE;
    s
}

/// How the figures were taken and what each kind's figure means.
fn intro(args: &RealArgs) -> String {
    let mut s = String::from("# Real links: braid next to kernel TCP through `braid link`\n\n");
    s += &format!(
        "{} rounds, kinds rotated each round, medians (every run in real.json); braid runs \
         sealed with `--cc {}`, the simulator's figure is the same scenario file with the same \
         controller, sealed, probing for the path MTU and timed as `braid send` times \
         itself (handshake to the receiver's verdict). tcp cubic and tcp bbr send the same \
         file over kernel TCP, timed the same way (connect to the receiver's answer); \
         iperf3's figures (`-n`, its receiver \
         figure) are for reference: its clock starts after TCP's handshake and stops when the \
         sender's last write returns, before the socket buffer and the path have drained. \
         Data goes the scenario's forward way, from inside the link to outside.\n\n",
        args.rounds, args.cc
    );
    s
}

/// The command that reproduces this run, defaults left out.
fn command(args: &RealArgs) -> String {
    let mut s = String::from("```sh\nbraid bench real");
    for row in &args.rows {
        s += &format!(" {}", row.display());
    }
    if args.kinds != Kind::ALL {
        let kinds: Vec<&str> = args.kinds.iter().map(|k| k.name()).collect();
        s += &format!(" --kinds {}", kinds.join(","));
    }
    if args.cc != braid_proto::cc::Algorithm::Bbr {
        s += &format!(" --cc {}", args.cc.name());
    }
    if args.rounds != 3 {
        s += &format!(" --rounds {}", args.rounds);
    }
    if let Some(mb) = args.mb {
        s += &format!(" --mb {mb}");
    }
    if args.limit != RUN_LIMIT_S {
        s += &format!(" --limit {}", args.limit);
    }
    s += &format!(" --out {}\n```\n\n", args.out.display());
    s
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1} %"))
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.0}"))
}

/// `a / b` as a factor, "-" without both or with nothing to divide by.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_owned(),
    }
}

/// A row's name: the scenario file's directory and stem.
fn row_name(file: &str) -> String {
    Path::new(file)
        .with_extension("")
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("/")
}

/// A kind's median, and how many of its runs failed (did not finish).
fn cell(r: &RealRow, k: Kind) -> String {
    let runs = r.runs.iter().filter(|x| x.kind == k).count();
    let failed = r
        .runs
        .iter()
        .filter(|x| x.kind == k && x.error.is_some())
        .count();
    match failed {
        0 => fmt(r.median(k)),
        _ => format!("{} ({failed} of {runs} failed)", fmt(r.median(k))),
    }
}

/// One row of the table: each kind's goodput, braid's over the best of
/// the kinds that ran, retransmissions and RTT.
fn table_row(i: usize, r: &RealRow, has: &impl Fn(Kind) -> bool) -> String {
    let braid = r.median(Kind::Braid);
    let best = |kinds: [Kind; 2]| {
        kinds
            .into_iter()
            .filter(|&k| has(k))
            .filter_map(|k| r.median(k))
            .reduce(f64::max)
    };
    let best_tcp = best([Kind::TcpCubic, Kind::TcpBbr]);
    let best_iperf3 = best([Kind::Iperf3Cubic, Kind::Iperf3Bbr]);
    format!(
        "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} \
         | {} / {} / {} / {} |\n",
        i + 1,
        row_name(&r.file),
        r.link,
        r.sim_mbps,
        cell(r, Kind::Braid),
        cell(r, Kind::TcpCubic),
        cell(r, Kind::TcpBbr),
        ratio(braid, best_tcp),
        cell(r, Kind::Iperf3Cubic),
        cell(r, Kind::Iperf3Bbr),
        ratio(braid, best_iperf3),
        ratio(braid, Some(r.sim_mbps)),
        pct(r.sim_retransmit_pct),
        pct(r.median_retransmits(Kind::Braid)),
        pct(r.median_retransmits(Kind::TcpCubic)),
        pct(r.median_retransmits(Kind::TcpBbr)),
        ms(r.sim_rtt_p95_ms),
        ms(r.median_rtt_p95(Kind::Braid)),
        ms(r.median_rtt_p95(Kind::TcpCubic)),
        ms(r.median_rtt_p95(Kind::TcpBbr)),
    )
}

/// What the table's figures mean, and the plot.
const FOOTNOTE: &str =
    "\nGoodput in Mbit/s; a failed run is one that did not finish within the time limit \
          or did not verify (real.json has its error). p95 RTT: of every sender's smoothed RTT \
          over time, read at a fixed interval through the transfer: kernel TCP's (TCP_INFO \
          `tcpi_rtt`, as `ss -ti` shows it) every 10 ms, braid's and the simulator's (the \
          session's own samples, as `--plot` records them) every 100 ms. A p95 over ACKs \
          would count a fast spell's many ACKs over a slow spell's few, when the queue is \
          longest; real.json also has braid's and the simulator's p95 over their raw \
          samples. ![goodput](plots/real-goodput.svg)\n";

#[cfg(test)]
mod tests {
    use super::super::RealRun;
    use super::*;

    /// The report of fixed rows renders byte for byte as it did
    /// (real_golden.md); REAL_GOLDEN_WRITE=PATH writes it anew.
    #[test]
    fn a_report_renders_as_before() {
        let args = <RealArgs as clap::FromArgMatches>::from_arg_matches(
            &<RealArgs as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from([
                "t",
                "catchunks-loss/1.toml",
                "mbecn/2.toml",
                "--kinds",
                "braid,tcp-cubic,iperf3-bbr",
                "--rounds",
                "2",
                "--mb",
                "20",
                "--limit",
                "90",
                "--cc",
                "cubic",
            ]),
        )
        .unwrap();
        let run = |round: u64, kind: Kind, g: Option<f64>, error: Option<&str>| RealRun {
            round,
            kind,
            goodput_mbps: g,
            retransmit_pct: g.map(|g| g / 10.0),
            rtt_p95_ms: g.map(|g| g * 3.0),
            rtt_p95_raw_ms: None,
            error: error.map(str::to_owned),
        };
        let rows = [
            RealRow {
                file: "scenarios/catchunks-loss/1.toml".into(),
                link: "12mbit:50ms loss 1%".into(),
                bytes: 20_000_000,
                sim_mbps: 11.2,
                sim_retransmit_pct: Some(1.3),
                sim_rtt_p95_ms: Some(104.0),
                sim_rtt_p95_raw_ms: Some(110.0),
                runs: vec![
                    run(1, Kind::Braid, Some(10.5), None),
                    run(2, Kind::Braid, Some(10.9), None),
                    run(1, Kind::TcpCubic, Some(8.0), None),
                    run(2, Kind::TcpCubic, None, Some("timed out")),
                    run(1, Kind::Iperf3Bbr, Some(11.5), None),
                ],
            },
            RealRow {
                file: "mbecn/2.toml".into(),
                link: "100mbit:10ms".into(),
                bytes: 20_000_000,
                sim_mbps: 0.0,
                sim_retransmit_pct: None,
                sim_rtt_p95_ms: None,
                sim_rtt_p95_raw_ms: None,
                runs: vec![run(1, Kind::TcpBbr, Some(90.0), None)],
            },
        ];
        let md = markdown(&rows, &args);
        if let Ok(path) = std::env::var("REAL_GOLDEN_WRITE") {
            std::fs::write(path, &md).unwrap();
        }
        assert!(md == include_str!("report_golden.md"), "the report changed");
    }
}
