//! Drill records (SPEC 5.3): one row per `batchguard drill --record`, the proof that a
//! job's recovery was rehearsed. `audit` reads them for AU301 (drill-overdue) and shows each
//! job's last drill.
//!
//! Columns `job, scheduled_at, at, passed, scenarios, report_digest`, all required. Where
//! they live: a JSONL file (`path.jsonl` / `path.ndjson`, read also as `.gz`/`.zst`), or the
//! table `batchguard_drills` of a SQLite (`sqlite:PATH`), PostgreSQL (`postgres://…`) or
//! MySQL / MariaDB (`mysql://…`) database (DDL in `schemas/drills.{sqlite,postgres,mysql}.sql`).
//!
//! Decisions (see `docs/ledger.md`):
//! - A database without the table holds no drill records: [`DrillRead::table_present`] is
//!   false, not an error (the audit then skips AU301 and says why). A missing file or
//!   database file is an error, as for every ledger source: a mistyped path must not read
//!   as "no drill ever ran".
//! - `scenarios` is the comma-separated outcome of each scenario that ran, `name:passed` or
//!   `name:failed` (`clean:passed,rerun:failed`); [`format_scenarios`] writes it.
//! - `passed` is a boolean: JSON `true`/`false` (or the strings), `1`/`0` in SQLite,
//!   `boolean` in PostgreSQL, `BOOLEAN` (`1`/`0`) in MySQL. A record that says `passed` while one of its scenarios failed,
//!   or that passed with no scenario at all, is a bad row: it would count as a rehearsal
//!   that did not happen. `passed: false` with every scenario passed is kept (a drill can
//!   fail before or beside its scenarios, at the snapshot digest check).
//! - A bad row (bad JSON, a missing or empty value, a bad timestamp or word) is counted in
//!   [`DrillRead::rows_rejected`] and located (`drills.jsonl:7`,
//!   `sqlite:store.db batchguard_drills:3`), as ledger rows are; the others are still read.

use super::RowError;
use super::read::{ReadOptions, Source, quote_table, row_error};
use crate::db;
use futures_util::TryStreamExt;
use jiff::Timestamp;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use sqlx::{AssertSqlSafe, Connection, Row};
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The table drill records live in, in a database.
pub const TABLE: &str = "batchguard_drills";

/// The columns of a drill record, in the order of SPEC 5.3; every one is required.
pub const COLUMNS: [&str; 6] = [
    "job",
    "scheduled_at",
    "at",
    "passed",
    "scenarios",
    "report_digest",
];

/// How many rejected rows a [`DrillRead`] keeps with their location (all are counted).
pub const MAX_ERRORS: usize = 100;

/// One drill (SPEC 5.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrillRecord {
    /// Job name, or `service/name`.
    pub job: String,
    /// The slot whose snapshot was replayed.
    pub scheduled_at: Timestamp,
    /// When the drill ran: what `drill_cadence` is measured against.
    pub at: Timestamp,
    /// Whether every scenario passed.
    pub passed: bool,
    /// The scenarios that ran, each `name:passed` or `name:failed`, comma-separated
    /// (`clean:passed,rerun:failed,concurrent:passed`); see [`format_scenarios`].
    pub scenarios: String,
    /// The digest of the drill's report (`sha256:<hex>`), to tie the record to the report
    /// kept in the incident log.
    pub report_digest: String,
}

/// The `scenarios` value for these outcomes: `clean:passed,rerun:failed`.
pub fn format_scenarios<'a>(outcomes: impl IntoIterator<Item = (&'a str, bool)>) -> String {
    outcomes
        .into_iter()
        .map(|(name, passed)| format!("{name}:{}", if passed { "passed" } else { "failed" }))
        .collect::<Vec<_>>()
        .join(",")
}

