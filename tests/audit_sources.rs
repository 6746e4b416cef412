//! The same ledger as CSV, JSONL, SQLite, PostgreSQL and MySQL gives identical audit JSON.
//!
//! PostgreSQL: `BATCHGUARD_TEST_PG` (default `postgres://postgres@127.0.0.1:5432/test`);
//! MySQL: `BATCHGUARD_TEST_MYSQL` (default `mysql://root@127.0.0.1:3306/test`, a fresh
//! database per test); unreachable means skip with a message, except under `CI=true`, where
//! it fails.

#[path = "common/stores.rs"]
mod stores;

use batchguard::{AuditRunOptions, audit};
use batchguard::{Event, LedgerReadOptions, LedgerSource, Output, read_events, read_outputs};
use sqlx::{AssertSqlSafe, Connection};
use stores::mysqldb;

const FROM: &str = "2026-03-01T00:00:00+09:00";
const TO: &str = "2026-03-02T00:00:00+09:00";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The demo ledger's well-formed rows.
fn demo() -> (Vec<Event>, Vec<Output>) {
    let (mut ev, mut out) = (Vec::new(), Vec::new());
    let o = LedgerReadOptions::default();
    let src = LedgerSource::parse("fixtures/demo/events.csv").expect("src");
    read_events(&src, &o, &mut |e| ev.push(e), &mut |_| {}).expect("events");
    let src = LedgerSource::parse("fixtures/demo/outputs.csv").expect("src");
    read_outputs(&src, &o, &mut |x| out.push(x), &mut |_| {}).expect("outputs");
    (ev, out)
}

