//! A namespace with nothing but its loopback, at a chosen MTU.

use std::process::Command;

use anyhow::Context;

use crate::ns::ip;
use crate::{prerequisites, remove, remove_stale};

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
