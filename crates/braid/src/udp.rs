//! A UDP socket on tokio with quinn-udp's system calls: ECN codepoints read
//! and written, GSO batches on send and GRO/recvmmsg batches on receive where
//! the kernel offers them, plain send/recv where it does not.

use braid_proto::Ecn;
use quinn_udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use tokio::io::Interest;

use crate::udp_errors::{self, Unreachable};

/// Socket buffer asked for by default: enough for a 1 Gbit/s burst of a few
/// milliseconds, so a briefly descheduled reader does not drop datagrams.
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;

/// Receive buffers per batch and bytes per buffer (a GRO super-datagram).
pub const RECV_BATCH: usize = 16;
/// Bytes per receive buffer: the largest GRO batch the kernel hands over.
pub const RECV_BUFFER: usize = 64 * 1024;

/// Largest GSO batch sent, bytes (the UDP payload limit, with room to spare).
pub const MAX_GSO_BYTES: usize = 60_000;

/// A bound, non-blocking UDP socket registered with tokio.
#[derive(Debug)]
pub struct UdpIo {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
}

impl UdpIo {
    /// Binds `addr` with send and receive buffers of `buffer` bytes where
    /// the system allows it. Needs a tokio runtime.
    pub fn bind(addr: SocketAddr, buffer: usize) -> io::Result<UdpIo> {
        UdpIo::from_std(bind_std(addr, buffer, false)?)
    }

    /// As [`UdpIo::bind`], as one of several sockets on one address that
    /// share its datagrams (`SO_REUSEPORT`: the kernel gives each peer's
    /// address and port to one of them). Only sockets bound this way, by
    /// the same user, can share the address.
    pub fn bind_shared(addr: SocketAddr, buffer: usize) -> io::Result<UdpIo> {
        UdpIo::from_std(bind_std(addr, buffer, true)?)
    }

