//! The run ledger (SPEC 5): what really happened, as events and applied outputs.
//!
//! Readers (CSV, JSONL, SQLite, PostgreSQL) turn rows into these types one at a time;
//! the audit consumes them as streams and never holds all rows. A row that cannot be read
//! is a [`RowError`] with its location: counted and reported, never dropped silently.

use jiff::Timestamp;
use std::fmt;

/// What an event row records (SPEC 5.1 `event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    Start,
    End,
    /// Lock not acquired.
    Skip,
    /// Input quarantined.
    DeadLetter,
    /// An operator's recovery action.
    Manual,
}

impl EventKind {
    pub const WORDS: &'static [&'static str] = &["start", "end", "skip", "dead_letter", "manual"];
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "start" => EventKind::Start,
            "end" => EventKind::End,
            "skip" => EventKind::Skip,
            "dead_letter" => EventKind::DeadLetter,
            "manual" => EventKind::Manual,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        Self::WORDS[self as usize]
    }
}

/// Outcome on an `end` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Success,
    Failure,
    /// The attempt's fence was no longer its slot's latest when it finished (SPEC 7.1
    /// item 24): another holder took the slot over, so this attempt gives no verdict.
    Superseded,
}

impl Status {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "success" => Some(Status::Success),
            "failure" => Some(Status::Failure),
            "superseded" => Some(Status::Superseded),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failure => "failure",
            Status::Superseded => "superseded",
        }
    }
}

/// Why an execution ran (SPEC 5.1 `trigger`; default `schedule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Trigger {
    #[default]
    Schedule,
    Retry,
    Manual,
    Replay,
    CatchUp,
}

impl Trigger {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" | "schedule" => Trigger::Schedule,
            "retry" => Trigger::Retry,
            "manual" => Trigger::Manual,
            "replay" => Trigger::Replay,
            "catch_up" => Trigger::CatchUp,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Retry => "retry",
            Trigger::Manual => "manual",
            Trigger::Replay => "replay",
            Trigger::CatchUp => "catch_up",
        }
    }
}

/// One event row (SPEC 5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub run_id: String,
    /// Job name, or `service/name`.
    pub job: String,
    pub scheduled_at: Timestamp,
    pub event: EventKind,
    pub at: Timestamp,
    pub instance: Option<String>,
    /// 1 for the first attempt of a slot; absent means 1.
    pub attempt: Option<u32>,
    /// On `end`.
    pub status: Option<Status>,
    /// On a failed `end` and on `dead_letter`.
    pub error_code: Option<String>,
    /// On `start`: `sha256:<hex>` of the input snapshot.
    pub snapshot_digest: Option<String>,
    pub trigger: Trigger,
}

/// One applied output (SPEC 5.2).
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub job: String,
    pub scheduled_at: Timestamp,
    pub run_id: String,
    pub output_key: String,
    pub at: Timestamp,
}

/// An [`Event`] borrowing its strings (from a reader's buffer): what
/// [`read::read_event_refs`] hands out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EventRef<'a> {
    pub run_id: &'a str,
    pub job: &'a str,
    pub scheduled_at: Timestamp,
    pub event: EventKind,
    pub at: Timestamp,
    pub instance: Option<&'a str>,
    pub attempt: Option<u32>,
    pub status: Option<Status>,
    pub error_code: Option<&'a str>,
    pub snapshot_digest: Option<&'a str>,
    pub trigger: Trigger,
}

impl EventRef<'_> {
    pub fn to_owned(self) -> Event {
        Event {
            run_id: self.run_id.to_owned(),
            job: self.job.to_owned(),
            scheduled_at: self.scheduled_at,
            event: self.event,
            at: self.at,
            instance: self.instance.map(str::to_owned),
            attempt: self.attempt,
            status: self.status,
            error_code: self.error_code.map(str::to_owned),
            snapshot_digest: self.snapshot_digest.map(str::to_owned),
            trigger: self.trigger,
        }
    }
}

impl Event {
    pub fn as_ref(&self) -> EventRef<'_> {
        EventRef {
            run_id: &self.run_id,
            job: &self.job,
            scheduled_at: self.scheduled_at,
            event: self.event,
            at: self.at,
            instance: self.instance.as_deref(),
            attempt: self.attempt,
            status: self.status,
            error_code: self.error_code.as_deref(),
            snapshot_digest: self.snapshot_digest.as_deref(),
            trigger: self.trigger,
        }
    }
}

/// An [`Output`] borrowing its strings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutputRef<'a> {
    pub job: &'a str,
    pub scheduled_at: Timestamp,
    pub run_id: &'a str,
    pub output_key: &'a str,
    pub at: Timestamp,
}

impl OutputRef<'_> {
    pub fn to_owned(&self) -> Output {
        Output {
            job: self.job.to_owned(),
            scheduled_at: self.scheduled_at,
            run_id: self.run_id.to_owned(),
            output_key: self.output_key.to_owned(),
            at: self.at,
        }
    }
}

impl Output {
    pub fn as_ref(&self) -> OutputRef<'_> {
        OutputRef {
            job: &self.job,
            scheduled_at: self.scheduled_at,
            run_id: &self.run_id,
            output_key: &self.output_key,
            at: self.at,
        }
    }
}

/// Where a row came from, for messages: `ledger.csv:1042` or `postgres batchguard_events row 17`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLocation {
    pub source: String,
    /// 1-based line (files) or row number (databases).
    pub row: u64,
}

impl fmt::Display for RowLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.row)
    }
}

/// A row that could not be read; counted in `rows_rejected` and listed in the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError {
    pub at: RowLocation,
    /// Column that was wrong, when one was.
    pub column: Option<String>,
    pub message: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.column {
            Some(c) => write!(f, "{}: column `{c}`: {}", self.at, self.message),
            None => write!(f, "{}: {}", self.at, self.message),
        }
    }
}

/// A source that cannot be read at all (missing file, unreachable server, bad DSN):
/// exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

pub mod csv;
pub mod drills;
pub mod format;
pub mod input;
pub mod jsonl;
pub mod mysql;
pub mod read;
pub mod sql;
pub mod tail;
pub mod time;

pub use read::{ReadOptions, Source, read_events, read_outputs};
