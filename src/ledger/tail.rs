//! Following a ledger as it grows (`batchguard watch`, `batchguard metrics`): each
//! [`Tail::poll`] reads only the rows written since the last one, so a refresh costs what
//! was written since, never the whole ledger.
//!
//! How each source knows where it stopped:
//! - **SQLite**: the `rowid`. Writers hold the file's write lock for a whole transaction,
//!   so rows become visible in `rowid` order and a row never appears below one already seen.
//! - **PostgreSQL**: the `id` identity column (`schemas/ledger.postgres.sql`, added by
//!   `batchguard store migrate`). Ids are taken when a row is inserted, not when its
//!   transaction commits, so a row may become visible after a higher id was read: every
//!   id skipped below the highest seen is kept as a *hole* and asked for again on the next
//!   polls, until it arrives or [`HOLE_AGE`] has passed (a rolled-back insert leaves a hole
//!   forever). A jump of more than [`MAX_GAP`] ids (a sequence moved by hand) is not
//!   tracked id by id.
//! - **MySQL / MariaDB**: the `AUTO_INCREMENT` `id` (`schemas/ledger.mysql.sql`), followed
//!   as PostgreSQL's: InnoDB also takes an id at the insert and shows the row at the commit,
//!   and a rolled-back insert also leaves a gap. Queries are text-protocol `COM_QUERY`s
//!   (ids are integers written in), so a poll is one round trip, as in the store.
//! - **JSONL file**: the byte offset. A last line without its newline is a write in
//!   progress: it is read on a later poll, once complete. A file that shrinks was replaced
//!   or truncated, which a ledger never is: that poll fails.
//!
//! Rows are validated by the same code as the audit's readers ([`EventRef::from_fields`],
//! [`OutputRef::from_fields`]); the tail also hands out the `fence` and `detail` columns,
//! which say who held a lock when a slot was skipped.

use super::read::{
    DEFAULT_EVENTS_TABLE, DEFAULT_OUTPUTS_TABLE, MAX_COLUMNS, ReadOptions, Source, quote_table,
    row_error,
};
use super::{Event, EventRef, Output, OutputRef, RowError, SourceError};
use crate::db;
use futures_util::TryStreamExt;
use jiff::Timestamp;
use sqlx::{AssertSqlSafe, Row};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// How long a skipped PostgreSQL id is asked for again: longer than any write transaction
/// of `run` (one statement, at most 30 s).
pub const HOLE_AGE: Duration = Duration::from_secs(300);
/// Larger jumps in the ids are not tracked id by id.
pub const MAX_GAP: i64 = 1024;
/// Rows per query.
const BATCH: i64 = 10_000;

/// An event row, with the columns the audit does not read.
#[derive(Clone, Copy, Debug)]
pub struct TailEvent<'a> {
    pub event: EventRef<'a>,
    /// `fence` (on `start`).
    pub fence: Option<i64>,
    /// `detail`: why a `skip` (who holds the lock), what a failed `end` printed last.
    pub detail: Option<&'a str>,
}

/// One drill record (SPEC 5.3) as `metrics` needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct DrillRecord {
    pub job: String,
    pub passed: bool,
    pub at: Timestamp,
}

/// The table drill records go to (SPEC 5.3).
pub const DRILLS_TABLE: &str = "batchguard_drills";

/// Where a poll's rows go.
pub trait TailSink {
    fn event(&mut self, e: &TailEvent<'_>);
    fn output(&mut self, o: &OutputRef<'_>);
    fn error(&mut self, e: RowError);
}

/// What one poll read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Polled {
    pub events: u64,
    pub outputs: u64,
    pub rejected: u64,
}

/// A ledger being followed: its events and, when it has them, its outputs.
pub struct Tail {
    events: Follow,
    outputs: Option<Follow>,
    opts: ReadOptions,
    /// The database connection PostgreSQL sources share (events, outputs and the clock).
    pg: Option<PgConn>,
    mysql: Option<MysqlConn>,
    sqlite: Option<SqliteConn>,
}

/// How one table or file is followed.
enum Follow {
    Sqlite(SqlCursor),
    Postgres(IdCursor),
    Mysql(IdCursor),
    File(FileCursor),
}

struct SqliteConn {
    rt: tokio::runtime::Runtime,
    conn: sqlx::SqliteConnection,
}

struct PgConn {
    rt: tokio::runtime::Runtime,
    conn: sqlx::PgConnection,
    url: String,
}

struct MysqlConn {
    rt: tokio::runtime::Runtime,
    conn: sqlx::mysql::MySqlConnection,
    url: String,
}

/// A SQL table and the last `rowid` read.
struct SqlCursor {
    table: String,
    label: String,
    select: String,
    index: [Option<usize>; MAX_COLUMNS],
    last: i64,
    is_event: bool,
}

/// A PostgreSQL or MySQL table, the highest `id` read and the ids skipped below it.
struct IdCursor {
    sql: SqlCursor,
    holes: BTreeMap<i64, Instant>,
}

impl IdCursor {
    fn new(sql: SqlCursor) -> IdCursor {
        IdCursor {
            sql,
            holes: BTreeMap::new(),
        }
    }