/// The outcomes a `scenarios` value lists, in its order; empty for an empty value. A
/// scenario name is `[a-z0-9][a-z0-9_-]*` (at most 32 characters) and appears once.
pub fn parse_scenarios(s: &str) -> Result<Vec<(&str, bool)>, String> {
    let mut out: Vec<(&str, bool)> = Vec::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for item in s.split(',') {
        let item = item.trim();
        let Some((name, outcome)) = item.rsplit_once(':') else {
            return Err(format!(
                "{} is not `name:passed` or `name:failed`",
                shown(item)
            ));
        };
        let name_ok = name.len() <= 32
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(format!(
                "{} is not a scenario name (lowercase letters, digits, `-`, `_`)",
                shown(name)
            ));
        }
        let passed = match outcome {
            "passed" => true,
            "failed" => false,
            _ => {
                return Err(format!(
                    "scenario `{name}`: {} is not `passed` or `failed`",
                    shown(outcome)
                ));
            }
        };
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("scenario `{name}` is listed twice"));
        }
        out.push((name, passed));
    }
    Ok(out)
}

impl DrillRecord {
    /// The outcome of each scenario (see [`parse_scenarios`]); empty when `scenarios` does
    /// not parse, which a record read by [`read`] or checked by [`DrillRecord::check`]
    /// always does.
    pub fn scenario_outcomes(&self) -> Vec<(&str, bool)> {
        parse_scenarios(&self.scenarios).unwrap_or_default()
    }

    /// Whether the record is one a reader accepts: `Err((column, why))` otherwise. Writers
    /// check it first, so no source ever holds a record the audit would reject.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (col, v) in [
            ("job", &self.job),
            ("scenarios", &self.scenarios),
            ("report_digest", &self.report_digest),
        ] {
            if v.contains('\0') {
                return Err((col, "contains a NUL character".into()));
            }
        }
        if self.job.trim().is_empty() {
            return Err(("job", "missing required value".into()));
        }
        if self.report_digest.trim().is_empty() {
            return Err(("report_digest", "missing required value".into()));
        }
        let outcomes = parse_scenarios(&self.scenarios).map_err(|m| ("scenarios", m))?;
        if self.passed {
            if outcomes.is_empty() {
                return Err((
                    "passed",
                    "the drill is recorded as passed but names no scenario".into(),
                ));
            }
            if let Some((name, _)) = outcomes.iter().find(|(_, ok)| !ok) {
                return Err((
                    "passed",
                    format!("the drill is recorded as passed but scenario `{name}` failed"),
                ));
            }
        }
        Ok(())
    }
}

/// Where drill records are read from (and written to, by `crate::store::drills`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrillSource {
    /// `path.jsonl` / `path.ndjson` (also `.gz`/`.zst` for reading).
    Jsonl(PathBuf),
    /// `sqlite:PATH`: table [`TABLE`].
    Sqlite(PathBuf),
    /// `postgres://…` (the DSN without a ledger's `events_table`/`outputs_table` options):
    /// table [`TABLE`].
    Postgres(String),
    /// `mysql://…`, as [`DrillSource::Postgres`]: table [`TABLE`] of the DSN's database.
    Mysql(String),
}

impl DrillSource {
    /// `path.jsonl`, `path.ndjson` (also `.gz`/`.zst`), `sqlite:PATH`, `postgres://…`,
    /// `mysql://…`.
    pub fn parse(s: &str) -> Result<DrillSource, String> {
        let t = s.trim();
        let is_db = t.starts_with("sqlite:")
            || t.starts_with("postgres://")
            || t.starts_with("postgresql://")
            || t.starts_with("mysql://");
        let name = super::input::format_name(t);
        let refuse = || {
            format!(
                "`{}` is not a drill record source: use path.jsonl, path.ndjson, sqlite:PATH, postgres://… or mysql://…",
                db::mask(t)
            )
        };
        if !(is_db || name.ends_with(".jsonl") || name.ends_with(".ndjson")) {
            return Err(refuse());
        }
        match Source::parse(t).map_err(|e| e.0)? {
            Source::Jsonl(p) => Ok(DrillSource::Jsonl(p)),
            Source::Sqlite(p) => Ok(DrillSource::Sqlite(p)),
            Source::Postgres { url, .. } => Ok(DrillSource::Postgres(url)),
            Source::Mysql { url, .. } => Ok(DrillSource::Mysql(url)),
            Source::Csv(_) => Err(refuse()),
        }
    }

