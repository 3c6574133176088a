//! The sender's side of a manifest: what the command line names, walked
//! into entries, and their contents read back as one stream from any
//! offset (where a resumed transfer starts).

use anyhow::{bail, Context as _};
use std::collections::HashSet;
use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::manifest::{Entry, EntryKind, Manifest, MAX_ENTRIES};

/// What a send carries and where each file's content comes from.
pub struct Outgoing {
    pub manifest: Manifest,
    /// The local path of each file entry, in order.
    pub sources: Vec<PathBuf>,
    /// Symbolic links found inside folders and left out.
    pub skipped_links: u64,
    /// Sockets, FIFOs and devices found inside folders and left out.
    pub skipped_special: u64,
}

impl Outgoing {
    /// Walks `paths` (files or folders; symbolic links named here are
    /// followed, those found inside folders only with `follow`). `name`
    /// renames the one thing sent.
    pub fn collect(
        paths: &[PathBuf],
        name: Option<&str>,
        follow: bool,
    ) -> anyhow::Result<Outgoing> {
        if name.is_some() && paths.len() > 1 {
            bail!(
                "--name names one file or folder; {} were given",
                paths.len()
            );
        }
        let mut out = Outgoing {
            manifest: Manifest {
                entries: Vec::new(),
            },
            sources: Vec::new(),
            skipped_links: 0,
            skipped_special: 0,
        };
        let mut roots = HashSet::new();
        for path in paths {
            let meta = std::fs::metadata(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            let root = match name {
                Some(n) => n.to_owned(),
                None => own_name(path)?,
            };
            if !roots.insert(root.clone()) {
                bail!("two of the things to send are named {root}; send them separately");
            }
            if meta.is_dir() {
                let mut chain = Vec::new();
                out.walk_dir(path, root, &meta, follow, &mut chain)?;
            } else if meta.is_file() {
                out.push_file(path, root, &meta);
            } else {
                bail!("{} is neither a file nor a folder", path.display());
            }
        }
        out.manifest
            .check()
            .with_context(|| "cannot send this as a braid transfer")?;
        Ok(out)
    }

    fn push_file(&mut self, path: &Path, name: String, meta: &Metadata) {
        self.manifest.entries.push(Entry {
            path: name,
            kind: EntryKind::File,
            mode: mode_of(meta),
            mtime: mtime_of(meta),
            size: Some(meta.len()),
        });
        self.sources.push(path.to_owned());
    }

    /// Adds `dir` as `name` and everything under it, in name order (the
    /// same order every time, which resuming relies on).
    fn walk_dir(
        &mut self,
        dir: &Path,
        name: String,
        meta: &Metadata,
        follow: bool,
        chain: &mut Vec<(u64, u64)>,
    ) -> anyhow::Result<()> {
        let id = dev_ino(meta);
        if chain.contains(&id) {
            self.skipped_links += 1; // A link back up the tree: a loop.
            return Ok(());
        }
        self.manifest.entries.push(Entry {
            path: name.clone(),
            kind: EntryKind::Dir,
            mode: mode_of(meta),
            mtime: mtime_of(meta),
            size: Some(0),
        });
        let mut children: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .collect::<io::Result<_>>()
            .with_context(|| format!("cannot list {}", dir.display()))?;
        children.sort_by_key(std::fs::DirEntry::file_name);
        chain.push(id);
        for child in children {
            let path = child.path();
            let child_name = format!("{name}/{}", utf8_name(&path)?);
            let mut meta = child.metadata()?;
            if meta.file_type().is_symlink() {
                if !follow {
                    self.skipped_links += 1;
                    continue;
                }
                match std::fs::metadata(&path) {
                    Ok(m) => meta = m,
                    Err(_) => {
                        self.skipped_links += 1; // Dangling.
                        continue;
                    }
                }
            }
            if self.manifest.entries.len() >= MAX_ENTRIES as usize {
                bail!("more than {MAX_ENTRIES} files and folders; send a tar stream instead");
            }
            if meta.is_dir() {
                self.walk_dir(&path, child_name, &meta, follow, chain)?;
            } else if meta.is_file() {
                self.push_file(&path, child_name, &meta);
            } else {
                self.skipped_special += 1;
            }
        }
        chain.pop();
        Ok(())
    }

    /// A reader of every file's content in turn, from `offset` bytes in.
    pub fn contents_from(&self, offset: u64) -> io::Result<Contents> {
        let sizes = self.manifest.files().map(|f| f.size.unwrap_or(0));
        let files: Vec<(PathBuf, u64)> = self.sources.iter().cloned().zip(sizes).collect();
        let mut c = Contents {
            files,
            next: 0,
            current: None,
        };
        c.skip_to(offset)?;
        Ok(c)
    }
}

/// The files' contents one after another, each exactly as long as the
/// manifest says: a file that shrank is an error, one that grew is cut
/// (the size was promised).
pub struct Contents {
    files: Vec<(PathBuf, u64)>,
    next: usize,
    current: Option<(io::Take<File>, PathBuf)>,
}

impl Contents {
    fn skip_to(&mut self, mut offset: u64) -> io::Result<()> {
        while let Some((path, size)) = self.files.get(self.next) {
            if offset < *size || (offset == 0 && *size == 0) {
                let mut f = open(path)?;
                f.seek(SeekFrom::Start(offset))?;
                self.current = Some((f.take(size - offset), path.clone()));
                self.next += 1;
                return Ok(());
            }
            offset -= size;
            self.next += 1;
        }
        Ok(())
    }
}

impl Read for Contents {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some((file, path)) = &mut self.current {
                let n = file.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                if file.limit() > 0 {
                    return Err(io::Error::other(format!(
                        "{} shrank while it was being sent",
                        path.display()
                    )));
                }
                self.current = None;
            }
            let Some((path, size)) = self.files.get(self.next) else {
                return Ok(0);
            };
            self.current = Some((open(path)?.take(*size), path.clone()));
            self.next += 1;
        }
    }
}

