//! A receiver's transfer in progress: a hidden folder beside where the
//! transfer will land (`.NAME.braid-part`), holding the entries as they
//! arrive. Nothing in it looks finished; only a verified transfer leaves
//! it, by renames. It stays when a transfer is cut off, so that the same
//! transfer sent again continues where it stopped: the receiver offers
//! the length of what it holds and its BLAKE3 hash, and the sender checks
//! that against its own files before it skips anything.

use anyhow::{bail, Context as _};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

use crate::manifest::{EntryKind, Manifest, PART_SUFFIX};

/// Longest part of a name kept in the staging folder's name, so that names
/// of up to 255 bytes (the usual limit) still leave room for the rest.
const NAME_PART: usize = 64;

/// The staging folder, held (locked) while this value lives so that two
/// receivers never fill one.
pub struct Staging {
    /// Where the transfer lands.
    dir: PathBuf,
    part: PathBuf,
    /// Whether what it holds is kept when it is dropped (a transfer of
    /// known size that brought something), whatever ended it, a signal
    /// included.
    keep: bool,
    _lock: File,
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep || bytes_under(&self.part) == 0 {
            let _ = std::fs::remove_dir_all(&self.part);
        }
    }
}

/// Bytes of the files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let Ok(children) = std::fs::read_dir(dir) else {
        return 0;
    };
    children
        .filter_map(Result::ok)
        .map(|c| match c.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&c.path()),
            Ok(t) if t.is_file() => c.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

impl Staging {
    /// Opens (or makes) the staging folder in `dir` for a transfer whose
    /// first thing lands as `first`; `resumable` if what it gets may be
    /// kept for the same transfer sent again.
    pub fn open(dir: &Path, first: &str, resumable: bool) -> anyhow::Result<Staging> {
        let part = dir.join(format!(".{}{PART_SUFFIX}", name_part(first)));
        match std::fs::symlink_metadata(&part) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("{} exists and is not a folder", part.display()),
            Err(_) => std::fs::create_dir(&part)
                .with_context(|| format!("cannot create a folder in {}", dir.display()))?,
        }
        let lock = File::open(&part)?;
        if !try_lock(&lock) {
            bail!(
                "another receiver is writing into {} (send it again once that ends)",
                part.display()
            );
        }
        Ok(Staging {
            dir: dir.to_owned(),
            part,
            keep: resumable,
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.part
    }

    /// How many bytes of `manifest`'s contents, from the start, this folder
    /// holds, and their hash so far: whole files while they have their
    /// full size, then the part of the next one.
    pub fn held(&self, manifest: &Manifest) -> io::Result<(u64, blake3::Hasher)> {
        let mut hasher = blake3::Hasher::new();
        let mut held = 0u64;
        if manifest.size().is_none() {
            return Ok((0, hasher)); // A stream cannot be resumed.
        }
        for f in manifest.files() {
            let size = f.size.unwrap_or(0);
            let path = self.part.join(&f.path);
            let len = match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_file() && m.len() <= size => m.len(),
                _ => break,
            };
            let mut file = File::open(&path)?;
            let n = crate::file_io::hash_prefix(&mut file, len, &mut hasher)?;
            held += n;
            if n < size {
                break;
            }
        }
        Ok((held, hasher))
    }

    /// Removes what it holds: the transfer starts over.
    pub fn wipe(&self) -> io::Result<()> {
        for child in std::fs::read_dir(&self.part)? {
            remove(&child?.path())?;
        }
        Ok(())
    }