    /// Forgets holes older than [`HOLE_AGE`]; the ones still asked for.
    fn live_holes(&mut self, now: Instant) -> Vec<i64> {
        self.holes
            .retain(|_, since| now.duration_since(*since) < HOLE_AGE);
        self.holes.keys().copied().collect()
    }

    /// Takes row `id` in: a hole filled, or a new highest id (the ids skipped below it
    /// become holes).
    fn saw(&mut self, id: i64, now: Instant) {
        if self.holes.remove(&id).is_none() && id > self.sql.last {
            let gap = id - self.sql.last - 1;
            if gap > 0 && gap <= MAX_GAP && self.sql.last > 0 {
                for h in self.sql.last + 1..id {
                    self.holes.insert(h, now);
                }
            }
            self.sql.last = id;
        }
    }
}

/// A file and how far it was read.
struct FileCursor {
    path: PathBuf,
    name: String,
    offset: u64,
    line: u64,
    is_event: bool,
    /// The file may not exist yet (the outputs file `run` creates at the first output):
    /// until it does, it reads as empty.
    until_created: bool,
}

impl Tail {
    /// Opens `events` (and `outputs`: a database's own outputs table when `None` and the
    /// table exists; a file ledger has outputs only when given). Nothing is read yet: the
    /// first [`Tail::poll`] reads everything there is.
    pub fn open(
        events: &Source,
        outputs: Option<&Source>,
        opts: ReadOptions,
    ) -> Result<Tail, SourceError> {
        let mut t = Tail {
            events: Follow::File(FileCursor::new(Path::new(""), true)),
            outputs: None,
            opts,
            pg: None,
            mysql: None,
            sqlite: None,
        };
        t.events = t.follow(events, true, true)?.expect("a required table");
        t.outputs = match outputs {
            Some(o) => t.follow(o, false, true)?,
            None => match events {
                Source::Sqlite(_) | Source::Postgres { .. } | Source::Mysql { .. } => {
                    t.follow(events, false, false)?
                }
                _ => None,
            },
        };
        Ok(t)
    }

    /// Follows `path` as the outputs file though it does not exist yet: `run` creates it
    /// beside a JSONL ledger at the first output reported, and until then there are none.
    pub fn outputs_created_later(&mut self, path: &Path) {
        let mut f = FileCursor::new(path, false);
        f.until_created = true;
        self.outputs = Some(Follow::File(f));
    }

    /// Whether outputs are followed (without them the output checks have nothing to read).
    pub fn has_outputs(&self) -> bool {
        self.outputs.is_some()
    }

    /// `None`: a table that is not `required` and does not exist.
    fn follow(
        &mut self,
        src: &Source,
        is_event: bool,
        required: bool,
    ) -> Result<Option<Follow>, SourceError> {
        match src {
            Source::Sqlite(path) => {
                if self.sqlite.is_none() {
                    self.sqlite = Some(SqliteConn::open(path)?);
                }
                let c = self.sqlite.as_mut().expect("just opened");
                let table = if is_event {
                    DEFAULT_EVENTS_TABLE
                } else {
                    DEFAULT_OUTPUTS_TABLE
                };
                let shown = format!("sqlite:{}", path.display());
                let cur = c.cursor(&shown, table, is_event, required)?;
                Ok(cur.map(Follow::Sqlite))
            }
            Source::Postgres {
                url,
                events_table,
                outputs_table,
            } => {
                if self.pg.is_none() {
                    self.pg = Some(PgConn::open(url)?);
                }
                let c = self.pg.as_mut().expect("just opened");
                let table = if is_event {
                    events_table
                } else {
                    outputs_table
                };
                let cur = c.cursor(table, is_event, required)?;
                Ok(cur.map(|sql| Follow::Postgres(IdCursor::new(sql))))
            }
            Source::Mysql {
                url,
                events_table,
                outputs_table,
            } => {
                if self.mysql.is_none() {
                    self.mysql = Some(MysqlConn::open(url)?);
                }
                let c = self.mysql.as_mut().expect("just opened");
                let table = if is_event {
                    events_table
                } else {
                    outputs_table
                };
                let cur = c.cursor(table, is_event, required)?;
                Ok(cur.map(|sql| Follow::Mysql(IdCursor::new(sql))))
            }
            Source::Jsonl(path) => {
                if super::input::is_stdin(path) {
                    return Err(SourceError(
                        "standard input cannot be followed: give the ledger's file or database"
                            .into(),
                    ));
                }
                let f = FileCursor::new(path, is_event);
                f.check()?;
                Ok(Some(Follow::File(f)))
            }
            other => Err(SourceError(format!(
                "{} cannot be followed as it grows: give a JSONL file, sqlite:PATH, \
                 postgres://… or mysql://… (`batchguard audit` reads every source once)",
                other.display()
            ))),
        }
    }

