//! One transfer as two child processes of this binary: the receiver
//! (`serve`) first, then the sender (`send`) once the receiver printed its
//! port. Separate processes give each side its own CPU account and keep a
//! kind's state (threads, sockets, allocator) from leaking into the next.

use crate::measure::{self, ChildReport, Syscalls};
use crate::peer::Kind;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::task::JoinHandle;

/// Both sides of one transfer.
pub struct Transfer {
    pub sender: ChildReport,
    pub receiver: ChildReport,
    /// With `perf`: UDP syscalls each child entered.
    pub sender_syscalls: Option<Syscalls>,
    pub receiver_syscalls: Option<Syscalls>,
}

/// A child with its stdout lines and its stderr collected on the side.
struct Proc {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: JoinHandle<String>,
    perf_out: Option<PathBuf>,
    role: &'static str,
}

/// Spawns `exe role args…`, under `perf stat` when `perf_out` is given.
fn spawn(role: &'static str, args: &[&str], perf_out: Option<PathBuf>) -> Result<Proc> {
    let exe = std::env::current_exe()?;
    let mut cmd = match &perf_out {
        Some(out) => {
            let mut c = Command::new("perf");
            c.args(["stat", "-x,", "-e", measure::PERF_EVENTS, "-o"])
                .arg(out)
                .arg("--")
                .arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.arg(role)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().with_context(|| format!("spawn {role}"))?;
    let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let stderr = tokio::spawn(read_all(child.stderr.take()));
    Ok(Proc {
        child,
        lines,
        stderr,
        perf_out,
        role,
    })
}

async fn read_all(r: Option<impl AsyncRead + Unpin>) -> String {
    let mut s = String::new();
    if let Some(mut r) = r {
        let _ = r.read_to_string(&mut s).await;
    }
    s
}

impl Proc {
    /// Reads to the child's `RESULT` line and its exit; on failure the error
    /// carries what the child wrote to stderr.
    async fn finish(mut self) -> Result<(ChildReport, Option<Syscalls>)> {
        let mut report = None;
        while let Some(line) = self.lines.next_line().await? {
            if let Some(json) = line.strip_prefix("RESULT ") {
                report = Some(serde_json::from_str::<ChildReport>(json)?);
            }
        }
        let status = self.child.wait().await?;
        let stderr = self.stderr.await.unwrap_or_default();
        let syscalls = self.perf_out.as_deref().and_then(take_perf);
        match report {
            Some(r) if status.success() => Ok((r, syscalls)),
            _ => bail!("{} {status}: {}", self.role, last_lines(&stderr)),
        }
    }
}

fn take_perf(path: &Path) -> Option<Syscalls> {
    let s = measure::parse_perf(path);
    let _ = std::fs::remove_file(path);
    s
}

/// The end of a child's stderr: where its error is.
fn last_lines(s: &str) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(4)..];
    if tail.is_empty() {
        "(no stderr)".into()
    } else {
        tail.join(" | ")
    }
}

/// Runs one transfer of `bytes`; gives up after `limit`, killing both.
pub async fn transfer(kind: Kind, bytes: u64, perf: bool, limit: Duration) -> Result<Transfer> {
    let perf_path = |role: &str| {
        perf.then(|| {
            std::env::temp_dir().join(format!(
                "loopback-bench-{}-{}-{role}.perf",
                std::process::id(),
                kind.name()
            ))
        })
    };
    let n = bytes.to_string();
    let mut receiver = spawn("serve", &[kind.name(), &n], perf_path("serve"))?;

    let ready = tokio::time::timeout(Duration::from_secs(30), receiver.lines.next_line())
        .await
        .context("receiver did not get ready within 30 s")??;
    let Some(ready) = ready else {
        let err = receiver.finish().await.err();
        bail!("receiver ended before ready: {err:?}");
    };
    let mut f = ready.split_whitespace();
    let (Some("READY"), Some(port), Some(extra)) = (f.next(), f.next(), f.next()) else {
        bail!("receiver's first line: {ready:?}");
    };
    let addr = format!("127.0.0.1:{port}");

    let sender = spawn("send", &[kind.name(), &addr, extra, &n], perf_path("send"))?;
    let both = async {
        let s = sender.finish().await;
        // A failed sender may leave the receiver waiting for ever: give it
        // a moment to report its own side, then stop it.
        let r = match s {
            Ok(_) => receiver.finish().await,
            Err(_) => tokio::time::timeout(Duration::from_secs(5), receiver.finish())
                .await
                .unwrap_or_else(|_| bail!("receiver stopped after the sender failed")),
        };
        (s, r)
    };
    // On timeout both Procs drop here: kill_on_drop ends them (and a child
    // under perf dies with perf through PR_SET_PDEATHSIG).
    let (s, r) = tokio::time::timeout(limit, both)
        .await
        .with_context(|| format!("no result within {} s", limit.as_secs()))?;
    let ((sender, sender_syscalls), (receiver, receiver_syscalls)) = match (s, r) {
        (Ok(s), Ok(r)) => (s, r),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => return Err(e),
        (Err(s), Err(r)) => bail!("{s:#}; {r:#}"),
    };
    Ok(Transfer {
        sender,
        receiver,
        sender_syscalls,
        receiver_syscalls,
    })
}
