//! quinn's own `perf` tool (quinn-rs/quinn, `perf` crate, built outside
//! this bench by `build-quinn-perf.sh`) as a kind: its server and its client
//! as the two children, TLS, memory to memory, perf's own defaults
//! otherwise.
//!
//! The client uploads the byte count on one bidirectional stream
//! (`--upload-size N --download-size 0 --bi-requests 1`) and logs "upload
//! finished" once the server has acknowledged all of it. perf then starts
//! the next request at once and runs until its `--duration`, so the bench
//! reads both processes' CPU from /proc the moment that line arrives and
//! ends them there. Goodput is N over the time from spawning the client to
//! that line (process start and handshake included, as for the other kinds
//! from connect start).

use crate::measure::{ChildReport, PeerStats};
use crate::run::Transfer;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The environment variable naming the binary when `--quinn-perf` is not given.
pub const ENV: &str = "QUINN_PERF";

/// The binary to use: the flag's path, else `$QUINN_PERF`. None when
/// neither names an existing file (the kind is then skipped).
pub fn locate(flag: Option<&str>) -> Option<PathBuf> {
    let path = flag
        .map(PathBuf::from)
        .or_else(|| std::env::var_os(ENV).map(PathBuf::from))?;
    path.is_file().then_some(path)
}

/// CPU seconds (user, system) a live process has used, from /proc.
fn proc_cpu(pid: u32) -> Result<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which sits in parentheses and may hold
    // spaces: state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')').context("/proc stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf only reads a configuration value.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let field = |i: usize| -> Result<f64> {
        Ok(f.get(i - 3).context("short /proc stat")?.parse::<f64>()? / tick)
    };
    Ok((field(14)?, field(15)?))
}

fn spawn(exe: &Path, args: &[String]) -> Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env("RUST_LOG", "warn,perf::client=debug,perf::server=info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // SAFETY: prctl in the forked child before exec, async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            crate::measure::die_with_parent();
            Ok(())
        })
    };
    Ok(cmd.spawn()?)
}

/// A free loopback UDP port for the server (released just before it binds).
fn free_port() -> Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits for a stdout line containing `needle`; Err if stdout ends first.
async fn wait_for(child: &mut Child, needle: &str) -> Result<()> {
    let out = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(out).lines();
    while let Some(line) = lines.next_line().await? {
        if line.contains(needle) {
            // Keep reading in the background so the child never blocks on
            // a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return Ok(());
        }
    }
    bail!("quinn perf ended before printing {needle:?}")
}

fn report(bytes: u64, wall_s: f64, (user, sys): (f64, f64)) -> ChildReport {
    ChildReport {
        peer: PeerStats {
            bytes,
            wall_s,
            ..PeerStats::default()
        },
        cpu_user_s: user,
        cpu_sys_s: sys,
    }
}

/// One transfer of `bytes` through quinn's perf; gives up after `limit`.
pub async fn transfer(exe: &Path, bytes: u64, limit: Duration) -> Result<Transfer> {
    let port = free_port()?;
    let addr = format!("127.0.0.1:{port}");
    let mut server = spawn(exe, &["server".into(), "--listen".into(), addr.clone()])?;
    tokio::time::timeout(
        Duration::from_secs(30),
        wait_for(&mut server, "listening on"),
    )
    .await
    .context("quinn perf server not listening within 30 s")??;

    let t0 = Instant::now();
    let mut client = spawn(
        exe,
        &[
            "client".into(),
            addr,
            "--bi-requests".into(),
            "1".into(),
            format!("--upload-size={bytes}"),
            "--download-size=0".into(),
            format!("--duration={}", limit.as_secs() + 10),
        ],
    )?;
    tokio::time::timeout(limit, wait_for(&mut client, "upload finished"))
        .await
        .with_context(|| format!("no result within {} s", limit.as_secs()))??;
    let wall_s = t0.elapsed().as_secs_f64();
    let sender_cpu = proc_cpu(client.id().context("client pid")?)?;
    let receiver_cpu = proc_cpu(server.id().context("server pid")?)?;
    let _ = client.kill().await;
    let _ = server.kill().await;
    Ok(Transfer {
        sender: report(bytes, wall_s, sender_cpu),
        receiver: report(bytes, wall_s, receiver_cpu),
        sender_syscalls: None,
        receiver_syscalls: None,
    })
}