    /// Reads the rows written since the last poll (everything, the first time).
    pub fn poll(&mut self, sink: &mut dyn TailSink) -> Result<Polled, SourceError> {
        let mut got = Polled::default();
        let Tail {
            events,
            outputs,
            opts,
            pg,
            mysql,
            sqlite,
        } = self;
        for f in std::iter::once(events).chain(outputs.as_mut()) {
            match f {
                Follow::Sqlite(c) => {
                    let conn = sqlite.as_mut().expect("opened with the cursor");
                    conn.poll(c, opts, sink, &mut got)?
                }
                Follow::Postgres(c) => {
                    let conn = pg.as_mut().expect("opened with the cursor");
                    conn.poll(c, opts, sink, &mut got)?
                }
                Follow::Mysql(c) => {
                    let conn = mysql.as_mut().expect("opened with the cursor");
                    conn.poll(c, opts, sink, &mut got)?
                }
                Follow::File(c) => c.poll(opts, sink, &mut got)?,
            }
        }
        Ok(got)
    }

    /// The drill records of the ledger's database (`batchguard_drills`), read whole
    /// (drills are quarterly: a handful of rows); none when the table does not exist or
    /// the ledger is a file. A row that cannot be read is left out.
    pub fn drills(&mut self) -> Result<Vec<DrillRecord>, SourceError> {
        let rows: Vec<(Option<String>, Option<String>, Option<String>)> =
            if let Some(c) = &mut self.sqlite {
                let exists: i64 =
                    c.rt.block_on(
                        sqlx::query_scalar("SELECT count(*) FROM pragma_table_info(?1)")
                            .bind(DRILLS_TABLE)
                            .fetch_one(&mut c.conn),
                    )
                    .map_err(|e| SourceError(format!("reading `{DRILLS_TABLE}`: {e}")))?;
                if exists == 0 {
                    return Ok(Vec::new());
                }
                c.rt.block_on(
                    sqlx::query_as(
                        "SELECT CAST(job AS TEXT), CAST(passed AS TEXT), CAST(at AS TEXT) \
                         FROM batchguard_drills",
                    )
                    .fetch_all(&mut c.conn),
                )
                .map_err(|e| SourceError(format!("reading `{DRILLS_TABLE}`: {e}")))?
            } else if let Some(c) = &mut self.pg {
                let PgConn { rt, conn, .. } = c;
                let exists: bool = rt
                    .block_on(
                        sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
                            .bind(DRILLS_TABLE)
                            .fetch_one(&mut *conn),
                    )
                    .map_err(|e| c_fail(&c.url, e))?;
                if !exists {
                    return Ok(Vec::new());
                }
                // `at` as UTC RFC 3339 whether it is timestamptz or text.
                rt.block_on(
                    sqlx::query_as(
                        "SELECT job::text, passed::text, CASE WHEN pg_typeof(at) = \
                         'timestamp with time zone'::regtype THEN to_char(at::timestamptz AT TIME \
                         ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') ELSE at::text END \
                         FROM batchguard_drills",
                    )
                    .fetch_all(&mut *conn),
                )
                .map_err(|e| c_fail(&c.url, e))?
            } else if let Some(c) = &mut self.mysql {
                match c.drills()? {
                    Some(rows) => rows,
                    None => return Ok(Vec::new()),
                }
            } else {
                return Ok(Vec::new());
            };
        Ok(rows
            .into_iter()
            .filter_map(|(job, passed, at)| {
                let passed = matches!(
                    passed?.trim().to_ascii_lowercase().as_str(),
                    "1" | "t" | "true" | "yes"
                );
                Some(DrillRecord {
                    job: job?,
                    passed,
                    at: super::time::parse_timestamp(&at?, None).ok()?,
                })
            })
            .collect())
    }