    /// The database of a ledger source, whose [`TABLE`] may hold drill records; `None`
    /// for a file ledger.
    pub fn of_ledger(src: &Source) -> Option<DrillSource> {
        match src {
            Source::Sqlite(p) => Some(DrillSource::Sqlite(p.clone())),
            Source::Postgres { url, .. } => Some(DrillSource::Postgres(url.clone())),
            Source::Mysql { url, .. } => Some(DrillSource::Mysql(url.clone())),
            Source::Csv(_) | Source::Jsonl(_) => None,
        }
    }

    /// For messages: the DSN with its password masked.
    pub fn display(&self) -> String {
        match self {
            DrillSource::Jsonl(p) => p.display().to_string(),
            DrillSource::Sqlite(p) => format!("sqlite:{}", p.display()),
            DrillSource::Postgres(url) | DrillSource::Mysql(url) => db::mask(url),
        }
    }
}

/// What [`read`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrillRead {
    /// The source as messages name it (password masked).
    pub source: String,
    /// The good rows, in the source's order.
    pub records: Vec<DrillRecord>,
    /// Rows read, good and bad (blank lines of a file are not rows).
    pub rows_read: u64,
    pub rows_rejected: u64,
    /// The first [`MAX_ERRORS`] bad rows, with their location.
    pub errors: Vec<RowError>,
    /// False when a database has no [`TABLE`]: no drill was ever recorded there.
    pub table_present: bool,
}

impl DrillRead {
    fn new(source: String) -> DrillRead {
        DrillRead {
            source,
            table_present: true,
            ..DrillRead::default()
        }
    }

    fn row(&mut self, r: Result<DrillRecord, RowError>) {
        self.rows_read += 1;
        match r {
            Ok(rec) => self.records.push(rec),
            Err(e) => {
                self.rows_rejected += 1;
                if self.errors.len() < MAX_ERRORS {
                    self.errors.push(e);
                }
            }
        }
    }
}

/// Reads every drill record of `source` (see [`DrillSource::parse`]). `Err` when the source
/// cannot be read at all (a bad source, a missing file, an unreachable server, a table
/// without a required column); bad rows are counted and located in the [`DrillRead`].
pub fn read(source: &str, opts: &ReadOptions) -> Result<DrillRead, String> {
    read_from(&DrillSource::parse(source)?, opts)
}

/// [`read`] from a parsed source.
pub fn read_from(src: &DrillSource, opts: &ReadOptions) -> Result<DrillRead, String> {
    match src {
        DrillSource::Jsonl(p) => read_jsonl(p, opts),
        DrillSource::Sqlite(p) => read_sqlite(p, opts),
        DrillSource::Postgres(url) => read_postgres(url, opts),
        DrillSource::Mysql(url) => read_mysql(url, opts),
    }
}

