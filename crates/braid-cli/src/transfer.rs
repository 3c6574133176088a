//! The file-transfer format over a braid session, and both ends of it.
//!
//! Sender to receiver: `BRAIDF1\n`, the file name (u16 length + UTF-8), the
//! size (u64, `u64::MAX` if unknown, as for stdin), the content, then the
//! BLAKE3 hash of the content (32 bytes) and the end of the stream.
//! Receiver to sender: `OK <hex hash>\n` once the content was verified and
//! is in place under its final name. A receiver that fails (a write error,
//! a file it may not replace, a corrupted transfer) or is interrupted aborts
//! the session with the reason, which reaches the sender within a round
//! trip, even while it is still sending.

use anyhow::{bail, Context as _};
use braid::Session;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::failure::{Failure, Kind};
use crate::file_io::{HashingReader, HashingWriter, Sink};
use crate::filled::Filled;
use crate::lent::Lent;
use crate::progress::Progress;

const MAGIC: &[u8; 8] = b"BRAIDF1\n";
const HASH_LEN: usize = 32;
/// Buffers of `file_io::CHUNK` bytes the session may fill for the writer
/// thread at once (made as needed).
const RECV_BUFFERS: usize = 16;
const UNKNOWN_SIZE: u64 = u64::MAX;
/// Longest verdict line read back.
const MAX_VERDICT: u64 = 4096;
/// How long the header waits for the input's first bytes to travel with:
/// well within a listener's first-data timeout (5 s).
const HEADER_WAIT: Duration = Duration::from_secs(1);
/// Close codes of the application (the core's own are below 16).
pub const CLOSE_FAILED: u64 = 16;
pub const CLOSE_INTERRUPTED: u64 = 17;
/// The sender has the receiver's verdict: the transfer is over, and the
/// receiver need not wait for the ACK of its verdict (QUIC's
/// CONNECTION_CLOSE after the application is done).
pub const CLOSE_DONE: u64 = 18;
/// Longest part of a file name kept in its temporary file's name, so that
/// names of up to 255 bytes (the usual file-system limit) still fit.
const TEMP_NAME_PART: usize = 64;

/// What precedes the content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub size: Option<u64>,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let name = self.name.as_bytes();
        let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
        let mut out = Vec::with_capacity(8 + 2 + name.len() + 8);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&name[..usize::from(len)]);
        out.extend_from_slice(&self.size.unwrap_or(UNKNOWN_SIZE).to_be_bytes());
        out
    }

    async fn read(r: &mut (impl AsyncRead + Unpin)) -> anyhow::Result<Header> {
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic).await.map_err(header_cut)?;
        if &magic != MAGIC {
            return Err(protocol("the peer is not sending a braid file transfer"));
        }
        let len = r.read_u16().await.map_err(header_cut)?;
        let mut name = vec![0u8; usize::from(len)];
        r.read_exact(&mut name).await.map_err(header_cut)?;
        let name = String::from_utf8(name).map_err(|_| protocol("the file name is not UTF-8"))?;
        let size = r.read_u64().await.map_err(header_cut)?;
        Ok(Header {
            name,
            size: (size != UNKNOWN_SIZE).then_some(size),
        })
    }
}

fn protocol(message: &str) -> anyhow::Error {
    Failure::err(Kind::Protocol, message)
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

/// The end of a transfer as one side saw it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub bytes: u64,
    pub hash: blake3::Hash,
    /// From the session's start to the peer's verdict (sender) or the
    /// file's rename (receiver).
    pub elapsed: Duration,
    /// Where the receiver put the file (`None` for stdout and on the sender).
    pub path: Option<PathBuf>,
}

