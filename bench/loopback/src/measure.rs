//! What a child measures about itself (CPU, transport counters), the
//! optional `perf stat` syscall count around it, and medians.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// What a transport side reports after its transfer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PeerStats {
    /// Stream bytes this side moved (sender: written; receiver: read).
    pub bytes: u64,
    /// Sender: connect start until the receiver's confirmation arrived (the
    /// goodput clock). Receiver: first byte accepted until its reply went.
    pub wall_s: f64,
    /// Datagrams sent / received, where the transport counts them.
    pub datagrams_tx: Option<u64>,
    pub datagrams_rx: Option<u64>,
    /// Send / receive I/O operations as the transport itself counts them
    /// (quinn's `udp_tx.ios` / `udp_rx.ios`; the latter is one per datagram
    /// delivered to the connection, not per syscall); braid counts neither.
    pub tx_ios: Option<u64>,
    pub rx_ios: Option<u64>,
    /// braid: segments retransmitted; quinn: packets declared lost.
    pub losses: Option<u64>,
}

/// A child's last line: its transport counters plus its own CPU time.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChildReport {
    #[serde(flatten)]
    pub peer: PeerStats,
    /// getrusage(RUSAGE_SELF) at exit: the whole child, all threads.
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

impl ChildReport {
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_sys_s
    }
}

/// This process's CPU time so far, (user, system) seconds.
pub fn self_cpu() -> (f64, f64) {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// Children die with the bench (or with the `perf` wrapping them), so a
/// killed or crashed run never leaves a process holding a port or a core.
pub fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and changes
    // nothing but this process's own death signal.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

/// UDP syscalls a child entered, counted by `perf stat` tracepoints.
/// Counts every entry, including receives that found nothing (EAGAIN).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Syscalls {
    pub sendmsg: u64,
    pub sendmmsg: u64,
    pub sendto: u64,
    pub recvmsg: u64,
    pub recvmmsg: u64,
    pub recvfrom: u64,
}

impl Syscalls {
    pub fn sends(&self) -> u64 {
        self.sendmsg + self.sendmmsg + self.sendto
    }
    pub fn recvs(&self) -> u64 {
        self.recvmsg + self.recvmmsg + self.recvfrom
    }
}

pub const PERF_EVENTS: &str = "syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendmmsg,\
syscalls:sys_enter_sendto,syscalls:sys_enter_recvmsg,syscalls:sys_enter_recvmmsg,\
syscalls:sys_enter_recvfrom";

/// Whether `perf stat` can count syscall tracepoints here (needs perf on
/// PATH and permission for tracepoints, e.g. root or a low paranoid level).
pub fn perf_works() -> bool {
    Command::new("perf")
        .args(["stat", "-x,", "-e", PERF_EVENTS, "--", "true"])
        .output()
        .is_ok_and(|o| {
            let err = String::from_utf8_lossy(&o.stderr);
            o.status.success() && !err.contains("<not supported>") && !err.contains("<not counted>")
        })
}

/// Reads `perf stat -x,` output: lines `count,unit,event,...`.
pub fn parse_perf(path: &Path) -> Option<Syscalls> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut s = Syscalls::default();
    let mut seen = 0;
    for line in text.lines() {
        let mut f = line.split(',');
        let (Some(count), Some(_unit), Some(event)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Ok(n) = count.trim().parse::<u64>() else {
            continue;
        };
        let slot = match event.trim().strip_prefix("syscalls:sys_enter_") {
            Some("sendmsg") => &mut s.sendmsg,
            Some("sendmmsg") => &mut s.sendmmsg,
            Some("sendto") => &mut s.sendto,
            Some("recvmsg") => &mut s.recvmsg,
            Some("recvmmsg") => &mut s.recvmmsg,
            Some("recvfrom") => &mut s.recvfrom,
            _ => continue,
        };
        *slot = n;
        seen += 1;
    }
    (seen > 0).then_some(s)
}

/// Median of the values; None for none.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}
