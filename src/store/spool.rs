//! The spool (SPEC 7.1 item 10): what could not be written to the ledger after a lease was
//! taken waits in `.batchguard/spool/` (one file per write, mode 0600) until the next `run`
//! or `batchguard store flush` writes it. Every run flushes at its start, so several
//! processes often flush one spool at once (SPEC 7.1 item 23): each entry is written by the
//! one process that holds its file's `flock` and still finds the file in place, and the
//! store writes a run's finish once per run id under its own lock or constraint, so a
//! crash between the write and the removal still records it once.
//!
//! An entry for a ledger apart from the store (`--ledger`) names that ledger, so whoever
//! flushes it (the next `run`, whatever its `--ledger`, or `store flush`) writes it where
//! it was meant to go. A file that cannot be read as an entry is reported and kept.

use super::ledger::{self, Batch, Ledger};
use super::{EventRow, Finish, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub const DIR: &str = ".batchguard/spool";

/// The largest spool file read; a larger one is not an entry `run` wrote.
const MAX_ENTRY: u64 = 1 << 30;

#[derive(Debug, Serialize, Deserialize)]
pub enum Entry {
    /// For the store (with the ledger writes too when `Finish::ledger`).
    Finish(Box<Finish>),
    /// For the store's own ledger tables.
    Event(Box<EventRow>),
    /// For the ledger `ledger` names (a `--ledger` apart from the store).
    Ledger { ledger: String, batch: Box<Batch> },
    /// A finish the store did not take, with a ledger apart: the store first, then that
    /// ledger gets what the store's answer says (a superseded attempt's `end` is
    /// `superseded`, SPEC 7.1 item 24), so a verdict never reaches the ledger before the
    /// store has judged it.
    FinishApart { ledger: String, fin: Box<Finish> },
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
        Entry::Ledger { batch, .. } => (batch.run_id.as_str(), "ledger"),
        Entry::FinishApart { fin, .. } => (fin.run_id.as_str(), "finish-apart"),
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
    /// Files that are not spool entries (corrupt, truncated, too large): left in place
    /// and named.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Entries for a ledger apart that did not take them: left in place, with why.
    pub failed: Vec<(PathBuf, String)>,
}

/// The entry file, opened and locked (`flock`, exclusive, non-blocking) by this process;
/// `None` when another process holds it or has already written and removed it. Checking
/// that the path still names the locked file after the lock is taken closes the window
/// where a second flusher opened the file before the first removed it.
fn claim(path: &Path) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: flock on a descriptor this function owns; the lock goes with the file.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return None;
    }
    let (held, now) = (f.metadata().ok()?, std::fs::metadata(path).ok()?);
    (held.ino() == now.ino() && held.dev() == now.dev()).then_some(f)
}

fn read_entry(f: &std::fs::File) -> Result<Entry, String> {
    let mut bytes = Vec::new();
    f.take(MAX_ENTRY + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_ENTRY {
        return Err(format!("larger than {} MiB", MAX_ENTRY >> 20));
    }
    serde_json::from_slice::<Entry>(&bytes).map_err(|e| e.to_string())
}

/// Writes every spooled entry, oldest first, removing each once written: store entries to
/// `store`, ledger entries to the ledger each names. Stops at the first store error (the
/// rest stays spooled); a ledger apart that fails keeps its entries (all later ones too,
/// so its events stay in order) and the flush goes on with the others.
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
    let mut ledgers: HashMap<String, Result<Box<dyn Ledger>, String>> = HashMap::new();
    for path in files {
        let Some(file) = claim(&path) else {
            continue;
        };
        let entry = match read_entry(&file) {
            Ok(e) => e,
            Err(why) => {
                out.unreadable.push((path, why));
                continue;
            }
        };
        match &entry {
            Entry::Finish(f) => {
                store.finish(f)?;
            }
            Entry::Event(e) => store.append(e)?,
            Entry::FinishApart { ledger: src, fin } => {
                let done = store.finish(fin)?;
                let mut fin = fin.clone();
                super::with_claims(store, &mut fin)?;
                // The store has settled it; the ledger's part waits as an entry of its own
                // when that ledger does not take it now.
                let batch = Box::new(fin.ledger_batch(Some(&done)));
                let l = ledgers
                    .entry(src.clone())
                    .or_insert_with(|| ledger::open(src).map_err(|e| e.0));
                let r = match l {
                    Ok(l) => l.write(&batch).map_err(|e| e.0),
                    Err(why) => Err(why.clone()),
                };
                if r.is_err() {
                    let rest = Entry::Ledger {
                        ledger: src.clone(),
                        batch,
                    };
                    if let Err(io) = put(dir, &rest) {
                        out.failed.push((path, io.to_string()));
                        continue;
                    }
                }
            }
            Entry::Ledger { ledger: src, batch } => {
                let l = ledgers
                    .entry(src.clone())
                    .or_insert_with(|| ledger::open(src).map_err(|e| e.0));
                let r = match l {
                    Ok(l) => l.write(batch).map_err(|e| e.0),
                    Err(why) => Err(why.clone()),
                };
                if let Err(why) = r {
                    let why = crate::db::scrub(src, why);
                    ledgers.insert(src.clone(), Err(why.clone()));
                    out.failed.push((path, why));
                    continue;
                }
            }
        }
        // Removed while the lock is held: a flusher that locks the file after this finds
        // the path gone and leaves it.
        let _ = std::fs::remove_file(&path);
        drop(file);
        out.written += 1;
    }
    Ok(out)
}
