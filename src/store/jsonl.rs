//! A JSONL ledger file (`--ledger path.jsonl`): events appended one JSON object per line in
//! the shape `batchguard audit --ledger path.jsonl` reads (SPEC 5.1), outputs to the
//! sibling `path.outputs.jsonl` (SPEC 5.2), read with `--outputs path.outputs.jsonl`.
//!
//! Processes on one host append at once, so every append holds an exclusive `flock` on
//! the events file (which also covers the outputs file) and writes its lines with one
//! `write` on an `O_APPEND` descriptor: lines of two runs never interleave, on any
//! filesystem where `flock` works. A last line left without its newline by a writer that
//! died is closed before the next line, so one torn line never swallows a good one.

use super::ledger::{Batch, Ledger};
use super::{EventRow, StoreError, rfc3339};
use serde_json::{Map, Value, json};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// `path.jsonl` or `path.ndjson`: the file kinds `run` appends to.
pub fn is_jsonl_path(src: &str) -> bool {
    src.ends_with(".jsonl") || src.ends_with(".ndjson")
}

/// The outputs file beside an events file: `events.jsonl` → `events.outputs.jsonl`.
pub fn outputs_path(events: &Path) -> PathBuf {
    let name = events
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) => (s.to_owned(), e.to_owned()),
        None => (name.clone(), "jsonl".to_owned()),
    };
    events.with_file_name(format!("{stem}.outputs.{ext}"))
}

pub struct JsonlLedger {
    events: PathBuf,
    outputs: PathBuf,
}

impl JsonlLedger {
    pub fn new(events: &Path) -> JsonlLedger {
        JsonlLedger {
            events: events.to_path_buf(),
            outputs: outputs_path(events),
        }
    }
}

/// One event as a JSON line: absent optional fields are left out.
pub fn event_line(ev: &EventRow) -> String {
    let mut m = Map::new();
    m.insert("run_id".into(), json!(ev.run_id));
    m.insert("job".into(), json!(ev.job));
    m.insert("scheduled_at".into(), json!(rfc3339(ev.scheduled_at)));
    m.insert("event".into(), json!(ev.event));
    m.insert("at".into(), json!(rfc3339(ev.at)));
    let mut opt = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    opt("instance", ev.instance.as_ref().map(|v| json!(v)));
    opt("attempt", ev.attempt.map(|v| json!(v)));
    opt("status", ev.status.as_ref().map(|v| json!(v)));
    opt("error_code", ev.error_code.as_ref().map(|v| json!(v)));
    opt(
        "snapshot_digest",
        ev.snapshot_digest.as_ref().map(|v| json!(v)),
    );
    opt("trigger", Some(json!(ev.trigger)));
    opt("fence", ev.fence.map(|v| json!(v)));
    opt(
        "detail",
        ev.detail.as_deref().map(|d| json!(super::clip_detail(d))),
    );
    let mut s = Value::Object(m).to_string();
    s.push('\n');
    s
}

pub(super) fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    // Read too: the last byte is checked for a torn line.
    std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
}

/// Appends `text` to `f` (held under the lock), closing a torn last line first.
pub(super) fn append_locked(f: &std::fs::File, text: &str) -> std::io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let len = f.metadata()?.len();
    let mut buf = Vec::with_capacity(text.len() + 1);
    if len > 0 {
        let mut last = [0u8; 1];
        f.read_exact_at(&mut last, len - 1)?;
        if last[0] != b'\n' {
            buf.push(b'\n');
        }
    }
    buf.extend_from_slice(text.as_bytes());
    let mut w = f;
    w.write_all(&buf)?;
    f.sync_data()
}

/// An exclusive `flock` on the file, released when the guard drops (or the file closes).
pub(super) struct Flock<'a>(&'a std::fs::File);

impl<'a> Flock<'a> {
    pub(super) fn take(f: &'a std::fs::File) -> std::io::Result<Flock<'a>> {
        loop {
            // SAFETY: a valid descriptor owned by `f` for the guard's lifetime.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(Flock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `take`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl Ledger for JsonlLedger {
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let fail = |p: &Path, e: std::io::Error| {
            StoreError::failed(format!("cannot append to ledger file {}: {e}", p.display()))
        };
        let ev = open_append(&self.events).map_err(|e| fail(&self.events, e))?;
        let lock = Flock::take(&ev).map_err(|e| fail(&self.events, e))?;
        if !batch.outputs.is_empty() {
            let mut text = String::new();
            for o in &batch.outputs {
                let line = json!({
                    "job": batch.job,
                    "scheduled_at": rfc3339(batch.scheduled_at),
                    "run_id": batch.run_id,
                    "output_key": o.key,
                    "at": rfc3339(o.at),
                });
                text.push_str(&line.to_string());
                text.push('\n');
            }
            let out = open_append(&self.outputs).map_err(|e| fail(&self.outputs, e))?;
            append_locked(&out, &text).map_err(|e| fail(&self.outputs, e))?;
        }
        let text: String = batch.events.iter().map(event_line).collect();
        let r = append_locked(&ev, &text).map_err(|e| fail(&self.events, e));
        drop(lock);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_file_sits_beside_the_events_file() {
        assert_eq!(
            outputs_path(Path::new("/l/events.jsonl")),
            Path::new("/l/events.outputs.jsonl")
        );
        assert_eq!(
            outputs_path(Path::new("x.ndjson")),
            Path::new("x.outputs.ndjson")
        );
    }

    #[test]
    fn a_torn_last_line_is_closed_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.jsonl");
        std::fs::write(&p, "{\"torn\":").unwrap();
        let f = open_append(&p).unwrap();
        append_locked(&f, "{\"a\":1}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"torn\":\n{\"a\":1}\n"
        );
    }
}
