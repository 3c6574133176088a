//! The medians of `braid bench transfers` and its markdown page.

use super::stats::median;
use super::transfers::{Case, Protection, Run, Sink};
use serde::Serialize;

/// Medians of one case.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Summary {
    pub case: String,
    pub runs: usize,
    pub goodput_mbps: f64,
    pub sender_cpu_s_per_gb: f64,
    pub receiver_cpu_s_per_gb: f64,
    pub relay_cpu_s_per_gb: Option<f64>,
    pub goodput_vs_first: f64,
    pub cpu_vs_first: f64,
    /// Over kernel TCP's, when it ran beside braid (`--mtu`).
    pub goodput_vs_tcp: Option<f64>,
    pub cpu_vs_tcp: Option<f64>,
}

impl Summary {
    /// CPU seconds per GB of every process of the case together.
    fn cpu(&self) -> f64 {
        self.sender_cpu_s_per_gb
            + self.receiver_cpu_s_per_gb
            + self.relay_cpu_s_per_gb.unwrap_or(0.0)
    }
}

/// What the page says about the run besides its rows.
pub(super) struct Setting<'a> {
    pub size: u64,
    pub rounds: u32,
    pub sink: Sink,
    /// The loopback MTU the processes had.
    pub mtu: u32,
    /// Whether they ran in a namespace of their own (`--mtu`).
    pub namespace: bool,
    pub command: &'a str,
}

pub(super) fn summarise(cases: &[Case], runs: &[Run]) -> Vec<Summary> {
    let of = |c: usize, f: &dyn Fn(&Run) -> Option<f64>| {
        let mut v: Vec<f64> = runs.iter().filter(|r| r.case == c).filter_map(f).collect();
        median(&mut v)
    };
    let mut out: Vec<Summary> = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let goodput = of(c, &|r| Some(r.goodput_mbps)).unwrap_or(0.0);
        out.push(Summary {
            case: case.name(),
            runs: runs.iter().filter(|r| r.case == c).count(),
            goodput_mbps: goodput,
            sender_cpu_s_per_gb: of(c, &|r| Some(r.sender_cpu_s_per_gb)).unwrap_or(0.0),
            receiver_cpu_s_per_gb: of(c, &|r| Some(r.receiver_cpu_s_per_gb)).unwrap_or(0.0),
            relay_cpu_s_per_gb: of(c, &|r| r.relay_cpu_s_per_gb),
            goodput_vs_first: 1.0,
            cpu_vs_first: 1.0,
            goodput_vs_tcp: None,
            cpu_vs_tcp: None,
        });
    }
    let ratio = |a: f64, b: f64| a / b.max(f64::MIN_POSITIVE);
    let (g0, c0) = out
        .first()
        .map_or((0.0, 0.0), |f| (f.goodput_mbps, f.cpu()));
    let tcp = cases
        .iter()
        .position(|c| c.kind == Protection::Tcp)
        .map(|t| (out[t].goodput_mbps, out[t].cpu()));
    for (s, case) in out.iter_mut().zip(cases) {
        s.goodput_vs_first = ratio(s.goodput_mbps, g0);
        s.cpu_vs_first = ratio(s.cpu(), c0);
        if let (Some((g, c)), false) = (tcp, case.kind == Protection::Tcp) {
            s.goodput_vs_tcp = Some(ratio(s.goodput_mbps, g));
            s.cpu_vs_tcp = Some(ratio(s.cpu(), c));
        }
    }
    out
}

pub(super) fn markdown(summaries: &[Summary], set: &Setting) -> String {
    use std::fmt::Write;
    let tcp = summaries.iter().any(|s| s.goodput_vs_tcp.is_some());
    let mut md = if set.namespace {
        format!(
            "# Transfers at MTU {}: the CLI as users run it, beside kernel TCP\n\n",
            set.mtu
        )
    } else {
        String::from("# Transfers on loopback: the CLI as users run it\n\n")
    };
    let _ = writeln!(
        md,
        "{} per transfer, {} rounds, cases rotated each round, medians; the \
         receiver writes to {}; sealed means a pinned key. `runs` in \
         [transfers.json](transfers.json) has every run.\n",
        braid::text::size(set.size),
        set.rounds,
        match set.sink {
            Sink::File => "a file",
            Sink::Null => "/dev/null",
        }
    );
    let _ = writeln!(md, "{}\n", mtu_note(set));
    if tcp {
        md.push_str(
            "kernel TCP: `braid-bench tcp-send` (cubic; reads the file and writes it to the \
             socket through a 1 MiB buffer, no encryption, no hashing) to `braid-bench \
             tcp-recv` (reads and discards), timed as `braid send` times itself: from connecting until the \
             receiver's answer that it has every byte. CPU is each process's, from the \
             kernel's accounting, as for braid.\n\n",
        );
    }
    let _ = writeln!(md, "```sh\n{}\n```\n", set.command);
    md.push_str(&table(summaries, tcp));
    md
}

