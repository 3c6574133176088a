//! CPU time and memory of a running process, from /proc (Linux): what
//! `braid relay --metrics` says of itself, and what the bench reads of the
//! programs it runs to give CPU per gigabyte moved. Not part of the
//! transport; it lives here because both binaries depend on this crate.

use std::io;

/// CPU time and memory of a running process, from /proc.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// User and system CPU seconds.
    pub cpu_s: f64,
    /// Resident memory now, in bytes.
    pub rss: u64,
    /// Resident memory at its peak, in bytes.
    pub rss_peak: u64,
}

/// Reads `pid`'s /proc/<pid>/stat (CPU ticks) and status (VmRSS, VmHWM).
pub fn usage(pid: u32) -> io::Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| io::Error::new(e.kind(), format!("no process {pid}: {e}")))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    parse_usage(&stat, &status, ticks)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "cannot read /proc/<pid>/stat"))
}

fn parse_usage(stat: &str, status: &str, ticks_per_s: f64) -> Option<Usage> {
    // The command name (field 2) may hold spaces and parentheses: the
    // fields that follow start after the last ')', with field 3 (state).
    let rest: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let utime: f64 = rest.get(11)?.parse().ok()?;
    let stime: f64 = rest.get(12)?.parse().ok()?;
    let kib = |key: &str| {
        status.lines().find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    let rss = kib("VmRSS:").unwrap_or(0) * 1024;
    Some(Usage {
        cpu_s: (utime + stime) / ticks_per_s,
        rss,
        rss_peak: kib("VmHWM:").map_or(rss, |k| k * 1024),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_reads_ticks_after_the_command_name() {
        let stat = "4242 (braid (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 50 0 0 20 0 3 0 100 1000000 500 18446744073709551615";
        let status = "Name:\tbraid\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        let u = parse_usage(stat, status, 100.0).unwrap();
        assert_eq!(u.cpu_s, 2.0);
        assert_eq!(u.rss, 10_485_760);
        assert_eq!(u.rss_peak, 20_971_520);
        assert!(parse_usage("4242 (braid) S 1", status, 100.0).is_none());
    }

    #[test]
    fn this_process_has_usage() {
        let u = usage(std::process::id()).unwrap();
        assert!(u.rss > 0 && u.rss_peak >= u.rss);
    }
}
