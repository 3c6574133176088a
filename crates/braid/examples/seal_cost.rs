//! What sealing costs: loopback goodput and CPU of sealed sessions next to
//! `--insecure` ones, memory to memory, alternating, several rounds.
//!
//! ```sh
//! cargo run --release -p braid --example seal_cost -- [MIB] [ROUNDS] [sealed|insecure]
//! ```
//!
//! Both ends run in this process, so CPU per GB is the two sides together.
//! Prints each run, then the medians and the sealed/insecure ratio.

use braid::{connect, Listener, PathSpec, Security, SessionConfig};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Sealed,
    Insecure,
}

struct Run {
    mbit_s: f64,
    cpu_s_per_gb: f64,
}

fn configs(mode: Mode) -> (SessionConfig, SessionConfig) {
    let (server, client) = match mode {
        Mode::Sealed => {
            let key = braid::random_keypair();
            let public = key.public();
            (Security::server(key), Security::pinned(public))
        }
        Mode::Insecure => (Security::insecure(), Security::insecure()),
    };
    let cfg = |security| SessionConfig {
        security,
        ..SessionConfig::default()
    };
    (cfg(server), cfg(client))
}

/// Process CPU time (user + system), both sides included.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

async fn transfer(mode: Mode, bytes: usize) -> anyhow::Result<Run> {
    let (server_cfg, client_cfg) = configs(mode);
    let listener = Listener::bind(([127, 0, 0, 1], 0).into(), server_cfg)?;
    let to = listener.local_addr();
    let receiver = tokio::spawn(async move {
        let mut s = listener.accept().await?;
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        loop {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            total += n;
        }
        s.shutdown().await?;
        anyhow::Ok(total)
    });
    let chunk = vec![0x5au8; 1 << 20];
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let mut s = connect(&[PathSpec::to(to)], client_cfg).await?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        s.write_all(&chunk[..n]).await?;
        left -= n;
    }
    s.shutdown().await?;
    let got = receiver.await??;
    let (cpu, wall) = (cpu_time() - cpu0, t0.elapsed());
    anyhow::ensure!(got == bytes, "{mode:?}: received {got} of {bytes}");
    let gb = bytes as f64 / 1e9;
    Ok(Run {
        mbit_s: bytes as f64 * 8.0 / wall.as_secs_f64() / 1e6,
        cpu_s_per_gb: cpu.as_secs_f64() / gb,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // A last argument `sealed` or `insecure` runs only that mode (to profile).
    let only = match args.last().map(String::as_str) {
        Some("sealed") => Some(Mode::Sealed),
        Some("insecure") => Some(Mode::Insecure),
        _ => None,
    };
    if only.is_some() {
        args.pop();
    }
    let args: Vec<usize> = args.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
    let mib = args.first().copied().unwrap_or(512);
    let rounds = args.get(1).copied().unwrap_or(5);
    let bytes = mib << 20;
    println!("{mib} MiB per run, {rounds} rounds, sealed and insecure alternating");
    let mut runs: Vec<(Mode, Run)> = Vec::new();
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warm cache.
        let order = if round % 2 == 0 {
            [Mode::Sealed, Mode::Insecure]
        } else {
            [Mode::Insecure, Mode::Sealed]
        };
        for mode in order.into_iter().filter(|m| only.is_none_or(|o| o == *m)) {
            let run = transfer(mode, bytes).await?;
            println!(
                "round {round} {:>8}: {:>7.0} Mbit/s  {:.2} CPU s/GB",
                format!("{mode:?}").to_lowercase(),
                run.mbit_s,
                run.cpu_s_per_gb
            );
            runs.push((mode, run));
        }
    }
    if only.is_some() {
        return Ok(());
    }
    let med = |mode: Mode, f: fn(&Run) -> f64| {
        median(
            runs.iter()
                .filter(|(m, _)| *m == mode)
                .map(|(_, r)| f(r))
                .collect(),
        )
    };
    let (s_rate, i_rate) = (
        med(Mode::Sealed, |r| r.mbit_s),
        med(Mode::Insecure, |r| r.mbit_s),
    );
    let (s_cpu, i_cpu) = (
        med(Mode::Sealed, |r| r.cpu_s_per_gb),
        med(Mode::Insecure, |r| r.cpu_s_per_gb),
    );
    println!();
    println!("| mode | goodput (median) | CPU s/GB, both ends |");
    println!("|---|---|---|");
    println!("| sealed | {s_rate:.0} Mbit/s | {s_cpu:.2} |");
    println!("| insecure | {i_rate:.0} Mbit/s | {i_cpu:.2} |");
    println!(
        "| sealed / insecure | {:.2}x | {:.2}x |",
        s_rate / i_rate,
        s_cpu / i_cpu
    );
    Ok(())
}
