//! The lab's network namespaces: made and removed with iproute2 (`ip netns`,
//! so they show in `ip netns list` and `ip netns exec` works on them),
//! entered by a short-lived thread to make a TUN device, write a sysctl or
//! talk netlink there, and by each child before it runs its program.
//!
//! Names are `braid-lab-<pid>-<node>`: a lab left behind by a process that
//! is gone (killed with -9) is recognised and removed by the next one.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// Every lab namespace's name starts with this.
pub const PREFIX: &str = "braid-lab-";

/// Where iproute2 keeps named namespaces.
const RUN_DIR: &str = "/run/netns";

/// `braid-lab-<pid>-<node>`.
pub fn name(pid: u32, node: &str) -> String {
    format!("{PREFIX}{pid}-{node}")
}

/// The pid a lab namespace's name was made by, if it is one.
pub fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, node) = rest.split_once('-')?;
    if node.is_empty() {
        return None;
    }
    pid.parse().ok()
}

/// Makes a namespace with its loopback up.
pub fn add(name: &str) -> anyhow::Result<()> {
    ip(&["netns", "add", name]).context("cannot create a network namespace")?;
    ip(&["-n", name, "link", "set", "dev", "lo", "up"])
}

/// Removes a namespace's name; the namespace goes with the last process
/// and file descriptor in it.
pub fn del(name: &str) {
    let _ = ip(&["netns", "del", name]);
}

/// The lab namespaces of processes that are gone.
pub fn stale(listed: &str, alive: impl Fn(u32) -> bool) -> Vec<String> {
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| owner(n).is_some_and(|pid| !alive(pid)))
        .map(str::to_owned)
        .collect()
}

/// Removes the namespaces of labs whose process is gone.
pub fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    for n in stale(&listed, |pid| {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }) {
        del(&n);
    }
}

fn open(name: &str) -> anyhow::Result<File> {
    File::open(format!("{RUN_DIR}/{name}")).with_context(|| format!("no network namespace {name}"))
}

/// Runs `f` on a thread of its own that has entered namespace `name`: a
/// socket, TUN device or netlink request made there belongs to it. The
/// calling thread stays where it is.
pub fn within<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
    let ns = open(name)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: setns on a namespace file we hold open; it changes only
            // this thread, which ends when `f` returns.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error()).context("cannot enter the namespace");
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("a thread in namespace {name} panicked")))
    })
}

/// `program` to run in namespace `name`. The child also dies with this
/// process (SIGKILL when it exits, however it exits), so a lab's programs
/// never outlive it.
pub fn command(name: &str, program: impl AsRef<std::ffi::OsStr>) -> anyhow::Result<Command> {
    let ns = open(name)?;
    let mut c = Command::new(program);
    // SAFETY: between fork and exec the closure makes only system calls
    // (setns, prctl, getppid), which are async-signal-safe; it allocates
    // nothing.
    let parent = unsafe { libc::getpid() };
    unsafe {
        c.pre_exec(move || {
            if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the death signal was armed.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // The lab blocks SIGINT and SIGTERM to take them on a thread
            // of its own (`guard_signals`); its programs must not inherit
            // that, or a SIGTERM would never reach them.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    Ok(c)
}

/// Runs `program args` in namespace `name` with `input` on its stdin; fails
/// with what it printed on stderr.
pub fn run(name: &str, program: &str, args: &[&str], input: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut child = command(name, program)?
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {program}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{program} {} in {name}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// iproute2's `ip`, failing with what it said.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Writes a sysctl of namespace `name` (e.g. "net/ipv4/ip_forward"): the
/// network sysctls a thread sees are those of its namespace.
pub fn sysctl(name: &str, key: &str, value: &str) -> anyhow::Result<()> {
    let path = format!("/proc/sys/{key}");
    within(name, || std::fs::write(&path, value))?
        .with_context(|| format!("cannot set {key} in {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_whose_they_are() {
        assert_eq!(name(4242, "host-a"), "braid-lab-4242-host-a");
        assert_eq!(owner("braid-lab-4242-host-a"), Some(4242));
        assert_eq!(owner("braid-lab-4242-"), None);
        assert_eq!(owner("braid-link-4242"), None);
        assert_eq!(owner("braid-lab-x-core"), None);
    }

    #[test]
    fn only_dead_processes_labs_are_stale() {
        let listed = "braid-lab-10-core (id: 3)\nbraid-lab-11-core\nbraid-link-10\nother\n";
        assert_eq!(stale(listed, |pid| pid == 11), ["braid-lab-10-core"]);
        assert!(stale(listed, |_| true).is_empty());
    }
}