    /// Wraps a socket from [`bind_std`]. Needs a tokio runtime: the
    /// socket belongs to that runtime's I/O driver from then on.
    pub fn from_std(std: std::net::UdpSocket) -> io::Result<UdpIo> {
        let state = UdpSocketState::new((&std).into())?;
        forgo_destination_address(&std);
        let local = std.local_addr()?;
        let io = tokio::net::UdpSocket::from_std(std)?;
        Ok(UdpIo { io, state, local })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Queues "port unreachable" reports of this socket's datagrams for
    /// [`UdpIo::unreachable`], which must then be polled for as long as
    /// the socket lives (the queue takes room from the receive buffer).
    pub(crate) fn report_unreachable(&self) {
        udp_errors::enable(&self.io);
    }

    /// The tokio socket, for system calls quinn-udp does not make.
    pub(crate) fn tokio_socket(&self) -> &tokio::net::UdpSocket {
        &self.io
    }

    /// Datagrams one GSO send may carry (1 without GSO).
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Sends `contents` to `to`: one datagram, or several of `segment` bytes
    /// each (the last may be shorter) in as few GSO calls as the socket's
    /// limits allow. Stops at the first error.
    pub async fn send(
        &self,
        to: SocketAddr,
        ecn: Ecn,
        contents: &[u8],
        segment: Option<usize>,
    ) -> io::Result<()> {
        for batch in gso_batches(to, ecn, contents, segment, self.max_gso_segments()) {
            self.send_gso(&batch).await?;
        }
        Ok(())
    }

    /// One batch of [`UdpIo::send`] in one call.
    async fn send_gso(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let try_send = || {
            self.io.async_io(Interest::WRITABLE, || {
                self.state.try_send((&self.io).into(), transmit)
            })
        };
        let sent = match try_send().await {
            // An earlier datagram's ICMP error, reported here: once more.
            Err(e) if udp_errors::is_icmp_report(&e) => try_send().await,
            r => r,
        };
        match sent {
            Err(e) if refused_gso(&e, transmit) => {
                for single in one_by_one(transmit) {
                    self.io
                        .async_io(Interest::WRITABLE, || {
                            self.state.try_send((&self.io).into(), &single)
                        })
                        .await?;
                }
                Ok(())
            }
            r => r,
        }
    }

    /// Sends one small datagram now if the socket has room, or drops it
    /// (stateless answers such as retries are not worth waiting for).
    pub fn try_send_to(&self, to: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        match self.io.try_send_to(datagram, to) {
            // An earlier datagram's ICMP error, reported here: once more.
            Err(e) if udp_errors::is_icmp_report(&e) => self.io.try_send_to(datagram, to),
            r => r,
        }
        .map(|_| ())
    }

    /// [`UdpIo::recv`] into `storage` cut into buffers of [`RECV_BUFFER`]
    /// bytes: `meta[i]` describes the `i`th.
    pub(crate) async fn recv_into(
        &self,
        storage: &mut [u8],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let mut bufs: Vec<IoSliceMut<'_>> = storage
            .chunks_mut(RECV_BUFFER)
            .map(IoSliceMut::new)
            .collect();
        self.recv(&mut bufs, meta).await
    }

    /// Receives a batch; each `meta[i]` describes `bufs[i]`, which may hold
    /// several datagrams of `meta[i].stride` bytes (GRO).
    pub async fn recv(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        self.io
            .async_io(Interest::READABLE, || {
                self.state.recv((&self.io).into(), bufs, meta)
            })
            .await
    }
}

impl UdpIo {
    /// The next "port unreachable" answer to a datagram of ours; never,
    /// where the system does not report them.
    pub(crate) async fn unreachable(&self) -> Unreachable {
        loop {
            let read = self
                .io
                .async_io(Interest::ERROR, || udp_errors::read_error(&self.io))
                .await;
            match read {
                Ok(Some(u)) => return u,
                Ok(None) => {}
                // Not expected of an error queue; do not spin on it.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    }
}

/// A bound, non-blocking UDP socket for [`UdpIo::from_std`], with buffers
/// of `buffer` bytes where the system allows it. With `reuse_port`
/// (Linux), other sockets may bind the same port the same way, and the
/// kernel spreads arriving flows over them by their addresses.
pub fn bind_std(
    addr: SocketAddr,
    buffer: usize,
    reuse_port: bool,
) -> io::Result<std::net::UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // Best effort: accept IPv4-mapped peers on a [::] socket.
        let _ = sock.set_only_v6(false);
    }
    #[cfg(target_os = "linux")]
    if reuse_port {
        sock.set_reuse_port(true)?;
    }
    #[cfg(not(target_os = "linux"))]
    if reuse_port {
        // Elsewhere SO_REUSEPORT does not spread flows: one socket per port.
        return Err(io::Error::new(io::ErrorKind::Unsupported, "SO_REUSEPORT"));
    }
    sock.bind(&addr.into())?;
    sock.set_nonblocking(true)?;
    let std: std::net::UdpSocket = sock.into();
    size_buffers(&std, buffer);
    Ok(std)
}

/// Bytes of one GSO call of `segment`-byte datagrams: as many whole
/// segments as [`MAX_GSO_BYTES`] and the socket's `max_segments` allow, one
/// at least.
pub(crate) fn gso_batch_bytes(segment: usize, max_segments: usize) -> usize {
    segment * (MAX_GSO_BYTES / segment).min(max_segments).max(1)
}

/// The sends that carry `contents` to `to`: one datagram, or datagrams of
/// `segment` bytes (the last may be shorter) in as few GSO calls as
/// [`gso_batch_bytes`] allows.
pub(crate) fn gso_batches(
    to: SocketAddr,
    ecn: Ecn,
    contents: &[u8],
    segment: Option<usize>,
    max_segments: usize,
) -> impl Iterator<Item = Transmit<'_>> {
    let seg = segment.filter(|&s| s > 0 && s < contents.len());
    let batch = seg.map_or(contents.len(), |s| gso_batch_bytes(s, max_segments));
    // An empty datagram is sent too; `chunks` alone would yield nothing.
    let empty = contents.is_empty().then_some(contents);
    contents
        .chunks(batch.max(1))
        .chain(empty)
        .map(move |piece| Transmit {
            destination: to,
            ecn: to_codepoint(ecn),
            contents: piece,
            segment_size: seg.filter(|&s| s < piece.len()),
            src_ip: None,
        })
}

/// Whether a failed GSO send is worth sending again datagram by datagram:
/// a kernel or device that refuses GSO (not a full socket).
pub(crate) fn refused_gso(e: &io::Error, t: &Transmit<'_>) -> bool {
    t.segment_size.is_some() && e.kind() != io::ErrorKind::WouldBlock
}

/// `t`'s datagrams one by one, for a kernel or device that refuses GSO.
pub(crate) fn one_by_one<'a>(t: &'a Transmit<'a>) -> impl Iterator<Item = Transmit<'a>> {
    let seg = t.segment_size.unwrap_or(t.contents.len()).max(1);
    t.contents.chunks(seg).map(|one| Transmit {
        contents: one,
        segment_size: None,
        ..t.clone()
    })
}

/// The codepoint quinn-udp writes for `ecn`.
pub fn to_codepoint(ecn: Ecn) -> Option<EcnCodepoint> {
    EcnCodepoint::from_bits(ecn.to_bits())
}

/// The codepoint of a received datagram.
pub fn from_codepoint(ecn: Option<EcnCodepoint>) -> Ecn {
    ecn.map_or(Ecn::NotEct, |c| Ecn::from_bits(c as u8))
}

/// Turns off the per-datagram destination address quinn-udp asks for:
/// braid never reads it, and quinn-udp's 96-byte control buffer cannot
/// hold it beside a GRO batch's segment size, its receive time and its
/// ECN codepoint. The kernel then drops the last, the codepoint
/// (MSG_CTRUNC), from exactly the coalesced batches a busy receiver reads,
/// and CE marks vanish under load.
pub(crate) fn forgo_destination_address(sock: &std::net::UdpSocket) {
    #[cfg(target_os = "linux")]
    for (level, opt) in [
        (libc::IPPROTO_IP, libc::IP_PKTINFO),
        (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO),
    ] {
        // Either option fails harmlessly on a socket of the other family.
        set_int_option(sock, level, opt, 0);
    }
}

/// Sets both buffers to `bytes`; as root on Linux, past the sysctl limits.
fn size_buffers(sock: &std::net::UdpSocket, bytes: usize) {
    let s = socket2::SockRef::from(sock);
    let _ = s.set_recv_buffer_size(bytes);
    let _ = s.set_send_buffer_size(bytes);
    #[cfg(target_os = "linux")]
    {
        let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        for (have, opt) in [
            (s.recv_buffer_size(), libc::SO_RCVBUFFORCE),
            (s.send_buffer_size(), libc::SO_SNDBUFFORCE),
        ] {
            // Linux reports twice the value set; below `bytes` means it was capped.
            if have.is_ok_and(|h| h < bytes) {
                set_int_option(sock, libc::SOL_SOCKET, opt, want);
            }
        }
    }
}

/// Best-effort `setsockopt` of an integer option (socket2 has no setter
/// for these).
#[cfg(target_os = "linux")]
pub(crate) fn set_int_option(
    sock: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) {
    // SAFETY: the fd is a valid socket for the duration of the call and the
    // option value is a live c_int of the length passed.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn loopback_round_trip_keeps_ecn() {
        let a = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let b = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        a.send(b.local_addr(), Ecn::Ect0, b"hello", None)
            .await
            .unwrap();
        let mut buf = vec![0u8; RECV_BUFFER];
        let mut bufs = [IoSliceMut::new(&mut buf)];
        let mut meta = [RecvMeta::default()];
        let n = b.recv(&mut bufs, &mut meta).await.unwrap();
        assert_eq!(n, 1);
        assert_eq!(meta[0].addr, a.local_addr());
        assert_eq!(&buf[..meta[0].len], b"hello");
        assert_eq!(from_codepoint(meta[0].ecn), Ecn::Ect0);
    }

