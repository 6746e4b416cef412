//! What a run leaves for later, and what the next one picks up (SPEC 7.1 items 6 and 10):
//! the ledger apart from the store (`--ledger`), the spool when a write is not taken, and
//! the run directories whose outputs a dead run never reported.

use super::plan::Plan;
use super::{Options, classify};
use crate::store::ledger::{self, Batch, Ledger};
use crate::store::{self, EventRow, Finished, Store, spool};
use jiff::Timestamp;
use std::path::{Path, PathBuf};

/// A `--ledger` apart from the store: opened on first use, once (a ledger that cannot be
/// reached is not retried within the run: its writes are spooled).
pub(super) struct Apart {
    pub(super) src: String,
    pub(super) ledger: Option<Result<Box<dyn Ledger>, String>>,
}

impl Apart {
    pub(super) fn new(opts: &Options, plan: &Plan) -> Option<Apart> {
        let src = opts.ledger.as_ref().filter(|l| *l != plan.store.raw())?;
        Some(Apart {
            src: src.clone(),
            ledger: None,
        })
    }

    /// Writes the batch to the ledger, or spools it for the next `run` or `store flush`.
    pub(super) fn write(&mut self, batch: Batch) -> Result<(), String> {
        let src = &self.src;
        let l = self
            .ledger
            .get_or_insert_with(|| ledger::open(src).map_err(|e| e.0));
        let why = match l {
            Ok(l) => match l.write(&batch) {
                Ok(()) => return Ok(()),
                Err(e) => e.0,
            },
            Err(why) => why.clone(),
        };
        let why = crate::db::scrub(src, why);
        let entry = spool::Entry::Ledger {
            ledger: self.src.clone(),
            batch: Box::new(batch),
        };
        match spool::put(Path::new(spool::DIR), &entry) {
            Ok(p) => {
                eprintln!(
                    "batchguard run: the ledger did not take a write ({why}); spooled to {} for the next run or `batchguard store flush`",
                    p.display()
                );
                Ok(())
            }
            Err(io) => Err(format!(
                "the ledger did not take a write ({why}) and the spool failed too: {io}"
            )),
        }
    }
}

/// Writes one event where the ledger is: the store's tables, or the ledger apart.
pub(super) fn record(
    st: &mut dyn Store,
    apart: &mut Option<Apart>,
    ev: EventRow,
) -> Result<(), String> {
    match apart {
        None => write_or_spool(st, spool::Entry::Event(Box::new(ev))).map(|_| ()),
        Some(a) => match Batch::events(vec![ev]) {
            Some(b) => a.write(b),
            None => Ok(()),
        },
    }
}

/// What a run directory of a run with a ledger apart says about its run, so the outputs of
/// a run that died reach the ledger it was writing to.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct RunMeta {
    pub(super) store: String,
    pub(super) ledger: String,
    pub(super) job: String,
    pub(super) scheduled_at: Timestamp,
}

pub(super) const RUN_META: &str = "run.json";

pub(super) fn write_meta(dir: &Path, meta: &RunMeta) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = serde_json::to_vec(meta).map_err(std::io::Error::other)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(dir.join(RUN_META))?;
    f.write_all(&text)
}

/// Writes to the store, or spools when the store does not answer (`None`: spooled, or an
/// event, which has no answer).
pub(super) fn write_or_spool(
    st: &mut dyn Store,
    entry: spool::Entry,
) -> Result<Option<Finished>, String> {
    let r = match &entry {
        spool::Entry::Finish(f) => st.finish(f).map(Some),
        spool::Entry::Event(e) => st.append(e).map(|()| None),
        spool::Entry::Ledger { .. } | spool::Entry::FinishApart { .. } => {
            return Err("a ledger entry is not for the store".into());
        }
    };
    match r {
        Ok(done) => Ok(done),
        Err(e) => match spool::put(Path::new(spool::DIR), &entry) {
            Ok(p) => {
                eprintln!(
                    "batchguard run: the ledger did not take a write ({e}); spooled to {} for the next run or `batchguard store flush`",
                    p.display()
                );
                Ok(None)
            }
            Err(io) => Err(format!(
                "the ledger did not take a write ({e}) and the spool failed too: {io}"
            )),
        },
    }
}

/// What a catch-up wrote, and what it had to leave behind (reported on stderr).
#[derive(Debug, Default)]
pub struct CaughtUp {
    pub written: u64,
    pub left: u64,
}

