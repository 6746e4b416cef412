//! Database ledgers through sqlx: SQLite (`sqlite:PATH`) and PostgreSQL (`postgres://…`).
//!
//! Decisions (see `docs/ledger.md`):
//! - A current-thread tokio runtime is created inside each read; the callers stay
//!   synchronous.
//! - The table's columns are looked up first (`pragma_table_info` / `pg_attribute` with the
//!   table name as a bound parameter); required columns it lacks are a [`SourceError`] naming
//!   them, optional ones it lacks read as absent, other columns are ignored.
//! - Every column is selected as text, so one validation path ([`LedgerRow::from_fields`])
//!   serves all sources: SQLite values are `CAST(… AS TEXT)` (timestamps are stored as RFC
//!   3339 text); PostgreSQL `timestamptz` columns are formatted as UTC RFC 3339 by
//!   `to_char` (microseconds), `timestamp without time zone` columns without an offset (so
//!   they are row errors unless `--assume-tz`), text columns as they are.
//! - Table names are validated identifiers ([`super::read::valid_table_name`]), then
//!   double-quoted; every other value is a bound parameter.
//! - Rows are streamed, never loaded whole: SQLite through `fetch`; PostgreSQL through a
//!   server-side cursor (`DECLARE … CURSOR`, `FETCH FORWARD 10000`) in a read-only
//!   transaction, so memory stays flat for any table size.
//! - Row numbers in messages are the position in the result (1-based), after the source
//!   and table: `sqlite:ledger.db batchguard_events:17`.

use super::read::{
    DEFAULT_EVENTS_TABLE, DEFAULT_OUTPUTS_TABLE, LedgerRow, MAX_COLUMNS, ReadOptions, mask_dsn,
    missing_columns, quote_table, row_error,
};
use super::{RowError, SourceError};
use crate::db;
use futures_util::TryStreamExt;
use sqlx::{AssertSqlSafe, Connection, Row};
use std::path::Path;
use std::str::FromStr;

/// Rows per `FETCH` from a PostgreSQL cursor: large enough that round trips do not
/// dominate, small enough that memory stays flat.
const CURSOR_BATCH: u32 = 10_000;

/// The shared current-thread runtime ([`crate::db::runtime`]).
fn runtime() -> Result<tokio::runtime::Runtime, SourceError> {
    db::runtime().map_err(SourceError)
}

/// A PostgreSQL connection within [`db::CONNECT_TIMEOUT`], failures named after `shown`.
pub(crate) async fn connect(
    options: &sqlx::postgres::PgConnectOptions,
    shown: &str,
    fail: impl Fn(&str, sqlx::Error) -> SourceError,
) -> Result<sqlx::postgres::PgConnection, SourceError> {
    db::connect_postgres(options).await.map_err(|e| match e {
        db::ConnectError::Driver(e) => fail("cannot connect", e),
        db::ConnectError::NoAnswer => SourceError(format!(
            "{shown}: cannot connect: no answer within {}s",
            db::CONNECT_TIMEOUT.as_secs()
        )),
    })
}

/// Builds `SELECT` expressions for the row kind's columns from the table's (name, type)
/// list; `None` for absent columns.
pub(crate) fn select_list<R: LedgerRow>(
    table_columns: &[(String, String)],
    expr: impl Fn(&str, &str) -> String,
) -> ([Option<usize>; MAX_COLUMNS], String) {
    let mut index = [None; MAX_COLUMNS];
    let mut list = Vec::new();
    for (i, col) in R::COLUMNS.iter().enumerate() {
        if let Some((_, ty)) = table_columns
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(col))
        {
            index[i] = Some(list.len());
            list.push(expr(col, &ty.to_ascii_lowercase()));
        }
    }
    if list.is_empty() {
        list.push("NULL".into());
    }
    (index, list.join(", "))
}

/// Reads one streamed row: all selected values are text or NULL.
pub(super) fn row_fields<'r, R: LedgerRow, DB: sqlx::Database>(
    row: &'r DB::Row,
    index: &[Option<usize>; MAX_COLUMNS],
    values: &mut [Option<String>; MAX_COLUMNS],
) -> Result<(), (usize, String)>
where
    Option<String>: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    for i in 0..R::COLUMNS.len() {
        values[i] = match index[i] {
            None => None,
            Some(j) => row
                .try_get_unchecked::<Option<String>, usize>(j)
                .map_err(|e| (i, e.to_string()))?,
        };
    }
    Ok(())
}