/// A drill record from its six text fields (`None`: absent or empty), in [`COLUMNS`] order.
/// `passed` takes `true`/`false`/`1`/`0`.
pub fn from_fields(
    fields: &[Option<&str>; 6],
    opts: &ReadOptions,
    source: &str,
    row: u64,
) -> Result<DrillRecord, RowError> {
    let err = |i: usize, m: String| row_error(source, row, Some(COLUMNS[i]), m);
    let required = |i: usize| fields[i].ok_or_else(|| err(i, "missing required value".into()));
    let time = |i: usize| {
        let s = required(i)?;
        super::time::parse_timestamp(s, opts.assume_tz.as_ref()).map_err(|m| err(i, m))
    };
    let job = required(0)?;
    let scheduled_at = time(1)?;
    let at = time(2)?;
    let word = required(3)?;
    let passed = match word.trim() {
        "true" | "1" => true,
        "false" | "0" => false,
        _ => {
            return Err(err(
                3,
                format!("{} is not a boolean; expected true or false", shown(word)),
            ));
        }
    };
    let rec = DrillRecord {
        job: job.to_owned(),
        scheduled_at,
        at,
        passed,
        // An empty list is a drill that stopped before any scenario (kept only as failed).
        scenarios: fields[4].unwrap_or("").trim().to_owned(),
        report_digest: required(5)?.to_owned(),
    };
    rec.check().map_err(|(col, m)| {
        let i = COLUMNS.iter().position(|c| *c == col).unwrap_or(0);
        err(i, m)
    })?;
    Ok(rec)
}

/// A value for a message: at most 64 characters, in backticks.
fn shown(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("`{}…`", &s[..i]),
        None => format!("`{s}`"),
    }
}

// ---------------------------------------------------------------- JSONL

fn read_jsonl(path: &Path, opts: &ReadOptions) -> Result<DrillRead, String> {
    let name = super::input::display(path);
    let io_err = |e: std::io::Error| format!("cannot read drill records {name}: {e}");
    let file = super::input::open(path).map_err(io_err)?;
    let mut rdr = BufReader::with_capacity(64 * 1024, file);
    let mut out = DrillRead::new(name.clone());
    let mut buf = Vec::with_capacity(512);
    let mut line = 0u64;
    loop {
        buf.clear();
        if rdr.read_until(b'\n', &mut buf).map_err(io_err)? == 0 {
            break;
        }
        line += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let text = match buf.strip_prefix(b"\xef\xbb\xbf") {
            Some(rest) if line == 1 => rest,
            _ => &buf[..],
        };
        out.row(parse_line(text, opts, &name, line));
    }
    Ok(out)
}

fn parse_line(
    buf: &[u8],
    opts: &ReadOptions,
    name: &str,
    line: u64,
) -> Result<DrillRecord, RowError> {
    let mut de = serde_json::Deserializer::from_slice(buf);
    let values = RowSeed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            let msg = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let msg = msg.strip_suffix(&suffix).unwrap_or(&msg);
            row_error(
                name,
                line,
                None,
                format!("invalid JSON at column {}: {msg}", e.column()),
            )
        })?;
    let mut fields: [Option<&str>; 6] = [None; 6];
    for (i, v) in values.iter().enumerate() {
        fields[i] = match v {
            Value::Absent => None,
            Value::Text(s) => Some(s.as_str()).filter(|s| !s.is_empty()),
            Value::Bool(b) if COLUMNS[i] == "passed" => Some(if *b { "true" } else { "false" }),
            Value::Bool(_) => {
                return Err(row_error(
                    name,
                    line,
                    Some(COLUMNS[i]),
                    "expected a string, found a boolean".into(),
                ));
            }
            Value::Other(kind) => {
                let want = if COLUMNS[i] == "passed" {
                    "a boolean"
                } else {
                    "a string"
                };
                return Err(row_error(
                    name,
                    line,
                    Some(COLUMNS[i]),
                    format!("expected {want}, found {kind}"),
                ));
            }
        };
    }
    from_fields(&fields, opts, name, line)
}