    /// With the error queue on, Linux reports an earlier datagram's ICMP
    /// error to whatever call comes next: a send to another, live peer
    /// must still go out, and a receive must still get what is waiting.
    #[tokio::test]
    async fn an_earlier_icmp_error_costs_no_other_datagram() {
        let a = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        a.report_unreachable();
        let b = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let closed = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut buf = vec![0u8; RECV_BUFFER];
        for round in 0..2u8 {
            a.send(closed, Ecn::NotEct, b"nobody", None).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            if round == 0 {
                // The report is pending: the next send is to someone else.
                a.send(b.local_addr(), Ecn::NotEct, b"live", None)
                    .await
                    .unwrap();
                let mut bufs = [IoSliceMut::new(&mut buf)];
                let mut meta = [RecvMeta::default()];
                b.recv(&mut bufs, &mut meta).await.unwrap();
                assert_eq!(&buf[..meta[0].len], b"live");
            } else {
                // The report is pending: the next call is a receive.
                b.send(a.local_addr(), Ecn::NotEct, b"waiting", None)
                    .await
                    .unwrap();
                let mut bufs = [IoSliceMut::new(&mut buf)];
                let mut meta = [RecvMeta::default()];
                let got = loop {
                    match a.recv(&mut bufs, &mut meta).await {
                        Err(e) if crate::udp_errors::is_icmp_report(&e) => continue,
                        r => break r,
                    }
                };
                got.unwrap();
                assert_eq!(&buf[..meta[0].len], b"waiting");
            }
        }
    }