/// Writes the spool and the outputs of runs that died (their lease expired), once each.
/// `store_url` is the store's URL as given: run directories of runs that held a lease in
/// another store are not this store's to judge.
pub fn catch_up(st: &mut dyn Store, store_url: &str) -> Result<CaughtUp, store::StoreError> {
    let flushed = spool::flush(Path::new(spool::DIR), st)?;
    for (p, why) in &flushed.unreadable {
        eprintln!(
            "batchguard: note: {} is not a spool entry ({why}); left in place",
            p.display()
        );
    }
    for (p, why) in &flushed.failed {
        eprintln!(
            "batchguard: note: {} stays spooled: its ledger did not take it ({why})",
            p.display()
        );
    }
    let mut done = CaughtUp {
        written: flushed.written,
        left: (flushed.unreadable.len() + flushed.failed.len()) as u64,
    };
    // An empty runs directory has no leftovers: no round trip to the store for them.
    let runs = Path::new(".batchguard/runs");
    let dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
                })
                .collect()
        })
        .unwrap_or_default();
    if dirs.is_empty() {
        return Ok(done);
    }
    for run in st.abandoned()? {
        let dir = runs.join(&run.run_id);
        // The run's own lock, taken: a live run holds it, and of two runs catching up
        // at once only one ingests (the other finds it held, or the directory gone).
        let Ok(_claim) = hold_run_dir(&dir) else {
            continue;
        };
        let file = dir.join("outputs");
        if !file.is_file() {
            continue;
        }
        let (outputs, _) = classify::read_outputs(&file, Timestamp::now());
        done.written += st.ingest_abandoned(&run, &outputs)?;
        remove_run_dir(&dir);
    }
    // Runs with a ledger apart: their directory names the ledger.
    for dir in dirs {
        let Ok(text) = std::fs::read(dir.join(RUN_META)) else {
            continue;
        };
        let Ok(meta) = serde_json::from_slice::<RunMeta>(&text) else {
            eprintln!(
                "batchguard: note: {} is not readable; {} left in place",
                dir.join(RUN_META).display(),
                dir.display()
            );
            continue;
        };
        let Some(run_id) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if meta.store != store_url {
            continue;
        }
        let Ok(_claim) = hold_run_dir(&dir) else {
            continue;
        };
        if !dir.join(RUN_META).is_file() || st.live(run_id)? {
            continue;
        }
        let (outputs, _) = classify::read_outputs(&dir.join("outputs"), Timestamp::now());
        // SPEC 7.5: what the dead run claimed is in the store only; its ledger gets it here.
        let outputs = store::merge_claimed(st.claimed(run_id)?, outputs);
        let n = outputs.len() as u64;
        if n > 0 {
            let mut a = Apart {
                src: meta.ledger.clone(),
                ledger: None,
            };
            let batch = Batch {
                job: meta.job,
                scheduled_at: meta.scheduled_at,
                run_id: run_id.to_owned(),
                events: vec![],
                outputs,
            };
            if let Err(e) = a.write(batch) {
                eprintln!("batchguard: {e}");
                done.left += 1;
                continue;
            }
        }
        done.written += n;
        remove_run_dir(&dir);
    }
    Ok(done)
}

pub(super) const RUN_LOCK: &str = "alive";

/// Removes a run directory while its lock is held. It is first renamed to a hidden name
/// that no run id has (catch-up skips hidden names), then emptied: removed in place,
/// another catch-up could open, and so create, its lock file after `remove_dir_all`
/// unlinked it and before the `rmdir`, and the directory would be left behind.
pub(super) fn remove_run_dir(dir: &Path) {
    let Some(name) = dir.file_name() else {
        return;
    };
    let mut hidden = std::ffi::OsString::from(".removing-");
    hidden.push(name);
    let gone = dir.with_file_name(hidden);
    match std::fs::rename(dir, &gone) {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&gone);
        }
        Err(_) => {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// An exclusive `flock` on the run directory's lock file, held for the life of the attempt:
/// the kernel drops it when the process dies, so a run whose lease has expired but whose
/// process is merely paused (stopped, swapped out, frozen) is never taken for dead and its
/// outputs file is not ingested from under it. Catch-up takes the same lock before it
/// ingests a directory, so two runs catching up at once never ingest one run twice.
pub(super) fn hold_run_dir(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(RUN_LOCK))?;
    // SAFETY: flock on a file we own; the fd lives as long as `f`.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f)
}