    /// Removes anything that is not an entry of `manifest` (of its kind),
    /// so that what lands is exactly what was sent.
    pub fn prune(&self, manifest: &Manifest) -> io::Result<()> {
        let kinds: HashMap<&str, EntryKind> = manifest
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e.kind))
            .collect();
        prune_dir(&self.part, "", &kinds)
    }

    /// A writer of the contents from `start` bytes in: the file holding
    /// that offset is cut there, the files after it are written anew.
    pub fn writer(&self, manifest: &Manifest, start: u64) -> io::Result<TreeWriter> {
        for d in manifest.entries.iter().filter(|e| e.kind == EntryKind::Dir) {
            std::fs::create_dir_all(self.part.join(&d.path))?;
        }
        let files = manifest
            .files()
            .map(|f| (self.part.join(&f.path), f.size))
            .collect();
        TreeWriter::new(files, start)
    }

    /// Gives entries their modes and times, makes them durable, and moves
    /// each thing at the top to `dir` under its name in `names`; without
    /// `overwrite` nothing is replaced. The staging folder is removed.
    pub fn land(
        self,
        manifest: &Manifest,
        names: &[String],
        overwrite: bool,
    ) -> anyhow::Result<()> {
        crate::landing::finish_entries(&self.part, manifest)?;
        let roots: Vec<_> = manifest.roots().map(|e| e.path.clone()).collect();
        let moves: Vec<(PathBuf, PathBuf)> = roots
            .iter()
            .zip(names)
            .map(|(r, n)| (self.part.join(r), self.dir.join(n)))
            .collect();
        crate::landing::move_into_place(&moves, overwrite)?;
        std::fs::remove_dir(&self.part)
            .with_context(|| format!("removing {}", self.part.display()))?;
        Ok(())
    }

    /// Removes the staging folder and all it holds.
    pub fn discard(mut self) {
        self.keep = false;
    }
}

fn prune_dir(dir: &Path, prefix: &str, kinds: &HashMap<&str, EntryKind>) -> io::Result<()> {
    for child in std::fs::read_dir(dir)? {
        let child = child?;
        let name = child.file_name();
        let Some(name) = name.to_str() else {
            remove(&child.path())?;
            continue;
        };
        let rel = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}/{name}")
        };
        let kind = child.file_type()?;
        match kinds.get(rel.as_str()) {
            Some(EntryKind::Dir) if kind.is_dir() => prune_dir(&child.path(), &rel, kinds)?,
            Some(EntryKind::File) if kind.is_file() => {}
            _ => remove(&child.path())?,
        }
    }
    Ok(())
}

