//! Loopback goodput and CPU per GB, memory to memory on 127.0.0.1: braid
//! sealed and insecure next to quinn (TLS, and without packet protection)
//! and kernel TCP.
//!
//! ```sh
//! cargo run --release --manifest-path bench/loopback/Cargo.toml -- \
//!     [--mib 512] [--rounds 5] [--json OUT.json] [--only KIND,...] [--no-perf] \
//!     [--quinn-perf PATH]
//! ```
//!
//! Every transfer is two child processes of this binary (hidden
//! subcommands `serve KIND BYTES` and `send KIND ADDR EXTRA BYTES`), each on
//! a tokio current_thread runtime, each reporting its own CPU time. Round r
//! runs the kinds rotated by r, so no kind always goes first.

mod braid_peer;
mod measure;
mod peer;
mod quinn_peer;
mod quinn_perf;
mod quinn_plain;
mod run;
mod tcp_peer;

use anyhow::{bail, Context, Result};
use measure::{median, ChildReport, Syscalls};
use peer::Kind;
use serde::Serialize;
use std::time::Duration;

struct Options {
    mib: u64,
    rounds: usize,
    json: Option<String>,
    kinds: Vec<Kind>,
    perf: bool,
    /// quinn's perf binary (`--quinn-perf` or `$QUINN_PERF`), if it exists.
    quinn_perf: Option<std::path::PathBuf>,
}

fn usage() -> &'static str {
    "loopback-bench [--mib 512] [--rounds 5] [--json OUT.json] \
     [--only braid-sealed,braid-insecure,quinn-tls,quinn-plain,quinn-perf,tcp] [--no-perf] \
     [--quinn-perf PATH (else $QUINN_PERF)]"
}

