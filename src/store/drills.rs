//! Writing drill records (SPEC 5.3, 7.3): `batchguard drill --record SOURCE` appends its
//! outcome here, and `audit` reads it back for AU301 (`crate::ledger::drills`).
//!
//! - A JSONL file gets one line per drill, appended under an exclusive `flock` with one
//!   `write` (as `run` appends its ledger), the file and its folder created when missing.
//! - A SQLite or PostgreSQL database gets one row in `batchguard_drills`, the table created
//!   when missing (DDL in `schemas/drills.sqlite.sql` / `schemas/drills.postgres.sql`; also
//!   run by `batchguard store migrate`). PostgreSQL creates it under an advisory lock, so
//!   two first drills at once do not race, and only when `to_regclass` does not find it, so
//!   a role that may only insert can record drills into a migrated database.
//! - A MySQL / MariaDB database gets its row as the MySQL store writes (`super::mysql`):
//!   one `COM_QUERY` that creates the table only when `information_schema` does not list it
//!   (a prepared `CREATE`, so a user that may only insert can record into a migrated
//!   database; MySQL's `CREATE TABLE IF NOT EXISTS` does not race), then inserts; values
//!   as hex literals, times as RFC 3339 text in UTC with six fractional digits.
//! - Every other value is a bound parameter. A drill is one statement a quarter: round
//!   trips do not matter here, unlike `run`'s store (`super::postgres`).
//! - The record is checked first ([`DrillRecord::check`]): no source ever holds a row the
//!   audit would reject. Messages name the source with its password masked.

use super::rfc3339;
use crate::db;
use crate::ledger::drills::{DrillRecord, DrillSource, TABLE};
use serde_json::json;
use sqlx::Connection;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

/// The drill table's DDL, SQLite.
pub const SQLITE_DDL: &str = include_str!("../../schemas/drills.sqlite.sql");
/// The drill table's DDL, PostgreSQL.
pub const POSTGRES_DDL: &str = include_str!("../../schemas/drills.postgres.sql");
/// The drill table's DDL, MySQL / MariaDB (one statement).
pub const MYSQL_DDL: &str = include_str!("../../schemas/drills.mysql.sql");

/// Serialises the creation of the drill table between processes (`CREATE … IF NOT
/// EXISTS` alone can race on a new database).
const CREATE_LOCK: i64 = 0x6267_5f64_7269_6c6c;

/// How long a database write may take before the drill counts as not recorded.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

const INSERT_SQLITE: &str = "INSERT INTO batchguard_drills \
    (job, scheduled_at, at, passed, scenarios, report_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const INSERT_POSTGRES: &str = "INSERT INTO batchguard_drills \
    (job, scheduled_at, at, passed, scenarios, report_digest) \
    VALUES ($1, $2::timestamptz, $3::timestamptz, $4, $5, $6)";

/// Appends `rec` to `source`: `path.jsonl` / `path.ndjson`, `sqlite:PATH` or
/// `postgres://…` (see [`DrillSource::parse`]).
pub fn append(source: &str, rec: &DrillRecord) -> Result<(), String> {
    append_to(&DrillSource::parse(source)?, rec)
}

/// [`append`] to a parsed source.
pub fn append_to(src: &DrillSource, rec: &DrillRecord) -> Result<(), String> {
    rec.check().map_err(|(col, m)| {
        format!(
            "drill record of `{}` not written to {}: column `{col}`: {m}",
            rec.job,
            src.display()
        )
    })?;
    match src {
        DrillSource::Jsonl(p) => append_jsonl(p, rec),
        DrillSource::Sqlite(p) => append_sqlite(p, rec),
        DrillSource::Postgres(url) => append_postgres(url, rec),
        DrillSource::Mysql(url) => mysql(url, "cannot record the drill", Some(rec)).map(|_| ()),
    }
}

/// One record as its JSON line (with the newline): timestamps RFC 3339 UTC, `passed` a
/// JSON boolean.
pub fn line(rec: &DrillRecord) -> String {
    let mut s = json!({
        "job": rec.job,
        "scheduled_at": rfc3339(rec.scheduled_at),
        "at": rfc3339(rec.at),
        "passed": rec.passed,
        "scenarios": rec.scenarios,
        "report_digest": rec.report_digest,
    })
    .to_string();
    s.push('\n');
    s
}

