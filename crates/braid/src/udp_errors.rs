//! "Port unreachable" answers to our own datagrams. An unconnected UDP
//! socket hears of them only through Linux's error queue (`IP_RECVERR`),
//! where each error comes with the address the datagram went to and the
//! start of the datagram itself, which lets the session check the error
//! is about a datagram it really sent (RFC 8085 §5.2). Elsewhere sockets
//! report nothing, and a handshake to a closed port waits out its timeout.

use std::io;
use std::net::SocketAddr;

/// Bytes of the quoted datagram kept: its header is all the check needs.
const QUOTE: usize = 64;

/// Our datagram to `to` met a closed port; `quoted` is its beginning.
#[derive(Debug, Clone)]
pub(crate) struct Unreachable {
    pub to: SocketAddr,
    pub quoted: Vec<u8>,
}

/// Whether a failed send or receive only reports an ICMP error of some
/// earlier datagram: with `IP_RECVERR`, Linux hands the latest such error
/// to the next system call on the socket, whatever it is for, and anyone
/// who knows the socket's port can forge one. The call that reports it
/// consumed it, so the operation is simply tried again.
pub(crate) fn is_icmp_report(e: &io::Error) -> bool {
    #[cfg(target_os = "linux")]
    {
        matches!(
            e.raw_os_error(),
            Some(
                libc::ECONNREFUSED
                    | libc::EHOSTUNREACH
                    | libc::ENETUNREACH
                    | libc::EHOSTDOWN
                    | libc::ENONET
                    | libc::ENOPROTOOPT
                    | libc::EPROTO
                    | libc::EMSGSIZE
                    | libc::EOPNOTSUPP
                    | libc::EACCES
                    | libc::ECONNRESET
            )
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        e.kind() == io::ErrorKind::ConnectionRefused
    }
}

/// Asks the kernel to queue ICMP errors of the socket's sends for
/// [`read_error`] (both families: a dual-stack socket sends both). Only
/// for a socket whose error queue is drained: queued errors take room
/// from the receive buffer.
pub(crate) fn enable(sock: &impl std::os::fd::AsRawFd) {
    #[cfg(target_os = "linux")]
    for (level, opt) in [
        (libc::IPPROTO_IP, libc::IP_RECVERR),
        (libc::IPPROTO_IPV6, libc::IPV6_RECVERR),
    ] {
        crate::udp::set_int_option(sock, level, opt, 1);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = sock;
}

/// Takes one error from the socket's error queue: `Ok(Some)` for a port
/// unreachable, `Ok(None)` for any other error (dropped), `WouldBlock`
/// when the queue is empty. Queued errors count against the receive
/// buffer, so the caller drains them all.
#[cfg(target_os = "linux")]
pub(crate) fn read_error(sock: &impl std::os::fd::AsRawFd) -> io::Result<Option<Unreachable>> {
    use std::mem::{size_of, zeroed};
    // SAFETY: every pointer handed to recvmsg points into live locals of
    // the sizes given; cmsg pointers come from the CMSG_* macros over the
    // control buffer recvmsg filled and are read unaligned.
    unsafe {
        let mut name: libc::sockaddr_storage = zeroed();
        let mut data = [0u8; QUOTE];
        let mut control = [0u64; 64];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        let mut msg: libc::msghdr = zeroed();
        msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 64]>() as _;
        let n = libc::recvmsg(
            sock.as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        );
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut port_unreachable = false;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let c = cmsg.read_unaligned();
            if (c.cmsg_level, c.cmsg_type) == (libc::IPPROTO_IP, libc::IP_RECVERR)
                || (c.cmsg_level, c.cmsg_type) == (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
            {
                let e = libc::CMSG_DATA(cmsg)
                    .cast::<libc::sock_extended_err>()
                    .read_unaligned();
                port_unreachable |= e.ee_errno == libc::ECONNREFUSED as u32
                    && matches!(
                        e.ee_origin,
                        libc::SO_EE_ORIGIN_ICMP | libc::SO_EE_ORIGIN_ICMP6
                    );
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        let to = socket_addr(&name);
        Ok(match to {
            Some(to) if port_unreachable => Some(Unreachable {
                to,
                quoted: data[..(n as usize).min(QUOTE)].to_vec(),
            }),
            _ => None,
        })
    }
}

#[cfg(target_os = "linux")]
fn socket_addr(name: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    // SAFETY: the family field says which layout the storage holds, and
    // sockaddr_storage is large and aligned enough for either.
    unsafe {
        match libc::c_int::from(name.ss_family) {
            libc::AF_INET => {
                let a = &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                Some(SocketAddrV4::new(ip, u16::from_be(a.sin_port)).into())
            }
            libc::AF_INET6 => {
                let a = &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                let port = u16::from_be(a.sin6_port);
                Some(SocketAddrV6::new(ip, port, a.sin6_flowinfo, a.sin6_scope_id).into())
            }
            _ => None,
        }
    }
}

/// Without an error queue there is never anything to read.
#[cfg(not(target_os = "linux"))]
pub(crate) fn read_error<S>(_sock: &S) -> io::Result<Option<Unreachable>> {
    Err(io::ErrorKind::WouldBlock.into())
}
