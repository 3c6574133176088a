//! The kinds compared, and what every peer does the same way: the sender
//! writes N bytes from one fixed buffer and ends its direction; the
//! receiver reads into one fixed buffer and discards, then replies with the
//! count it got (8 bytes, little-endian) and ends its own direction. The
//! sender's clock stops when that reply has arrived whole, so goodput covers
//! delivery to the receiving application, not just to its socket.

use anyhow::{ensure, Context, Result};
use std::io::Write;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Size of the sender's fixed buffer and of the receiver's read buffer.
pub const CHUNK: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    BraidSealed,
    BraidInsecure,
    QuinnTls,
    /// quinn, same handshake, 1-RTT packets unprotected.
    QuinnPlain,
    /// quinn's own `perf` tool, server and client (built outside the bench).
    QuinnPerf,
    Tcp,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::BraidSealed,
        Kind::BraidInsecure,
        Kind::QuinnTls,
        Kind::QuinnPlain,
        Kind::QuinnPerf,
        Kind::Tcp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::BraidSealed => "braid-sealed",
            Kind::BraidInsecure => "braid-insecure",
            Kind::QuinnTls => "quinn-tls",
            Kind::QuinnPlain => "quinn-plain",
            Kind::QuinnPerf => "quinn-perf",
            Kind::Tcp => "tcp",
        }
    }

    pub fn parse(s: &str) -> Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .with_context(|| {
                let names: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown kind {s:?}; kinds: {}", names.join(","))
            })
    }
}

/// The receiver's first line: the parent waits for it before starting the
/// sender. `extra` is what the sender needs to trust the receiver (braid's
/// public key, quinn's certificate as hex) or `-`.
pub fn announce(port: u16, extra: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "READY {port} {extra}");
    let _ = out.flush();
}

/// Receiver side over a byte stream (braid session, TCP): read to the end,
/// reply with the count, end our direction. Returns the count.
pub async fn receive<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = s.read(&mut buf).await.context("read")?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    s.write_all(&total.to_le_bytes()).await.context("reply")?;
    s.shutdown().await.context("shutdown after reply")?;
    Ok(total)
}

/// Sender side over a byte stream: write `bytes`, end our direction, read
/// the receiver's reply to its end and check it.
pub async fn send<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, bytes: u64) -> Result<()> {
    let chunk = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        s.write_all(&chunk[..n]).await.context("write")?;
        left -= n as u64;
    }
    s.shutdown().await.context("shutdown")?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.context("read reply")?;
    check_reply(&reply, bytes)
}

/// The reply must be exactly the count the sender wrote.
pub fn check_reply(reply: &[u8], bytes: u64) -> Result<()> {
    let got: [u8; 8] = reply
        .try_into()
        .with_context(|| format!("reply of {} bytes, expected 8", reply.len()))?;
    let got = u64::from_le_bytes(got);
    ensure!(got == bytes, "receiver got {got} bytes of {bytes}");
    Ok(())
}

/// The receiver's own check of the count.
pub fn expect(got: u64, bytes: u64) -> Result<()> {
    ensure!(got == bytes, "received {got} bytes of {bytes}");
    Ok(())
}
