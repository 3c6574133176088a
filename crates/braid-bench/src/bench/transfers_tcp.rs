//! Kernel TCP's turn in `braid bench transfers --mtu`: the same file from
//! `braid-bench tcp-send` to `braid-bench tcp-recv` ([`crate::tcp_file`]),
//! two processes of this binary where braid's run, timed as `braid send` times itself,
//! with each one's CPU time from the kernel's accounting.

use super::transfers::{output_and_cpu, said, Bench, Procs, Run};
use anyhow::{bail, Context};
use std::process::Stdio;

/// One transfer over kernel TCP (cubic, the kernel's default).
pub(super) fn transfer(bench: &Bench) -> anyhow::Result<Run> {
    let port = super::real::free_tcp_port()?;
    let listen = format!("127.0.0.1:{port}");
    let size = bench.size();
    let mut procs = Procs::default();
    let mut recv = bench.own_command()?;
    recv.args([
        "tcp-recv",
        "--listen",
        &listen,
        "--bytes",
        &size.to_string(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = procs.start("braid-bench tcp-recv", &mut recv)?;
    said(child.stderr.take(), "listening on ", "braid-bench tcp-recv")?;
    let mut send = bench.own_command()?;
    let mut send = send
        .arg("tcp-send")
        .arg(bench.input())
        .args(["--to", &listen, "--cc", "cubic"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start braid-bench tcp-send")?;
    let (sent, send_cpu) = output_and_cpu(&mut send)?;
    if !sent.status.success() {
        bail!(
            "braid-bench tcp-send failed: {}",
            String::from_utf8_lossy(&sent.stderr).trim()
        );
    }
    let s: serde_json::Value =
        serde_json::from_slice(&sent.stdout).context("braid-bench tcp-send printed no JSON")?;
    let (received, recv_cpu) = output_and_cpu(&mut procs.take(0))?;
    let r: serde_json::Value =
        serde_json::from_slice(&received.stdout).context("braid-bench tcp-recv printed no JSON")?;
    anyhow::ensure!(
        r["bytes"] == size && s["bytes"] == size,
        "kernel TCP moved {} of {size} bytes (sender: {})",
        r["bytes"],
        s["bytes"]
    );
    let gb = size as f64 / 1e9;
    Ok(Run {
        round: 0,
        case: 0,
        goodput_mbps: s["goodput_mbps"].as_f64().context("no goodput")?,
        duration_s: s["seconds"].as_f64().context("no duration")?,
        sender_cpu_s_per_gb: send_cpu.as_secs_f64() / gb,
        receiver_cpu_s_per_gb: recv_cpu.as_secs_f64() / gb,
        relay_cpu_s_per_gb: None,
    })
}