fn remove(path: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// The start of `name`, cut at a character boundary.
fn name_part(name: &str) -> &str {
    let mut end = name.len().min(NAME_PART);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

#[cfg(unix)]
fn try_lock(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: an open descriptor; the lock goes with it when it closes,
    // also when the process dies.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(not(unix))]
fn try_lock(_f: &File) -> bool {
    true
}

/// Splits the contents into the files they belong to, by the manifest's
/// sizes; never writes past them.
pub struct TreeWriter {
    files: Vec<(PathBuf, Option<u64>)>,
    current: Option<Current>,
    next: usize,
}

/// The file being written.
struct Current {
    file: File,
    /// Bytes it still takes (`u64::MAX` less what came, for a stream).
    left: u64,
    /// Where the next byte goes, and how far the disk was asked to write.
    at: u64,
    handed_to_disk: u64,
}

impl TreeWriter {
    fn new(files: Vec<(PathBuf, Option<u64>)>, mut start: u64) -> io::Result<TreeWriter> {
        let mut w = TreeWriter {
            files,
            current: None,
            next: 0,
        };
        while let Some((path, size)) = w.files.get(w.next) {
            let size = size.unwrap_or(u64::MAX);
            if start < size || size == 0 {
                let mut file = OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(path)?;
                file.set_len(start)?;
                file.seek(io::SeekFrom::Start(start))?;
                w.current = Some(Current {
                    file,
                    left: size - start,
                    at: start,
                    handed_to_disk: start,
                });
                w.next += 1;
                break;
            }
            start -= size;
            w.next += 1;
        }
        Ok(w)
    }

    /// Creates the files still missing (empty ones at the end), checks
    /// every file got all its bytes, and makes them durable.
    pub fn finish(&mut self) -> io::Result<()> {
        loop {
            if let Some(c) = self.current.take() {
                let (path, size) = &self.files[self.next - 1];
                if c.left > 0 && size.is_some() {
                    return Err(io::Error::other(format!(
                        "{} is {} bytes short",
                        path.display(),
                        c.left
                    )));
                }
            }
            if !self.open_next()? {
                return sync_all_in(&self.files);
            }
        }
    }

    fn open_next(&mut self) -> io::Result<bool> {
        let Some((path, size)) = self.files.get(self.next) else {
            return Ok(false);
        };
        self.current = Some(Current {
            file: File::create(path)?,
            left: size.unwrap_or(u64::MAX),
            at: 0,
            handed_to_disk: 0,
        });
        self.next += 1;
        Ok(true)
    }
}

impl Write for TreeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if let Some(c) = &mut self.current {
                if c.left > 0 {
                    let n = buf.len().min(usize::try_from(c.left).unwrap_or(usize::MAX));
                    let n = c.file.write(&buf[..n])?;
                    c.left -= n as u64;
                    c.at += n as u64;
                    if c.at - c.handed_to_disk >= crate::file_io::WRITEBACK_EVERY {
                        crate::file_io::start_writeback(
                            &c.file,
                            c.handed_to_disk,
                            c.at - c.handed_to_disk,
                        );
                        c.handed_to_disk = c.at;
                    }
                    return Ok(n);
                }
            }
            if !self.open_next()? {
                return Err(io::Error::other("more content than the files listed"));
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Files beyond which one `syncfs` beats a sync per file.
const SYNC_EACH_UP_TO: usize = 16;

/// Makes the files durable: each one, or for many files the whole file
/// system at once where `syncfs` exists.
fn sync_all_in(files: &[(PathBuf, Option<u64>)]) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    if let (Some((first, _)), true) = (files.first(), files.len() > SYNC_EACH_UP_TO) {
        use std::os::fd::AsRawFd;
        let f = File::open(first)?;
        // SAFETY: an open descriptor of the file system to sync.
        if unsafe { libc::syncfs(f.as_raw_fd()) } == 0 {
            return Ok(());
        }
    }
    for (path, _) in files {
        File::open(path)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Entry;

    fn manifest() -> Manifest {
        let dir = Entry {
            kind: EntryKind::Dir,
            size: Some(0),
            ..Entry::file("t", None)
        };
        Manifest {
            entries: vec![
                dir,
                Entry::file("t/a", Some(4)),
                Entry::file("t/b", Some(6)),
                Entry::file("t/c", Some(3)),
            ],
        }
    }

    #[test]
    fn what_is_held_runs_across_whole_files_into_the_next_one() {
        let out = tempfile::tempdir().unwrap();
        let s = Staging::open(out.path(), "t", true).unwrap();
        std::fs::create_dir(s.path().join("t")).unwrap();
        std::fs::write(s.path().join("t/a"), b"aaaa").unwrap();
        std::fs::write(s.path().join("t/b"), b"bb").unwrap();
        std::fs::write(s.path().join("t/c"), b"ccc").unwrap(); // After a gap: not held.
        std::fs::write(s.path().join("t/stray"), b"x").unwrap();
        let (held, hasher) = s.held(&manifest()).unwrap();
        assert_eq!(held, 6);
        assert_eq!(hasher.finalize(), blake3::hash(b"aaaabb"));
        // Going on from there: what is not listed goes, the rest is written.
        s.prune(&manifest()).unwrap();
        assert!(!s.path().join("t/stray").exists());
        let mut w = s.writer(&manifest(), held).unwrap();
        w.write_all(b"BBBBCCC").unwrap();
        w.finish().unwrap();
        assert_eq!(std::fs::read(s.path().join("t/b")).unwrap(), b"bbBBBB");
        assert_eq!(std::fs::read(s.path().join("t/c")).unwrap(), b"CCC");
        assert!(w.write(b"more").is_err(), "nothing past the listed sizes");
    }

    #[test]
    fn a_file_longer_than_listed_is_not_held_and_one_receiver_fills_a_folder() {
        let out = tempfile::tempdir().unwrap();
        let s = Staging::open(out.path(), "t", true).unwrap();
        std::fs::create_dir(s.path().join("t")).unwrap();
        std::fs::write(s.path().join("t/a"), b"aaaaa").unwrap();
        assert_eq!(s.held(&manifest()).unwrap().0, 0);
        assert!(Staging::open(out.path(), "t", true).is_err(), "locked");
        drop(s);
        let s = Staging::open(out.path(), "t", true).unwrap();
        let mut w = s.writer(&manifest(), 0).unwrap();
        w.write_all(b"aaaab").unwrap();
        let e = w.finish().unwrap_err();
        assert!(e.to_string().contains("bytes short"), "{e}");
    }
}
