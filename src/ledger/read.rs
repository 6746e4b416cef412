//! Ledger sources (SPEC 5.3) and the one entry point per row kind.
//!
//! Every reader streams: a row is turned into an [`Event`]/[`Output`] (or a [`RowError`])
//! and handed to the caller's closure before the next one is read, so memory does not grow
//! with the ledger. Every reader turns its raw row into the same array of optional text
//! fields, and [`LedgerRow::from_fields`] validates them in one place: a value means the
//! same thing in a CSV file, a JSON line, a SQLite or a PostgreSQL row.

use super::{
    Event, EventKind, EventRef, Output, OutputRef, RowError, RowLocation, SourceError, Status,
    Trigger,
};
use jiff::tz::TimeZone;
use std::path::PathBuf;

/// Default table names of a database ledger.
pub const DEFAULT_EVENTS_TABLE: &str = "batchguard_events";
pub const DEFAULT_OUTPUTS_TABLE: &str = "batchguard_outputs";

/// Where a ledger is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Csv(PathBuf),
    Jsonl(PathBuf),
    Sqlite(PathBuf),
    /// `url` is the DSN without the `events_table`/`outputs_table` options; the table names
    /// are validated identifiers (optionally `schema.table`).
    Postgres {
        url: String,
        events_table: String,
        outputs_table: String,
    },
    /// `mysql://…`, the same as [`Source::Postgres`] (tables optionally `db.table`).
    Mysql {
        url: String,
        events_table: String,
        outputs_table: String,
    },
}

/// The format of a file ledger whose name does not tell it (`--ledger-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Csv,
    Jsonl,
}

impl Source {
    /// `path.csv`, `path.jsonl`/`path.ndjson` (each also `.gz`/`.zst`), `sqlite:PATH`,
    /// `postgres://…?events_table=…&outputs_table=…` (defaults `batchguard_events` /
    /// `batchguard_outputs`; identifiers validated).
    pub fn parse(s: &str) -> Result<Source, SourceError> {
        Self::parse_as(s, None)
    }

    /// [`Source::parse`], with `format` for a file whose name does not tell its format:
    /// `-` (standard input), a named pipe, `/dev/fd/N` from `<(…)`.
    pub fn parse_as(s: &str, format: Option<FileFormat>) -> Result<Source, SourceError> {
        let s = if s == super::input::STDIN {
            s
        } else {
            s.trim()
        };
        if s.is_empty() {
            return Err(SourceError("empty ledger source".into()));
        }
        if let Some(rest) = s.strip_prefix("sqlite:") {
            // `sqlite:PATH`, and sqlx's `sqlite://PATH` spelling.
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(SourceError(
                    "`sqlite:` needs a file path: sqlite:PATH".into(),
                ));
            }
            return Ok(Source::Sqlite(PathBuf::from(path)));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return parse_postgres(s);
        }
        if s.starts_with("mysql://") {
            return match parse_postgres(s)? {
                Source::Postgres {
                    url,
                    events_table,
                    outputs_table,
                } => Ok(Source::Mysql {
                    url,
                    events_table,
                    outputs_table,
                }),
                other => Ok(other),
            };
        }
        let lower = super::input::format_name(s);
        if lower.ends_with(".csv") {
            Ok(Source::Csv(PathBuf::from(s)))
        } else if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") {
            Ok(Source::Jsonl(PathBuf::from(s)))
        } else if let Some(f) = format {
            Ok(match f {
                FileFormat::Csv => Source::Csv(PathBuf::from(s)),
                FileFormat::Jsonl => Source::Jsonl(PathBuf::from(s)),
            })
        } else if s == super::input::STDIN {
            Err(SourceError(
                "`-` reads standard input: say its format with --ledger-format csv|jsonl".into(),
            ))
        } else {
            Err(SourceError(format!(
                "cannot tell the format of ledger source `{}`: use path.csv, path.jsonl, \
                 path.ndjson (also .gz, .zst), sqlite:PATH, postgres://… or mysql://…, or give \
                 --ledger-format csv|jsonl",
                mask_dsn(s)
            )))
        }
    }

    /// For messages: the DSN with its password masked.
    pub fn display(&self) -> String {
        match self {
            Source::Csv(p) | Source::Jsonl(p) => super::input::display(p),
            Source::Sqlite(p) => format!("sqlite:{}", p.display()),
            Source::Postgres {
                url,
                events_table,
                outputs_table,
            }
            | Source::Mysql {
                url,
                events_table,
                outputs_table,
            } => {
                let mut s = mask_dsn(url);
                if events_table != DEFAULT_EVENTS_TABLE || outputs_table != DEFAULT_OUTPUTS_TABLE {
                    s.push(if s.contains('?') { '&' } else { '?' });
                    s.push_str(&format!(
                        "events_table={events_table}&outputs_table={outputs_table}"
                    ));
                }
                s
            }
        }
    }
}