    #[tokio::test]
    async fn gso_batch_arrives_as_separate_datagrams() {
        let a = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let b = UdpIo::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let segs = a.max_gso_segments().min(4);
        let data: Vec<u8> = (0..segs * 100).map(|i| (i / 100) as u8).collect();
        a.send(b.local_addr(), Ecn::NotEct, &data, Some(100))
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; RECV_BUFFER];
        while got.len() < segs {
            let mut bufs = [IoSliceMut::new(&mut buf)];
            let mut meta = [RecvMeta::default()];
            b.recv(&mut bufs, &mut meta).await.unwrap();
            let m = meta[0];
            for d in buf[..m.len].chunks(m.stride) {
                got.push(d.to_vec());
            }
        }
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), 100);
            assert!(d.iter().all(|&x| x == i as u8));
        }
    }

    #[tokio::test]
    async fn coalesced_batch_keeps_ecn_and_receive_time() {
        coalesced_batch_keeps_metadata("127.0.0.1:0", "127.0.0.1:0").await;
        // Hosts without IPv6 cannot bind these; IPv4 covers them there.
        if std::net::UdpSocket::bind("[::1]:0").is_ok() {
            coalesced_batch_keeps_metadata("[::1]:0", "[::1]:0").await;
            // A dual-stack listener receiving IPv4.
            coalesced_batch_keeps_metadata("127.0.0.1:0", "[::]:0").await;
        }
    }

    async fn coalesced_batch_keeps_metadata(from: &str, to: &str) {
        let a = UdpIo::bind(from.parse().unwrap(), 1 << 20).unwrap();
        let b = UdpIo::bind(to.parse().unwrap(), 1 << 20).unwrap();
        let dest = SocketAddr::new(a.local_addr().ip(), b.local_addr().port());
        let segs = a.max_gso_segments().min(4);
        a.send(dest, Ecn::Ce, &vec![7u8; segs * 100], Some(100))
            .await
            .unwrap();
        let mut buf = vec![0u8; RECV_BUFFER];
        let mut bufs = [IoSliceMut::new(&mut buf)];
        let mut meta = [RecvMeta::default()];
        b.recv(&mut bufs, &mut meta).await.unwrap();
        // Loopback hands a GSO batch to a GRO socket whole, with the
        // batch's segment size among its control messages.
        if segs > 1 {
            assert_eq!((meta[0].len, meta[0].stride), (segs * 100, 100), "{to}");
        }
        assert_eq!(from_codepoint(meta[0].ecn), Ecn::Ce, "{to}");
        assert!(meta[0].timestamp.is_some(), "{to}");
    }
}
