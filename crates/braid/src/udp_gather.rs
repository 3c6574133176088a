//! One GSO send gathered from several buffers (an iovec each), which
//! quinn-udp's single-slice `Transmit` cannot express: the relay forwards
//! consecutive receive buffers of one sender as one batch without joining
//! them in memory first. Linux only; elsewhere the caller sends each part.

use std::io;
use std::net::SocketAddr;

use braid_proto::Ecn;

use crate::udp::UdpIo;

/// Parts one call gathers at most.
pub(crate) const MAX_PARTS: usize = 16;

/// Sends `parts` back to back as one payload cut into datagrams of
/// `segment` bytes (the last may be shorter), in one `sendmsg`. Every part
/// but the last must hold whole segments; together at most the socket's
/// GSO limits. `Unsupported` where there is no such call.
#[cfg(target_os = "linux")]
pub(crate) async fn send_gathered(
    io: &UdpIo,
    to: SocketAddr,
    ecn: Ecn,
    parts: &[&[u8]],
    segment: usize,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use tokio::io::Interest;

    if parts.is_empty() || parts.len() > MAX_PARTS {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let segment = u16::try_from(segment).map_err(|_| io::ErrorKind::InvalidInput)?;
    let addr = socket2::SockAddr::from(to);
    // ECN as quinn-udp writes it: IP_TOS towards IPv4 (mapped too), else
    // the traffic class.
    let v4 = match to {
        SocketAddr::V4(_) => true,
        SocketAddr::V6(a) => a.ip().to_ipv4_mapped().is_some(),
    };
    let tos = libc::c_int::from(ecn.to_bits());
    let sock = io.tokio_socket();
    sock.async_io(Interest::WRITABLE, || {
        // Built per attempt: raw pointers may not be held across an await.
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_PARTS];
        for (v, p) in iov.iter_mut().zip(parts) {
            // sendmsg only reads through the pointer.
            v.iov_base = p.as_ptr() as *mut libc::c_void;
            v.iov_len = p.len();
        }
        // Room for two control messages of at most an int each, aligned.
        let mut control = [0u64; 8];
        // SAFETY: every pointer in `hdr` (address, iovecs, control buffer)
        // refers to a live local for the duration of the call; the cmsg
        // macros stay within `control`, which is sized for both messages.
        let sent = unsafe {
            let mut hdr: libc::msghdr = std::mem::zeroed();
            hdr.msg_name = addr.as_ptr() as *mut libc::c_void;
            hdr.msg_namelen = addr.len();
            hdr.msg_iov = iov.as_mut_ptr();
            hdr.msg_iovlen = parts.len() as _;
            hdr.msg_control = control.as_mut_ptr().cast();
            hdr.msg_controllen = std::mem::size_of_val(&control) as _;
            let mut len = 0;
            let c = libc::CMSG_FIRSTHDR(&hdr);
            let (level, kind) = if v4 {
                (libc::IPPROTO_IP, libc::IP_TOS)
            } else {
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
            };
            (*c).cmsg_level = level;
            (*c).cmsg_type = kind;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), tos);
            len += libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
            let c = libc::CMSG_NXTHDR(&hdr, c);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), segment);
            len += libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as usize;
            hdr.msg_controllen = len as _;
            libc::sendmsg(sock.as_raw_fd(), &hdr, 0)
        };
        if sent < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    })
    .await
}

#[cfg(not(target_os = "linux"))]
pub(crate) async fn send_gathered(
    _io: &UdpIo,
    _to: SocketAddr,
    _ecn: Ecn,
    _parts: &[&[u8]],
    _segment: usize,
) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use quinn_udp::RecvMeta;
    use std::io::IoSliceMut;

    /// Three parts leave as one batch: the receiver sees the datagrams of
    /// all three, cut at the segment size, in order, with the codepoint.
    #[tokio::test]
    async fn parts_leave_as_one_batch_of_segments() {
        let a = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let b = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        if a.max_gso_segments() < 5 {
            return; // No GSO here: the relay sends part by part.
        }
        let (p1, p2, p3) = ([1u8; 200], [2u8; 100], [3u8; 60]);
        send_gathered(&a, b.local_addr(), Ecn::Ect0, &[&p1, &p2, &p3], 100)
            .await
            .unwrap();
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut buf = vec![0u8; crate::udp::RECV_BUFFER];
        while got.len() < 4 {
            let mut bufs = [IoSliceMut::new(&mut buf)];
            let mut meta = [RecvMeta::default()];
            b.recv(&mut bufs, &mut meta).await.unwrap();
            let m = meta[0];
            assert_eq!(crate::udp::from_codepoint(m.ecn), Ecn::Ect0);
            let stride = if m.stride == 0 { m.len } else { m.stride };
            got.extend(buf[..m.len].chunks(stride).map(<[u8]>::to_vec));
        }
        let want = [vec![1u8; 100], vec![1; 100], vec![2; 100], vec![3; 60]];
        assert_eq!(got, want);
    }
}