fn parse_postgres(s: &str) -> Result<Source, SourceError> {
    let (base, query) = match s.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (s, None),
    };
    let mut events_table = DEFAULT_EVENTS_TABLE.to_string();
    let mut outputs_table = DEFAULT_OUTPUTS_TABLE.to_string();
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match k {
            "events_table" => &mut events_table,
            "outputs_table" => &mut outputs_table,
            _ => {
                kept.push(pair);
                continue;
            }
        };
        if !valid_table_name(v) {
            return Err(SourceError(format!(
                "`{k}={}` is not a table name: use letters, digits and `_` (not starting with \
                 a digit, at most 63), optionally `schema.table` ({})",
                truncate(v, 80),
                mask_dsn(s)
            )));
        }
        *slot = v.to_string();
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok(Source::Postgres {
        url,
        events_table,
        outputs_table,
    })
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `[A-Za-z_][A-Za-z0-9_]{0,62}`, optionally `schema.table` with both parts so.
pub fn valid_table_name(s: &str) -> bool {
    fn ident(s: &str) -> bool {
        let b = s.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && (b[0].is_ascii_alphabetic() || b[0] == b'_')
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
    }
    match s.split_once('.') {
        Some((schema, table)) => ident(schema) && ident(table),
        None => ident(s),
    }
}

/// A validated table name, double-quoted per part: `"schema"."table"`.
pub(crate) fn quote_table(s: &str) -> String {
    s.split('.')
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(".")
}

/// Kept at its old path; the masking lives with the other database services.
pub use crate::db::mask_dsn;

/// How rows are interpreted.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Zone for timestamps written without an offset; `None` refuses them (row errors).
    pub assume_tz: Option<TimeZone>,
}

/// Streams every event row: good rows to `on_event`, bad rows to `on_error` (with row/line
/// location). Returns rows read (good + bad).
pub fn read_events(
    src: &Source,
    opts: &ReadOptions,
    on_event: &mut dyn FnMut(Event),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    read_any::<Event>(src, opts, on_event, on_error)
}

/// The same for outputs. For a database source the outputs table of the same database; for
/// files, the file is an outputs file.
pub fn read_outputs(
    src: &Source,
    opts: &ReadOptions,
    on_output: &mut dyn FnMut(Output),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    read_any::<Output>(src, opts, on_output, on_error)
}

/// [`read_events`] handing each row as an [`EventRef`] borrowing the reader's buffer: no
/// allocation per row for CSV sources (others convert their owned rows).
pub fn read_event_refs(
    src: &Source,
    opts: &ReadOptions,
    on_event: &mut dyn FnMut(&EventRef<'_>),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    match src {
        Source::Csv(p) => super::csv::read_fields::<Event>(
            p,
            &mut |f, name, line| {
                on_event(&EventRef::from_fields(f, opts, name, line)?);
                Ok(())
            },
            on_error,
        ),
        _ => read_any::<Event>(src, opts, &mut |e| on_event(&e.as_ref()), on_error),
    }
}

/// For a database source, whether its outputs table exists (`None`: not a database).
pub fn has_outputs_table(src: &Source) -> Result<Option<bool>, SourceError> {
    match src {
        Source::Sqlite(p) => super::sql::sqlite_has_table(p, DEFAULT_OUTPUTS_TABLE).map(Some),
        Source::Postgres {
            url, outputs_table, ..
        } => super::sql::postgres_has_table(url, outputs_table).map(Some),
        Source::Mysql {
            url, outputs_table, ..
        } => super::mysql::has_table(url, outputs_table).map(Some),
        _ => Ok(None),
    }
}

