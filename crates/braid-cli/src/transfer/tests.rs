//! The sending end over a real session on loopback: what a sender does
//! when its input goes wrong while the receiver is taking it.

use super::send::HEADER_WAIT;
use super::*;
use crate::progress::Progress;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

/// Reads `file`, and once it has handed out `after` bytes, truncates the
/// file on disk to `to` bytes, as another program could.
struct TruncatedWhileRead {
    file: std::fs::File,
    path: PathBuf,
    read: u64,
    after: u64,
    to: u64,
}

impl Read for TruncatedWhileRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read >= self.after && self.after != u64::MAX {
            let f = std::fs::OpenOptions::new().write(true).open(&self.path)?;
            f.set_len(self.to)?;
            self.after = u64::MAX;
        }
        let n = self.file.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Fails with `error` once `after` bytes were read.
struct FailingAfter {
    read: u64,
    after: u64,
}

impl Read for FailingAfter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read >= self.after {
            return Err(io::Error::other("the disk is on fire"));
        }
        let n = buf.len().min((self.after - self.read) as usize);
        buf[..n].fill(9);
        self.read += n as u64;
        Ok(n)
    }
}

/// Sends `content` announced as `size` bytes to a receiver on loopback
/// that writes into `out`; both sides' results.
async fn send_to_receiver(
    content: impl Read + Send + 'static,
    size: u64,
    out: &Path,
) -> (anyhow::Result<Outcome>, anyhow::Result<Outcome>) {
    send_to_receiver_windowed(content, size, out, None).await
}

/// [`send_to_receiver`], the receiver's window held at `window` if given.
async fn send_to_receiver_windowed(
    content: impl Read + Send + 'static,
    size: u64,
    out: &Path,
    window: Option<u64>,
) -> (anyhow::Result<Outcome>, anyhow::Result<Outcome>) {
    send_to_receiver_with(content, size, out, |server| {
        if let Some(w) = window {
            (server.recv_window, server.send_window, server.max_window) = (w, w, w);
        }
    })
    .await
}

/// [`send_to_receiver`], the receiver's configuration changed by `edit`.
async fn send_to_receiver_with(
    content: impl Read + Send + 'static,
    size: u64,
    out: &Path,
    edit: impl FnOnce(&mut braid::SessionConfig),
) -> (anyhow::Result<Outcome>, anyhow::Result<Outcome>) {
    let key = braid::random_keypair();
    let client = braid::SessionConfig {
        security: braid::Security::pinned(key.public()),
        ..braid::SessionConfig::default()
    };
    let mut server = braid::SessionConfig {
        security: braid::Security::server(key),
        ..braid::SessionConfig::default()
    };
    edit(&mut server);
    let listener = braid::Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let addr = listener.local_addr();
    let output = Output::Dir(out.to_path_buf());
    let receiver = tokio::spawn(async move {
        let mut session = listener.accept().await?;
        let received = receive(&mut session, &output, false, &Progress::disabled()).await;
        if received.is_ok() {
            verdict_acknowledged(&mut session).await;
        }
        received
    });
    let mut session = braid::connect(&[braid::PathSpec::to(addr)], client)
        .await
        .unwrap();
    let sent = send_once(&mut session, content, size).await;
    // As `braid send` does on failure: the receiver learns of it.
    drop(session);
    let received = tokio::time::timeout(Duration::from_secs(20), receiver)
        .await
        .expect("the receiver learns of the failure")
        .unwrap();
    (sent, received)
}

/// Sends `content`, read once, as the file `f.bin` of `size` bytes.
async fn send_once(
    session: &mut braid::Session,
    content: impl Read + Send + 'static,
    size: u64,
) -> anyhow::Result<Outcome> {
    let manifest = crate::manifest::Manifest::single("f.bin", Some(size));
    let source = Source::Once(Box::new(content));
    send(session, &manifest, source, &Progress::disabled(), &mut 0).await
}

/// Gives nothing for `stall`, then `data`, as a slow pipe does.
struct Stalled {
    stall: Duration,
    data: std::io::Cursor<Vec<u8>>,
}

impl Read for Stalled {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::thread::sleep(std::mem::take(&mut self.stall));
        io::Read::read(&mut self.data, buf)
    }
}

/// An input that gives nothing for longer than the receiver's first-data
/// timeout: the header goes alone, so the receiver does not take the
/// session for an idle one.
#[tokio::test]
async fn a_slow_input_does_not_hold_the_header_back() {
    let data = b"late but welcome".to_vec();
    let content = Stalled {
        stall: HEADER_WAIT * 2,
        data: std::io::Cursor::new(data.clone()),
    };
    let out = tempfile::tempdir().unwrap();
    let (sent, received) = send_to_receiver_with(content, data.len() as u64, out.path(), |s| {
        s.first_data_timeout = Some(HEADER_WAIT + HEADER_WAIT / 2);
    })
    .await;
    sent.unwrap();
    received.unwrap();
    assert_eq!(std::fs::read(out.path().join("f.bin")).unwrap(), data);
}