fn audit_json(ledger: String, outputs: Option<String>) -> String {
    let r = audit(&AuditRunOptions {
        ledger,
        outputs,
        manifests: vec!["fixtures/demo/billing.batchguard.yaml".into()],
        snapshots: None,
        from: FROM.parse().expect("from"),
        to: TO.parse().expect("to"),
        assume_tz: None,
        progress: false,
        ..Default::default()
    })
    .expect("audit runs");
    batchguard::render_audit_json(&r)
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

fn write_csv(dir: &std::path::Path, ev: &[Event], out: &[Output]) -> (String, String) {
    let (ep, op) = (dir.join("events.csv"), dir.join("outputs.csv"));
    let mut w = csv::Writer::from_path(&ep).expect("csv");
    w.write_record(batchguard::EVENT_COLUMNS).expect("header");
    for e in ev {
        w.write_record([
            e.run_id.clone(),
            e.job.clone(),
            e.scheduled_at.to_string(),
            e.event.as_str().into(),
            e.at.to_string(),
            opt(&e.instance),
            e.attempt.map(|a| a.to_string()).unwrap_or_default(),
            e.status.map(|s| s.as_str().to_string()).unwrap_or_default(),
            opt(&e.error_code),
            opt(&e.snapshot_digest),
            e.trigger.as_str().into(),
            String::new(), // fence
            String::new(), // detail
        ])
        .expect("row");
    }
    w.flush().expect("flush");
    let mut w = csv::Writer::from_path(&op).expect("csv");
    w.write_record(batchguard::OUTPUT_COLUMNS).expect("header");
    for o in out {
        w.write_record([
            o.job.clone(),
            o.scheduled_at.to_string(),
            o.run_id.clone(),
            o.output_key.clone(),
            o.at.to_string(),
        ])
        .expect("row");
    }
    w.flush().expect("flush");
    (ep.display().to_string(), op.display().to_string())
}

fn write_jsonl(dir: &std::path::Path, ev: &[Event], out: &[Output]) -> (String, String) {
    let (ep, op) = (dir.join("events.jsonl"), dir.join("outputs.ndjson"));
    let mut s = String::new();
    for e in ev {
        s.push_str(
            &serde_json::json!({
                "run_id": e.run_id, "job": e.job, "scheduled_at": e.scheduled_at.to_string(),
                "event": e.event.as_str(), "at": e.at.to_string(), "instance": e.instance,
                "attempt": e.attempt, "status": e.status.map(|s| s.as_str()),
                "error_code": e.error_code, "snapshot_digest": e.snapshot_digest,
                "trigger": e.trigger.as_str(),
            })
            .to_string(),
        );
        s.push('\n');
    }
    std::fs::write(&ep, s).expect("write");
    let mut s = String::new();
    for o in out {
        s.push_str(
            &serde_json::json!({
                "job": o.job, "scheduled_at": o.scheduled_at.to_string(), "run_id": o.run_id,
                "output_key": o.output_key, "at": o.at.to_string(),
            })
            .to_string(),
        );
        s.push('\n');
    }
    std::fs::write(&op, s).expect("write");
    (ep.display().to_string(), op.display().to_string())
}

const EVENT_INSERT: &str = "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, \
    instance, attempt, status, error_code, snapshot_digest, \"trigger\") \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
const OUTPUT_INSERT: &str = "INSERT INTO batchguard_outputs (job, scheduled_at, run_id, output_key, at) \
    VALUES ($1, $2, $3, $4, $5)";

macro_rules! fill {
    ($c:expr, $ev:expr, $out:expr, $ev_sql:expr, $out_sql:expr) => {{
        for e in $ev {
            sqlx::query(AssertSqlSafe($ev_sql.clone()))
                .bind(&e.run_id)
                .bind(&e.job)
                .bind(e.scheduled_at.to_string())
                .bind(e.event.as_str())
                .bind(e.at.to_string())
                .bind(&e.instance)
                .bind(e.attempt.map(|a| a as i32))
                .bind(e.status.map(|s| s.as_str()))
                .bind(&e.error_code)
                .bind(&e.snapshot_digest)
                .bind(e.trigger.as_str())
                .execute(&mut *$c)
                .await
                .expect("insert event");
        }
        for o in $out {
            sqlx::query(AssertSqlSafe($out_sql.clone()))
                .bind(&o.job)
                .bind(o.scheduled_at.to_string())
                .bind(&o.run_id)
                .bind(&o.output_key)
                .bind(o.at.to_string())
                .execute(&mut *$c)
                .await
                .expect("insert output");
        }
    }};
}

fn write_sqlite(dir: &std::path::Path, ev: &[Event], out: &[Output]) -> String {
    let path = dir.join("ledger.db");
    let ddl = std::fs::read_to_string("schemas/ledger.sqlite.sql").expect("ddl");
    rt().block_on(async {
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let mut c = sqlx::SqliteConnection::connect_with(&opts)
            .await
            .expect("open");
        sqlx::raw_sql(AssertSqlSafe(ddl))
            .execute(&mut c)
            .await
            .expect("ddl");
        let (e, o) = (EVENT_INSERT.to_string(), OUTPUT_INSERT.to_string());
        let cr = &mut c;
        fill!(cr, ev, out, e, o);
        c.close().await.expect("close");
    });
    format!("sqlite:{}", path.display())
}

#[test]
fn csv_jsonl_sqlite_and_postgres_give_identical_json() {
    let (ev, out) = demo();
    assert!(ev.len() > 50 && out.len() > 40);
    let dir = tempfile::tempdir().expect("tempdir");
    let (ce, co) = write_csv(dir.path(), &ev, &out);
    let baseline = audit_json(ce, Some(co));
    assert!(baseline.contains("\"AU102\""), "{baseline}");
    let (je, jo) = write_jsonl(dir.path(), &ev, &out);
    assert_eq!(audit_json(je, Some(jo)), baseline, "JSONL differs from CSV");
    let db = write_sqlite(dir.path(), &ev, &out);
    assert_eq!(audit_json(db, None), baseline, "SQLite differs from CSV");

    let url = std::env::var("BATCHGUARD_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let rt = rt();
    let conn = rt.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            sqlx::PgConnection::connect(&url),
        )
        .await
    });
    let mut c = match conn {
        Ok(Ok(c)) => c,
        other => {
            let why = match other {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".into(),
            };
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("PostgreSQL at {url} is unreachable under CI=true: {why}");
            }
            eprintln!("skipping the PostgreSQL part: {url} is unreachable ({why})");
            return;
        }
    };
    let suffix = format!("{}_{}", std::process::id(), line!());
    let (et, ot) = (format!("au_ev_{suffix}"), format!("au_out_{suffix}"));
    let ddl = std::fs::read_to_string("schemas/ledger.postgres.sql")
        .expect("ddl")
        .replace("batchguard_events", &et)
        .replace("batchguard_outputs", &ot);
    rt.block_on(async {
        sqlx::raw_sql(AssertSqlSafe(ddl.clone()))
            .execute(&mut c)
            .await
            .expect("ddl");
        let ts = if ddl.contains("timestamptz") {
            "::timestamptz"
        } else {
            ""
        };
        let e = EVENT_INSERT
            .replace("batchguard_events", &et)
            .replace("$3", &format!("$3{ts}"))
            .replace("$5", &format!("$5{ts}"));
        let o = OUTPUT_INSERT
            .replace("batchguard_outputs", &ot)
            .replace("$2", &format!("$2{ts}"))
            .replace("$5", &format!("$5{ts}"));
        let cr = &mut c;
        fill!(cr, &ev, &out, e, o);
    });
    let got = audit_json(format!("{url}?events_table={et}&outputs_table={ot}"), None);
    rt.block_on(async {
        for t in [&et, &ot] {
            let _ = sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE IF EXISTS \"{t}\"")))
                .execute(&mut c)
                .await;
        }
    });
    assert_eq!(got, baseline, "PostgreSQL differs from CSV");
}

