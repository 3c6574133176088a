//! How many registrations or pairs each host holds at a relay, so one host
//! cannot take the tables (or every code number) from everyone else.

use std::net::{IpAddr, SocketAddr};

use crate::counts::Counts;

/// A host: an IPv4 address, or an IPv6 /64 (one subnet, as a host is
/// usually given), IPv4-mapped addresses counted as IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Host(u128);

impl Host {
    pub fn of(addr: SocketAddr) -> Host {
        match addr.ip().to_canonical() {
            IpAddr::V4(v4) => Host(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => Host((u128::from(v6) & !((1u128 << 64) - 1)) | 1),
        }
    }
}

/// Counts per host, with a bound.
#[derive(Debug, Default)]
pub(crate) struct HostCounts(Counts<Host>);

impl HostCounts {
    /// Whether `addr`'s host holds `bound` already.
    pub fn at_bound(&self, addr: SocketAddr, bound: usize) -> bool {
        self.0.get(Host::of(addr)) >= bound
    }

    pub fn add(&mut self, addr: SocketAddr) {
        self.0.add(Host::of(addr));
    }

    pub fn remove(&mut self, addr: SocketAddr) {
        self.0.remove(Host::of(addr));
    }

    /// One held by `from` is now held by `to`.
    pub fn moved(&mut self, from: SocketAddr, to: SocketAddr) {
        self.remove(from);
        self.add(to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_ipv6_interface_ids_are_one_host_ipv4_mapped_is_ipv4() {
        let h = |s: &str| Host::of(s.parse().unwrap());
        assert_eq!(h("198.18.0.1:1"), h("198.18.0.1:2"));
        assert_eq!(h("198.18.0.1:1"), h("[::ffff:198.18.0.1]:9"));
        assert_ne!(h("198.18.0.1:1"), h("198.18.0.2:1"));
        assert_eq!(h("[2001:db8:0:1::1]:1"), h("[2001:db8:0:1::2]:1"));
        assert_ne!(h("[2001:db8:0:1::1]:1"), h("[2001:db8:0:2::1]:1"));
        let mut c = HostCounts::default();
        let a = "198.18.0.1:1".parse().unwrap();
        c.add(a);
        c.add(a);
        assert!(c.at_bound("198.18.0.1:7".parse().unwrap(), 2));
        c.moved(a, "198.18.0.9:1".parse().unwrap());
        assert!(!c.at_bound(a, 2));
        assert!(c.at_bound(a, 1));
    }
}