/// One JSON value as a drill column sees it.
#[derive(Default)]
enum Value {
    #[default]
    Absent,
    Text(String),
    Bool(bool),
    Other(&'static str),
}

/// A JSON object into the six columns; other keys ignored, a repeated key refused.
struct RowSeed;

impl<'de> DeserializeSeed<'de> for RowSeed {
    type Value = [Value; 6];
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed {
    type Value = [Value; 6];
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: [Value; 6] = Default::default();
        let mut seen = [false; 6];
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match COLUMNS.iter().position(|c| *c == key) {
                Some(i) => {
                    if seen[i] {
                        return Err(de::Error::custom(format_args!(
                            "duplicate key `{}`",
                            COLUMNS[i]
                        )));
                    }
                    seen[i] = true;
                    out[i] = map.next_value_seed(ValueSeed)?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number or boolean")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Text(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Text(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Text(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Text(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Text(v.to_string()))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Absent)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Absent)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Value::Other("an object"))
    }
}

// ---------------------------------------------------------------- databases

/// The select list for the table's columns (name, type): every column as text, a
/// PostgreSQL `timestamptz` as UTC RFC 3339; `Err` naming the required columns it lacks.
fn select_list(
    table_columns: &[(String, String)],
    expr: impl Fn(&str, &str) -> String,
    what: &str,
) -> Result<String, String> {
    let mut list = Vec::new();
    let mut missing = Vec::new();
    for col in COLUMNS {
        match table_columns
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(col))
        {
            Some((_, ty)) => list.push(expr(col, &ty.to_ascii_lowercase())),
            None => missing.push(format!("`{col}`")),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "{what} lacks the required drill column{} {}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        ));
    }
    Ok(list.join(", "))
}

/// The six text values of a row, or the column that could not be read as text.
fn row_values<'r, DB: sqlx::Database>(
    row: &'r DB::Row,
) -> Result<[Option<String>; 6], (usize, String)>
where
    Option<String>: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let mut out: [Option<String>; 6] = Default::default();
    for (i, v) in out.iter_mut().enumerate() {
        *v = row
            .try_get_unchecked::<Option<String>, usize>(i)
            .map_err(|e| (i, e.to_string()))?;
    }
    Ok(out)
}

fn deliver(
    out: &mut DrillRead,
    values: Result<[Option<String>; 6], (usize, String)>,
    opts: &ReadOptions,
    label: &str,
    n: u64,
) {
    let r = match values {
        Ok(v) => {
            let fields: [Option<&str>; 6] =
                std::array::from_fn(|i| v[i].as_deref().filter(|s| !s.is_empty()));
            from_fields(&fields, opts, label, n)
        }
        Err((i, m)) => Err(row_error(label, n, Some(COLUMNS[i]), m)),
    };
    out.row(r);
}

/// Every row of a drill table's query handed to `out`, numbered from 1 as the error
/// locations count them.
async fn deliver_rows<DB, S>(
    mut rows: S,
    out: &mut DrillRead,
    opts: &ReadOptions,
    label: &str,
    fail: impl Fn(sqlx::Error) -> String,
) -> Result<(), String>
where
    DB: sqlx::Database,
    S: futures_util::Stream<Item = Result<DB::Row, sqlx::Error>> + Unpin,
    for<'r> Option<String>: sqlx::Decode<'r, DB>,
    Option<String>: sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let mut n = 0u64;
    while let Some(row) = rows.try_next().await.map_err(&fail)? {
        n += 1;
        deliver(out, row_values::<DB>(&row), opts, label, n);
    }
    Ok(())
}

/// A driver message without the driver's internals, the DSN's password scrubbed.
fn plain(url: &str, e: sqlx::Error) -> String {
    let m = db::scrub(url, e.to_string());
    m.strip_prefix("error returned from database: ")
        .map(str::to_owned)
        .unwrap_or(m)
}