/// Sends `header` and `content`, then waits for the receiver's verdict.
/// The content is read and hashed on a thread of its own, and its buffers
/// are lent to the session as they are (see [`crate::lent`]).
pub async fn send(
    session: &mut Session,
    header: &Header,
    content: impl Read + Send + 'static,
    progress: &Progress,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let skip = header.encode().len() as u64;
    let _following =
        progress.follow_acked(session.monitor(), skip, header.size.unwrap_or(u64::MAX));
    let mut reader = HashingReader::spawn(content);
    let stream = Lent::new(Some(reader.recycler()));
    if !session.use_generated_content(stream.content()) {
        bail!("the session was written to before the transfer");
    }
    if let Some(size) = header.size {
        session.announce_len(skip + size + HASH_LEN as u64);
    }
    // The header leaves with the first chunk: alone it would be the whole
    // first flight, and BBR measures the path from that flight's ACKs.
    let mut pending_header = Some(header.encode());
    let mut sent = 0u64;
    let mut next = first_piece(&mut reader, session, &stream, &mut pending_header).await;
    while let Some(piece) = next.context("reading the input")? {
        let mut len = piece.bytes().len();
        if let Some(first) = pending_header.take() {
            let n = first.len();
            len += n;
            stream.push(first, n);
        }
        sent += piece.bytes().len() as u64;
        let (buf, piece_len) = piece.into_parts();
        stream.push(buf, piece_len);
        write_lent(session, len).await?;
        next = reader.next().await;
    }
    if let Some(first) = pending_header {
        let len = first.len();
        stream.push(first, len);
        write_lent(session, len).await?;
    }
    if header.size.is_some_and(|s| s != sent) {
        return Err(Failure::err(
            Kind::Local,
            format!(
                "the input changed size while sending ({} bytes announced, {sent} read)",
                header.size.unwrap_or(0)
            ),
        ));
    }
    let hash = reader.hash().await.context("reading the input")?;
    stream.push(hash.as_bytes().to_vec(), HASH_LEN);
    write_lent(session, HASH_LEN).await?;
    // The verdict, not the ACK of our FIN, says how it ended: the receiver
    // answers only once it has read everything, FIN included.
    session.finish();
    let mut verdict = String::new();
    let read = (&mut *session)
        .take(MAX_VERDICT)
        .read_to_string(&mut verdict)
        .await;
    if let Err(e) = read {
        let total = sent + header.encode().len() as u64 + hash.as_bytes().len() as u64;
        if session.stats().bytes_acked >= total {
            return Err(Failure::err(
                Kind::ConnectionLost,
                format!(
                    "the receiver acknowledged every byte, but its verdict never arrived \
                     (it may have kept the file): {e}"
                ),
            ));
        }
        return Err(e).context("waiting for the receiver's verdict");
    }
    match verdict.trim_end().split_once(' ') {
        Some(("OK", hex)) if hex == hash.to_hex().as_str() => {
            session.abort(CLOSE_DONE, "verdict received");
            Ok(Outcome {
                bytes: sent,
                hash,
                elapsed: started.elapsed(),
                path: None,
            })
        }
        Some(("OK", hex)) => Err(Failure::err(
            Kind::Corrupted,
            format!(
                "the receiver computed another hash ({}): content corrupted",
                crate::text::escape(hex)
            ),
        )),
        _ => Err(protocol("the receiver closed without a verdict")),
    }
}

/// Counts the `len` bytes just lent to the session as written, waiting
/// while its send buffer is full.
/// The input's first piece. A slow source (a pipe) does not hold the
/// header back past [`HEADER_WAIT`]: it then goes alone, since a listener
/// closes a session that carries nothing in its first seconds.
async fn first_piece(
    reader: &mut HashingReader,
    session: &Session,
    stream: &Lent,
    header: &mut Option<Vec<u8>>,
) -> std::io::Result<Option<crate::file_io::Piece>> {
    if let Ok(first) = tokio::time::timeout(HEADER_WAIT, reader.next()).await {
        return first;
    }
    if let Some(h) = header.take() {
        let n = h.len();
        stream.push(h, n);
        write_lent(session, n).await?;
    }
    reader.next().await
}

async fn write_lent(session: &Session, len: usize) -> std::io::Result<()> {
    let mut left = len as u64;
    while left > 0 {
        left -= session.write_generated(left).await?;
    }
    Ok(())
}

/// Content bytes of `header`'s transfer the receiver has acknowledged (the
/// stream carries the header first and the hash last).
pub fn content_acknowledged(session: &Session, header: &Header) -> u64 {
    session
        .stats()
        .bytes_acked
        .saturating_sub(header.encode().len() as u64)
        .min(header.size.unwrap_or(u64::MAX))
}

