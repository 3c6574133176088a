//! The receiving end: the manifest, checked; an offer of what an earlier
//! transfer left; the contents into the staging folder (or a stream);
//! then, verified, into place.

use anyhow::{bail, Context as _};
use braid::Session;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{close_reason, parent, protocol, Outcome, Output, HASH_LEN, MAGIC, RECV_BUFFERS};
use crate::close_codes::CLOSE_FAILED;
use crate::failure::{Failure, Kind};
use crate::file_io::{HashingWriter, Sink};
use crate::filled::Filled;
use crate::manifest::{Manifest, MAX_MANIFEST};
use crate::progress::Progress;
use crate::staging::Staging;

/// What a receiver learned, kept even if it then fails: which transfer it
/// was, where its contents started, and what stays for a later one.
#[derive(Default)]
pub struct Seen {
    pub manifest: Option<Arc<Manifest>>,
    /// Content bytes an earlier transfer had brought.
    pub start: u64,
    /// Content bytes on disk when the transfer stopped, and where, kept
    /// for the same transfer sent again.
    pub kept: Option<(PathBuf, u64)>,
    /// The staging folder of contents verified and not yet landed.
    staging: Option<Staging>,
}

/// Receives one transfer into `output`, verifies it and tells the sender:
/// the verdict, or an abort with the reason.
pub async fn receive(
    session: &mut Session,
    output: &Output,
    overwrite: bool,
    progress: &Progress,
) -> anyhow::Result<Outcome> {
    receive_telling(session, output, overwrite, progress, &mut Seen::default()).await
}

/// [`receive`], keeping in `seen` what it learns as soon as it does, so
/// that a failure can still say which transfer it was.
pub async fn receive_telling(
    session: &mut Session,
    output: &Output,
    overwrite: bool,
    progress: &Progress,
    seen: &mut Seen,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let plan = |m: &Manifest| Plan::new(output, m, overwrite);
    let result = receive_planned(session, plan, progress, seen).await;
    match &result {
        Ok(o) => {
            // The contents are verified and kept: that is the outcome,
            // reported at once. The verdict goes out reliably while the
            // caller lingers (`verdict_acknowledged`); its fate does not
            // change ours.
            let line = format!("OK {}\n", o.hash.to_hex());
            if session.write_all(line.as_bytes()).await.is_ok() {
                session.finish();
            }
        }
        Err(e) => session.abort(CLOSE_FAILED, &close_reason("receiver failed", e)),
    }
    result.map(|o| Outcome {
        elapsed: started.elapsed(),
        ..o
    })
}

/// Where the contents go, decided from the output and the manifest.
enum Plan {
    /// One file's content into a stream (or nowhere).
    Stream(Sink),
    /// Everything at the top lands in `dir`, under `names`, replacing
    /// what is there if `overwrite`.
    Land {
        dir: PathBuf,
        names: Vec<String>,
        overwrite: bool,
    },
}

impl Plan {
    fn new(output: &Output, manifest: &Manifest, overwrite: bool) -> anyhow::Result<Plan> {
        let local = |m: String| Failure::err(Kind::Local, m);
        let roots: Vec<String> = manifest.roots().map(|e| e.path.clone()).collect();
        let (dir, names) = match output {
            Output::Discard => return Ok(Plan::Stream(Sink::Discard)),
            Output::Stdout | Output::Device(_) if !manifest.is_single_file() => {
                return Err(local(format!(
                    "the sender sends {} ({} files); give a folder with --output",
                    braid::text::escape(&manifest.label()),
                    manifest.files().count()
                )))
            }
            Output::Stdout => return Ok(Plan::Stream(Sink::Stream(Box::new(std::io::stdout())))),
            Output::Device(path) => {
                let device = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .with_context(|| format!("opening {}", path.display()))?;
                return Ok(Plan::Stream(Sink::Stream(Box::new(device))));
            }
            Output::File(p) if roots.len() > 1 => {
                return Err(local(format!(
                    "the sender sends {} things; --output {} names one (give a folder)",
                    roots.len(),
                    braid::text::escape(&p.display().to_string())
                )))
            }
            Output::File(p) => {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                (parent(p), vec![name.unwrap_or_else(|| roots[0].clone())])
            }
            Output::Dir(d) => (d.clone(), roots),
        };
        // Refused before any byte comes, and again by the renames at the
        // end for anything that appears meanwhile.
        if !overwrite {
            if let Some(n) = names
                .iter()
                .find(|n| dir.join(n).symlink_metadata().is_ok())
            {
                return Err(local(format!(
                    "{} exists on the receiver (start it with --overwrite to replace files, \
                     or send it with another --name)",
                    braid::text::escape(&dir.join(n).display().to_string())
                )));
            }
        }
        Ok(Plan::Land {
            dir,
            names,
            overwrite,
        })
    }
}

