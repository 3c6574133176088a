//! The sending end: the manifest, the receiver's offer, the contents from
//! where the receiver needs them, the hash, then the verdict.

use anyhow::{bail, Context as _};
use braid::Session;
use std::io::Read;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

use super::{protocol, Outcome, HASH_LEN, MAGIC, MAX_VERDICT};
use crate::close_codes::CLOSE_DONE;
use crate::failure::{Failure, Kind};
use crate::file_io::{hash_prefix, HashingReader};
use crate::lent::Lent;
use crate::manifest::Manifest;
use crate::outgoing::Outgoing;
use crate::progress::Progress;

/// How long the start waits for the input's first bytes to travel with:
/// well within a listener's first-data timeout (5 s).
pub(super) const HEADER_WAIT: Duration = Duration::from_secs(1);

/// Where the contents come from.
pub enum Source {
    /// A reader read once from its start (stdin, generated data): a
    /// transfer of it always starts over.
    Once(Box<dyn Read + Send>),
    /// Files on disk, read from wherever the receiver's offer says.
    Files(Outgoing),
}

/// Contents smaller than this start at once instead of waiting a round
/// trip for the receiver's offer: resuming them could save little more
/// than that round trip, and only after an interruption, while every
/// transfer would pay the wait.
const WAIT_FOR_OFFER_FROM: u64 = 256 << 10;

/// Sends `manifest` and the contents of `source`, then waits for the
/// receiver's verdict. The contents are read and hashed on a thread of
/// their own, and their buffers lent to the session as they are (see
/// [`crate::lent`]). `start_at_out` is set to where the contents start once
/// that is known (past what an earlier transfer brought).
pub async fn send(
    session: &mut Session,
    manifest: &Manifest,
    source: Source,
    progress: &Progress,
    start_at_out: &mut u64,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let size = manifest.size();
    let mut preamble = MAGIC.to_vec();
    preamble.extend_from_slice(&manifest.encode());
    let stream = Lent::new(None);
    if !session.use_generated_content(stream.content()) {
        bail!("the session was written to before the transfer");
    }
    let len = preamble.len();
    stream.push(preamble, len);
    write_lent(session, len).await?;
    // A one-shot input, or a small one, starts at 0 whatever the receiver
    // holds: its contents follow the manifest at once, and the offer is
    // read later.
    let at_once =
        matches!(source, Source::Once(_)) || size.is_some_and(|s| s < WAIT_FOR_OFFER_FROM);
    let offer = if at_once {
        (0, None)
    } else {
        read_offer(session).await?
    };
    let (start, hasher, input) = start_at(offer, size, source).await?;
    *start_at_out = start;
    // The start and the content travel together from here: 8 bytes of
    // start, the content from there, then the hash.
    let skip = len as u64 + 8;
    if let Some(size) = size {
        session.announce_len(skip + (size - start) + HASH_LEN as u64);
    }
    let _following =
        progress.follow_acked(session.monitor(), skip, start, size.unwrap_or(u64::MAX));
    let mut reader = HashingReader::spawn_seeded(input, hasher);
    stream.give_back_to(reader.recycler());
    let mut pending_start = Some(start.to_be_bytes().to_vec());
    let mut sent = 0u64;
    let mut next = first_piece(&mut reader, session, &stream, &mut pending_start).await;
    while let Some(piece) = next.context("reading the input")? {
        let mut len = piece.bytes().len();
        if let Some(first) = pending_start.take() {
            len += first.len();
            stream.push(first, 8);
        }
        sent += piece.bytes().len() as u64;
        let (buf, piece_len) = piece.into_parts();
        stream.push(buf, piece_len);
        write_lent(session, len).await?;
        next = reader.next().await;
    }
    if let Some(first) = pending_start {
        stream.push(first, 8);
        write_lent(session, 8).await?;
    }
    if size.is_some_and(|s| s != start + sent) {
        return Err(Failure::err(
            Kind::Local,
            format!(
                "the input changed size while sending ({} bytes announced, {} read)",
                size.unwrap_or(0),
                start + sent
            ),
        ));
    }
    let hash = reader.hash().await.context("reading the input")?;
    stream.push(hash.as_bytes().to_vec(), HASH_LEN);
    write_lent(session, HASH_LEN).await?;
    let total = skip + sent + HASH_LEN as u64;
    if at_once {
        read_offer(session).await?;
    }
    verdict(session, total, hash).await?;
    Ok(Outcome {
        bytes: start + sent,
        resumed: start,
        hash,
        elapsed: started.elapsed(),
        path: None,
    })
}

