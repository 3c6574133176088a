//! What a transfer carries: one file or stream, or files and folders, as a
//! list of entries whose contents follow one another in the stream.
//!
//! Every entry's path is relative and `/`-separated; a folder comes before
//! what it holds. A receiver checks all of it before it creates anything:
//! no absolute path, no `.` or `..` component, no entry twice, no entry
//! inside a file, nothing but files and folders, and every number bounded.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::failure::{Failure, Kind as FailureKind};

/// Longest encoded manifest a receiver reads (about 100,000 entries with
/// long paths).
pub const MAX_MANIFEST: u32 = 16 << 20;
/// Most entries in one transfer.
pub const MAX_ENTRIES: u32 = 1 << 20;
/// Longest path of an entry, in bytes (Linux's PATH_MAX).
const MAX_PATH: usize = 4096;
/// Longest component of a path (the usual file-system limit).
const MAX_COMPONENT: usize = 255;
/// A size the sender does not know yet (a stream such as stdin).
const UNKNOWN_SIZE: u64 = u64::MAX;
/// The suffix of a receiver's partial transfer: no entry may end with it.
pub const PART_SUFFIX: &str = ".braid-part";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
    /// Permission bits (`0o777` at most; never set-id or sticky bits).
    pub mode: u32,
    /// Modification time as seconds and nanoseconds since 1970 (`None`:
    /// unknown, as for a stream).
    pub mtime: Option<(i64, u32)>,
    /// A file's size (`None`: a stream of unknown length); 0 for a folder.
    pub size: Option<u64>,
}

impl Entry {
    /// A file or stream named `name`, as one file.
    pub fn file(name: &str, size: Option<u64>) -> Entry {
        Entry {
            path: name.to_owned(),
            kind: EntryKind::File,
            mode: 0o644,
            mtime: None,
            size,
        }
    }

    pub fn mtime(&self) -> Option<SystemTime> {
        let (secs, nanos) = self.mtime?;
        let since = Duration::new(secs.unsigned_abs(), nanos.min(999_999_999));
        if secs >= 0 {
            UNIX_EPOCH.checked_add(since)
        } else {
            UNIX_EPOCH.checked_sub(since)
        }
    }

    /// Whether this entry is at the top (not inside a folder).
    pub fn is_root(&self) -> bool {
        !self.path.contains('/')
    }
}

/// The entries of one transfer, in the order their contents are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub entries: Vec<Entry>,
}

impl Manifest {
    pub fn single(name: &str, size: Option<u64>) -> Manifest {
        Manifest {
            entries: vec![Entry::file(name, size)],
        }
    }

