//! MySQL / MariaDB ledgers (`mysql://…`, SPEC 5.4), read the way [`super::sql`] reads
//! PostgreSQL:
//! - the table's columns come from `information_schema.COLUMNS` (the table name a bound
//!   parameter; `db.table` names another database), required columns it lacks are a
//!   [`SourceError`], other columns are ignored;
//! - every column is selected as text: `TIMESTAMP` columns as UTC RFC 3339 (the session's
//!   `time_zone` is `+00:00`, so the server converts the stored instant), `DATETIME`
//!   columns without an offset (so they are row errors unless `--assume-tz`, like
//!   PostgreSQL's `timestamp without time zone`), everything else `CAST(… AS CHAR)`
//!   (batchguard's own tables keep RFC 3339 text);
//! - rows are streamed: the text protocol sends a result row by row as the client reads it
//!   (the server blocks on a full socket), and each row is handed on before the next is
//!   decoded, so neither side holds the table.

use super::read::{LedgerRow, MAX_COLUMNS, ReadOptions, mask_dsn, missing_columns, row_error};
use super::sql::{deliver, plain, row_fields, select_list};
use super::{RowError, SourceError};
use crate::db;
use futures_util::TryStreamExt;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{AssertSqlSafe, ConnectOptions};
use std::str::FromStr;

/// A validated table name, backquoted per part: `` `db`.`table` ``.
pub(super) fn quote(table: &str) -> String {
    table
        .split('.')
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(".")
}

/// `(schema, table)`: the schema is the connection's database unless named.
fn parts(table: &str) -> (Option<&str>, &str) {
    match table.split_once('.') {
        Some((s, t)) => (Some(s), t),
        None => (None, table),
    }
}

pub(super) async fn connect(url: &str, shown: &str) -> Result<MySqlConnection, SourceError> {
    let fail = |what: &str, e: sqlx::Error| {
        SourceError(format!(
            "{shown}: {what}: {}",
            plain(db::scrub(url, e.to_string()))
        ))
    };
    let options = MySqlConnectOptions::from_str(url)
        .map_err(|e| fail("bad DSN", e))?
        .disable_statement_logging();
    match tokio::time::timeout(db::CONNECT_TIMEOUT, options.connect()).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(fail("cannot connect", e)),
        Err(_) => Err(SourceError(format!(
            "{shown}: cannot connect: no answer within {}s",
            db::CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// The table's (name, data type) list, in column order; empty when there is no table.
pub(super) async fn columns(
    conn: &mut MySqlConnection,
    table: &str,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    let (schema, name) = parts(table);
    sqlx::query_as(
        "SELECT CAST(COLUMN_NAME AS CHAR), CAST(LOWER(DATA_TYPE) AS CHAR) FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
    )
    .bind(schema)
    .bind(name)
    .fetch_all(conn)
    .await
}

/// A column as text: `TIMESTAMP` as UTC RFC 3339 (the session's `time_zone` is `+00:00`),
/// `DATETIME` without an offset, anything else as it is.
pub(super) fn text_of(col: &str, ty: &str) -> String {
    match ty {
        "timestamp" => format!("DATE_FORMAT(`{col}`, '%Y-%m-%dT%H:%i:%s.%fZ')"),
        "datetime" => format!("DATE_FORMAT(`{col}`, '%Y-%m-%dT%H:%i:%s.%f')"),
        _ => format!("CAST(`{col}` AS CHAR)"),
    }
}

/// Whether the database has `table` (validated, optionally `db.table`).
pub(crate) fn has_table(url: &str, table: &str) -> Result<bool, SourceError> {
    let shown = mask_dsn(url);
    if !super::read::valid_table_name(table) {
        return Err(SourceError(format!(
            "{shown}: `{table}` is not a valid table name"
        )));
    }
    db::runtime().map_err(SourceError)?.block_on(async {
        let mut conn = connect(url, &shown).await?;
        let cols = columns(&mut conn, table).await.map_err(|e| {
            SourceError(format!(
                "{shown}: cannot look up the table: {}",
                plain(db::scrub(url, e.to_string()))
            ))
        })?;
        Ok(!cols.is_empty())
    })
}

pub(crate) fn read<R: LedgerRow>(
    url: &str,
    table: &str,
    opts: &ReadOptions,
    on_row: &mut dyn FnMut(R),
    on_error: &mut dyn FnMut(RowError),
) -> Result<u64, SourceError> {
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
    db::runtime().map_err(SourceError)?.block_on(async {
        let mut conn = connect(url, &shown).await?;
        let cols = columns(&mut conn, table)
            .await
            .map_err(|e| fail("cannot read the table's columns", e))?;
        if cols.is_empty() {
            return Err(SourceError(format!("{shown}: no table `{table}`")));
        }
        let (index, list) = select_list::<R>(&cols, text_of);
        if let Some(e) = missing_columns::<R>(&index, &format!("table `{table}` of {shown}")) {
            return Err(e);
        }
        let sql = format!("SELECT {list} FROM {}", quote(table));
        let label = format!("{shown} {table}");
        let mut stream = sqlx::raw_sql(AssertSqlSafe(sql)).fetch(&mut conn);
        let mut n = 0u64;
        let mut values: [Option<String>; MAX_COLUMNS] = Default::default();
        while let Some(row) = stream
            .try_next()
            .await
            .map_err(|e| fail(&format!("reading `{table}`"), e))?
        {
            n += 1;
            match row_fields::<R, sqlx::MySql>(&row, &index, &mut values) {
                Ok(()) => deliver(&values, opts, &label, n, on_row, on_error),
                Err((i, m)) => on_error(row_error(&label, n, Some(R::COLUMNS[i]), m)),
            }
        }
        Ok(n)
    })
}
