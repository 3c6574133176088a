//! The file-transfer format over a braid session, and both ends of it.
//!
//! Sender to receiver: `BRAIDF2\n` and the manifest (u32 length, then the
//! entries, see [`crate::manifest`]). Receiver to sender: `FROM <n>
//! [<hex hash>]\n`, the bytes of the contents it already holds from an
//! earlier, interrupted transfer and their BLAKE3 hash. Sender to
//! receiver: where the contents start (u64: `n` if that hash is the one
//! of its own first `n` bytes, else 0), the contents from there (every
//! file's in turn), then the BLAKE3 hash of all the contents (32 bytes)
//! and the end of the stream. Receiver to sender: `OK <hex hash>\n` once
//! the contents were verified and are in place under their final names.
//! A receiver that fails (a write error, a file it may not replace, a
//! corrupted transfer) or is interrupted aborts the session with the
//! reason, which reaches the sender within a round trip, even while it is
//! still sending.

use anyhow::{bail, Context as _};
use braid::Session;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

use crate::close_codes::CLOSE_INTERRUPTED;
use crate::failure::{Failure, Kind};
use crate::manifest::Manifest;
use crate::side::Side;

mod receive;
mod send;

pub use receive::{receive, receive_telling, Seen};
pub use send::{send, Source};

const MAGIC: &[u8; 8] = b"BRAIDF2\n";
const HASH_LEN: usize = 32;
/// Buffers of `file_io::CHUNK` bytes the session may fill for the writer
/// thread at once (made as needed).
const RECV_BUFFERS: usize = 16;
/// Longest verdict line read back.
const MAX_VERDICT: u64 = 4096;

/// Ends a transfer that was interrupted (`what`, exit status `status`): the
/// peer learns why at once, and keeps what it has for the same transfer
/// sent again.
pub fn interrupted(session: &Session, side: Side, what: &str, status: u8) -> anyhow::Error {
    session.abort(CLOSE_INTERRUPTED, &format!("{} {what}", side.name()));
    Failure::err(Kind::Interrupted(status), what)
}

fn protocol(message: &str) -> anyhow::Error {
    Failure::err(Kind::Protocol, message)
}

/// The end of a transfer as one side saw it.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Content bytes verified, those kept from before included.
    pub bytes: u64,
    /// Content bytes an earlier, interrupted transfer had already brought.
    pub resumed: u64,
    pub hash: blake3::Hash,
    /// From the session's start to the peer's verdict (sender) or the
    /// file's rename (receiver).
    pub elapsed: Duration,
    /// Where the receiver put the file (`None` for stdout and on the sender).
    pub path: Option<PathBuf>,
}

/// The bytes that precede the contents: the magic, the manifest and the
/// start.
fn preamble_len(manifest: &Manifest) -> u64 {
    MAGIC.len() as u64 + manifest.encode().len() as u64 + 8
}

/// Content bytes the receiver holds, acknowledged ones (sender) or
/// received ones (receiver) in `stream_bytes`, from `start` on.
pub fn content_done(manifest: &Manifest, start: u64, stream_bytes: u64) -> u64 {
    let size = manifest.size().unwrap_or(u64::MAX);
    stream_bytes
        .saturating_sub(preamble_len(manifest))
        .saturating_add(start)
        .min(size)
}

/// Where received content goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// This file name.
    File(PathBuf),
    /// The sender's file name in this directory.
    Dir(PathBuf),
    Stdout,
    /// An existing file that is not a regular one (`/dev/null`, a FIFO, a
    /// terminal): written into as it is, never replaced.
    Device(PathBuf),
    /// Verify only, keep nothing (the demo).
    Discard,
}

impl Output {
    /// `-`, a directory, or a file name; checks it can be written. A
    /// directory named with a trailing `/` is created if missing (the user
    /// clearly meant one); a file's directory must exist.
    pub fn parse(arg: &str) -> anyhow::Result<Output> {
        if arg == "-" {
            return Ok(Output::Stdout);
        }
        let path = PathBuf::from(arg);
        let kind = std::fs::metadata(&path).map(|m| m.file_type());
        if kind.is_ok_and(|k| !k.is_file() && !k.is_dir()) {
            // Opened only when the file comes: opening a FIFO waits for
            // its reader, and closing it would end what that reader sees.
            return Ok(Output::Device(path));
        }
        if arg.ends_with('/') && !path.is_dir() {
            std::fs::create_dir_all(&path)
                .with_context(|| format!("cannot create the output directory {arg}"))?;
            eprintln!("created the output directory {arg}");
        }
        let (out, dir) = if path.is_dir() {
            (Output::Dir(path.clone()), path)
        } else {
            let parent = parent(&path);
            (Output::File(path), parent)
        };
        check_writable(&dir).with_context(|| format!("output {arg} is not writable"))?;
        Ok(out)
    }
}

/// The folder a file name lands in (`.` for a bare name).
fn parent(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn check_writable(dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        bail!(
            "directory {} does not exist (end --output with / to have a directory created)",
            dir.display()
        );
    }
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let probe = tempfile::NamedTempFile::new_in(dir)?;
    drop(probe);
    Ok(())
}

/// Longest a receiver stays after its outcome to get its verdict
/// acknowledged: past the sender's own silent-peer limit (about 3.4 s on a
/// short path, longer on long ones), so a sender that can still hear us gets
/// the verdict and one that cannot has given up by then.
pub const VERDICT_LINGER: Duration = Duration::from_secs(15);

/// After a receiver's outcome is printed: waits until the verdict is
/// acknowledged or the sender closes with CLOSE_DONE (it has everything it
/// needs from us), the session fails, or `VERDICT_LINGER` passes. Its fate
/// does not change the outcome.
pub async fn verdict_acknowledged(session: &mut Session) {
    let _ = tokio::time::timeout(VERDICT_LINGER, session.shutdown()).await;
}

/// A reason for the peer: the whole chain of causes if it fits in a CLOSE
/// frame, else the root cause (the part that says what went wrong, such as
/// "No space left on device", rather than a long path).
pub fn close_reason(what: &str, e: &anyhow::Error) -> String {
    let full = format!("{what}: {e:#}");
    if full.len() <= braid_proto::wire::MAX_REASON {
        full
    } else {
        format!("{what}: {}", e.root_cause())
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod sending;

#[cfg(test)]
#[path = "tree_tests.rs"]
mod trees;
