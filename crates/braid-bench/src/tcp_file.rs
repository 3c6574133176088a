//! A file over kernel TCP, timed as `braid send` times itself: from before
//! the connection is opened until the receiver's answer that it read every
//! byte. `braid bench real` runs it beside braid so that both pay for
//! their handshake and their tail; iperf3's `-n` figure covers neither: its
//! clock starts after TCP's handshake and stops when the sender's last
//! write returns, with the socket buffer and the path still full (its
//! receiver had counted 48.3 of 50 MB then, at 50 Mbit/s and RTT 40 ms).
//!
//! The sender also samples the kernel's RTT (`tcpi_rtt` of TCP_INFO, its
//! smoothed RTT, the figure `ss -ti` shows) every [`RTT_SAMPLE_EVERY`] while
//! it sends and waits, and reports their 95th percentile, for comparison
//! with braid's raw RTT samples. Smoothing shaves the peaks, so if anything
//! the kernel's figure is the lower one.
//!
//! The sender is a hidden subcommand (`braid-bench tcp-send`), to run inside
//! `braid link`; the receiver is [`receive_one`], in the bench's process,
//! or in one of its own (`braid-bench tcp-recv`, for `braid bench transfers
//! --mtu`, which counts each end's CPU).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

/// What the receiver answers once it has read the expected byte count.
const VERDICT_OK: &[u8] = b"OK\n";
/// How often the sender reads TCP_INFO's RTT.
const RTT_SAMPLE_EVERY: Duration = Duration::from_millis(10);

#[derive(Args)]
pub struct TcpSendArgs {
    /// File to send.
    file: PathBuf,
    /// Receiver's address (a `braid bench real` receiver).
    #[arg(long)]
    to: SocketAddr,
    /// Kernel congestion controller (TCP_CONGESTION), e.g. cubic or bbr.
    #[arg(long)]
    cc: String,
}

#[derive(Args)]
pub struct TcpRecvArgs {
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Bytes to expect: the verdict is OK only for exactly this many.
    #[arg(long)]
    bytes: u64,
    /// Seconds to wait for the sender and its last byte.
    #[arg(long, default_value_t = 600)]
    limit: u64,
}

/// [`receive_one`] as a process of its own (`braid-bench tcp-recv`), so that its
/// CPU time is its own: says `listening on ADDR` on stderr once it is, and
/// prints `{"bytes": N}` when the connection has ended.
pub fn recv(args: TcpRecvArgs) -> anyhow::Result<ExitCode> {
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    eprintln!("listening on {}", listener.local_addr()?);
    let limit = Duration::from_secs(args.limit);
    let bytes = receive_one(listener, args.bytes, limit)
        .join()
        .map_err(|_| anyhow::anyhow!("the receiving thread panicked"))??;
    println!("{}", serde_json::json!({ "bytes": bytes }));
    Ok(ExitCode::SUCCESS)
}

/// Sends the file, waits for the verdict and prints one JSON object:
/// bytes, seconds, goodput_mbps, data_segments, retransmitted, rtt_p95_ms.
pub fn send(args: TcpSendArgs) -> anyhow::Result<ExitCode> {
    let json = transfer(&args)?;
    println!("{json}");
    Ok(ExitCode::SUCCESS)
}

/// The transfer behind [`send`], its figures as JSON.
fn transfer(args: &TcpSendArgs) -> anyhow::Result<serde_json::Value> {
    let mut file = std::fs::File::open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let started = Instant::now();
    let mut stream =
        TcpStream::connect(args.to).with_context(|| format!("cannot connect to {}", args.to))?;
    set_congestion(&stream, &args.cc)?;
    let sampler = RttSampler::start(&stream)?;
    let bytes = write_all_of(&mut file, &mut stream).context("sending")?;
    stream.shutdown(Shutdown::Write)?;
    let mut verdict = Vec::new();
    (&stream)
        .take(16)
        .read_to_end(&mut verdict)
        .context("reading the verdict")?;
    let seconds = started.elapsed().as_secs_f64();
    if verdict != VERDICT_OK {
        bail!(
            "the receiver answered {:?}",
            String::from_utf8_lossy(&verdict)
        );
    }
    let info = tcp_info(&stream)?;
    let rtt_p95_ms = sampler.p95_ms();
    Ok(serde_json::json!({
        "bytes": bytes,
        "seconds": seconds,
        "goodput_mbps": bytes as f64 * 8.0 / 1e6 / seconds,
        "data_segments": info.tcpi_data_segs_out,
        "retransmitted": info.tcpi_total_retrans,
        "rtt_p95_ms": rtt_p95_ms,
    }))
}

