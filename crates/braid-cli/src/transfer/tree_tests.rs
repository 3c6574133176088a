//! Folders and resuming, end to end over a real session on loopback, and
//! each end played by an attacker against the other.

use super::*;
use crate::manifest::{Entry, Manifest};
use crate::outgoing::Outgoing;
use crate::progress::Progress;
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LIMIT: Duration = Duration::from_secs(20);

/// A listener and a session to it.
pub(super) async fn pair() -> (braid::Session, braid::Session) {
    let key = braid::random_keypair();
    let client = braid::SessionConfig {
        security: braid::Security::pinned(key.public()),
        ..braid::SessionConfig::default()
    };
    let server = braid::SessionConfig {
        security: braid::Security::server(key),
        ..braid::SessionConfig::default()
    };
    let listener = braid::Listener::bind("127.0.0.1:0".parse().unwrap(), server).unwrap();
    let addr = listener.local_addr();
    let accepted = tokio::spawn(async move { listener.accept().await.unwrap() });
    let sender = braid::connect(&[braid::PathSpec::to(addr)], client)
        .await
        .unwrap();
    (sender, accepted.await.unwrap())
}

/// Sends `manifest` from `source` into `out`; both ends' results.
async fn transfer(
    manifest: &Manifest,
    source: Source,
    out: &Path,
) -> (anyhow::Result<Outcome>, anyhow::Result<Outcome>) {
    let (mut sender, mut receiver) = pair().await;
    let output = Output::Dir(out.to_path_buf());
    let receiving = tokio::spawn(async move {
        let r = receive(&mut receiver, &output, false, &Progress::disabled()).await;
        if r.is_ok() {
            verdict_acknowledged(&mut receiver).await;
        }
        r
    });
    let sent = send(&mut sender, manifest, source, &Progress::disabled(), &mut 0).await;
    drop(sender);
    let received = tokio::time::timeout(LIMIT, receiving)
        .await
        .unwrap()
        .unwrap();
    (sent, received)
}

/// Reads `inner`, then fails once `after` bytes were handed out: a
/// sender that stops part way.
struct CutAfter<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for CutAfter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("cut off"));
        }
        let n = buf.len().min(self.left as usize);
        let n = self.inner.read(&mut buf[..n])?;
        self.left -= n as u64;
        Ok(n)
    }
}

fn data(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(seed) >> 3) as u8)
        .collect()
}

/// A folder of two large files, a small one, an empty file and an empty
/// folder.
fn folder(at: &Path) -> std::path::PathBuf {
    let top = at.join("photos");
    std::fs::create_dir_all(top.join("2024/empty")).unwrap();
    std::fs::write(top.join("2024/a.raw"), data(6 << 20, 31)).unwrap();
    std::fs::write(top.join("2024/b.raw"), data(5 << 20, 17)).unwrap();
    std::fs::write(top.join("notes.txt"), b"three files and a folder").unwrap();
    std::fs::write(top.join("zero"), b"").unwrap();
    top
}