fn read_sqlite(path: &Path, opts: &ReadOptions) -> Result<DrillRead, String> {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
    let shown = format!("sqlite:{}", path.display());
    if !path.is_file() {
        return Err(format!("{shown}: no such database file"));
    }
    let fail = |what: &str, e: sqlx::Error| format!("{shown}: {what}: {}", plain("", e));
    db::runtime()?.block_on(async {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false);
        let mut conn = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| fail("cannot open", e))?;
        let columns: Vec<(String, String)> =
            sqlx::query_as("SELECT name, type FROM pragma_table_info(?1)")
                .bind(TABLE)
                .fetch_all(&mut conn)
                .await
                .map_err(|e| fail("cannot read the table list", e))?;
        let mut out = DrillRead::new(shown.clone());
        if columns.is_empty() {
            out.table_present = false;
            return Ok(out);
        }
        let list = select_list(
            &columns,
            |col, _| format!("CAST(\"{col}\" AS TEXT)"),
            &format!("table `{TABLE}` of {shown}"),
        )?;
        let sql = format!("SELECT {list} FROM {}", quote_table(TABLE));
        let label = format!("{shown} {TABLE}");
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch(&mut conn);
        deliver_rows::<sqlx::Sqlite, _>(rows, &mut out, opts, &label, |e| {
            fail(&format!("reading `{TABLE}`"), e)
        })
        .await?;
        Ok(out)
    })
}

fn read_postgres(url: &str, opts: &ReadOptions) -> Result<DrillRead, String> {
    let shown = db::mask(url);
    let fail = |what: &str, e: sqlx::Error| format!("{shown}: {what}: {}", plain(url, e));
    let options =
        sqlx::postgres::PgConnectOptions::from_str(url).map_err(|e| fail("bad DSN", e))?;
    db::runtime()?.block_on(async {
        let mut conn = match db::connect_postgres(&options).await {
            Ok(c) => c,
            Err(db::ConnectError::Driver(e)) => return Err(fail("cannot connect", e)),
            Err(db::ConnectError::NoAnswer) => {
                return Err(format!(
                    "{shown}: cannot connect: no answer within {}s",
                    db::CONNECT_TIMEOUT.as_secs()
                ));
            }
        };
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
        )
        .bind(quote_table(TABLE))
        .fetch_all(&mut conn)
        .await
        .map_err(|e| fail("cannot read the table's columns", e))?;
        let mut out = DrillRead::new(shown.clone());
        if columns.is_empty() {
            out.table_present = false;
            return Ok(out);
        }
        let list = select_list(
            &columns,
            |col, ty| match ty {
                "timestamp with time zone" => format!(
                    "to_char(\"{col}\" AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
                ),
                "timestamp without time zone" => {
                    format!("to_char(\"{col}\", 'YYYY-MM-DD\"T\"HH24:MI:SS.US')")
                }
                _ => format!("\"{col}\"::text"),
            },
            &format!("table `{TABLE}` of {shown}"),
        )?;
        let sql = format!("SELECT {list} FROM {}", quote_table(TABLE));
        let label = format!("{shown} {TABLE}");
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch(&mut conn);
        deliver_rows::<sqlx::Postgres, _>(rows, &mut out, opts, &label, |e| {
            fail(&format!("reading `{TABLE}`"), e)
        })
        .await?;
        let _ = conn.close().await;
        Ok(out)
    })
}

