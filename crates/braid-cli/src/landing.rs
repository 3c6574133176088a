//! The last steps of a verified transfer: entries get the sender's
//! permissions and times, then move from the staging folder into place.

use anyhow::{bail, Context as _};
use std::fs::{File, FileTimes};
use std::path::{Path, PathBuf};

use crate::manifest::{EntryKind, Manifest};

/// Sets each entry's permission bits and modification time; folders last
/// and deepest first, since filling a folder changes its time.
pub fn finish_entries(part: &Path, manifest: &Manifest) -> anyhow::Result<()> {
    let (dirs, files): (Vec<_>, Vec<_>) = manifest
        .entries
        .iter()
        .partition(|e| e.kind == EntryKind::Dir);
    for e in files.iter().chain(dirs.iter().rev()) {
        let path = part.join(&e.path);
        let with = |what: &str| format!("setting the {what} of {}", path.display());
        if let Some(t) = e.mtime() {
            // A file opened to write may not be a folder: open to read.
            let f = File::open(&path).with_context(|| with("time"))?;
            f.set_times(FileTimes::new().set_modified(t))
                .with_context(|| with("time"))?;
        }
        set_mode(&path, e.mode).with_context(|| with("permissions"))?;
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o777))
}

#[cfg(not(unix))]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    let mut p = std::fs::metadata(path)?.permissions();
    p.set_readonly(mode & 0o200 == 0);
    std::fs::set_permissions(path, p)
}

/// Moves each `(from, to)`. Without `overwrite`, nothing that exists is
/// replaced and nothing moves if any target exists; with it, a file is
/// replaced at once and a folder is set aside, then removed once the new
/// one is in place.
pub fn move_into_place(moves: &[(PathBuf, PathBuf)], overwrite: bool) -> anyhow::Result<()> {
    if !overwrite {
        if let Some((_, to)) = moves.iter().find(|(_, to)| to.symlink_metadata().is_ok()) {
            bail!(exists(to));
        }
    }
    for (from, to) in moves {
        let old_dir = to.symlink_metadata().is_ok_and(|m| m.is_dir());
        if !overwrite {
            rename_noreplace(from, to).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    anyhow::anyhow!(exists(to))
                } else {
                    anyhow::Error::from(e).context(format!("renaming into {}", to.display()))
                }
            })?;
        } else if old_dir {
            let aside = set_aside_name(to);
            std::fs::rename(to, &aside)
                .with_context(|| format!("moving {} aside", to.display()))?;
            std::fs::rename(from, to).with_context(|| format!("renaming into {}", to.display()))?;
            std::fs::remove_dir_all(&aside)
                .with_context(|| format!("removing the old {}", to.display()))?;
        } else {
            std::fs::rename(from, to).with_context(|| format!("renaming into {}", to.display()))?;
        }
    }
    Ok(())
}

fn exists(to: &Path) -> String {
    format!(
        "{} exists on the receiver (start it with --overwrite to replace it, or send with \
         another --name)",
        braid::text::escape(&to.display().to_string())
    )
}

fn set_aside_name(to: &Path) -> PathBuf {
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned());
    to.with_file_name(format!(
        ".{}.braid-replaced-{}",
        name.unwrap_or_default(),
        std::process::id()
    ))
}

/// A rename that fails if `to` exists, even if it appeared just now.
#[cfg(target_os = "linux")]
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::other("a path with a NUL"))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.symlink_metadata().is_ok() {
        return Err(std::io::ErrorKind::AlreadyExists.into());
    }
    std::fs::rename(from, to)
}