fn read_any<R: LedgerRow>(
    src: &Source,
    opts: &ReadOptions,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    match src {
        Source::Csv(p) => super::csv::read::<R>(p, opts, on_row, on_error),
        Source::Jsonl(p) => super::jsonl::read::<R>(p, opts, on_row, on_error),
        Source::Sqlite(p) => super::sql::read_sqlite::<R>(p, opts, on_row, on_error),
        Source::Postgres {
            url,
            events_table,
            outputs_table,
        } => {
            let table = if R::IS_EVENT {
                events_table
            } else {
                outputs_table
            };
            super::sql::read_postgres::<R>(url, table, opts, on_row, on_error)
        }
        Source::Mysql {
            url,
            events_table,
            outputs_table,
        } => {
            let table = if R::IS_EVENT {
                events_table
            } else {
                outputs_table
            };
            super::mysql::read::<R>(url, table, opts, on_row, on_error)
        }
    }
}

/// Columns of the events table/file, required ones first (SPEC 5.1).
pub const EVENT_COLUMNS: [&str; 13] = [
    "run_id",
    "job",
    "scheduled_at",
    "event",
    "at",
    "instance",
    "attempt",
    "status",
    "error_code",
    "snapshot_digest",
    "trigger",
    "fence",
    "detail",
];
/// Columns of the outputs table/file, all required (SPEC 5.2).
pub const OUTPUT_COLUMNS: [&str; 5] = ["job", "scheduled_at", "run_id", "output_key", "at"];

/// Most columns any row kind has.
pub(crate) const MAX_COLUMNS: usize = 13;

/// A row kind: its columns and how validated text fields become a value.
pub trait LedgerRow: Sized {
    const IS_EVENT: bool;
    /// Column names; the first `REQUIRED` must be present (and non-empty in every row).
    const COLUMNS: &'static [&'static str];
    const REQUIRED: usize;
    /// `fields[i]` is the value of `COLUMNS[i]`, `None` when absent or empty.
    fn from_fields(
        fields: &[Option<&str>],
        opts: &ReadOptions,
        source: &str,
        row: u64,
    ) -> Result<Self, RowError>;
}

pub(crate) fn row_error(source: &str, row: u64, column: Option<&str>, message: String) -> RowError {
    RowError {
        at: RowLocation {
            source: source.to_string(),
            row,
        },
        column: column.map(str::to_string),
        message,
    }
}

thread_local! {
    /// Per column index: the last timestamp text the fast path parsed, and its value.
    static LAST_TS: std::cell::RefCell<[(String, jiff::Timestamp); MAX_COLUMNS]> =
        std::cell::RefCell::new(std::array::from_fn(|_| (String::new(), jiff::Timestamp::UNIX_EPOCH)));
}

struct Ctx<'c, 'a> {
    fields: &'c [Option<&'a str>],
    columns: &'static [&'static str],
    opts: &'c ReadOptions,
    source: &'c str,
    row: u64,
}

impl<'a> Ctx<'_, 'a> {
    fn err(&self, i: usize, message: String) -> RowError {
        row_error(self.source, self.row, Some(self.columns[i]), message)
    }
    fn required(&self, i: usize) -> Result<&'a str, RowError> {
        match self.fields.get(i).copied().flatten() {
            Some(v) => Ok(v),
            None => Err(self.err(i, "missing required value".into())),
        }
    }
    fn optional(&self, i: usize) -> Option<&'a str> {
        self.fields.get(i).copied().flatten()
    }
    fn timestamp(&self, i: usize) -> Result<jiff::Timestamp, RowError> {
        let s = self.required(i)?;
        // Consecutive rows often repeat a timestamp (the slot of a run's rows, the time of a
        // run's outputs): the last one parsed by the fast path (which does not depend on
        // `--assume-tz`) is remembered per column.
        let hit = LAST_TS.with(|c| {
            let c = c.borrow();
            let (k, t) = &c[i];
            (k.as_str() == s).then_some(*t)
        });
        if let Some(t) = hit {
            return Ok(t);
        }
        if let Some(t) = super::time::parse_fast(s) {
            LAST_TS.with(|c| {
                let mut c = c.borrow_mut();
                let e = &mut c[i];
                e.0.clear();
                e.0.push_str(s);
                e.1 = t;
            });
            return Ok(t);
        }
        super::time::parse_timestamp(s, self.opts.assume_tz.as_ref()).map_err(|m| self.err(i, m))
    }
}