/// Copies `file` to `stream` through a 1 MiB buffer, as an application
/// writing what it read would (and as braid does), not with sendfile(2),
/// which `std::io::copy` would use: on a loopback with a 1,500-byte MTU
/// the kernel sends a file's pages at a quarter of the rate it sends
/// written bytes (4.8 against 20 Gbit/s on the development machine).
fn write_all_of(file: &mut std::fs::File, stream: &mut TcpStream) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stream.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// Reads the connection's smoothed RTT every [`RTT_SAMPLE_EVERY`] on a
/// thread of its own until [`Self::p95_ms`].
struct RttSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u32>>,
}

impl RttSampler {
    fn start(stream: &TcpStream) -> anyhow::Result<Self> {
        let stream = stream.try_clone()?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        // The handshake's sample, taken here: a transfer may end before the
        // thread first runs (a few MB on loopback).
        let mut us: Vec<u32> = rtt_us(&stream).ok().flatten().into_iter().collect();
        let thread = std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                match rtt_us(&stream) {
                    Ok(rtt) => us.extend(rtt),
                    Err(_) => break,
                }
                std::thread::sleep(RTT_SAMPLE_EVERY);
            }
            us
        });
        Ok(RttSampler { stop, thread })
    }

    /// Nearest-rank 95th percentile of the samples, ms; `None` without any.
    fn p95_ms(self) -> Option<f64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut us = self.thread.join().ok()?;
        if us.is_empty() {
            return None;
        }
        let rank = (us.len() * 95).div_ceil(100).max(1) - 1;
        let (_, x, _) = us.select_nth_unstable(rank);
        Some(f64::from(*x) / 1e3)
    }
}

/// Accepts one connection and reads it to its end within `limit`, and
/// answers OK when it carried `expected` bytes. Returns the bytes read.
pub fn receive_one(
    listener: TcpListener,
    expected: u64,
    limit: Duration,
) -> std::thread::JoinHandle<anyhow::Result<u64>> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + limit;
        listener.set_nonblocking(true)?;
        let mut stream = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        bail!("no TCP sender within {limit:?}");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e.into()),
            }
        };
        stream.set_nonblocking(false)?;
        // Short timeouts, so that a sender cut off with its link (no FIN,
        // no RST ever arrives) is given up on at the deadline.
        stream.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut buf = vec![0u8; 256 << 10];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= deadline {
                        bail!("the TCP sender did not finish within {limit:?}");
                    }
                }
                Err(e) => return Err(anyhow::Error::new(e).context("receiving")),
            }
        }
        let answer: &[u8] = if total == expected {
            VERDICT_OK
        } else {
            b"SHORT\n"
        };
        stream.write_all(answer)?;
        Ok(total)
    })
}

fn set_congestion(stream: &TcpStream, cc: &str) -> anyhow::Result<()> {
    // SAFETY: the fd is open for the stream's lifetime; the value is a
    // byte string of the given length.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        bail!(
            "TCP_CONGESTION {cc}: {} (is the tcp_{cc} module loaded?)",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The connection's smoothed RTT, µs; `None` before the kernel has one.
fn rtt_us(stream: &TcpStream) -> anyhow::Result<Option<u32>> {
    Ok(Some(tcp_info(stream)?.tcpi_rtt).filter(|&rtt| rtt > 0))
}

fn tcp_info(stream: &TcpStream) -> anyhow::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data; the kernel writes at most `len`
    // bytes into it.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        if rc != 0 {
            bail!("TCP_INFO: {}", std::io::Error::last_os_error());
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receiver answers OK only for the full count, and the sender's
    /// figure covers every byte (loopback).
    #[test]
    fn a_file_over_loopback_is_answered_and_timed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 3_000_000]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = listener.local_addr().unwrap();
        let rx = receive_one(listener, 3_000_000, Duration::from_secs(10));
        let sent = transfer(&TcpSendArgs {
            file: path.clone(),
            to,
            cc: "cubic".into(),
        })
        .unwrap();
        assert_eq!(rx.join().unwrap().unwrap(), 3_000_000);
        assert_eq!(sent["bytes"], 3_000_000, "{sent}");
        let seconds = sent["seconds"].as_f64().unwrap();
        let goodput = sent["goodput_mbps"].as_f64().unwrap();
        assert!(seconds > 0.0 && seconds < 10.0, "{sent}");
        assert!((goodput - 24.0 / seconds).abs() < 1e-6 * goodput, "{sent}");
        assert!(sent["data_segments"].as_u64().unwrap() > 0, "{sent}");
        // Sampled from the handshake on.
        assert!(sent["rtt_p95_ms"].as_f64().unwrap() > 0.0, "{sent}");

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = listener.local_addr().unwrap();
        let rx = receive_one(listener, 3_000_001, Duration::from_secs(10));
        let e = transfer(&TcpSendArgs {
            file: path,
            to,
            cc: "cubic".into(),
        })
        .unwrap_err();
        assert!(format!("{e:#}").contains("SHORT"), "{e:#}");
        assert_eq!(rx.join().unwrap().unwrap(), 3_000_000);
    }
}