fn parse_args(args: &[String]) -> Result<Options> {
    let mut o = Options {
        mib: 512,
        rounds: 5,
        json: None,
        kinds: Kind::ALL.to_vec(),
        perf: true,
        quinn_perf: None,
    };
    let mut quinn_perf = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--mib" => o.mib = value()?.parse().context("--mib")?,
            "--rounds" => o.rounds = value()?.parse().context("--rounds")?,
            "--json" => o.json = Some(value()?.clone()),
            "--only" => {
                o.kinds = value()?
                    .split(',')
                    .map(|k| Kind::parse(k.trim()))
                    .collect::<Result<_>>()?
            }
            "--no-perf" => o.perf = false,
            "--quinn-perf" => quinn_perf = Some(value()?.clone()),
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            _ => bail!("unknown argument {a:?}\nusage: {}", usage()),
        }
    }
    o.quinn_perf = quinn_perf::locate(quinn_perf.as_deref());
    if o.quinn_perf.is_none() && o.kinds.contains(&Kind::QuinnPerf) {
        println!(
            "quinn-perf skipped: no quinn perf binary (--quinn-perf PATH or ${}; \
             bench/loopback/build-quinn-perf.sh builds one)",
            quinn_perf::ENV
        );
        o.kinds.retain(|&k| k != Kind::QuinnPerf);
    }
    if o.mib == 0 || o.rounds == 0 || o.kinds.is_empty() {
        bail!("--mib, --rounds and --only must not be zero or empty");
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") | Some("send") => child(&args),
        _ => parse_args(&args).and_then(bench),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// A child: one side of one transfer, then its report as the last line.
fn child(args: &[String]) -> Result<()> {
    measure::die_with_parent();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let peer = rt.block_on(async {
        match args {
            [role, kind, bytes] if role == "serve" => {
                let bytes = bytes.parse()?;
                match Kind::parse(kind)? {
                    Kind::BraidSealed => braid_peer::serve(true, bytes).await,
                    Kind::BraidInsecure => braid_peer::serve(false, bytes).await,
                    Kind::QuinnTls => quinn_peer::serve(true, bytes).await,
                    Kind::QuinnPlain => quinn_peer::serve(false, bytes).await,
                    Kind::QuinnPerf => bail!("quinn-perf runs quinn's own binary"),
                    Kind::Tcp => tcp_peer::serve(bytes).await,
                }
            }
            [role, kind, addr, extra, bytes] if role == "send" => {
                let (addr, bytes) = (addr.parse()?, bytes.parse()?);
                match Kind::parse(kind)? {
                    Kind::BraidSealed => braid_peer::send(true, addr, extra, bytes).await,
                    Kind::BraidInsecure => braid_peer::send(false, addr, extra, bytes).await,
                    Kind::QuinnTls => quinn_peer::send(true, addr, extra, bytes).await,
                    Kind::QuinnPlain => quinn_peer::send(false, addr, extra, bytes).await,
                    Kind::QuinnPerf => bail!("quinn-perf runs quinn's own binary"),
                    Kind::Tcp => tcp_peer::send(addr, bytes).await,
                }
            }
            _ => bail!("bad child arguments {args:?}"),
        }
    })?;
    drop(rt);
    let (cpu_user_s, cpu_sys_s) = measure::self_cpu();
    let report = ChildReport {
        peer,
        cpu_user_s,
        cpu_sys_s,
    };
    println!("RESULT {}", serde_json::to_string(&report)?);
    Ok(())
}

/// One run as printed and written to JSON. CPU per GB is per 10^9 bytes.
#[derive(Serialize)]
struct Run {
    round: usize,
    kind: &'static str,
    error: Option<String>,
    mbit_s: Option<f64>,
    sender_cpu_s_per_gb: Option<f64>,
    receiver_cpu_s_per_gb: Option<f64>,
    total_cpu_s_per_gb: Option<f64>,
    /// Data direction: datagrams the sender sent per send syscall, and the
    /// receiver received per receive syscall.
    tx_dgrams_per_syscall: Option<f64>,
    rx_dgrams_per_syscall: Option<f64>,
    sender: Option<ChildReport>,
    receiver: Option<ChildReport>,
    sender_syscalls: Option<Syscalls>,
    receiver_syscalls: Option<Syscalls>,
}

fn ratio(n: Option<u64>, d: Option<u64>) -> Option<f64> {
    match (n, d) {
        (Some(n), Some(d)) if d > 0 => Some(n as f64 / d as f64),
        _ => None,
    }
}

impl Run {
    fn new(round: usize, kind: Kind, bytes: u64, t: Result<run::Transfer>) -> Run {
        let mut run = Run {
            round,
            kind: kind.name(),
            error: None,
            mbit_s: None,
            sender_cpu_s_per_gb: None,
            receiver_cpu_s_per_gb: None,
            total_cpu_s_per_gb: None,
            tx_dgrams_per_syscall: None,
            rx_dgrams_per_syscall: None,
            sender: None,
            receiver: None,
            sender_syscalls: None,
            receiver_syscalls: None,
        };
        let t = match t {
            Ok(t) => t,
            Err(e) => {
                run.error = Some(format!("{e:#}"));
                return run;
            }
        };
        let gb = bytes as f64 / 1e9;
        let (s, r) = (&t.sender, &t.receiver);
        run.mbit_s = Some(bytes as f64 * 8.0 / s.peer.wall_s / 1e6);
        run.sender_cpu_s_per_gb = Some(s.cpu_s() / gb);
        run.receiver_cpu_s_per_gb = Some(r.cpu_s() / gb);
        run.total_cpu_s_per_gb = Some((s.cpu_s() + r.cpu_s()) / gb);
        // Sends: quinn's own `udp_tx.ios` (it matches perf's sendmsg count),
        // else what perf counted (braid). Receives: perf only, since quinn's
        // `udp_rx.ios` counts one per datagram handed to the connection, not
        // recvmmsg calls. TCP has no datagrams: n/a.
        let tx_calls = s.peer.tx_ios.or(t.sender_syscalls.map(|c| c.sends()));
        let rx_calls = t.receiver_syscalls.map(|c| c.recvs());
        run.tx_dgrams_per_syscall = ratio(s.peer.datagrams_tx, tx_calls);
        run.rx_dgrams_per_syscall = ratio(r.peer.datagrams_rx, rx_calls);
        run.sender = Some(t.sender);
        run.receiver = Some(t.receiver);
        run.sender_syscalls = t.sender_syscalls;
        run.receiver_syscalls = t.receiver_syscalls;
        run
    }

    fn line(&self) -> String {
        let head = format!("round {} {:<15}", self.round, self.kind);
        if let Some(e) = &self.error {
            return format!("{head} FAILED: {e}");
        }
        format!(
            "{head} {:>7.0} Mbit/s  CPU s/GB sender {:.2} receiver {:.2}  \
             dgrams/syscall tx {} rx {}",
            self.mbit_s.unwrap_or(f64::NAN),
            self.sender_cpu_s_per_gb.unwrap_or(f64::NAN),
            self.receiver_cpu_s_per_gb.unwrap_or(f64::NAN),
            fmt(self.tx_dgrams_per_syscall, 1),
            fmt(self.rx_dgrams_per_syscall, 1),
        )
    }
}

/// Medians of one kind's successful runs.
#[derive(Serialize)]
struct Medians {
    kind: &'static str,
    ok: usize,
    runs: usize,
    mbit_s: Option<f64>,
    sender_cpu_s_per_gb: Option<f64>,
    receiver_cpu_s_per_gb: Option<f64>,
    total_cpu_s_per_gb: Option<f64>,
    tx_dgrams_per_syscall: Option<f64>,
    rx_dgrams_per_syscall: Option<f64>,
    /// This kind over quinn-tls: goodput, and CPU of both ends together.
    goodput_vs_quinn: Option<f64>,
    cpu_vs_quinn: Option<f64>,
}

fn medians(kind: Kind, runs: &[Run]) -> Medians {
    let mine: Vec<&Run> = runs.iter().filter(|r| r.kind == kind.name()).collect();
    let med = |f: fn(&Run) -> Option<f64>| median(mine.iter().filter_map(|r| f(r)).collect());
    Medians {
        kind: kind.name(),
        ok: mine.iter().filter(|r| r.error.is_none()).count(),
        runs: mine.len(),
        mbit_s: med(|r| r.mbit_s),
        sender_cpu_s_per_gb: med(|r| r.sender_cpu_s_per_gb),
        receiver_cpu_s_per_gb: med(|r| r.receiver_cpu_s_per_gb),
        total_cpu_s_per_gb: med(|r| r.total_cpu_s_per_gb),
        tx_dgrams_per_syscall: med(|r| r.tx_dgrams_per_syscall),
        rx_dgrams_per_syscall: med(|r| r.rx_dgrams_per_syscall),
        goodput_vs_quinn: None,
        cpu_vs_quinn: None,
    }
}

fn div(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn fmt(v: Option<f64>, decimals: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.decimals$}"))
}

/// A ratio as "0.87x".
fn times(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}x"))
}