fn shown(s: &str) -> String {
    let t = truncate(s, 64);
    if t.len() < s.len() {
        format!("`{t}…`")
    } else {
        format!("`{s}`")
    }
}

impl LedgerRow for Event {
    const IS_EVENT: bool = true;
    const COLUMNS: &'static [&'static str] = &EVENT_COLUMNS;
    const REQUIRED: usize = 5;

    fn from_fields(
        fields: &[Option<&str>],
        opts: &ReadOptions,
        source: &str,
        row: u64,
    ) -> Result<Self, RowError> {
        EventRef::from_fields(fields, opts, source, row).map(|e| e.to_owned())
    }
}

impl<'a> EventRef<'a> {
    /// Validates the text fields of an event row (see [`LedgerRow::from_fields`]), borrowing
    /// its strings.
    pub fn from_fields(
        fields: &[Option<&'a str>],
        opts: &ReadOptions,
        source: &str,
        row: u64,
    ) -> Result<Self, RowError> {
        let c = Ctx {
            fields,
            columns: Event::COLUMNS,
            opts,
            source,
            row,
        };
        let run_id = c.required(0)?;
        let job = c.required(1)?;
        let scheduled_at = c.timestamp(2)?;
        let word = c.required(3)?;
        let event = EventKind::parse(word).ok_or_else(|| {
            c.err(
                3,
                format!(
                    "{} is not an event; expected one of {}",
                    shown(word),
                    EventKind::WORDS.join(", ")
                ),
            )
        })?;
        let at = c.timestamp(4)?;
        let attempt = match c.optional(6) {
            None => None,
            Some(s) => match s.trim().parse::<u32>() {
                Ok(0) => return Err(c.err(6, "attempt must be 1 or more (1 is the first)".into())),
                Ok(n) => Some(n),
                Err(_) => {
                    return Err(c.err(6, format!("{} is not a whole number of attempts", shown(s))));
                }
            },
        };
        let status = match c.optional(7) {
            None => None,
            Some(s) => Some(Status::parse(s).ok_or_else(|| {
                c.err(
                    7,
                    format!(
                        "{} is not a status; expected success, failure or superseded",
                        shown(s)
                    ),
                )
            })?),
        };
        let trigger = match c.optional(10) {
            None => Trigger::Schedule,
            Some(s) => Trigger::parse(s).ok_or_else(|| {
                c.err(
                    10,
                    format!(
                        "{} is not a trigger; expected one of schedule, retry, manual, replay",
                        shown(s)
                    ),
                )
            })?,
        };
        Ok(EventRef {
            run_id,
            job,
            scheduled_at,
            event,
            at,
            instance: c.optional(5),
            attempt,
            status,
            error_code: c.optional(8),
            snapshot_digest: c.optional(9),
            trigger,
        })
    }
}

impl LedgerRow for Output {
    const IS_EVENT: bool = false;
    const COLUMNS: &'static [&'static str] = &OUTPUT_COLUMNS;
    const REQUIRED: usize = 5;

    fn from_fields(
        fields: &[Option<&str>],
        opts: &ReadOptions,
        source: &str,
        row: u64,
    ) -> Result<Self, RowError> {
        OutputRef::from_fields(fields, opts, source, row).map(|o| o.to_owned())
    }
}