/// Content bytes of a transfer the receiver has received in order (the
/// header first; `None`: not read yet, so no content either).
pub fn content_received(session: &Session, header: Option<&Header>) -> u64 {
    header.map_or(0, |h| {
        session
            .stats()
            .bytes_received
            .saturating_sub(h.encode().len() as u64)
            .min(h.size.unwrap_or(u64::MAX))
    })
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
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (Output::File(path), parent)
        };
        check_writable(&dir).with_context(|| format!("output {arg} is not writable"))?;
        Ok(out)
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

/// The last path component of a sender's name, refusing anything that
/// could escape the output directory.
fn safe_name(name: &str) -> anyhow::Result<&str> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    if base.is_empty() || base == "." || base == ".." {
        return Err(protocol(&format!(
            "the sender's file name \"{}\" is not usable",
            crate::text::escape(name)
        )));
    }
    Ok(base)
}

/// Receives one file into `output`, verifies it and tells the sender: the
/// verdict, or an abort with the reason.
pub async fn receive(
    session: &mut Session,
    output: &Output,
    overwrite: bool,
    progress: &Progress,
) -> anyhow::Result<Outcome> {
    receive_telling(session, output, overwrite, progress, &mut None).await
}

/// [`receive`], keeping the header in `header` as soon as it is read, so
/// that a failure can still say which file it was.
pub async fn receive_telling(
    session: &mut Session,
    output: &Output,
    overwrite: bool,
    progress: &Progress,
    header: &mut Option<Header>,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let result = receive_inner(session, output, overwrite, progress, started, header).await;
    match &result {
        Ok(o) => {
            // The file is verified and kept: that is the outcome, reported
            // at once. The verdict goes out reliably while the caller
            // lingers (`verdict_acknowledged`); its fate does not change ours.
            let line = format!("OK {}\n", o.hash.to_hex());
            if session.write_all(line.as_bytes()).await.is_ok() {
                session.finish();
            }
        }
        Err(e) => session.abort(CLOSE_FAILED, &close_reason("receiver failed", e)),
    }
    result
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

async fn receive_inner(
    session: &mut Session,
    output: &Output,
    overwrite: bool,
    progress: &Progress,
    started: Instant,
    seen: &mut Option<Header>,
) -> anyhow::Result<Outcome> {
    let header = Header::read(session).await?;
    *seen = Some(header.clone());
    if let Some(size) = header.size {
        progress.set_length(size);
    }
    let target = match output {
        Output::File(p) => Some(p.clone()),
        Output::Dir(d) => Some(d.join(safe_name(&header.name)?)),
        Output::Stdout | Output::Device(_) | Output::Discard => None,
    };
    match target {
        None => {
            let sink = match output {
                Output::Discard => Sink::Discard,
                Output::Device(path) => {
                    let device = std::fs::OpenOptions::new()
                        .write(true)
                        .open(path)
                        .with_context(|| format!("opening {}", path.display()))?;
                    Sink::Stream(Box::new(device))
                }
                _ => Sink::Stream(Box::new(std::io::stdout())),
            };
            let (bytes, hash) = copy_verified(session, sink, &header, progress).await?;
            Ok(Outcome {
                bytes,
                hash,
                elapsed: started.elapsed(),
                path: None,
            })
        }
        Some(target) => {
            if !overwrite && target.exists() {
                return Err(Failure::err(
                    Kind::Local,
                    format!(
                        "{} exists on the receiver (start it with --overwrite to replace \
                         files, or send it with another --name)",
                        crate::text::escape(&target.display().to_string())
                    ),
                ));
            }
            let dir = match target.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            // The size is known before the first byte: refuse a file the
            // disk cannot hold now, not once it fills.
            if let (Some(size), Some(free)) = (header.size, free_space(&dir)) {
                if size > free {
                    return Err(Failure::err(
                        Kind::Local,
                        format!(
                            "{} needs {size} bytes and {} has {free} free",
                            crate::text::escape(&header.name),
                            dir.display()
                        ),
                    ));
                }
            }
            // Removed on drop unless persisted: an incomplete transfer
            // never leaves a file that looks complete.
            let part = tempfile::Builder::new()
                .prefix(&format!(".{}.", temp_name_part(&header.name)))
                .suffix(".braid-part")
                .tempfile_in(&dir)
                .with_context(|| format!("cannot create a file in {}", dir.display()))?;
            // Synced (on disk) before the rename that makes it look complete.
            let sink = Sink::File(part.reopen()?);
            let (bytes, hash) = copy_verified(session, sink, &header, progress)
                .await
                .with_context(|| format!("writing {}", target.display()))?;
            // A received file is an ordinary file, not a private temporary.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = part
                    .as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644));
            }
            // Without --overwrite the rename refuses an existing file, even
            // one that appeared during the transfer.
            let persisted = if overwrite {
                part.persist(&target).map(drop)
            } else {
                part.persist_noclobber(&target).map(drop)
            };
            persisted.with_context(|| format!("renaming into {}", target.display()))?;
            Ok(Outcome {
                bytes,
                hash,
                elapsed: started.elapsed(),
                path: Some(target),
            })
        }
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