    /// The source's clock: PostgreSQL's `now()`, MySQL's `UTC_TIMESTAMP(6)`, the host's
    /// for SQLite and files.
    pub fn now(&mut self) -> Result<Timestamp, SourceError> {
        if let Some(c) = &mut self.mysql {
            return c.now();
        }
        match &mut self.pg {
            Some(c) => c.now(),
            None => Ok(host_now()),
        }
    }
}

/// The clock of a ledger source, for a window that ends "now" (`audit --since`):
/// PostgreSQL's `now()`, MySQL's `UTC_TIMESTAMP(6)` (the clock its store decides leases
/// by), the host's for SQLite and files (SPEC 7.1: SQLite's clock is the host's). In whole
/// microseconds, the ledger's precision.
pub fn clock(src: &Source) -> Result<Timestamp, SourceError> {
    match src {
        Source::Postgres { url, .. } => PgConn::open(url)?.now(),
        Source::Mysql { url, .. } => MysqlConn::open(url)?.now(),
        _ => Ok(host_now()),
    }
}

/// The host's clock, in whole microseconds.
pub fn host_now() -> Timestamp {
    let t = Timestamp::now();
    Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)
}

fn c_fail(url: &str, e: sqlx::Error) -> SourceError {
    SourceError(format!(
        "{}: reading `{DRILLS_TABLE}`: {}",
        db::mask(url),
        super::sql::plain(db::scrub(url, e.to_string()))
    ))
}

/// The text fields of one row into an event or an output for the sink.
fn deliver(
    values: &[Option<String>; MAX_COLUMNS],
    is_event: bool,
    opts: &ReadOptions,
    label: &str,
    row: u64,
    sink: &mut dyn TailSink,
    got: &mut Polled,
) {
    let mut fields: [Option<&str>; MAX_COLUMNS] = [None; MAX_COLUMNS];
    for (f, v) in fields.iter_mut().zip(values.iter()) {
        *f = v.as_deref().filter(|s| !s.is_empty());
    }
    deliver_fields(&fields, is_event, opts, label, row, sink, got);
}

fn deliver_fields(
    fields: &[Option<&str>],
    is_event: bool,
    opts: &ReadOptions,
    label: &str,
    row: u64,
    sink: &mut dyn TailSink,
    got: &mut Polled,
) {
    let r = if is_event {
        event_of(fields, opts, label, row).map(|e| {
            got.events += 1;
            sink.event(&e)
        })
    } else {
        OutputRef::from_fields(&fields[..5], opts, label, row).map(|o| {
            got.outputs += 1;
            sink.output(&o)
        })
    };
    if let Err(e) = r {
        got.rejected += 1;
        sink.error(e);
    }
}

/// An event row's fields (in [`super::read::EVENT_COLUMNS`] order) as a [`TailEvent`].
fn event_of<'a>(
    fields: &[Option<&'a str>],
    opts: &ReadOptions,
    label: &str,
    row: u64,
) -> Result<TailEvent<'a>, RowError> {
    let event = EventRef::from_fields(&fields[..11], opts, label, row)?;
    let fence = match fields.get(11).copied().flatten() {
        None => None,
        Some(s) => Some(s.trim().parse::<i64>().map_err(|_| {
            row_error(
                label,
                row,
                Some("fence"),
                format!("`{s}` is not a whole number"),
            )
        })?),
    };
    Ok(TailEvent {
        event,
        fence,
        detail: fields.get(12).copied().flatten(),
    })
}

/// Row `id` of `c`'s table: its values handed to `sink`, or, when a value is not text, the
/// row counted as rejected and reported with its column.
#[allow(clippy::too_many_arguments)]
fn take_row<'r, DB: sqlx::Database>(
    row: &'r DB::Row,
    c: &SqlCursor,
    id: i64,
    opts: &ReadOptions,
    values: &mut [Option<String>; MAX_COLUMNS],
    sink: &mut dyn TailSink,
    got: &mut Polled,
) where
    Option<String>: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let n_cols = columns(c.is_event).len();
    match values_of::<DB>(row, &c.index, n_cols, values) {
        Ok(()) => deliver(values, c.is_event, opts, &c.label, id as u64, sink, got),
        Err((i, m)) => {
            got.rejected += 1;
            sink.error(row_error(
                &c.label,
                id as u64,
                Some(columns(c.is_event)[i]),
                m,
            ));
        }
    }
}

/// The text values of a row whose first column is its number (`rowid`, `id`), by
/// column of the row kind; `Err((column, why))` for a value that is not text.
fn values_of<'r, DB: sqlx::Database>(
    row: &'r DB::Row,
    index: &[Option<usize>; MAX_COLUMNS],
    n_cols: usize,
    values: &mut [Option<String>; MAX_COLUMNS],
) -> Result<(), (usize, String)>
where
    Option<String>: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    for (i, v) in values.iter_mut().enumerate().take(n_cols) {
        *v = match index[i] {
            None => None,
            Some(j) => row
                .try_get_unchecked::<Option<String>, usize>(j + 1)
                .map_err(|e| (i, e.to_string()))?,
        };
    }
    Ok(())
}