/// Receives one transfer where `plan` says once the manifest is known.
async fn receive_planned(
    session: &mut Session,
    plan: impl FnOnce(&Manifest) -> anyhow::Result<Plan>,
    progress: &Progress,
    seen: &mut Seen,
) -> anyhow::Result<Outcome> {
    // Shared, not copied: the list may be 16 MiB of entries.
    let manifest = Arc::new(read_manifest(session).await?);
    seen.manifest = Some(Arc::clone(&manifest));
    if let Some(size) = manifest.size() {
        progress.set_length(size);
    }
    progress.set_files(&manifest);
    let (dir, names, overwrite) = match plan(&manifest)? {
        Plan::Stream(sink) => {
            offer(session, 0, None).await?;
            read_start(session, 0).await?;
            let mut on_disk = 0;
            let copied = copy_verified(
                session,
                sink,
                blake3::Hasher::new(),
                &manifest,
                0,
                progress,
                &mut on_disk,
            );
            let (bytes, hash) = copied.await?;
            return Ok(outcome(bytes, 0, hash, None));
        }
        Plan::Land {
            dir,
            names,
            overwrite,
        } => (dir, names, overwrite),
    };
    let path = match names.as_slice() {
        [one] => dir.join(one),
        _ => dir.clone(),
    };
    let (bytes, hash) = fill(session, &dir, &names[0], &manifest, progress, seen).await?;
    let staging = seen.staging.take().context("the staging folder went")?;
    let part = staging.path().to_owned();
    let m = Arc::clone(&manifest);
    let landed = tokio::task::spawn_blocking(move || staging.land(&m, &names, overwrite)).await?;
    if let Err(e) = landed {
        // Verified and complete: the same transfer sent again (say with
        // --overwrite) finds all of it.
        seen.kept = Some((part, bytes));
        return Err(e);
    }
    Ok(outcome(bytes, seen.start, hash, Some(path)))
}

/// Offers what the staging folder holds, takes the contents from where
/// the sender starts, and verifies them. On failure the folder stays for
/// the same transfer sent again (`seen.kept`), unless what it holds
/// cannot be resumed: nothing, a stream, or a corrupted transfer.
async fn fill(
    session: &mut Session,
    dir: &Path,
    first: &str,
    manifest: &Arc<Manifest>,
    progress: &Progress,
    seen: &mut Seen,
) -> anyhow::Result<(u64, blake3::Hash)> {
    let (dir_, first_, m) = (dir.to_owned(), first.to_owned(), Arc::clone(manifest));
    let (staging, held, hasher) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let staging = Staging::open(&dir_, &first_, m.size().is_some())?;
        let (held, hasher) = staging.held(&m)?;
        Ok((staging, held, hasher))
    })
    .await??;
    // A staging folder that holds nothing goes when dropped.
    check_room(dir, manifest, held)?;
    offer(session, held, Some(hasher.finalize())).await?;
    let start = read_start(session, held).await?;
    seen.start = start;
    let m = Arc::clone(manifest);
    let (staging, writer) = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        if start == 0 {
            staging.wipe()?;
        } else {
            staging.prune(&m)?;
        }
        let writer = staging.writer(&m, start)?;
        Ok((staging, writer))
    })
    .await?
    .with_context(|| format!("preparing {}", dir.display()))?;
    let hasher = if start == 0 {
        blake3::Hasher::new()
    } else {
        hasher
    };
    let mut on_disk = start;
    let copied = copy_verified(
        session,
        Sink::Files(writer),
        hasher,
        manifest,
        start,
        progress,
        &mut on_disk,
    )
    .await;
    let corrupted = |e: &anyhow::Error| {
        e.downcast_ref::<Failure>()
            .is_some_and(|f| f.kind == Kind::Corrupted)
    };
    match copied {
        Ok(done) => {
            seen.staging = Some(staging);
            Ok(done)
        }
        Err(e) if manifest.size().is_none() || corrupted(&e) => {
            staging.discard();
            Err(e)
        }
        Err(e) => {
            if on_disk > 0 {
                seen.kept = Some((staging.path().to_owned(), on_disk));
            }
            Err(e)
        }
    }
}