/// The MTU the run had, and what it means for braid's datagrams.
fn mtu_note(set: &Setting) -> String {
    if set.namespace {
        format!(
            "Loopback MTU {} (every process in a network namespace of its own, whose \
             loopback has that MTU): braid's datagrams are at most {} bytes, as on a \
             path with that MTU.",
            set.mtu,
            set.mtu.saturating_sub(28)
        )
    } else {
        format!(
            "Loopback MTU {} (the host's): braid's path-MTU discovery finds datagrams \
             of 16 KiB and more here, which no real network carries; `--mtu 1500` \
             measures at Ethernet's MTU.",
            set.mtu
        )
    }
}

fn table(summaries: &[Summary], tcp: bool) -> String {
    use std::fmt::Write;
    let mut md = String::from(
        "| case | runs | goodput Mbit/s | CPU s/GB sender | CPU s/GB receiver | CPU s/GB relay | goodput vs first | CPU vs first |",
    );
    md += if tcp {
        " goodput vs TCP | CPU vs TCP |\n|---|---|---|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|---|---|\n"
    };
    let dash = |v: Option<f64>, unit: &str| v.map_or("—".to_owned(), |r| format!("{r:.2}{unit}"));
    for s in summaries {
        let _ = write!(
            md,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {} | {:.2}x | {:.2}x |",
            s.case,
            s.runs,
            s.goodput_mbps,
            s.sender_cpu_s_per_gb,
            s.receiver_cpu_s_per_gb,
            dash(s.relay_cpu_s_per_gb, ""),
            s.goodput_vs_first,
            s.cpu_vs_first
        );
        if tcp {
            let _ = write!(
                md,
                " {} | {} |",
                dash(s.goodput_vs_tcp, "x"),
                dash(s.cpu_vs_tcp, "x")
            );
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::super::transfers::Via;
    use super::*;

    fn case(kind: Protection, via: &str) -> Case {
        Case {
            kind,
            via: via.into(),
            qlog: false,
            route: via.parse::<Via>().unwrap(),
        }
    }

    fn run(case: usize, goodput: f64, cpu: f64) -> Run {
        Run {
            round: 1,
            case,
            goodput_mbps: goodput,
            duration_s: 1.0,
            sender_cpu_s_per_gb: cpu,
            receiver_cpu_s_per_gb: cpu,
            relay_cpu_s_per_gb: None,
        }
    }

    #[test]
    fn medians_and_ratios_are_per_case() {
        let cases = [
            case(Protection::Sealed, "direct"),
            case(Protection::Insecure, "direct"),
        ];
        let runs = [
            run(0, 100.0, 1.0),
            run(0, 300.0, 3.0),
            run(0, 200.0, 2.0),
            run(1, 400.0, 1.0),
        ];
        let s = summarise(&cases, &runs);
        assert_eq!((s[0].runs, s[0].goodput_mbps), (3, 200.0));
        assert_eq!(s[0].goodput_vs_first, 1.0);
        assert_eq!(s[1].goodput_vs_first, 2.0);
        assert_eq!(s[1].cpu_vs_first, 0.5);
        assert_eq!(s[0].goodput_vs_tcp, None);
    }

    /// With kernel TCP among the cases, every braid case has its ratios to
    /// TCP's medians, the page states the MTU and shows them.
    #[test]
    fn braid_is_set_against_kernel_tcp() {
        let cases = [
            case(Protection::Sealed, "direct"),
            case(Protection::Tcp, "direct"),
        ];
        let runs = [
            run(0, 2000.0, 2.0),
            run(1, 8000.0, 0.5),
            run(0, 1000.0, 3.0),
            run(1, 10000.0, 0.5),
            run(0, 3000.0, 1.0),
            run(1, 9000.0, 0.2),
        ];
        let s = summarise(&cases, &runs);
        assert_eq!(s[0].goodput_vs_tcp, Some(2000.0 / 9000.0));
        assert_eq!(s[0].cpu_vs_tcp, Some(4.0));
        assert_eq!((s[1].goodput_vs_tcp, s[1].cpu_vs_tcp), (None, None));
        let md = markdown(
            &s,
            &Setting {
                size: 300_000_000,
                rounds: 3,
                sink: Sink::Null,
                mtu: 1500,
                namespace: true,
                command: "braid bench transfers --mtu 1500",
            },
        );
        assert!(md.starts_with("# Transfers at MTU 1500"), "{md}");
        assert!(md.contains("at most 1472 bytes"), "{md}");
        assert!(
            md.contains(
                "| sealed, direct | 3 | 2000 | 2.00 | 2.00 | — | 1.00x | 1.00x | 0.22x | 4.00x |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| kernel TCP | 3 | 9000 | 0.50 | 0.50 | — | 4.50x | 0.25x | — | — |"),
            "{md}"
        );
    }
}