fn columns(is_event: bool) -> &'static [&'static str] {
    if is_event {
        <Event as super::read::LedgerRow>::COLUMNS
    } else {
        <Output as super::read::LedgerRow>::COLUMNS
    }
}

/// The select list of a table, or why the table cannot be followed (`None`: an optional
/// table that does not exist).
fn select_for(
    table_columns: &[(String, String)],
    is_event: bool,
    what: &str,
    expr: impl Fn(&str, &str) -> String,
) -> Result<([Option<usize>; MAX_COLUMNS], String), SourceError> {
    let (index, list) = if is_event {
        super::sql::select_list::<Event>(table_columns, expr)
    } else {
        super::sql::select_list::<Output>(table_columns, expr)
    };
    let missing = if is_event {
        super::read::missing_columns::<Event>(&index, what)
    } else {
        super::read::missing_columns::<Output>(&index, what)
    };
    match missing {
        Some(e) => Err(e),
        None => Ok((index, list)),
    }
}

impl SqliteConn {
    fn open(path: &Path) -> Result<SqliteConn, SourceError> {
        use sqlx::ConnectOptions;
        use sqlx::sqlite::SqliteConnectOptions;
        let shown = format!("sqlite:{}", path.display());
        if !path.is_file() {
            return Err(SourceError(format!("{shown}: no such database file")));
        }
        let rt = db::runtime().map_err(SourceError)?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(Duration::from_secs(30));
        let conn = rt.block_on(options.connect()).map_err(|e| {
            SourceError(format!(
                "{shown}: cannot open: {}",
                super::sql::plain(e.to_string())
            ))
        })?;
        Ok(SqliteConn { rt, conn })
    }

    fn cursor(
        &mut self,
        shown: &str,
        table: &str,
        is_event: bool,
        required: bool,
    ) -> Result<Option<SqlCursor>, SourceError> {
        let fail = |what: &str, e: sqlx::Error| {
            SourceError(format!(
                "{shown}: {what}: {}",
                super::sql::plain(e.to_string())
            ))
        };
        let cols: Vec<(String, String)> = self
            .rt
            .block_on(
                sqlx::query_as("SELECT name, type FROM pragma_table_info(?1)")
                    .bind(table)
                    .fetch_all(&mut self.conn),
            )
            .map_err(|e| fail("cannot read the table list", e))?;
        if cols.is_empty() {
            if !required {
                return Ok(None);
            }
            return Err(SourceError(format!("{shown}: no table `{table}`")));
        }
        let (index, list) = select_for(
            &cols,
            is_event,
            &format!("table `{table}` of {shown}"),
            |c, _| format!("CAST(\"{c}\" AS TEXT)"),
        )?;
        Ok(Some(SqlCursor {
            table: table.to_owned(),
            label: format!("{shown} {table}"),
            select: format!(
                "SELECT rowid, {list} FROM {} WHERE rowid > ?1 ORDER BY rowid LIMIT {BATCH}",
                quote_table(table)
            ),
            index,
            last: 0,
            is_event,
        }))
    }

    fn poll(
        &mut self,
        c: &mut SqlCursor,
        opts: &ReadOptions,
        sink: &mut dyn TailSink,
        got: &mut Polled,
    ) -> Result<(), SourceError> {
        let mut values: [Option<String>; MAX_COLUMNS] = Default::default();
        loop {
            let mut n = 0i64;
            let SqliteConn { rt, conn } = self;
            rt.block_on(async {
                let mut rows = sqlx::query(AssertSqlSafe(c.select.clone()))
                    .bind(c.last)
                    .fetch(&mut *conn);
                while let Some(row) = rows.try_next().await? {
                    n += 1;
                    let id: i64 = row.try_get(0)?;
                    c.last = id;
                    take_row::<sqlx::Sqlite>(&row, c, id, opts, &mut values, sink, got);
                }
                Ok::<_, sqlx::Error>(())
            })
            .map_err(|e| {
                SourceError(format!(
                    "{}: reading `{}`: {}",
                    c.label.split(' ').next().unwrap_or(""),
                    c.table,
                    super::sql::plain(e.to_string())
                ))
            })?;
            if n < BATCH {
                return Ok(());
            }
        }
    }
}