/// The size is known before the first byte: refuses what the disk cannot
/// hold now, not once it fills.
fn check_room(dir: &Path, manifest: &Manifest, held: u64) -> anyhow::Result<()> {
    if let (Some(size), Some(free)) = (manifest.size(), free_space(dir)) {
        let needed = size - held;
        if needed > free {
            return Err(Failure::err(
                Kind::Local,
                format!(
                    "{} needs {needed} more bytes and {} has {free} free",
                    braid::text::escape(&manifest.label()),
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

fn outcome(bytes: u64, resumed: u64, hash: blake3::Hash, path: Option<PathBuf>) -> Outcome {
    Outcome {
        bytes,
        resumed,
        hash,
        elapsed: std::time::Duration::ZERO,
        path,
    }
}

/// Bytes an unprivileged writer may still put on the file system of `dir`.
#[cfg(unix)]
fn free_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer statvfs fills on success.
    let ok = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) } == 0;
    // SAFETY: initialised by the successful call above.
    let st = ok.then(|| unsafe { st.assume_init() })?;
    // Both are 64-bit on the platforms braid builds for; `as` keeps any
    // 32-bit one compiling.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_space(_dir: &Path) -> Option<u64> {
    None
}

async fn read_manifest(session: &mut Session) -> anyhow::Result<Manifest> {
    let mut magic = [0u8; 8];
    session.read_exact(&mut magic).await.map_err(header_cut)?;
    if magic[..6] == MAGIC[..6] && magic != *MAGIC {
        return Err(protocol(
            "the sender speaks another version of the transfer format: run the same braid \
             version at both ends",
        ));
    }
    if magic != *MAGIC {
        return Err(protocol("the peer is not sending a braid file transfer"));
    }
    let len = session.read_u32().await.map_err(header_cut)?;
    if len > MAX_MANIFEST {
        return Err(protocol(&format!(
            "the sender's list of files is {len} bytes, more than the {MAX_MANIFEST} taken"
        )));
    }
    let mut body = vec![0u8; len as usize];
    session.read_exact(&mut body).await.map_err(header_cut)?;
    Manifest::decode(&body)
}

/// Tells the sender how much of the contents we hold.
async fn offer(session: &mut Session, held: u64, hash: Option<blake3::Hash>) -> anyhow::Result<()> {
    let line = match hash {
        Some(h) if held > 0 => format!("FROM {held} {}\n", h.to_hex()),
        _ => "FROM 0\n".to_owned(),
    };
    session.write_all(line.as_bytes()).await?;
    Ok(())
}

/// Where the sender starts: at our offer or from the beginning.
async fn read_start(session: &mut Session, offered: u64) -> anyhow::Result<u64> {
    let start = session.read_u64().await.map_err(header_cut)?;
    if start != 0 && start != offered {
        return Err(protocol(&format!(
            "the sender starts at byte {start}, where we offered {offered}"
        )));
    }
    Ok(start)
}

/// A header cut short by the end of the stream is the sender's doing; any
/// other error (the session's) says why itself.
fn header_cut(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        protocol("the sender ended the stream inside the transfer header")
    } else {
        anyhow::Error::from(e).context("reading the transfer header")
    }
}

/// Copies the contents to `sink`, holding back the trailing hash, and
/// checks it. The session appends the contents straight into the writer
/// thread's buffers (see [`crate::filled`]); the writer holds back the last
/// [`HASH_LEN`] bytes it gets, which at the end are the hash. `hasher` has
/// seen the `start` bytes that came before.
async fn copy_verified(
    session: &mut Session,
    sink: Sink,
    hasher: blake3::Hasher,
    manifest: &Manifest,
    start: u64,
    progress: &Progress,
    on_disk: &mut u64,
) -> anyhow::Result<(u64, blake3::Hash)> {
    // A buffer goes to the writer, and its bytes out of the window, once a
    // quarter of the window at most is in it, so that it fills.
    let window = usize::try_from(session.stats().recv_window / 4).unwrap_or(usize::MAX);
    let filled = Filled::new(RECV_BUFFERS, window);
    let writer =
        HashingWriter::spawn_with(sink, hasher, RECV_BUFFERS + 1, HASH_LEN, filled.give_back());
    filled.fill_for(writer.queue());
    // Whatever happens, the writer hears no more from us after this.
    let _abandon = Abandon(&filled);
    if !session.use_received_content(filled.content()) {
        bail!("the session's content already goes elsewhere");
    }
    progress.set_position(start);
    loop {
        tokio::select! {
            all = session.received_all() => {
                if let Err(e) = all {
                    // What came in order is content: it goes to disk for
                    // the same transfer sent again (the writer holds back
                    // what could be the hash).
                    filled.close();
                    writer.stop().await;
                    *on_disk = (start + filled.written()).saturating_sub(HASH_LEN as u64).max(start);
                    return Err(e.into());
                }
                break;
            }
            () = filled.returned() => {
                if filled.writer_stopped() {
                    break; // The writer failed; `finish` says why.
                }
                session.received_released();
                *on_disk = start + filled.written();
                progress.set_position(*on_disk);
            }
        }
    }
    filled.close();
    let finished = writer.finish_holding_back().await;
    *on_disk = start + filled.written();
    let (written, hash, tail) = finished?;
    progress.set_position(start + written);
    let corrupted = |m: String| Failure::err(Kind::Corrupted, m);
    if tail.len() < HASH_LEN {
        return Err(corrupted(
            "the stream ended before the content's hash: transfer incomplete".into(),
        ));
    }
    let total = start + written;
    if manifest.size().is_some_and(|s| s != total) {
        return Err(corrupted(format!(
            "received {total} bytes, the sender announced {}",
            manifest.size().unwrap_or(0)
        )));
    }
    if hash.as_bytes()[..] != tail[..] {
        return Err(corrupted(
            "BLAKE3 mismatch: the content was corrupted".into(),
        ));
    }
    Ok((total, hash))
}

/// Cuts the writer off from a transfer that ends early.
struct Abandon<'a>(&'a Filled);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        self.0.abandon();
    }
}