    /// The entries at the top: what lands in the output directory.
    pub fn roots(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.is_root())
    }

    /// The files, in the order of their contents.
    pub fn files(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.kind == EntryKind::File)
    }

    /// The bytes of content in all (`None` while a stream's is unknown).
    pub fn size(&self) -> Option<u64> {
        self.files()
            .try_fold(0u64, |sum, f| sum.checked_add(f.size?))
    }

    /// One file or stream, as transfers were before folders.
    pub fn is_single_file(&self) -> bool {
        self.entries.len() == 1 && self.entries[0].kind == EntryKind::File
    }

    /// How to name the transfer to a user: the one thing at the top, or
    /// the first and how many more.
    pub fn label(&self) -> String {
        let mut roots = self.roots();
        let first = roots.next().map_or("", |e| e.path.as_str());
        match roots.count() {
            0 => first.to_owned(),
            n => format!("{first} and {n} more"),
        }
    }

    /// BLAKE3 of the encoded list: both ends compute the same.
    pub fn hash(&self) -> blake3::Hash {
        blake3::hash(&self.encode())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for e in &self.entries {
            body.push(match e.kind {
                EntryKind::File => 0,
                EntryKind::Dir => 1,
            });
            body.extend_from_slice(&(e.path.len() as u16).to_be_bytes());
            body.extend_from_slice(e.path.as_bytes());
            body.extend_from_slice(&e.mode.to_be_bytes());
            let (secs, nanos) = e.mtime.unwrap_or((i64::MIN, 0));
            body.extend_from_slice(&secs.to_be_bytes());
            body.extend_from_slice(&nanos.to_be_bytes());
            body.extend_from_slice(&e.size.unwrap_or(UNKNOWN_SIZE).to_be_bytes());
        }
        let mut out = Vec::with_capacity(4 + body.len());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses and checks a body of at most [`MAX_MANIFEST`] bytes (its
    /// length already read).
    pub fn decode(body: &[u8]) -> anyhow::Result<Manifest> {
        let mut r = Cursor(body);
        let count = r.u32()?;
        if count == 0 || count > MAX_ENTRIES {
            return Err(protocol(format!("the sender listed {count} entries")));
        }
        // Each entry takes at least 27 bytes: a count beyond what the body
        // holds is refused before anything is allocated for it.
        if u64::from(count) * 27 > body.len() as u64 {
            return Err(protocol("the manifest is shorter than its entries".into()));
        }
        let mut entries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let kind = match r.u8()? {
                0 => EntryKind::File,
                1 => EntryKind::Dir,
                k => return Err(protocol(format!("unknown entry kind {k}"))),
            };
            let len = usize::from(r.u16()?);
            let path = String::from_utf8(r.take(len)?.to_vec())
                .map_err(|_| protocol("a path is not UTF-8".into()))?;
            let mode = r.u32()? & 0o777;
            let secs = r.i64()?;
            let nanos = r.u32()?;
            let size = r.u64()?;
            entries.push(Entry {
                path,
                kind,
                mode,
                mtime: (secs != i64::MIN && nanos < 1_000_000_000).then_some((secs, nanos)),
                size: match kind {
                    EntryKind::Dir => Some(0),
                    EntryKind::File => (size != UNKNOWN_SIZE).then_some(size),
                },
            });
        }
        if !r.0.is_empty() {
            return Err(protocol("the manifest has bytes after its entries".into()));
        }
        let manifest = Manifest { entries };
        manifest.check()?;
        Ok(manifest)
    }

    /// Refuses anything that could escape the output directory, collide,
    /// or overflow a count.
    pub fn check(&self) -> anyhow::Result<()> {
        let mut seen: HashSet<&str> = HashSet::with_capacity(self.entries.len());
        let mut dirs: HashSet<&str> = HashSet::new();
        for e in &self.entries {
            check_path(&e.path)?;
            if e.is_root() && e.path.ends_with(PART_SUFFIX) {
                return Err(protocol(format!(
                    "\"{}\" ends with {PART_SUFFIX}, the name of a partial transfer",
                    braid::text::escape(&e.path)
                )));
            }
            if let Some((parent, _)) = e.path.rsplit_once('/') {
                if !dirs.contains(parent) {
                    return Err(protocol(format!(
                        "\"{}\" comes before its folder",
                        braid::text::escape(&e.path)
                    )));
                }
            }
            if !seen.insert(&e.path) {
                return Err(protocol(format!(
                    "\"{}\" is listed twice",
                    braid::text::escape(&e.path)
                )));
            }
            if e.kind == EntryKind::Dir {
                dirs.insert(&e.path);
            }
        }
        if self.entries.len() > 1 && self.files().any(|f| f.size.is_none()) {
            return Err(protocol(
                "a stream of unknown size must travel alone".into(),
            ));
        }
        if self.files().all(|f| f.size.is_some()) && self.size().is_none() {
            return Err(protocol("the sizes add up to more than 2^64 bytes".into()));
        }
        Ok(())
    }
}

