//! This host's addresses, for a peer on the same network: the interfaces'
//! addresses with the session socket's port. Which of them are offered is
//! the core's call ([`braid_proto::rendezvous::host_candidates`]).

use std::net::{IpAddr, SocketAddr};

/// The addresses a socket bound at `local` may be reached at: `local`
/// itself when bound to one address, else every interface's address of
/// the families it receives (the runtime's sockets on `[::]` are dual
/// stack, so IPv4 too).
pub(crate) fn local_addresses(local: SocketAddr) -> Vec<SocketAddr> {
    if !local.ip().is_unspecified() {
        return vec![local];
    }
    let Ok(interfaces) = if_addrs::get_if_addrs() else {
        return Vec::new();
    };
    interfaces
        .into_iter()
        .map(|i| i.ip())
        .filter(|ip| !matches!((local.ip(), ip), (IpAddr::V4(_), IpAddr::V6(_))))
        .map(|ip| SocketAddr::new(ip, local.port()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_bound_to_one_address_has_that_one() {
        let a: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        assert_eq!(local_addresses(a), vec![a]);
    }

    #[test]
    fn a_wildcard_socket_has_its_families_interfaces_with_its_port() {
        let any: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        let found = local_addresses(any);
        // Loopback is an interface everywhere the tests run.
        assert!(found.iter().any(|a| a.ip().is_loopback()), "{found:?}");
        assert!(
            found.iter().all(|a| a.is_ipv4() && a.port() == 4000),
            "{found:?}"
        );
    }
}