/// The start of the sender's (safe) name, cut at a character boundary.
fn temp_name_part(name: &str) -> &str {
    let name = safe_name(name).unwrap_or("braid");
    let mut end = name.len().min(TEMP_NAME_PART);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Copies the content to `sink`, holding back the trailing hash, and checks
/// it. The session appends the content straight into the writer thread's
/// buffers (see [`crate::filled`]); the writer holds back the last
/// [`HASH_LEN`] bytes it gets, which at the end are the hash.
async fn copy_verified(
    session: &mut Session,
    sink: Sink,
    header: &Header,
    progress: &Progress,
) -> anyhow::Result<(u64, blake3::Hash)> {
    // A buffer goes to the writer, and its bytes out of the window, once a
    // quarter of the window at most is in it, so that it fills.
    let window = usize::try_from(session.stats().recv_window / 4).unwrap_or(usize::MAX);
    let filled = Filled::new(RECV_BUFFERS, window);
    let writer = HashingWriter::spawn_with(sink, RECV_BUFFERS + 1, HASH_LEN, filled.give_back());
    filled.fill_for(writer.queue());
    // Whatever happens, the writer hears no more from us after this.
    let _abandon = Abandon(&filled);
    if !session.use_received_content(filled.content()) {
        bail!("the session's content already goes elsewhere");
    }
    loop {
        tokio::select! {
            all = session.received_all() => {
                all?;
                break;
            }
            () = filled.returned() => {
                if filled.writer_stopped() {
                    break; // The writer failed; `finish` says why.
                }
                session.received_released();
                progress.set_position(filled.written());
            }
        }
    }
    filled.close();
    let (written, hash, tail) = writer.finish_holding_back().await?;
    progress.set_position(written);
    let corrupted = |m: String| Failure::err(Kind::Corrupted, m);
    if tail.len() < HASH_LEN {
        return Err(corrupted(
            "the stream ended before the content's hash: transfer incomplete".into(),
        ));
    }
    if header.size.is_some_and(|s| s != written) {
        return Err(corrupted(format!(
            "received {written} bytes, the sender announced {}",
            header.size.unwrap_or(0)
        )));
    }
    if hash.as_bytes()[..] != tail[..] {
        return Err(corrupted(
            "BLAKE3 mismatch: the content was corrupted".into(),
        ));
    }
    Ok((written, hash))
}

/// Cuts the writer off from a transfer that ends early.
struct Abandon<'a>(&'a Filled);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn header_round_trip() {
        for h in [
            Header {
                name: "a.bin".into(),
                size: Some(12345),
            },
            Header {
                name: "stdin".into(),
                size: None,
            },
        ] {
            let bytes = h.encode();
            let got = Header::read(&mut &bytes[..]).await.unwrap();
            assert_eq!(got, h);
        }
        let err = Header::read(&mut &b"HTTP/1.1 200 OK\r\n\r\n"[..])
            .await
            .unwrap_err();
        assert!(err
            .to_string()
            .contains("not sending a braid file transfer"));
    }

    #[test]
    fn long_names_leave_room_in_the_temporary_name() {
        let long = "é".repeat(127) + "x"; // 255 bytes
        assert_eq!(long.len(), 255);
        let part = temp_name_part(&long);
        assert!(part.len() <= TEMP_NAME_PART && long.starts_with(part));
    }

    #[test]
    fn names_cannot_escape_the_directory() {
        assert_eq!(safe_name("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(safe_name("dir/file.txt").unwrap(), "file.txt");
        assert!(safe_name("..").is_err());
        assert!(safe_name("a/").is_err());
        assert!(safe_name("").is_err());
    }
}

#[cfg(test)]
#[path = "transfer_tests.rs"]
mod sending;
