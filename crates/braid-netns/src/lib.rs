//! braid-netns: network namespaces and TUN devices, for `braid link`
//! (one emulated link in front of a command) and the NAT lab of
//! `braid-bench` (namespaces for hosts, routers and relays, joined by TUN
//! hops). Linux only; making them needs root.
//!
//! [`Namespace`] is `braid link`'s: a network namespace for the command and
//! a TUN device at each end of the emulated link, like mahimahi's shells.
//! The outside end (`host`) lives in the namespace braid was started in, the
//! inside end (`inner`, the namespace's default route) in a namespace of its
//! own; braid reads every IP packet from one TUN device and writes it to the
//! other when the link delivers it. The namespace is named after braid's
//! pid, so a namespace left by a braid that was killed is recognised and
//! removed by the next one. [`ns`] is the lab's namespaces and the `ip`
//! calls everything here makes.

pub mod ns;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::ns::ip;

const PREFIX: &str = "braid-link-";

/// One end of the link: a TUN device (IP packets, no packet information
/// header), non-blocking.
#[derive(Debug)]
pub struct Tun {
    file: File,
    pub name: String,
}

impl Tun {
    pub fn create(name: &str) -> anyhow::Result<Tun> {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                bail!("no /dev/net/tun: this kernel has no TUN devices (modprobe tun)")
            }
            Err(e) => return Err(e).context("cannot open /dev/net/tun"),
        };
        // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which lives across the call.
        if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("cannot create TUN device {name}"));
        }
        // SAFETY: F_GETFL/F_SETFL on an fd we own.
        unsafe {
            let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Ok(Tun {
            file,
            name: name.to_owned(),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The next packet, or `None` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match (&self.file).read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Hands a packet to the kernel of this end's namespace.
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        (&self.file).write(packet).map(drop)
    }
}

/// The namespace, its two TUN ends and their addresses; removed on drop.
#[derive(Debug)]
pub struct Namespace {
    pub name: String,
    /// The outside end's address, `$BRAID_LINK_HOST` for the command.
    pub host: Ipv4Addr,
    /// The command's address, `$BRAID_LINK_ADDR`.
    pub inner: Ipv4Addr,
    /// Reads what the outside sends to the command; writes what reaches it.
    pub outside: Tun,
    /// Reads what the command sends; writes what reaches the command.
    pub inside: Tun,
}

impl Namespace {
    /// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), /dev/net/tun and
    /// iproute2's `ip`; says which is missing.
    pub fn create() -> anyhow::Result<Namespace> {
        prerequisites("braid link", "a network namespace and TUN devices")?;
        remove_stale(PREFIX);
        let pid = std::process::id();
        let name = format!("{PREFIX}{pid}");
        let (host, inner) = addresses(pid);
        ip(&["netns", "add", &name]).context("cannot create a network namespace")?;
        // From here on, dropping `partial` removes the namespace again.
        let partial = Cleanup(name.clone());
        let outside = Tun::create(&format!("bl{pid}o"))?;
        let inside = Tun::create(&format!("bl{pid}i"))?;
        let host_cidr = format!("{host}/30");
        let inner_cidr = format!("{inner}/30");
        ip(&["link", "set", "dev", &inside.name, "netns", &name])?;
        ip(&["addr", "add", &host_cidr, "dev", &outside.name])?;
        ip(&["link", "set", "dev", &outside.name, "up"])?;
        for args in [
            &["addr", "add", &inner_cidr, "dev", &inside.name][..],
            &["link", "set", "dev", &inside.name, "up"],
            &["link", "set", "dev", "lo", "up"],
            &["route", "add", "default", "dev", &inside.name],
        ] {
            let mut all = vec!["-n", &name];
            all.extend_from_slice(args);
            ip(&all)?;
        }
        std::mem::forget(partial);
        Ok(Namespace {
            name,
            host,
            inner,
            outside,
            inside,
        })
    }

    /// `argv` to run inside the namespace, with the ends' addresses in its
    /// environment.
    pub fn command(&self, argv: &[String]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name])
            .args(argv)
            .env("BRAID_LINK_HOST", self.host.to_string())
            .env("BRAID_LINK_ADDR", self.inner.to_string());
        c
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // The TUN devices go with their file descriptors and the namespace.
        remove(&self.name);
    }
}

/// A network namespace with nothing but its loopback, at a chosen MTU, so
/// that traffic on 127.0.0.1 there has a real path's packet size (1,500
/// bytes on Ethernet) instead of the host loopback's 64 KiB. Named after
/// braid's pid like [`Namespace`], removed on drop (and, if braid was
/// killed, by the next one).
#[derive(Debug)]
pub struct Loopback {
    pub name: String,
}

const LOOPBACK_PREFIX: &str = "braid-mtu-";

impl Loopback {
    /// Needs root and iproute2's `ip`; `who` names the command in the
    /// message that says which is missing.
    pub fn create(who: &str, mtu: u32) -> anyhow::Result<Loopback> {
        prerequisites(who, "a network namespace")?;
        remove_stale(LOOPBACK_PREFIX);
        let name = format!("{LOOPBACK_PREFIX}{}", std::process::id());
        ip(&["netns", "add", &name]).context("cannot create a network namespace")?;
        let made = Loopback { name };
        let mtu = mtu.to_string();
        ip(&[
            "-n", &made.name, "link", "set", "dev", "lo", "up", "mtu", &mtu,
        ])
        .with_context(|| format!("cannot give the namespace's loopback MTU {mtu}"))?;
        Ok(made)
    }

    /// `program` to run in the namespace (it dies with this process).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> anyhow::Result<Command> {
        crate::ns::command(&self.name, program)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        remove(&self.name);
    }
}

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

/// Removes a namespace unless defused with `mem::forget`.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        remove(&self.0);
    }
}

fn remove(name: &str) {
    let _ = ip(&["netns", "del", name]);
}

/// A /30 in 100.64.0.0/10 (shared address space, RFC 6598) chosen by pid,
/// so concurrent `braid link`s get different ones.
fn addresses(pid: u32) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + (pid % (1 << 20)) * 4;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
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

/// Sleeps until one of the devices has a packet or `wait` has passed.
pub fn wait_readable(tuns: &[&Tun; 2], wait: Duration) {
    let mut fds = tuns.map(|t| libc::pollfd {
        fd: t.fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: two live pollfds, a live timespec, no signal mask change.
    // EINTR (a signal) just ends the wait early.
    unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_a_slash_30_in_shared_space() {
        for pid in [1, 2, 4_194_303, 77_777] {
            let (h, i) = addresses(pid);
            assert_eq!(u32::from(i), u32::from(h) + 1);
            assert_eq!(u32::from(h) % 4, 1, "{h}: not the first host of a /30");
            assert_eq!(h.octets()[0], 100);
            assert!((64..128).contains(&h.octets()[1]), "{h}");
        }
        assert_ne!(addresses(1), addresses(2));
    }
}
