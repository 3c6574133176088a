//! `braid sim`: run a scenario in virtual time.

use braid_sim::Scenario;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct SimArgs {
    /// Scenario file (TOML); see docs/scenarios.md. Omitted: the built-in example.
    file: Option<PathBuf>,
    /// Seed overriding the scenario's.
    #[arg(long)]
    seed: Option<u64>,
    /// Congestion controller for every flow, overriding the scenario's.
    #[arg(long)]
    cc: Option<braid_proto::cc::Algorithm>,
    /// Start every flow this much later than the file says (and allow the
    /// run as much longer): on a trace link, the transfer meets another
    /// stretch of the trace. Results depend on that phase; compare
    /// controllers over several.
    #[arg(long, value_name = "D", value_parser = crate::parse_duration)]
    delay_start: Option<std::time::Duration>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    /// With --json, include each connection's time series.
    #[arg(long, requires = "json")]
    series: bool,
    /// Also draw the run's plots (window, bytes in flight, throughput and
    /// smoothed RTT per connection) into DIR, as SVG and PNG; see
    /// docs/observability.md.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Also write each session's qlog (JSON-SEQ, .sqlog) into DIR, in
    /// virtual time; open them in qvis. See docs/observability.md.
    #[arg(long, value_name = "DIR")]
    qlog: Option<PathBuf>,
    /// Instead of a scenario, run the rendezvous meeting between two sites
    /// behind every pair of NAT kinds (cone, restricted, symmetric,
    /// firewall) and print when each pair met and found a direct path;
    /// then `braid bench reach`'s lab cases (NAT pairs, capacity,
    /// failover) as 20 MB transfers in virtual time; see docs/reach.md.
    #[arg(long, conflicts_with_all = ["file", "cc", "delay_start", "json", "plot", "qlog"])]
    reach: bool,
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    if args.reach {
        let seed = args.seed.unwrap_or(1);
        print!("{}", braid_sim::reach::matrix(seed));
        println!();
        let rows = braid_sim::reach::run_lab_cases(20_000_000, seed);
        print!("{}", braid_sim::reach::markdown(&rows));
        return Ok(ExitCode::SUCCESS);
    }
    let mut scenario = match &args.file {
        Some(path) => Scenario::from_file(path)?,

        None => Scenario::example(),
    };
    if let Some(cc) = &args.cc {
        for flow in &mut scenario.flows {
            flow.session.cc = *cc;
        }
    }

    if let Some(d) = args.delay_start {
        for flow in &mut scenario.flows {
            flow.start += d;
        }
        scenario.time_limit += d;
    }

    let seed = args.seed.unwrap_or(scenario.seed);
    let sim = braid_sim::Sim::new(scenario, seed);
    let result = match &args.qlog {
        Some(dir) => {
            let (result, files) = sim.with_qlog(dir)?.run_with_qlog();
            for file in files? {
                eprintln!("braid sim: qlog {}", file.display());
            }
            result
        }
        None => sim.run(),
    };
    if let Some(dir) = &args.plot {
        crate::plot::write_run(&result, dir, "braid sim")?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&result.to_json(args.series))?);
    } else {
        print!("{}", result.summary());
    }
    let ok = result
        .flows
        .iter()
        .all(|f| f.forward.completed && f.reverse.as_ref().is_none_or(|r| r.completed));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