impl<'a> OutputRef<'a> {
    /// Validates the text fields of an output row, borrowing its strings.
    pub fn from_fields(
        fields: &[Option<&'a str>],
        opts: &ReadOptions,
        source: &str,
        row: u64,
    ) -> Result<Self, RowError> {
        let c = Ctx {
            fields,
            columns: Output::COLUMNS,
            opts,
            source,
            row,
        };
        let job = c.required(0)?;
        let scheduled_at = c.timestamp(1)?;
        let run_id = c.required(2)?;
        let output_key = c.required(3)?;
        let at = c.timestamp(4)?;
        Ok(OutputRef {
            job,
            scheduled_at,
            run_id,
            output_key,
            at,
        })
    }
}

/// Required columns a header (or table) lacks, as one message; `None` when complete.
pub(crate) fn missing_columns<R: LedgerRow>(
    index: &[Option<usize>],
    what: &str,
) -> Option<SourceError> {
    let missing: Vec<&str> = (0..R::REQUIRED)
        .filter(|&i| index[i].is_none())
        .map(|i| R::COLUMNS[i])
        .collect();
    if missing.is_empty() {
        return None;
    }
    let kind = if R::IS_EVENT { "events" } else { "outputs" };
    Some(SourceError(format!(
        "{what} lacks the required {kind} column{} {}",
        if missing.len() == 1 { "" } else { "s" },
        missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sources() {
        assert_eq!(
            Source::parse("a/ledger.csv").unwrap(),
            Source::Csv("a/ledger.csv".into())
        );
        assert_eq!(Source::parse("x.CSV").unwrap(), Source::Csv("x.CSV".into()));
        assert_eq!(
            Source::parse("x.jsonl").unwrap(),
            Source::Jsonl("x.jsonl".into())
        );
        assert_eq!(
            Source::parse("x.ndjson").unwrap(),
            Source::Jsonl("x.ndjson".into())
        );
        assert_eq!(
            Source::parse("sqlite:l.db").unwrap(),
            Source::Sqlite("l.db".into())
        );
        assert_eq!(
            Source::parse("sqlite:///tmp/l.db").unwrap(),
            Source::Sqlite("/tmp/l.db".into())
        );
        assert!(Source::parse("sqlite:").is_err());
        assert!(Source::parse("ledger.parquet").is_err());
        assert!(Source::parse("").is_err());
    }

    #[test]
    fn parses_postgres_with_tables_and_masks_password() {
        let s = Source::parse(
            "postgres://bob:s3cret@db:5432/ledger?sslmode=disable&events_table=audit.ev&outputs_table=out_1",
        )
        .unwrap();
        assert_eq!(
            s,
            Source::Postgres {
                url: "postgres://bob:s3cret@db:5432/ledger?sslmode=disable".into(),
                events_table: "audit.ev".into(),
                outputs_table: "out_1".into(),
            }
        );
        let d = s.display();
        assert!(!d.contains("s3cret"), "{d}");
        assert!(d.contains("bob:***@db"), "{d}");
        let s = Source::parse("postgresql://db/ledger").unwrap();
        assert_eq!(
            s,
            Source::Postgres {
                url: "postgresql://db/ledger".into(),
                events_table: DEFAULT_EVENTS_TABLE.into(),
                outputs_table: DEFAULT_OUTPUTS_TABLE.into(),
            }
        );
    }

    #[test]
    fn refuses_bad_table_names_without_leaking_the_password() {
        for bad in [
            "x;drop table y",
            "1abc",
            "a.b.c",
            "\"q\"",
            "",
            "a-b",
            "ä",
            &"a".repeat(64),
        ] {
            let e = Source::parse(&format!("postgres://u:pw@h/d?events_table={bad}")).unwrap_err();
            assert!(!e.0.contains(":pw@"), "{}", e.0);
        }
        assert!(valid_table_name(&"a".repeat(63)));
        assert!(valid_table_name("_x.Y9"));
        assert_eq!(quote_table("s.t"), "\"s\".\"t\"");
    }

    fn ev(fields: &[Option<&str>]) -> Result<Event, RowError> {
        Event::from_fields(fields, &ReadOptions::default(), "t.csv", 7)
    }

    #[test]
    fn event_fields_are_validated_with_their_column() {
        let base = [
            Some("r1"),
            Some("billing/settle"),
            Some("2026-03-01T02:00:00Z"),
            Some("end"),
            Some("2026-03-01T02:03:00Z"),
            None,
            Some("2"),
            Some("failure"),
            Some("ETIMEDOUT"),
            None,
            Some("retry"),
        ];
        let e = ev(&base).unwrap();
        assert_eq!(e.attempt, Some(2));
        assert_eq!(e.status, Some(Status::Failure));
        assert_eq!(e.trigger, Trigger::Retry);
        for (i, bad, col) in [
            (3, Some("begin"), "event"),
            (6, Some("two"), "attempt"),
            (6, Some("0"), "attempt"),
            (6, Some("-1"), "attempt"),
            (7, Some("ok"), "status"),
            (10, Some("cron"), "trigger"),
            (2, Some("2026-03-01T02:00:00"), "scheduled_at"),
            (0, None, "run_id"),
            (4, None, "at"),
        ] {
            let mut f = base;
            f[i] = bad;
            let e = ev(&f).unwrap_err();
            assert_eq!(e.column.as_deref(), Some(col), "{e}");
            assert_eq!(e.at.to_string(), "t.csv:7");
        }
    }
}
