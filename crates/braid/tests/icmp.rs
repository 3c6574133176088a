//! A forged "port unreachable" during the handshake, from the attacker's
//! side: an on-path sniffer sees the client's first HELLO, holds it back
//! and answers it with an ICMP error quoting it exactly, as the client's
//! kernel would take it from the listener's host, while the listener is
//! up. Forging ICMP needs a raw socket; without the privilege the test
//! says so and passes.
#![cfg(target_os = "linux")]

mod common;

use braid::{connect, Listener, PathSpec};
use common::{answer_with_hash, client_cfg, content, send_in_pieces, server_cfg};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UdpSocket;

/// Bytes of the datagram the error quotes, as a router's would (RFC 1812
/// asks for more than the 8 of RFC 792; Linux quotes up to 576 bytes).
const QUOTED: usize = 64;

/// The Internet checksum (RFC 1071).
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// ICMP "port unreachable" for `datagram`, sent from `from` to `to`: the
/// error's header, then the offending IPv4 and UDP headers and the start
/// of the datagram.
fn port_unreachable(from: SocketAddrV4, to: SocketAddrV4, datagram: &[u8]) -> Vec<u8> {
    let quoted = &datagram[..datagram.len().min(QUOTED)];
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&((20 + 8 + datagram.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&from.ip().octets());
    ip.extend_from_slice(&to.ip().octets());
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&ip);
    icmp.extend_from_slice(&from.port().to_be_bytes());
    icmp.extend_from_slice(&to.port().to_be_bytes());
    icmp.extend_from_slice(&((8 + datagram.len()) as u16).to_be_bytes());
    icmp.extend_from_slice(&[0, 0]);
    icmp.extend_from_slice(quoted);
    let sum = checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    icmp
}

/// A raw ICMP socket, if this process may open one.
fn raw_icmp() -> Option<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) };
    // SAFETY: fd is a fresh descriptor nobody else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send_raw(sock: &OwnedFd, to: Ipv4Addr, packet: &[u8]) {
    // SAFETY: sockaddr_in is plain data; every pointer is to a live local.
    let sent = unsafe {
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes(to.octets());
        libc::sendto(
            sock.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&sin as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(
        sent,
        packet.len() as isize,
        "{}",
        std::io::Error::last_os_error()
    );
}

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(a) => SocketAddrV4::new(a.ip().to_ipv4_mapped().unwrap(), a.port()),
    }
}

/// A forwarder to `server` that, instead of carrying the client's first
/// datagram, answers it with a forged "port unreachable"; then it
/// carries everything both ways.
async fn forging_forwarder(server: SocketAddr, raw: OwnedFd) -> SocketAddr {
    let outside = std::sync::Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let inside = std::sync::Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let at = outside.local_addr().unwrap();
    let (o, i) = (outside.clone(), inside.clone());
    let (client_tx, mut client_rx) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        let mut forged = false;
        while let Ok((n, from)) = o.recv_from(&mut buf).await {
            if !forged {
                forged = true;
                let icmp = port_unreachable(v4(from), v4(at), &buf[..n]);
                send_raw(&raw, *v4(from).ip(), &icmp);
                client_tx.send_replace(Some(from));
                continue;
            }
            let _ = i.send_to(&buf[..n], server).await;
        }
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, _)) = inside.recv_from(&mut buf).await {
            let client = *client_rx.borrow_and_update();
            if let Some(c) = client {
                let _ = outside.send_to(&buf[..n], c).await;
            }
        }
    });
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_port_unreachable_does_not_end_the_handshake() {
    let Some(raw) = raw_icmp() else {
        eprintln!("no raw socket (needs CAP_NET_RAW): the forgery is not tried");
        return;
    };
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), server_cfg()).unwrap();
    let server_at = listener.local_addr();
    let server = tokio::spawn(async move {
        let mut s = listener.accept().await.unwrap();
        let got = answer_with_hash(&mut s).await.unwrap();
        s.shutdown().await.unwrap();
        got
    });
    let via = forging_forwarder(server_at, raw).await;
    let data = content(256 << 10);
    let transfer = async {
        let mut s = connect(&[PathSpec::to(via)], client_cfg()).await?;
        Ok::<_, braid::Error>(send_in_pieces(&mut s, &data, 64 << 10, Duration::ZERO).await)
    };
    let hash = tokio::time::timeout(Duration::from_secs(10), transfer)
        .await
        .expect("bounded")
        .expect("the forged error ended the handshake");
    assert_eq!(hash, blake3::hash(&data).as_bytes().to_vec());
    assert_eq!(server.await.unwrap(), data);
}