#[tokio::test]
async fn a_file_truncated_while_being_sent_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("src");
    let size = 8u64 << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let content = TruncatedWhileRead {
        file: std::fs::File::open(&path).unwrap(),
        path: path.clone(),
        read: 0,
        after: 2 << 20,
        to: 3 << 20,
    };
    let out = tempfile::tempdir().unwrap();
    let (sent, received) = send_to_receiver(content, size, out.path()).await;
    let e = format!("{:#}", sent.unwrap_err());
    assert!(
        e.contains("the input changed size while sending (8388608 bytes announced, 3145728 read)"),
        "{e}"
    );
    assert!(received.is_err());
    // Nothing looks complete: whatever arrived is in the hidden staging
    // folder, if anything did before the sender stopped.
    let left: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.iter().all(|n| n == ".f.bin.braid-part"), "{left:?}");
}

#[tokio::test]
async fn a_read_error_while_sending_is_reported() {
    let out = tempfile::tempdir().unwrap();
    let content = FailingAfter {
        read: 0,
        after: 3 << 20,
    };
    let (sent, received) = send_to_receiver(content, 8 << 20, out.path()).await;
    let e = format!("{:#}", sent.unwrap_err());
    assert!(
        e.contains("reading the input") && e.contains("the disk is on fire"),
        "{e}"
    );
    assert!(received.is_err());
}

#[tokio::test]
async fn a_file_arrives_whole_through_the_lent_buffers() {
    // Several reader buffers, and a last one partly filled.
    let size = 5 * crate::file_io::CHUNK as u64 + 12_345;
    let data: Vec<u8> = (0..size).map(|i| (i * 31 % 253) as u8).collect();
    let out = tempfile::tempdir().unwrap();
    let (sent, received) = send_to_receiver(io::Cursor::new(data.clone()), size, out.path()).await;
    let (sent, received) = (sent.unwrap(), received.unwrap());
    assert_eq!((sent.bytes, sent.hash), (size, blake3::hash(&data)));
    assert_eq!(received.hash, sent.hash);
    assert_eq!(std::fs::read(out.path().join("f.bin")).unwrap(), data);
}

/// The session appends into the writer's buffers; a window far below one
/// buffer still fills them (each goes to the writer at a quarter window),
/// and bytes that find every buffer at the writer wait in the session.
#[tokio::test]
async fn a_file_arrives_whole_through_the_filled_buffers_even_with_a_small_window() {
    let size = 2 * crate::file_io::CHUNK as u64 + 777;
    let data: Vec<u8> = (0..size).map(|i| (i * 17 % 251) as u8).collect();
    for window in [None, Some(96 << 10)] {
        let out = tempfile::tempdir().unwrap();
        let (sent, received) =
            send_to_receiver_windowed(io::Cursor::new(data.clone()), size, out.path(), window)
                .await;
        let (sent, received) = (sent.unwrap(), received.unwrap());
        assert_eq!((received.bytes, received.hash), (size, blake3::hash(&data)));
        assert_eq!(sent.hash, received.hash);
        assert_eq!(std::fs::read(out.path().join("f.bin")).unwrap(), data);
    }
}

/// How many of `size` bytes of contents a receiver that never answers (no
/// offer, no verdict) gets from `send`ing `source`.
async fn arriving_without_an_offer(manifest: Manifest, source: Source, size: u64) -> u64 {
    use tokio::io::AsyncReadExt;
    let (mut session, mut receiver) = super::trees::pair().await;
    let silent = tokio::spawn(async move {
        let (mut buf, mut got) = (vec![0; 1 << 16], 0u64);
        while got < size {
            match receiver.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
        got
    });
    let sender = tokio::spawn(async move {
        let _ = send(
            &mut session,
            &manifest,
            source,
            &Progress::disabled(),
            &mut 0,
        )
        .await;
    });
    let got = tokio::time::timeout(Duration::from_secs(10), silent)
        .await
        .expect("the contents arrive without an offer")
        .unwrap();
    sender.abort();
    got
}

/// A one-shot input (stdin, generated data) always starts at 0, and so
/// does a small file, so their contents follow the manifest at once: a
/// receiver that has not yet said what it holds already has them all.
/// Waiting for the offer first cost the demo 0.4 s of its 17, and a 100 KB
/// file a round trip.
#[tokio::test]
async fn a_one_shot_input_or_a_small_file_does_not_wait_for_the_offer() {
    let size = 300_000u64;
    let manifest = crate::manifest::Manifest::single("f.bin", Some(size));
    let source = Source::Once(Box::new(io::repeat(7).take(size)));
    let got = arriving_without_an_offer(manifest, source, size).await;
    assert!(
        got >= size,
        "{got} of {size} bytes arrived before any offer"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small.bin");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    let outgoing =
        crate::outgoing::Outgoing::collect(std::slice::from_ref(&file), None, false).unwrap();
    let manifest = outgoing.manifest.clone();
    let got = arriving_without_an_offer(manifest, Source::Files(outgoing), 100_000).await;
    assert!(
        got >= 100_000,
        "{got} bytes of a small file arrived before any offer"
    );
}
