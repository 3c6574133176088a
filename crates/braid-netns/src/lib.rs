//! braid-netns: network namespaces and TUN devices, for `braid link`
//! (one emulated link in front of a command) and braid-bench (a loopback
//! at a chosen MTU, and the NAT lab: namespaces for hosts, routers and
//! relays joined by TUN hops). Linux only; making them needs root.
//!
//! - [`Tun`] (`tun`): one end of an emulated link, a non-blocking TUN
//!   device carrying IP packets; [`wait_readable`] sleeps until either of
//!   two has one.
//! - [`Namespace`] (`namespace`): `braid link`'s, a network namespace for
//!   the command and a TUN device at each end of the emulated link, like
//!   mahimahi's shells. The outside end lives in the namespace braid was
//!   started in, the inside end (the namespace's default route) in the new
//!   one; braid reads every IP packet from one device and writes it to the
//!   other when the link delivers it.
//! - [`Loopback`] (`loopback`): a namespace with nothing but its loopback,
//!   at a real path's MTU.
//! - [`hop`]: two TUN devices joined by the simulator's link model, one
//!   lane each way; the one forwarding loop of `braid link` and the lab.
//! - [`ns`]: the lab's namespaces, entering one, and the `ip` calls
//!   everything here makes.
//!
//! Each namespace is named after the pid that made it, so one left by a
//! process that was killed is recognised and removed by the next one.

pub mod hop;
mod loopback;
mod namespace;
pub mod ns;
mod tun;

pub use loopback::Loopback;
pub use namespace::Namespace;
pub use tun::{wait_readable, Tun};

use std::process::{Command, Stdio};

use anyhow::bail;

use crate::ns::ip;

/// Root (CAP_NET_ADMIN) and iproute2's `ip`, or an error saying which of
/// them `who` lacks to make `what`.
fn prerequisites(who: &str, what: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("{who} needs root to create {what} (CAP_NET_ADMIN); run it with sudo");
    }
    if Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        bail!("{who} needs iproute2's `ip` command (apt install iproute2)");
    }
    Ok(())
}

fn remove(name: &str) {
    let _ = ip(&["netns", "del", name]);
}

/// Namespaces named `prefix` and a pid whose process is gone.
fn remove_stale(prefix: &str) {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix(prefix) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove(name);
        }
    }
}
