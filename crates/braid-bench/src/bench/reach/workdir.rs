//! The run's working directory.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The run's files (the file sent, what was received), in
/// `$TMPDIR/braid-reach-<pid>`: removed on drop, and, if a kill -9 left
/// it, by the next run.
pub struct WorkDir(PathBuf);

const WORK_PREFIX: &str = "braid-reach-";

impl WorkDir {
    pub fn create() -> anyhow::Result<WorkDir> {
        let tmp = std::env::temp_dir();
        if let Ok(entries) = std::fs::read_dir(&tmp) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name.strip_prefix(WORK_PREFIX) else {
                    continue;
                };
                if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = tmp.join(format!("{WORK_PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot make a working directory {}", dir.display()))?;
        Ok(WorkDir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