/// One relative path: components that are plain names.
fn check_path(path: &str) -> anyhow::Result<()> {
    let bad = |why: &str| {
        Err(protocol(format!(
            "the path \"{}\" {why}",
            braid::text::escape(path)
        )))
    };
    if path.is_empty() || path.len() > MAX_PATH {
        return bad("is empty or too long");
    }
    for part in path.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return bad("is not a plain relative path");
        }
        if part.len() > MAX_COMPONENT {
            return bad("has a name too long for a file system");
        }
        if part.contains(['\\', '\0']) {
            return bad("holds a backslash or a NUL");
        }
    }
    Ok(())
}

fn protocol(message: String) -> anyhow::Error {
    Failure::err(FailureKind::Protocol, message)
}

/// Reads big-endian numbers off a byte slice, failing at its end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(protocol("the manifest ends inside an entry".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> anyhow::Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> anyhow::Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> anyhow::Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> anyhow::Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> anyhow::Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(path: &str) -> Entry {
        Entry {
            path: path.into(),
            kind: EntryKind::Dir,
            mode: 0o755,
            mtime: Some((1_700_000_000, 5)),
            size: Some(0),
        }
    }

    fn file(path: &str, size: u64) -> Entry {
        Entry {
            mode: 0o600,
            mtime: Some((-5, 0)),
            ..Entry::file(path, Some(size))
        }
    }

    fn decoded(m: &Manifest) -> anyhow::Result<Manifest> {
        let bytes = m.encode();
        Manifest::decode(&bytes[4..])
    }

    #[test]
    fn a_tree_round_trips() {
        let m = Manifest {
            entries: vec![
                dir("a"),
                file("a/x", 3),
                dir("a/b"),
                file("a/b/y", 0),
                file("z", 9),
            ],
        };
        assert_eq!(decoded(&m).unwrap(), m);
        assert_eq!(m.size(), Some(12));
        assert_eq!(m.label(), "a and 1 more");
        assert_eq!(m.roots().count(), 2);
        let stream = Manifest::single("stdin-x", None);
        assert_eq!(decoded(&stream).unwrap(), stream);
        assert_eq!(stream.size(), None);
    }

    #[test]
    fn paths_that_could_escape_are_refused() {
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "./a",
            "a/.",
            "a\\..\\b",
            "",
        ] {
            let m = Manifest {
                entries: vec![dir("a"), file(bad, 1)],
            };
            assert!(decoded(&m).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn inconsistent_trees_are_refused() {
        let cases = [
            vec![file("a/x", 1)],                        // no folder a
            vec![file("a", 1), file("a/x", 1)],          // inside a file
            vec![dir("a"), dir("a")],                    // twice
            vec![file("x", 1), file("x", 2)],            // twice
            vec![file(".x.braid-part", 1)],              // a partial's name
            vec![file("x", u64::MAX - 1), file("y", 2)], // overflows
            vec![Entry::file("s", None), file("y", 2)],  // a stream beside files
        ];
        for entries in cases {
            let m = Manifest { entries };
            assert!(decoded(&m).is_err(), "{m:?} accepted");
        }
    }

    #[test]
    fn counts_and_lengths_from_the_peer_are_bounded() {
        // A count far beyond the body: refused before allocating.
        let mut body = u32::MAX.to_be_bytes().to_vec();
        body.extend_from_slice(&[0; 64]);
        assert!(Manifest::decode(&body).is_err());
        let mut body = 1000u32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0; 64]);
        assert!(Manifest::decode(&body).is_err());
        // A path length past the end.
        let mut bytes = Manifest::single("abc", Some(1)).encode();
        bytes[9] = 200;
        assert!(Manifest::decode(&bytes[4..]).is_err());
        // Trailing bytes.
        let mut bytes = Manifest::single("abc", Some(1)).encode();
        bytes.push(0);
        assert!(Manifest::decode(&bytes[4..]).is_err());
    }

    #[test]
    fn modes_keep_permission_bits_only() {
        let mut m = Manifest::single("x", Some(1));
        m.entries[0].mode = 0o4777;
        assert_eq!(decoded(&m).unwrap().entries[0].mode, 0o777);
    }
}