impl PgConn {
    fn open(url: &str) -> Result<PgConn, SourceError> {
        let shown = db::mask(url);
        let fail = |what: &str, e: sqlx::Error| {
            SourceError(format!(
                "{shown}: {what}: {}",
                super::sql::plain(db::scrub(url, e.to_string()))
            ))
        };
        let options =
            sqlx::postgres::PgConnectOptions::from_str(url).map_err(|e| fail("bad DSN", e))?;
        let rt = db::runtime().map_err(SourceError)?;
        let conn = rt.block_on(super::sql::connect(&options, &shown, fail))?;
        Ok(PgConn {
            rt,
            conn,
            url: url.to_owned(),
        })
    }

    fn fail(&self, what: &str, e: sqlx::Error) -> SourceError {
        SourceError(format!(
            "{}: {what}: {}",
            db::mask(&self.url),
            super::sql::plain(db::scrub(&self.url, e.to_string()))
        ))
    }

    fn now(&mut self) -> Result<Timestamp, SourceError> {
        // `now()` as written: the server's clock, in microseconds since the epoch.
        let us: i64 = self
            .rt
            .block_on(
                sqlx::query_scalar("SELECT (floor(extract(epoch from now()) * 1000000))::bigint")
                    .fetch_one(&mut self.conn),
            )
            .map_err(|e| self.fail("cannot read the clock", e))?;
        Timestamp::from_microsecond(us).map_err(|e| {
            SourceError(format!(
                "{}: the server's clock is out of range: {e}",
                db::mask(&self.url)
            ))
        })
    }

    fn cursor(
        &mut self,
        table: &str,
        is_event: bool,
        required: bool,
    ) -> Result<Option<SqlCursor>, SourceError> {
        let shown = db::mask(&self.url);
        let quoted = quote_table(table);
        let cols: Vec<(String, String)> = self
            .rt
            .block_on(
                sqlx::query_as(
                    "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                     FROM pg_attribute a \
                     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
                     ORDER BY a.attnum",
                )
                .bind(&quoted)
                .fetch_all(&mut self.conn),
            )
            .map_err(|e| self.fail("cannot read the table's columns", e))?;
        if cols.is_empty() {
            if !required {
                return Ok(None);
            }
            return Err(SourceError(format!("{shown}: no table `{table}`")));
        }
        if !cols.iter().any(|(n, _)| n == "id") {
            return Err(SourceError(format!(
                "{shown}: table `{table}` has no `id` column, which numbers its rows so that \
                 only new ones are read: for the batchguard tables run `batchguard store \
                 migrate --store '{shown}'`; for a table of your own, `ALTER TABLE {table} \
                 ADD COLUMN id bigint GENERATED BY DEFAULT AS IDENTITY` and an index on it"
            )));
        }
        let (index, list) = select_for(
            &cols,
            is_event,
            &format!("table `{table}` of {shown}"),
            |col, ty| match ty {
                "timestamp with time zone" => format!(
                    "to_char(\"{col}\" AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
                ),
                "timestamp without time zone" => {
                    format!("to_char(\"{col}\", 'YYYY-MM-DD\"T\"HH24:MI:SS.US')")
                }
                _ => format!("\"{col}\"::text"),
            },
        )?;
        Ok(Some(SqlCursor {
            table: table.to_owned(),
            label: format!("{shown} {table}"),
            select: format!(
                "SELECT id, {list} FROM {quoted} WHERE id > $1 OR id = ANY($2) ORDER BY id LIMIT {BATCH}"
            ),
            index,
            last: 0,
            is_event,
        }))
    }

    fn poll(
        &mut self,
        c: &mut IdCursor,
        opts: &ReadOptions,
        sink: &mut dyn TailSink,
        got: &mut Polled,
    ) -> Result<(), SourceError> {
        let now = Instant::now();
        let mut values: [Option<String>; MAX_COLUMNS] = Default::default();
        // The holes are asked for in the first query only; later batches go on from the
        // highest id.
        let mut holes = c.live_holes(now);
        loop {
            let mut n = 0i64;
            let rows = {
                let PgConn { rt, conn, .. } = &mut *self;
                rt.block_on(
                    sqlx::query(AssertSqlSafe(c.sql.select.clone()))
                        .bind(c.sql.last)
                        .bind(&holes)
                        .fetch_all(&mut *conn),
                )
            }
            .map_err(|e| self.fail(&format!("reading `{}`", c.sql.table), e))?;
            holes.clear();
            for row in &rows {
                n += 1;
                let id: i64 = row
                    .try_get(0)
                    .map_err(|e| self.fail(&format!("reading `{}`", c.sql.table), e))?;
                c.saw(id, now);
                take_row::<sqlx::Postgres>(row, &c.sql, id, opts, &mut values, sink, got);
            }
            if n < BATCH {
                return Ok(());
            }
        }
    }
}

