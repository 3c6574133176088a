//! `braid link`'s namespace: the command's own network namespace, whose
//! default route is a TUN device, and the TUN device outside that is the
//! link's other end.

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::Context;

use crate::ns::ip;
use crate::{prerequisites, remove, remove_stale, Tun};

const PREFIX: &str = "braid-link-";

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

/// Removes a namespace unless defused with `mem::forget`.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        remove(&self.0);
    }
}

/// A /30 in 100.64.0.0/10 (shared address space, RFC 6598) chosen by pid,
/// so concurrent `braid link`s get different ones.
fn addresses(pid: u32) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + (pid % (1 << 20)) * 4;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
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