fn bench(o: Options) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bytes = o.mib << 20;
    let perf = o.perf && measure::perf_works();
    // Generous: a run slower than ~40 Mbit/s counts as stuck.
    let limit = Duration::from_secs(30 + bytes / 5_000_000);
    let names: Vec<_> = o.kinds.iter().map(|k| k.name()).collect();
    println!(
        "{} MiB per run, {} rounds, kinds {}; UDP syscalls counted by perf: {}",
        o.mib,
        o.rounds,
        names.join(","),
        if perf { "yes" } else { "no" }
    );
    let mut runs = Vec::new();
    for round in 0..o.rounds {
        let mut order = o.kinds.clone();
        let len = order.len();
        order.rotate_left(round % len);
        for kind in order {
            let t = match (&o.quinn_perf, kind) {
                (Some(exe), Kind::QuinnPerf) => {
                    rt.block_on(quinn_perf::transfer(exe, bytes, limit))
                }
                _ => rt.block_on(run::transfer(kind, bytes, perf, limit)),
            };
            let run = Run::new(round, kind, bytes, t);
            println!("{}", run.line());
            runs.push(run);
        }
    }

    let mut table: Vec<Medians> = o.kinds.iter().map(|&k| medians(k, &runs)).collect();
    let quinn = table.iter().find(|m| m.kind == Kind::QuinnTls.name());
    let (q_rate, q_cpu) = (
        quinn.and_then(|q| q.mbit_s),
        quinn.and_then(|q| q.total_cpu_s_per_gb),
    );
    for m in &mut table {
        m.goodput_vs_quinn = div(m.mbit_s, q_rate);
        m.cpu_vs_quinn = div(m.total_cpu_s_per_gb, q_cpu);
    }
    print_table(&table);

    if let Some(path) = &o.json {
        let doc = serde_json::json!({
            "mib": o.mib,
            "bytes": bytes,
            "rounds": o.rounds,
            "perf_syscalls": perf,
            "runs": runs,
            "medians": table,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
        println!("\nwrote {path}");
    }
    Ok(())
}

fn print_table(table: &[Medians]) {
    println!();
    println!(
        "| kind | ok/runs | goodput Mbit/s | CPU s/GB sender | CPU s/GB receiver \
         | CPU s/GB both | goodput vs quinn-tls | CPU vs quinn-tls \
         | dgrams/syscall tx | dgrams/syscall rx |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for m in table {
        println!(
            "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.kind,
            m.ok,
            m.runs,
            fmt(m.mbit_s, 0),
            fmt(m.sender_cpu_s_per_gb, 2),
            fmt(m.receiver_cpu_s_per_gb, 2),
            fmt(m.total_cpu_s_per_gb, 2),
            times(m.goodput_vs_quinn),
            times(m.cpu_vs_quinn),
            fmt(m.tx_dgrams_per_syscall, 1),
            fmt(m.rx_dgrams_per_syscall, 1),
        );
    }
    let get = |k: Kind| table.iter().find(|m| m.kind == k.name());
    // What sealing costs braid, and braid against quinn with protection off
    // on both (the issue's bar: braid-insecure at least quinn-plain).
    let pairs = [
        (Kind::BraidSealed, Kind::BraidInsecure),
        (Kind::BraidInsecure, Kind::QuinnPlain),
        (Kind::BraidSealed, Kind::QuinnPerf),
        (Kind::QuinnTls, Kind::QuinnPerf),
    ];
    let mut first = true;
    for (a, b) in pairs {
        if let (Some(x), Some(y)) = (get(a), get(b)) {
            if std::mem::take(&mut first) {
                println!();
            }
            println!(
                "{} / {}: goodput {}, CPU (both ends) {}",
                a.name(),
                b.name(),
                times(div(x.mbit_s, y.mbit_s)),
                times(div(x.total_cpu_s_per_gb, y.total_cpu_s_per_gb)),
            );
        }
    }
}