fn open(path: &Path) -> io::Result<File> {
    File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The last component of a path named on the command line (`.` and `..`
/// name the folder they stand for).
fn own_name(path: &Path) -> anyhow::Result<String> {
    let absolute;
    let named = match path.file_name() {
        Some(_) => path,
        None => {
            absolute = std::fs::canonicalize(path)?;
            &absolute
        }
    };
    match named.file_name() {
        Some(_) => utf8_name(named),
        None => Ok("root".to_owned()),
    }
}

fn utf8_name(path: &Path) -> anyhow::Result<String> {
    let name = path.file_name().unwrap_or_default();
    name.to_str().map(str::to_owned).with_context(|| {
        format!(
            "{} has a name that is not UTF-8; rename it or send a tar stream",
            path.display()
        )
    })
}

#[cfg(unix)]
fn mode_of(meta: &Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o777
}

#[cfg(not(unix))]
fn mode_of(meta: &Metadata) -> u32 {
    if meta.is_dir() {
        0o755
    } else if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

fn mtime_of(meta: &Metadata) -> Option<(i64, u32)> {
    let t = meta.modified().ok()?;
    Some(match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (i64::try_from(d.as_secs()).ok()?, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            // Before 1970: whole seconds, rounded down.
            let secs = i64::try_from(d.as_secs()).ok()?;
            if d.subsec_nanos() == 0 {
                (-secs, 0)
            } else {
                (-secs - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    })
}

#[cfg(unix)]
fn dev_ino(meta: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn dev_ino(_meta: &Metadata) -> (u64, u64) {
    (0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("top");
        std::fs::create_dir_all(root.join("b/empty")).unwrap();
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        std::fs::write(root.join("b/c.bin"), vec![7u8; 3000]).unwrap();
        std::fs::write(root.join("b/zero"), b"").unwrap();
        t
    }

    #[test]
    fn a_folder_is_walked_in_name_order_and_read_back_from_any_offset() {
        let t = tree();
        let out = Outgoing::collect(&[t.path().join("top")], None, false).unwrap();
        let paths: Vec<_> = out
            .manifest
            .entries
            .iter()
            .map(|e| e.path.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "top",
                "top/a.txt",
                "top/b",
                "top/b/c.bin",
                "top/b/empty",
                "top/b/zero"
            ]
        );
        assert_eq!(out.manifest.size(), Some(3005));
        let mut all = Vec::new();
        out.contents_from(0).unwrap().read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 3005);
        for at in [0u64, 3, 5, 6, 3004, 3005] {
            let mut rest = Vec::new();
            out.contents_from(at)
                .unwrap()
                .read_to_end(&mut rest)
                .unwrap();
            assert_eq!(rest, all[at as usize..], "from {at}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_inside_folders_are_left_out_unless_followed() {
        let t = tree();
        let top = t.path().join("top");
        std::os::unix::fs::symlink("/etc", top.join("etc-link")).unwrap();
        std::os::unix::fs::symlink("..", top.join("b/up")).unwrap();
        let out = Outgoing::collect(std::slice::from_ref(&top), None, false).unwrap();
        assert_eq!(out.skipped_links, 2);
        assert!(out
            .manifest
            .entries
            .iter()
            .all(|e| !e.path.contains("link")));
        // Followed, a link back up the tree is a loop and stays out.
        std::fs::remove_file(top.join("etc-link")).unwrap();
        let out = Outgoing::collect(&[top], None, true).unwrap();
        assert_eq!(out.skipped_links, 1);
    }

    #[test]
    fn a_file_that_shrank_is_an_error() {
        let t = tree();
        let out = Outgoing::collect(&[t.path().join("top")], None, false).unwrap();
        std::fs::write(t.path().join("top/b/c.bin"), b"short").unwrap();
        let mut all = Vec::new();
        let err = out
            .contents_from(0)
            .unwrap()
            .read_to_end(&mut all)
            .unwrap_err();
        assert!(err.to_string().contains("shrank"), "{err}");
    }

    #[test]
    fn two_things_of_one_name_are_refused() {
        let t = tree();
        std::fs::create_dir(t.path().join("other")).unwrap();
        std::fs::write(t.path().join("other/a.txt"), b"x").unwrap();
        let a = t.path().join("top/a.txt");
        let b = t.path().join("other/a.txt");
        assert!(Outgoing::collect(&[a.clone(), b], None, false).is_err());
        assert!(Outgoing::collect(&[a.clone(), a], Some("n"), false).is_err());
    }
}