impl MysqlConn {
    fn open(url: &str) -> Result<MysqlConn, SourceError> {
        let rt = db::runtime().map_err(SourceError)?;
        let shown = super::read::mask_dsn(url);
        let conn = rt.block_on(super::mysql::connect(url, &shown))?;
        Ok(MysqlConn {
            rt,
            conn,
            url: url.to_owned(),
        })
    }

    fn fail(&self, what: &str, e: sqlx::Error) -> SourceError {
        SourceError(format!(
            "{}: {what}: {}",
            super::read::mask_dsn(&self.url),
            super::sql::plain(db::scrub(&self.url, e.to_string()))
        ))
    }

    /// The rows of one text-protocol query (one round trip), every value as text.
    fn text_rows(
        &mut self,
        sql: String,
        what: &str,
    ) -> Result<Vec<sqlx::mysql::MySqlRow>, SourceError> {
        let MysqlConn { rt, conn, .. } = self;
        rt.block_on(sqlx::raw_sql(AssertSqlSafe(sql)).fetch_all(&mut *conn))
            .map_err(|e| self.fail(what, e))
    }

    fn now(&mut self) -> Result<Timestamp, SourceError> {
        const WHAT: &str = "cannot read the clock";
        let rows = self.text_rows(
            "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS CHAR)"
                .into(),
            WHAT,
        )?;
        rows.first()
            .and_then(|r| r.try_get_unchecked::<Option<String>, _>(0).ok().flatten())
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|us| Timestamp::from_microsecond(us).ok())
            .ok_or_else(|| {
                SourceError(format!(
                    "{}: {WHAT}: unexpected answer",
                    super::read::mask_dsn(&self.url)
                ))
            })
    }

    fn table_columns(&mut self, table: &str) -> Result<Vec<(String, String)>, SourceError> {
        let MysqlConn { rt, conn, .. } = self;
        rt.block_on(super::mysql::columns(conn, table))
            .map_err(|e| self.fail("cannot read the table's columns", e))
    }

    fn cursor(
        &mut self,
        table: &str,
        is_event: bool,
        required: bool,
    ) -> Result<Option<SqlCursor>, SourceError> {
        let shown = super::read::mask_dsn(&self.url);
        if !super::read::valid_table_name(table) {
            return Err(SourceError(format!(
                "{shown}: `{table}` is not a valid table name"
            )));
        }
        let cols = self.table_columns(table)?;
        if cols.is_empty() {
            if !required {
                return Ok(None);
            }
            return Err(SourceError(format!("{shown}: no table `{table}`")));
        }
        if !cols.iter().any(|(n, _)| n.eq_ignore_ascii_case("id")) {
            return Err(SourceError(format!(
                "{shown}: table `{table}` has no `id` column, which numbers its rows so that \
                 only new ones are read: for the batchguard tables run `batchguard store \
                 migrate --store '{shown}'`; for a table of your own, `ALTER TABLE {table} \
                 ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE`"
            )));
        }
        let (index, list) = select_for(
            &cols,
            is_event,
            &format!("table `{table}` of {shown}"),
            super::mysql::text_of,
        )?;
        Ok(Some(SqlCursor {
            table: table.to_owned(),
            label: format!("{shown} {table}"),
            // The condition is added per poll: the highest id and the holes, written in.
            select: format!(
                "SELECT CAST(`id` AS CHAR), {list} FROM {}",
                super::mysql::quote(table)
            ),
            index,
            last: 0,
            is_event,
        }))
    }

    fn poll(
        &mut self,
        c: &mut IdCursor,
        opts: &ReadOptions,
        sink: &mut dyn TailSink,
        got: &mut Polled,
    ) -> Result<(), SourceError> {
        use std::fmt::Write;
        let now = Instant::now();
        let mut values: [Option<String>; MAX_COLUMNS] = Default::default();
        let mut holes = c.live_holes(now);
        loop {
            let mut sql = format!("{} WHERE `id` > {}", c.sql.select, c.sql.last);
            if !holes.is_empty() {
                sql.push_str(" OR `id` IN (");
                for (i, h) in holes.iter().enumerate() {
                    let _ = write!(sql, "{}{h}", if i > 0 { ", " } else { "" });
                }
                sql.push(')');
            }
            let _ = write!(sql, " ORDER BY `id` LIMIT {BATCH}");
            let what = format!("reading `{}`", c.sql.table);
            let rows = self.text_rows(sql, &what)?;
            holes.clear();
            for row in &rows {
                let id = row
                    .try_get_unchecked::<Option<String>, _>(0)
                    .ok()
                    .flatten()
                    .and_then(|s| s.parse::<i64>().ok())
                    .ok_or_else(|| {
                        SourceError(format!(
                            "{}: {what}: an `id` that is not a whole number",
                            super::read::mask_dsn(&self.url)
                        ))
                    })?;
                c.saw(id, now);
                take_row::<sqlx::MySql>(row, &c.sql, id, opts, &mut values, sink, got);
            }
            if (rows.len() as i64) < BATCH {
                return Ok(());
            }
        }
    }

    /// `batchguard_drills` of the connection's database as (job, passed, at) text; `None`
    /// when it has no such table.
    #[allow(clippy::type_complexity)]
    fn drills(
        &mut self,
    ) -> Result<Option<Vec<(Option<String>, Option<String>, Option<String>)>>, SourceError> {
        let cols = self.table_columns(DRILLS_TABLE).map_err(|e| {
            SourceError(e.0.replacen(
                "cannot read the table's columns",
                &format!("reading `{DRILLS_TABLE}`"),
                1,
            ))
        })?;
        let ty = |name: &str| {
            cols.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, t)| t.clone())
        };
        let (Some(_), Some(_), Some(at)) = (ty("job"), ty("passed"), ty("at")) else {
            return Ok(None);
        };
        // `at` in UTC RFC 3339 whether the column is text (as written) or TIMESTAMP.
        let sql = format!(
            "SELECT CAST(`job` AS CHAR), CAST(`passed` AS CHAR), {} FROM `{DRILLS_TABLE}`",
            super::mysql::text_of("at", &at)
        );
        let rows = self.text_rows(sql, &format!("reading `{DRILLS_TABLE}`"))?;
        Ok(Some(
            rows.iter()
                .map(|r| {
                    let get = |i: usize| r.try_get_unchecked::<Option<String>, _>(i).ok().flatten();
                    (get(0), get(1), get(2))
                })
                .collect(),
        ))
    }
}