fn read_mysql(url: &str, opts: &ReadOptions) -> Result<DrillRead, String> {
    let shown = db::mask(url);
    let fail = |what: &str, e: sqlx::Error| format!("{shown}: {what}: {}", plain(url, e));
    db::runtime()?.block_on(async {
        let mut conn = super::mysql::connect(url, &shown).await.map_err(|e| e.0)?;
        let columns = super::mysql::columns(&mut conn, TABLE)
            .await
            .map_err(|e| fail("cannot read the table's columns", e))?;
        let mut out = DrillRead::new(shown.clone());
        if columns.is_empty() {
            out.table_present = false;
            return Ok(out);
        }
        let list = select_list(
            &columns,
            super::mysql::text_of,
            &format!("table `{TABLE}` of {shown}"),
        )?;
        let sql = format!("SELECT {list} FROM {}", super::mysql::quote(TABLE));
        let label = format!("{shown} {TABLE}");
        let rows = sqlx::raw_sql(AssertSqlSafe(sql)).fetch(&mut conn);
        deliver_rows::<sqlx::MySql, _>(rows, &mut out, opts, &label, |e| {
            fail(&format!("reading `{TABLE}`"), e)
        })
        .await?;
        let _ = conn.close().await;
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> DrillRecord {
        DrillRecord {
            job: "billing/settle".into(),
            scheduled_at: "2026-03-01T02:00:00Z".parse().unwrap(),
            at: "2026-03-10T09:00:00Z".parse().unwrap(),
            passed: true,
            scenarios: "clean:passed,rerun:passed".into(),
            report_digest: "sha256:ab".into(),
        }
    }

    #[test]
    fn scenarios_round_trip_and_refuse_bad_shapes() {
        let s = format_scenarios([("clean", true), ("rerun", false)]);
        assert_eq!(s, "clean:passed,rerun:failed");
        assert_eq!(
            parse_scenarios(&s).unwrap(),
            vec![("clean", true), ("rerun", false)]
        );
        assert_eq!(parse_scenarios("").unwrap(), vec![]);
        for bad in [
            "clean",
            "clean:ok",
            "Clean:passed",
            ":passed",
            "clean:passed,clean:failed",
            "clean:passed,",
        ] {
            assert!(parse_scenarios(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_passing_record_must_name_only_passing_scenarios() {
        assert!(rec().check().is_ok());
        let mut r = rec();
        r.scenarios = "clean:passed,rerun:failed".into();
        assert_eq!(r.check().unwrap_err().0, "passed");
        r.passed = false;
        assert!(r.check().is_ok());
        r.scenarios.clear();
        assert!(
            r.check().is_ok(),
            "a failed drill may have stopped before any scenario"
        );
        r.passed = true;
        assert_eq!(r.check().unwrap_err().0, "passed");
    }

    #[test]
    fn sources_are_jsonl_files_or_databases() {
        assert_eq!(
            DrillSource::parse("d/drills.jsonl").unwrap(),
            DrillSource::Jsonl("d/drills.jsonl".into())
        );
        assert_eq!(
            DrillSource::parse("sqlite:s.db").unwrap(),
            DrillSource::Sqlite("s.db".into())
        );
        assert_eq!(
            DrillSource::parse("postgres://u:pw@h/d?events_table=e").unwrap(),
            DrillSource::Postgres("postgres://u:pw@h/d".into())
        );
        for bad in ["drills.csv", "-", "", "drills.txt"] {
            assert!(DrillSource::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            DrillSource::parse("mysql://u:pw@h/d?events_table=e").unwrap(),
            DrillSource::Mysql("mysql://u:pw@h/d".into())
        );
        let e = DrillSource::parse("ftp://u:pw@h/d.csv").unwrap_err();
        assert!(!e.contains(":pw@"), "{e}");
    }

    #[test]
    fn fields_are_validated_with_their_column() {
        let o = ReadOptions::default();
        let good = [
            Some("settle"),
            Some("2026-03-01T02:00:00Z"),
            Some("2026-03-10T09:00:00+09:00"),
            Some("1"),
            Some("clean:passed"),
            Some("sha256:ab"),
        ];
        let r = from_fields(&good, &o, "d.jsonl", 3).unwrap();
        assert!(r.passed);
        for (i, bad, col) in [
            (0, None, "job"),
            (1, Some("yesterday"), "scheduled_at"),
            (2, Some("2026-03-10T09:00:00"), "at"),
            (3, Some("yes"), "passed"),
            (3, None, "passed"),
            (4, Some("clean"), "scenarios"),
            (5, None, "report_digest"),
        ] {
            let mut f = good;
            f[i] = bad;
            let e = from_fields(&f, &o, "d.jsonl", 3).unwrap_err();
            assert_eq!(e.column.as_deref(), Some(col), "{e}");
            assert_eq!(e.at.to_string(), "d.jsonl:3");
        }
    }
}