/// The receiver's offer: how many bytes of the contents it already holds,
/// and their hash.
async fn read_offer(session: &mut Session) -> anyhow::Result<(u64, Option<blake3::Hash>)> {
    let line = read_line(session, 128)
        .await
        .context("waiting for the receiver to say what it holds")?;
    let mut words = line.split(' ');
    let (Some("FROM"), Some(held)) = (words.next(), words.next()) else {
        return Err(protocol("the receiver did not say where to start"));
    };
    let held: u64 = held
        .parse()
        .map_err(|_| protocol("the receiver's offer is not a number"))?;
    let hash = match words.next() {
        Some(hex) => Some(
            blake3::Hash::from_hex(hex)
                .map_err(|_| protocol("the receiver's offer has no hash"))?,
        ),
        None => None,
    };
    Ok((held, hash))
}

/// One line of at most `max` bytes, without its newline; reads no further.
async fn read_line(session: &mut Session, max: usize) -> anyhow::Result<String> {
    let mut line = Vec::new();
    loop {
        let b = session.read_u8().await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                protocol("the receiver closed without answering")
            } else {
                anyhow::Error::from(e)
            }
        })?;
        if b == b'\n' {
            break;
        }
        if line.len() == max {
            return Err(protocol("the receiver's answer is too long"));
        }
        line.push(b);
    }
    String::from_utf8(line).map_err(|_| protocol("the receiver's answer is not text"))
}

/// Where to start: at the receiver's offer if its hash is that of our
/// first bytes (checked here, on our own files), else from the beginning.
/// The hasher has seen what is skipped.
async fn start_at(
    (held, theirs): (u64, Option<blake3::Hash>),
    size: Option<u64>,
    source: Source,
) -> anyhow::Result<(u64, blake3::Hasher, Box<dyn Read + Send>)> {
    let fresh = blake3::Hasher::new();
    let files = match source {
        Source::Once(input) => return Ok((0, fresh, input)),
        Source::Files(files) => files,
    };
    let checkable = held > 0 && size.is_some_and(|s| held <= s) && theirs.is_some();
    let task = tokio::task::spawn_blocking(move || -> std::io::Result<_> {
        if checkable {
            let mut hasher = blake3::Hasher::new();
            let n = hash_prefix(&mut files.contents_from(0)?, held, &mut hasher)?;
            if n == held && Some(hasher.finalize()) == theirs {
                let rest: Box<dyn Read + Send> = Box::new(files.contents_from(held)?);
                return Ok((held, hasher, rest));
            }
        }
        let all: Box<dyn Read + Send> = Box::new(files.contents_from(0)?);
        Ok((0, blake3::Hasher::new(), all))
    });
    task.await?.context("reading the input")
}

/// Waits for the receiver's verdict on `hash`; `total` is every byte we
/// sent, to tell a lost verdict from a lost transfer.
async fn verdict(session: &mut Session, total: u64, hash: blake3::Hash) -> anyhow::Result<()> {
    // The verdict, not the ACK of our FIN, says how it ended: the receiver
    // answers only once it has read everything, FIN included.
    session.finish();
    let mut verdict = String::new();
    let read = (&mut *session)
        .take(MAX_VERDICT)
        .read_to_string(&mut verdict)
        .await;
    if let Err(e) = read {
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
            Ok(())
        }
        Some(("OK", hex)) => Err(Failure::err(
            Kind::Corrupted,
            format!(
                "the receiver computed another hash ({}): content corrupted",
                braid::text::escape(hex)
            ),
        )),
        _ => Err(protocol("the receiver closed without a verdict")),
    }
}

/// The input's first piece. A slow source (a pipe) does not hold the start
/// back past [`HEADER_WAIT`]: it then goes alone, so that the receiver
/// hears from us while the input is silent.
async fn first_piece(
    reader: &mut HashingReader,
    session: &Session,
    stream: &Lent,
    start: &mut Option<Vec<u8>>,
) -> std::io::Result<Option<crate::file_io::Piece>> {
    if let Ok(first) = tokio::time::timeout(HEADER_WAIT, reader.next()).await {
        return first;
    }
    if let Some(s) = start.take() {
        stream.push(s, 8);
        write_lent(session, 8).await?;
    }
    reader.next().await
}

/// Counts the `len` bytes just lent to the session as written, waiting
/// while its send buffer is full.
async fn write_lent(session: &Session, len: usize) -> std::io::Result<()> {
    let mut left = len as u64;
    while left > 0 {
        left -= session.write_generated(left).await?;
    }
    Ok(())
}