/// Creates the drill table in the database a store URL names (`store migrate`). `Ok(false)`
/// for a store that is no SQL database this module writes (nothing to create).
pub fn migrate(url: &str) -> Result<bool, String> {
    let url = url.trim();
    if !(url.starts_with("sqlite:")
        || url.starts_with("postgres://")
        || url.starts_with("postgresql://")
        || url.starts_with("mysql://"))
    {
        return Ok(false);
    }
    match DrillSource::parse(url)? {
        DrillSource::Sqlite(p) => {
            let (conn, shown) = super::sqlite::connect(&p).map_err(|e| e.0)?;
            conn.execute_batch(SQLITE_DDL)
                .map_err(|e| format!("{shown}: cannot create `{TABLE}`: {e}"))?;
            Ok(true)
        }
        DrillSource::Postgres(url) => postgres(&url, "cannot create `batchguard_drills`", None),
        DrillSource::Mysql(url) => mysql(&url, "cannot create `batchguard_drills`", None),
        DrillSource::Jsonl(_) => Ok(false),
    }
}

fn append_jsonl(path: &Path, rec: &DrillRecord) -> Result<(), String> {
    let shown = path.display();
    let lower = path.to_string_lossy().to_ascii_lowercase();
    if [".gz", ".zst", ".zstd"].iter().any(|s| lower.ends_with(s)) {
        return Err(format!(
            "cannot append a drill record to {shown}: it is compressed; record to a plain .jsonl file"
        ));
    }
    let fail = |e: std::io::Error| format!("cannot append a drill record to {shown}: {e}");
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {} for drill records: {e}", dir.display()))?;
    }
    let f = super::jsonl::open_append(path).map_err(fail)?;
    let lock = super::jsonl::Flock::take(&f).map_err(fail)?;
    let r = super::jsonl::append_locked(&f, &line(rec)).map_err(fail);
    drop(lock);
    r
}

fn append_sqlite(path: &Path, rec: &DrillRecord) -> Result<(), String> {
    // The store's own open: folder created, WAL, busy timeout (the bound of a write that
    // waits for another process), a racing first open retried.
    let (conn, shown) = super::sqlite::connect(path).map_err(|e| e.0)?;
    conn.execute_batch(SQLITE_DDL)
        .map_err(|e| format!("{shown}: cannot create `{TABLE}`: {e}"))?;
    conn.execute(
        INSERT_SQLITE,
        rusqlite::params![
            rec.job,
            rfc3339(rec.scheduled_at),
            rfc3339(rec.at),
            rec.passed,
            rec.scenarios,
            rec.report_digest,
        ],
    )
    .map_err(|e| format!("{shown}: cannot record the drill: {e}"))?;
    Ok(())
}

fn append_postgres(url: &str, rec: &DrillRecord) -> Result<(), String> {
    postgres(url, "cannot record the drill", Some(rec)).map(|_| ())
}