/// Every path under `root` with its kind and content.
fn listing(root: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                stack.push(p.clone());
                out.push((rel, None));
            } else {
                out.push((rel, Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

/// The first transfer of `paths` into `out`, cut off after `after`
/// content bytes; returns what the receiver kept.
async fn interrupted(paths: &[std::path::PathBuf], out: &Path, after: u64) -> anyhow::Error {
    let outgoing = Outgoing::collect(paths, None, false).unwrap();
    let manifest = outgoing.manifest.clone();
    let cut = CutAfter {
        inner: outgoing.contents_from(0).unwrap(),
        left: after,
    };
    let (sent, received) = transfer(&manifest, Source::Once(Box::new(cut)), out).await;
    assert!(sent.is_err());
    received.unwrap_err()
}

#[tokio::test]
async fn a_folder_arrives_whole_with_its_modes_and_times() {
    let src = tempfile::tempdir().unwrap();
    let top = folder(src.path());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let exe = std::fs::Permissions::from_mode(0o750);
        std::fs::set_permissions(top.join("notes.txt"), exe).unwrap();
    }
    let old = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let f = std::fs::File::open(top.join("2024/b.raw")).unwrap();
    f.set_modified(old).unwrap();
    let outgoing = Outgoing::collect(std::slice::from_ref(&top), None, false).unwrap();
    let manifest = outgoing.manifest.clone();
    let out = tempfile::tempdir().unwrap();
    let (sent, received) = transfer(&manifest, Source::Files(outgoing), out.path()).await;
    let (sent, received) = (sent.unwrap(), received.unwrap());
    assert_eq!(sent.hash, received.hash);
    assert_eq!(
        received.path.as_deref(),
        Some(out.path().join("photos").as_path())
    );
    assert_eq!(listing(&out.path().join("photos")), listing(&top));
    let got = std::fs::metadata(out.path().join("photos/2024/b.raw")).unwrap();
    assert_eq!(got.modified().unwrap(), old);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let got = std::fs::metadata(out.path().join("photos/notes.txt")).unwrap();
        assert_eq!(got.permissions().mode() & 0o777, 0o750);
    }
    // Nothing else is left beside it.
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

#[tokio::test]
async fn an_interrupted_folder_goes_on_where_it_stopped() {
    let src = tempfile::tempdir().unwrap();
    let top = folder(src.path());
    let out = tempfile::tempdir().unwrap();
    // Cut inside the second large file.
    let e = interrupted(std::slice::from_ref(&top), out.path(), 8 << 20).await;
    assert!(format!("{e:#}").contains("aborted"), "{e:#}");
    // Nothing looks finished: only the hidden staging folder is there.
    assert!(!out.path().join("photos").exists());
    assert!(out
        .path()
        .join(".photos.braid-part/photos/2024/a.raw")
        .exists());
    let outgoing = Outgoing::collect(std::slice::from_ref(&top), None, false).unwrap();
    let manifest = outgoing.manifest.clone();
    let (sent, received) = transfer(&manifest, Source::Files(outgoing), out.path()).await;
    let (sent, received) = (sent.unwrap(), received.unwrap());
    // How far the first one got depends on when its session went.
    assert!(
        sent.resumed > 0 && sent.resumed <= 8 << 20,
        "resumed from {}",
        sent.resumed
    );
    assert_eq!(received.resumed, sent.resumed);
    assert_eq!(received.hash, sent.hash);
    assert_eq!(listing(&out.path().join("photos")), listing(&top));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

#[tokio::test]
async fn a_source_changed_since_the_interruption_starts_over() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("big.bin");
    let content = data(12 << 20, 7);
    std::fs::write(&file, &content).unwrap();
    let out = tempfile::tempdir().unwrap();
    interrupted(std::slice::from_ref(&file), out.path(), 9 << 20).await;
    // One byte of what the receiver holds changes on the sender's side.
    let mut changed = content.clone();
    changed[1000] ^= 1;
    std::fs::write(&file, &changed).unwrap();
    let outgoing = Outgoing::collect(std::slice::from_ref(&file), None, false).unwrap();
    let manifest = outgoing.manifest.clone();
    let (sent, received) = transfer(&manifest, Source::Files(outgoing), out.path()).await;
    let (sent, received) = (sent.unwrap(), received.unwrap());
    assert_eq!((sent.resumed, received.resumed), (0, 0));
    assert_eq!(std::fs::read(out.path().join("big.bin")).unwrap(), changed);
}

/// A receiver that offers `line` and reports where the sender starts.
async fn sender_start_for_offer(line: String) -> u64 {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("f");
    std::fs::write(&file, data(1 << 20, 3)).unwrap();
    let outgoing = Outgoing::collect(std::slice::from_ref(&file), None, false).unwrap();
    let manifest = outgoing.manifest.clone();
    let (mut sender, mut attacker) = pair().await;
    let sending = tokio::spawn(async move {
        send(
            &mut sender,
            &manifest,
            Source::Files(outgoing),
            &Progress::disabled(),
            &mut 0,
        )
        .await
    });
    let mut preamble = vec![0u8; 8 + 4];
    attacker.read_exact(&mut preamble).await.unwrap();
    let len = u32::from_be_bytes(preamble[8..12].try_into().unwrap());
    let mut body = vec![0u8; len as usize];
    attacker.read_exact(&mut body).await.unwrap();
    attacker.write_all(line.as_bytes()).await.unwrap();
    let start = tokio::time::timeout(LIMIT, attacker.read_u64())
        .await
        .unwrap()
        .unwrap();
    drop(attacker);
    sending.abort();
    start
}

#[tokio::test]
async fn a_receivers_offer_is_checked_not_trusted() {
    let content = data(1 << 20, 3);
    let right = blake3::hash(&content[..4096]);
    let wrong = blake3::hash(b"something else");
    // A true offer is taken: the check is what tells the others apart.
    assert_eq!(
        sender_start_for_offer(format!("FROM 4096 {}\n", right.to_hex())).await,
        4096
    );
    assert_eq!(
        sender_start_for_offer(format!("FROM 4096 {}\n", wrong.to_hex())).await,
        0
    );
    let all = blake3::hash(&content);
    let past_the_end = format!("FROM {} {}\n", (1 << 20) + 1, all.to_hex());
    assert_eq!(sender_start_for_offer(past_the_end).await, 0);
    assert_eq!(sender_start_for_offer("FROM 4096\n".into()).await, 0);
}

/// A sender that writes `manifest` and then `start` whatever the offer
/// was; the receiver's result and what it left in `out`.
async fn forged_sender(manifest: Manifest, start: u64, out: &Path) -> anyhow::Error {
    let (mut attacker, mut receiver) = pair().await;
    let output = Output::Dir(out.to_path_buf());
    let receiving =
        tokio::spawn(
            async move { receive(&mut receiver, &output, false, &Progress::disabled()).await },
        );
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&manifest.encode());
    attacker.write_all(&bytes).await.unwrap();
    let mut offer = [0u8; 7]; // "FROM 0\n", or the start of a longer one
    let _ = attacker.read_exact(&mut offer).await;
    let _ = attacker.write_all(&start.to_be_bytes()).await;
    let _ = attacker.write_all(&[5u8; 64]).await;
    attacker.finish();
    let r = tokio::time::timeout(LIMIT, receiving)
        .await
        .unwrap()
        .unwrap();
    r.unwrap_err()
}

#[tokio::test]
async fn a_sender_cannot_escape_the_folder_or_skip_unoffered_bytes() {
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for bad in ["../evil", "ok/../../evil", "/tmp/evil"] {
        let m = Manifest {
            entries: vec![Entry::file(bad, Some(64))],
        };
        let e = forged_sender(m, 0, &out).await;
        assert!(format!("{e:#}").contains("path"), "{bad}: {e:#}");
    }
    // A start nobody offered: the receiver held nothing.
    let e = forged_sender(Manifest::single("f", Some(64)), 32, &out).await;
    assert!(format!("{e:#}").contains("where we offered 0"), "{e:#}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing landed"
    );
    let beside: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
    assert_eq!(beside.len(), 1, "nothing escaped");
}
