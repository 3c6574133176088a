//! One end of an emulated link: a TUN device carrying IP packets.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use anyhow::{bail, Context};

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
