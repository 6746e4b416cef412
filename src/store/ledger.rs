//! Where `run` writes what happened (SPEC 7.1, 7.2): the store's own ledger tables, or,
//! with `--ledger SOURCE`, a ledger apart from the store: a JSONL file or another SQL
//! database. The lease decisions stay in the store either way.

use super::{EventRow, OutputRow, StoreError, StoreKind, StoreUrl};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The ledger writes of one run, written together: events (and outputs, when the run
/// applied any).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub job: String,
    pub scheduled_at: Timestamp,
    pub run_id: String,
    pub events: Vec<EventRow>,
    pub outputs: Vec<OutputRow>,
}

impl Batch {
    pub fn events(events: Vec<EventRow>) -> Option<Batch> {
        let first = events.first()?;
        Some(Batch {
            job: first.job.clone(),
            scheduled_at: first.scheduled_at,
            run_id: first.run_id.clone(),
            events,
            outputs: vec![],
        })
    }

    /// Whether the batch closes its run: a SQL ledger writes such a batch once per run id.
    pub fn has_end(&self) -> bool {
        self.events.iter().any(|e| e.event == "end")
    }
}

pub trait Ledger {
    /// Appends the batch: one transaction in a database, one locked append in a file.
    /// A batch with an `end` is written once per run id in a database (a spooled batch
    /// written again is skipped).
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError>;
}

/// The kinds of `--ledger` that `run` can write.
pub fn is_writable_source(src: &str) -> bool {
    src.starts_with("sqlite:")
        || src.starts_with("postgres://")
        || src.starts_with("postgresql://")
        || src.starts_with("mysql://")
        || super::jsonl::is_jsonl_path(src)
}

/// Opens a ledger apart from the store. A SQLite file gets the ledger tables only (not the
/// store's); a PostgreSQL or MySQL database needs them from `batchguard store migrate`.
pub fn open(src: &str) -> Result<Box<dyn Ledger>, StoreError> {
    if super::jsonl::is_jsonl_path(src) {
        return Ok(Box::new(super::jsonl::JsonlLedger::new(
            std::path::Path::new(src),
        )));
    }
    let url = StoreUrl::parse(src)
        .ok()
        .filter(|u| u.kind().keeps_ledger());
    match url.as_ref().map(|u| (u, u.kind())) {
        Some((u, StoreKind::Sqlite)) => Ok(Box::new(super::sqlite::SqliteStore::open_ledger(
            u.sqlite_path().unwrap_or(std::path::Path::new("")),
        )?)),
        Some((u, StoreKind::Postgres)) => Ok(Box::new(super::postgres::PgStore::open(u)?)),
        Some((u, StoreKind::Mysql)) => Ok(Box::new(super::mysql::MysqlStore::open(u)?)),
        _ => Err(StoreError::bad_url(format!(
            "`{}` is not a ledger `run` can write: sqlite:PATH, postgres://…, mysql://… or a path.jsonl / path.ndjson file",
            crate::db::mask(src)
        ))),
    }
}