/// The MySQL ledger as `batchguard store migrate` creates it (RFC 3339 text), and the same
/// rows in tables with `TIMESTAMP(6)` columns (a team's own schema): both read as CSV does.
#[test]
fn mysql_text_and_timestamp_tables_give_the_same_json_as_csv() {
    let (ev, out) = demo();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ce, co) = write_csv(dir.path(), &ev, &out);
    let baseline = audit_json(ce, Some(co));
    let Some(db) = mysqldb::fresh("audit") else {
        return;
    };
    let rt = rt();
    let mut c = rt
        .block_on(sqlx::MySqlConnection::connect(&db.url))
        .expect("connect");
    let ddl = std::fs::read_to_string("schemas/ledger.mysql.sql").expect("ddl");
    let stamp = |t: &jiff::Timestamp| t.strftime("%Y-%m-%d %H:%M:%S%.6f").to_string();
    for (et, ot, timestamps) in [
        ("batchguard_events", "batchguard_outputs", false),
        ("ev_ts", "out_ts", true),
    ] {
        let mut ddl = ddl
            .replace("batchguard_events", et)
            .replace("batchguard_outputs", ot);
        if timestamps {
            for col in ["scheduled_at", "at"] {
                ddl = ddl.replace(
                    &format!("{col:<12} VARCHAR(40)"),
                    &format!("{col:<12} TIMESTAMP(6)"),
                );
                ddl = ddl.replace(
                    &format!("{col:<15} VARCHAR(40)"),
                    &format!("{col:<15} TIMESTAMP(6)"),
                );
            }
            assert_eq!(ddl.matches("TIMESTAMP(6)").count(), 4, "{ddl}");
        }
        let time = |t: &jiff::Timestamp| {
            if timestamps { stamp(t) } else { t.to_string() }
        };
        rt.block_on(async {
            for stmt in ddl.split(";\n").filter(|s| s.contains("CREATE")) {
                sqlx::raw_sql(AssertSqlSafe(stmt.to_owned()))
                    .execute(&mut c)
                    .await
                    .expect("ddl");
            }
            for e in &ev {
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {et} (run_id, job, scheduled_at, event, at, instance, attempt, \
                     status, error_code, snapshot_digest, `trigger`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                )))
                .bind(&e.run_id)
                .bind(&e.job)
                .bind(time(&e.scheduled_at))
                .bind(e.event.as_str())
                .bind(time(&e.at))
                .bind(&e.instance)
                .bind(e.attempt.map(|a| a as i32))
                .bind(e.status.map(|s| s.as_str()))
                .bind(&e.error_code)
                .bind(&e.snapshot_digest)
                .bind(e.trigger.as_str())
                .execute(&mut c)
                .await
                .expect("insert event");
            }
            for o in &out {
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {ot} (job, scheduled_at, run_id, output_key, at) VALUES (?, ?, ?, ?, ?)"
                )))
                .bind(&o.job)
                .bind(time(&o.scheduled_at))
                .bind(&o.run_id)
                .bind(&o.output_key)
                .bind(time(&o.at))
                .execute(&mut c)
                .await
                .expect("insert output");
            }
        });
        let src = if timestamps {
            format!("{}?events_table={et}&outputs_table={ot}", db.url)
        } else {
            db.url.clone()
        };
        assert_eq!(
            audit_json(src, None),
            baseline,
            "MySQL ({}) differs from CSV",
            if timestamps { "TIMESTAMP" } else { "text" }
        );
    }
}
