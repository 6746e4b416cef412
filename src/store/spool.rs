//! The spool (SPEC 7.1 item 10): what could not be written to the ledger after a lease was
//! taken waits in `.batchguard/spool/` (one file per write, mode 0600) until the next `run`
//! or `batchguard store flush` writes it. A finish is idempotent per run id, so a file
//! written twice (a crash between the write and the removal) is recorded once.

use super::{EventRow, Finish, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const DIR: &str = ".batchguard/spool";

#[derive(Debug, Serialize, Deserialize)]
pub enum Entry {
    Finish(Box<Finish>),
    Event(Box<EventRow>),
}

/// Writes one entry as its own file; the name orders entries by time of writing.
pub fn put(dir: &Path, entry: &Entry) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let (run_id, kind) = match entry {
        Entry::Finish(f) => (f.run_id.as_str(), "finish"),
        Entry::Event(e) => (e.run_id.as_str(), e.event.as_str()),
    };
    let stamp = jiff::Timestamp::now().as_microsecond();
    let safe: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{stamp:020}-{safe}-{kind}.json"));
    let text = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    f.write_all(&text)?;
    f.sync_all()?;
    Ok(path)
}

/// What a flush did.
#[derive(Debug, Default)]
pub struct Flushed {
    pub written: u64,
    /// Files that are not spool entries: left in place and named.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Writes every spooled entry to the store, oldest first, removing each once written.
/// Stops at the first store error (the rest stays spooled).
pub fn flush(dir: &Path, store: &mut dyn Store) -> Result<Flushed, StoreError> {
    let mut out = Flushed::default();
    let Ok(read) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    let mut files: Vec<PathBuf> = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let entry = match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Entry>(&b).map_err(|e| e.to_string()))
        {
            Ok(e) => e,
            Err(why) => {
                out.unreadable.push((path, why));
                continue;
            }
        };
        match &entry {
            Entry::Finish(f) => store.finish(f)?,
            Entry::Event(e) => store.append(e)?,
        }
        let _ = std::fs::remove_file(&path);
        out.written += 1;
    }
    Ok(out)
}