pub(super) fn deliver<R: LedgerRow>(
    values: &[Option<String>; MAX_COLUMNS],
    opts: &ReadOptions,
    label: &str,
    n: u64,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) {
    let mut fields: [Option<&str>; MAX_COLUMNS] = [None; MAX_COLUMNS];
    for (f, v) in fields.iter_mut().zip(values.iter()) {
        *f = v.as_deref().filter(|s| !s.is_empty());
    }
    match R::from_fields(&fields[..R::COLUMNS.len()], opts, label, n) {
        Ok(r) => on_row(r),
        Err(e) => on_error(e),
    }
}

pub(crate) fn read_sqlite<R: LedgerRow>(
    path: &Path,
    opts: &ReadOptions,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
    let shown = format!("sqlite:{}", path.display());
    if !path.is_file() {
        return Err(SourceError(format!("{shown}: no such database file")));
    }
    let table = if R::IS_EVENT {
        DEFAULT_EVENTS_TABLE
    } else {
        DEFAULT_OUTPUTS_TABLE
    };
    let fail = |what: &str, e: sqlx::Error| {
        SourceError(format!("{shown}: {what}: {}", plain(e.to_string())))
    };
    runtime()?.block_on(async {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false);
        let mut conn = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| fail("cannot open", e))?;
        let columns: Vec<(String, String)> =
            sqlx::query_as("SELECT name, type FROM pragma_table_info(?1)")
                .bind(table)
                .fetch_all(&mut conn)
                .await
                .map_err(|e| fail("cannot read the table list", e))?;
        if columns.is_empty() {
            return Err(SourceError(format!("{shown}: no table `{table}`")));
        }
        let (index, list) = select_list::<R>(&columns, |col, _| format!("CAST(\"{col}\" AS TEXT)"));
        if let Some(e) = missing_columns::<R>(&index, &format!("table `{table}` of {shown}")) {
            return Err(e);
        }
        let sql = format!("SELECT {list} FROM {}", quote_table(table));
        let label = format!("{shown} {table}");
        let mut stream = sqlx::query(AssertSqlSafe(sql)).fetch(&mut conn);
        let mut n = 0u64;
        let mut values: [Option<String>; MAX_COLUMNS] = Default::default();
        while let Some(row) = stream
            .try_next()
            .await
            .map_err(|e| fail(&format!("reading `{table}`"), e))?
        {
            n += 1;
            match row_fields::<R, sqlx::Sqlite>(&row, &index, &mut values) {
                Ok(()) => deliver(&values, opts, &label, n, on_row, on_error),
                Err((i, m)) => on_error(row_error(&label, n, Some(R::COLUMNS[i]), m)),
            }
        }
        Ok(n)
    })
}

/// Whether the SQLite database has `table` (an audit without its outputs table skips
/// the output checks rather than failing).
pub(crate) fn sqlite_has_table(path: &Path, table: &str) -> Result<bool, SourceError> {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
    let shown = format!("sqlite:{}", path.display());
    if !path.is_file() {
        return Err(SourceError(format!("{shown}: no such database file")));
    }
    let fail = |what: &str, e: sqlx::Error| {
        SourceError(format!("{shown}: {what}: {}", plain(e.to_string())))
    };
    runtime()?.block_on(async {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false);
        let mut conn = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| fail("cannot open", e))?;
        let n: (i64,) = sqlx::query_as("SELECT count(*) FROM pragma_table_info(?1)")
            .bind(table)
            .fetch_one(&mut conn)
            .await
            .map_err(|e| fail("cannot read the table list", e))?;
        Ok(n.0 > 0)
    })
}

