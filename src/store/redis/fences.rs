//! The highest fence each working directory was given per store and job
//! (`.batchguard/fences.json`): a counter found below it is a Redis that lost data.

use std::collections::BTreeMap;
use std::path::Path;

/// `{identity: {job: fence}}`; an absent file is empty.
pub(super) fn read_fences(path: &Path) -> Result<BTreeMap<String, BTreeMap<String, i64>>, String> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("not a fences file: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// Raises the job's recorded fence to `fence` (never lowers it): read, merge and replace
/// (write a temporary file, rename) under an exclusive lock of a lock file beside it.
pub(super) fn record_fence(
    path: &Path,
    identity: &str,
    job: &str,
    fence: i64,
) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let lock_path = path.with_extension("lock");
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // SAFETY: a valid descriptor, kept open for the lock's life.
    while unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.to_string());
        }
    }
    let mut all = read_fences(path)?;
    let slot = all
        .entry(identity.to_owned())
        .or_default()
        .entry(job.to_owned())
        .or_insert(0);
    if *slot >= fence {
        return Ok(());
    }
    *slot = fence;
    let text = serde_json::to_vec_pretty(&all).map_err(|e| e.to_string())?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(&text)
        .and_then(|()| f.sync_all())
        .map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_fence_only_rises() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f/fences.json");
        record_fence(&p, "s", "j", 5).unwrap();
        record_fence(&p, "s", "j", 3).unwrap();
        record_fence(&p, "s", "k", 9).unwrap();
        let all = read_fences(&p).unwrap();
        assert_eq!(all["s"]["j"], 5);
        assert_eq!(all["s"]["k"], 9);
    }
}
