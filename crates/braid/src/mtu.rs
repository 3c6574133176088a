//! The ceiling path MTU discovery probes up to: the MTU of the interface a
//! route leaves by, less the IP and UDP headers. The sockets already set
//! don't-fragment (quinn-udp asks for `IP_PMTUDISC_PROBE`), so a probe too
//! large for a link on the way is dropped, not fragmented.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The largest datagram probed for, bytes, where the interface allows more
/// (loopback's 64 KiB MTU): 16 KiB datagrams carry a byte for about half
/// the CPU of Ethernet-sized ones, and four still fill one GSO batch.
pub const MAX_DATAGRAM_CAP: u16 = 16384;

/// Ethernet's 1500-byte MTU less IPv4 (20) and UDP (8): the ceiling when
/// the route's MTU cannot be read.
pub const ETHERNET_IPV4: u16 = 1472;
/// Ethernet's MTU less IPv6 (40) and UDP (8).
pub const ETHERNET_IPV6: u16 = 1452;

/// The largest UDP payload the route to `to` carries as far as the local
/// interface says, capped at [`MAX_DATAGRAM_CAP`]; Ethernet's when the
/// system does not tell.
pub fn route_max_datagram(to: SocketAddr) -> u16 {
    let headers = if is_v4(to.ip()) { 28 } else { 48 };
    let fallback = if is_v4(to.ip()) {
        ETHERNET_IPV4
    } else {
        ETHERNET_IPV6
    };
    if to.ip().is_unspecified() {
        return fallback;
    }
    route_mtu(to).map_or(fallback, |mtu| {
        u16::try_from(mtu.saturating_sub(headers))
            .unwrap_or(u16::MAX)
            .clamp(1200, MAX_DATAGRAM_CAP)
    })
}

fn is_v4(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(_) => true,
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some(),
    }
}

/// The MTU Linux keeps for the route to `to` (`IP_MTU` of a socket
/// connected there: the interface's, or a smaller one learnt from ICMP).
#[cfg(target_os = "linux")]
fn route_mtu(to: SocketAddr) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let (any, level, opt): (IpAddr, _, _) = if to.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED.into(), libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (
            Ipv6Addr::UNSPECIFIED.into(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU,
        )
    };
    let sock = std::net::UdpSocket::bind(SocketAddr::new(any, 0)).ok()?;
    // Connecting a UDP socket sends nothing: it only looks the route up,
    // which no port changes, but port 0 cannot be connected to (a
    // listener's own address often has it).
    let port = to.port().max(9);
    sock.connect(SocketAddr::new(to.ip(), port)).ok()?;
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the fd is a live socket; value and len point to a c_int and
    // its length, which the kernel writes at most.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && value > 0).then_some(value as u32)
}

#[cfg(not(target_os = "linux"))]
fn route_mtu(_to: SocketAddr) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_capped_and_unknown_ones_are_ethernet() {
        // Linux's loopback MTU is 65,536: capped.
        let v4 = route_max_datagram("127.0.0.1:9".parse().unwrap());
        assert_eq!(v4, MAX_DATAGRAM_CAP);
        // A listener's address with the port left to the system.
        let any_port = route_max_datagram("127.0.0.1:0".parse().unwrap());
        assert_eq!(any_port, MAX_DATAGRAM_CAP);
        assert_eq!(
            route_max_datagram("0.0.0.0:9".parse().unwrap()),
            ETHERNET_IPV4
        );
        assert_eq!(route_max_datagram("[::]:9".parse().unwrap()), ETHERNET_IPV6);
    }
}