impl FileCursor {
    fn new(path: &Path, is_event: bool) -> FileCursor {
        FileCursor {
            path: path.to_path_buf(),
            name: super::input::display(path),
            offset: 0,
            line: 0,
            is_event,
            until_created: false,
        }
    }

    /// A plain file: a compressed one cannot be read from where the last poll stopped.
    fn check(&self) -> Result<(), SourceError> {
        let mut f = std::fs::File::open(&self.path)
            .map_err(|e| SourceError(format!("cannot read ledger file {}: {e}", self.name)))?;
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            return Err(SourceError(format!(
                "{} is not a regular file: a pipe cannot be followed as it grows",
                self.name
            )));
        }
        let mut head = [0u8; 4];
        let n = f.read(&mut head).unwrap_or(0);
        if super::input::Compression::sniff(&head[..n]) != super::input::Compression::None {
            return Err(SourceError(format!(
                "{} is compressed: a compressed ledger cannot be followed as it grows \
                 (`batchguard audit` reads it)",
                self.name
            )));
        }
        Ok(())
    }

    fn poll(
        &mut self,
        opts: &ReadOptions,
        sink: &mut dyn TailSink,
        got: &mut Polled,
    ) -> Result<(), SourceError> {
        let io =
            |e: std::io::Error| SourceError(format!("cannot read ledger file {}: {e}", self.name));
        let mut f = match std::fs::File::open(&self.path) {
            Err(e) if self.until_created && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(());
            }
            r => r.map_err(io)?,
        };
        let len = f.metadata().map_err(io)?.len();
        if len < self.offset {
            return Err(SourceError(format!(
                "ledger file {} shrank from {} to {len} bytes: it was replaced or truncated, \
                 and a ledger only grows; start again to read it from the beginning",
                self.name, self.offset
            )));
        }
        if len == self.offset {
            return Ok(());
        }
        f.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        // Up to the length seen now, a line at a time (memory stays flat for any file).
        let mut rdr = std::io::BufReader::with_capacity(1 << 20, f.take(len - self.offset));
        let cols = columns(self.is_event);
        let mut raw = Vec::with_capacity(512);
        loop {
            raw.clear();
            let n = rdr.read_until(b'\n', &mut raw).map_err(io)?;
            // Only whole lines: the rest is a write in progress, read once complete.
            if n == 0 || raw.last() != Some(&b'\n') {
                return Ok(());
            }
            self.offset += n as u64;
            let at_start = self.line == 0;
            self.line += 1;
            let body = &raw[..n - 1];
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let text = match body.strip_prefix(b"\xef\xbb\xbf") {
                Some(rest) if at_start => rest,
                _ => body,
            };
            let line = self.line;
            let is_event = self.is_event;
            let name = &self.name;
            let r = super::jsonl::with_fields(text, cols, name, line, &mut |fields| {
                deliver_fields(fields, is_event, opts, name, line, sink, got);
                Ok(())
            });
            if let Err(e) = r {
                got.rejected += 1;
                sink.error(e);
            }
        }
    }
}