/// Whether the PostgreSQL database has `table` (validated, optionally `schema.table`).
pub(crate) fn postgres_has_table(url: &str, table: &str) -> Result<bool, SourceError> {
    use sqlx::postgres::PgConnectOptions;
    let shown = mask_dsn(url);
    let fail = |what: &str, e: sqlx::Error| {
        SourceError(format!(
            "{shown}: {what}: {}",
            plain(db::scrub(url, e.to_string()))
        ))
    };
    let options = PgConnectOptions::from_str(url).map_err(|e| fail("bad DSN", e))?;
    runtime()?.block_on(async {
        let mut conn = connect(&options, &shown, fail).await?;
        let found: (bool,) = sqlx::query_as("SELECT to_regclass($1) IS NOT NULL")
            .bind(quote_table(table))
            .fetch_one(&mut conn)
            .await
            .map_err(|e| fail("cannot look up the table", e))?;
        Ok(found.0)
    })
}

/// A driver message without the driver's internals: sqlx's "error returned from
/// database: " prefix and the server source position (" at line 948") are noise to a user.
pub(crate) fn plain(m: String) -> String {
    let m = m
        .strip_prefix("error returned from database: ")
        .map(str::to_owned)
        .unwrap_or(m);
    match m.rfind(" at line ") {
        Some(i) if m[i + 9..].chars().all(|c| c.is_ascii_digit()) && m.len() > i + 9 => {
            m[..i].to_owned()
        }
        _ => m,
    }
}

pub(crate) fn read_postgres<R: LedgerRow>(
    url: &str,
    table: &str,
    opts: &ReadOptions,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
    use sqlx::postgres::PgConnectOptions;
    let shown = mask_dsn(url);
    let fail = |what: &str, e: sqlx::Error| {
        SourceError(format!(
            "{shown}: {what}: {}",
            plain(db::scrub(url, e.to_string()))
        ))
    };
    if !super::read::valid_table_name(table) {
        return Err(SourceError(format!(
            "{shown}: `{table}` is not a valid table name"
        )));
    }
    let options = PgConnectOptions::from_str(url).map_err(|e| fail("bad DSN", e))?;
    runtime()?.block_on(async {
        let mut conn = connect(&options, &shown, fail).await?;
        let quoted = quote_table(table);
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
        )
        .bind(&quoted)
        .fetch_all(&mut conn)
        .await
        .map_err(|e| fail("cannot read the table's columns", e))?;
        if columns.is_empty() {
            return Err(SourceError(format!("{shown}: no table `{table}`")));
        }
        let (index, list) = select_list::<R>(&columns, |col, ty| match ty {
            "timestamp with time zone" => format!(
                "to_char(\"{col}\" AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
            ),
            "timestamp without time zone" => {
                format!("to_char(\"{col}\", 'YYYY-MM-DD\"T\"HH24:MI:SS.US')")
            }
            _ => format!("\"{col}\"::text"),
        });
        if let Some(e) = missing_columns::<R>(&index, &format!("table `{table}` of {shown}")) {
            return Err(e);
        }
        // A server-side cursor in a read-only transaction: the server hands out
        // CURSOR_BATCH rows per round trip, so neither side ever holds the table.
        let reading = |e| fail(&format!("reading `{table}`"), e);
        let mut tx = conn.begin().await.map_err(reading)?;
        sqlx::query("SET TRANSACTION READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(reading)?;
        let declare =
            format!("DECLARE batchguard_ledger NO SCROLL CURSOR FOR SELECT {list} FROM {quoted}");
        sqlx::query(AssertSqlSafe(declare))
            .execute(&mut *tx)
            .await
            .map_err(reading)?;
        let fetch = format!("FETCH FORWARD {CURSOR_BATCH} FROM batchguard_ledger");
        let label = format!("{shown} {table}");
        let mut n = 0u64;
        let mut values: [Option<String>; MAX_COLUMNS] = Default::default();
        loop {
            let rows = sqlx::query(AssertSqlSafe(fetch.clone()))
                .fetch_all(&mut *tx)
                .await
                .map_err(reading)?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                n += 1;
                match row_fields::<R, sqlx::Postgres>(row, &index, &mut values) {
                    Ok(()) => deliver(&values, opts, &label, n, on_row, on_error),
                    Err((i, m)) => on_error(row_error(&label, n, Some(R::COLUMNS[i]), m)),
                }
            }
        }
        tx.rollback().await.map_err(reading)?;
        Ok(n)
    })
}