/// Connects, creates the table when it is missing, and inserts `rec` when given.
fn postgres(url: &str, what: &str, rec: Option<&DrillRecord>) -> Result<bool, String> {
    let shown = db::mask(url);
    let fail = |e: sqlx::Error| {
        let m = db::scrub(url, e.to_string());
        let m = m
            .strip_prefix("error returned from database: ")
            .map(str::to_owned)
            .unwrap_or(m);
        format!("{shown}: {what}: {m}")
    };
    let options = sqlx::postgres::PgConnectOptions::from_str(url)
        .map_err(|e| {
            format!(
                "{shown}: not a PostgreSQL URL: {}",
                db::scrub(url, e.to_string())
            )
        })?
        .application_name("batchguard");
    let rt = db::runtime()?;
    rt.block_on(async {
        let mut conn = match db::connect_postgres(&options).await {
            Ok(c) => c,
            Err(db::ConnectError::Driver(e)) => {
                return Err(format!(
                    "{shown}: cannot connect: {}",
                    db::scrub(url, e.to_string())
                ));
            }
            Err(db::ConnectError::NoAnswer) => {
                return Err(format!(
                    "{shown}: cannot connect: no answer within {} s",
                    db::CONNECT_TIMEOUT.as_secs()
                ));
            }
        };
        let write = async {
            let found: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
                .bind(TABLE)
                .fetch_one(&mut conn)
                .await
                .map_err(fail)?;
            if !found {
                let mut tx = conn.begin().await.map_err(fail)?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(CREATE_LOCK)
                    .execute(&mut *tx)
                    .await
                    .map_err(fail)?;
                sqlx::raw_sql(POSTGRES_DDL)
                    .execute(&mut *tx)
                    .await
                    .map_err(fail)?;
                tx.commit().await.map_err(fail)?;
            }
            if let Some(rec) = rec {
                sqlx::query(INSERT_POSTGRES)
                    .bind(&rec.job)
                    .bind(rfc3339(rec.scheduled_at))
                    .bind(rfc3339(rec.at))
                    .bind(rec.passed)
                    .bind(&rec.scenarios)
                    .bind(&rec.report_digest)
                    .execute(&mut conn)
                    .await
                    .map_err(fail)?;
            }
            Ok::<_, String>(())
        };
        match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(format!(
                    "{shown}: {what}: no answer within {} s",
                    WRITE_TIMEOUT.as_secs()
                ));
            }
        }
        let _ = conn.close().await;
        Ok(true)
    })
}

/// One round trip: the table created when `information_schema` does not list it, and
/// `rec` inserted when given.
fn mysql(url: &str, what: &str, rec: Option<&DrillRecord>) -> Result<bool, String> {
    use super::mysql::{lit, text_time};
    let ddl = super::mysql::ddl_statements(MYSQL_DDL).join(";\n");
    let mut sql = format!(
        "SET @bg_drills = (SELECT COUNT(*) FROM information_schema.TABLES \
           WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {table});
SET @bg_create = IF(@bg_drills > 0, 'DO 0', {ddl});
PREPARE bg_create FROM @bg_create;
EXECUTE bg_create;
DEALLOCATE PREPARE bg_create",
        table = lit(TABLE),
        ddl = lit(&ddl),
    );
    if let Some(rec) = rec {
        sql.push_str(&format!(
            ";\nINSERT INTO batchguard_drills (job, scheduled_at, at, passed, scenarios, report_digest) \
             VALUES ({}, {}, {}, {}, {}, {})",
            lit(&rec.job),
            lit(&text_time(rec.scheduled_at)),
            lit(&text_time(rec.at)),
            if rec.passed { "TRUE" } else { "FALSE" },
            lit(&rec.scenarios),
            lit(&rec.report_digest),
        ));
    }
    let url = super::StoreUrl::parse(url).map_err(|e| e.to_string())?;
    let mut st = super::mysql::MysqlStore::open(&url).map_err(|e| e.0)?;
    st.execute(sql, what).map_err(|e| e.0)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> DrillRecord {
        DrillRecord {
            job: "settle".into(),
            scheduled_at: "2026-03-01T02:00:00Z".parse().unwrap(),
            at: "2026-03-10T09:00:00.123456Z".parse().unwrap(),
            passed: false,
            scenarios: "clean:passed,rerun:failed".into(),
            report_digest: "sha256:00".into(),
        }
    }

    #[test]
    fn a_line_is_one_json_object_with_a_boolean() {
        let l = line(&rec());
        assert!(l.ends_with('\n') && !l[..l.len() - 1].contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["passed"], false);
        assert_eq!(v["at"], "2026-03-10T09:00:00.123456Z");
        assert_eq!(v["scenarios"], "clean:passed,rerun:failed");
    }

    #[test]
    fn a_record_the_audit_would_reject_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.jsonl");
        let mut r = rec();
        r.passed = true;
        let e = append(p.to_str().unwrap(), &r).unwrap_err();
        assert!(e.contains("scenario `rerun` failed"), "{e}");
        assert!(!p.exists());
    }

    #[test]
    fn stores_without_a_drill_table_migrate_nothing() {
        assert_eq!(migrate("redis://h:6379"), Ok(false));
    }
}
