//! Drill records (SPEC 5.3) and AU301 drill-overdue (SPEC 6): what `drill --record` appends
//! reads back the same from a JSONL file, a SQLite file and the real PostgreSQL and
//! MariaDB servers;
//! hostile drill files are counted and located, never a panic; `audit` reports AU301
//! exactly for the jobs with a snapshot and no passing drill within `drill_cadence`, reads
//! the records from `--drills` or from the ledger database, and says when it has none.
//!
//! PostgreSQL: `BATCHGUARD_TEST_PG` (see `tests/common/pgdb.rs`), MySQL / MariaDB:
//! `BATCHGUARD_TEST_MYSQL` (`tests/common/mysqldb.rs`); unreachable, these tests print why
//! and pass, except under `CI=true`.

mod common;
#[path = "common/stores.rs"]
mod stores;

use batchguard::LedgerReadOptions;
use batchguard::append_drill;
use batchguard::{DrillRead, DrillRecord, format_scenarios};
use common::{bg, sqlite_rows};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use stores::{Db, Kind};

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().expect("test timestamp")
}

fn rec(job: &str, at: &str, outcomes: &[(&str, bool)]) -> DrillRecord {
    DrillRecord {
        job: job.into(),
        scheduled_at: ts("2026-01-01T00:00:00Z"),
        at: ts(at),
        passed: outcomes.iter().all(|(_, ok)| *ok) && !outcomes.is_empty(),
        scenarios: format_scenarios(outcomes.iter().copied()),
        report_digest: format!("sha256:{:064x}", at.len()),
    }
}

/// Three records as the drill command writes them: one passed, one failed (microsecond
/// times, which every source keeps), one that stopped before any scenario.
fn three() -> Vec<DrillRecord> {
    let mut failed = rec(
        "billing/settle",
        "2026-03-10T09:30:00.123456Z",
        &[("clean", true), ("rerun", false), ("crash", false)],
    );
    failed.scheduled_at = ts("2026-03-01T02:00:00+09:00");
    let mut stopped = rec("report", "2026-03-11T00:00:00Z", &[]);
    stopped.passed = false;
    vec![
        rec(
            "settle",
            "2026-02-01T12:00:00Z",
            &[
                ("clean", true),
                ("rerun", true),
                ("concurrent", true),
                ("crash", true),
                ("retry", true),
                ("stale", true),
            ],
        ),
        failed,
        stopped,
    ]
}

fn read(source: &str) -> DrillRead {
    batchguard::read_drills(source, &LedgerReadOptions::default())
        .unwrap_or_else(|e| panic!("{source}: {e}"))
}

fn round_trip(source: &str) {
    // A file is created by the first append: nothing to read before it.
    let before = batchguard::read_drills(source, &LedgerReadOptions::default()).unwrap_or_default();
    let recs = three();
    for r in &recs {
        append_drill(source, r).unwrap_or_else(|e| panic!("append to {source}: {e}"));
    }
    let got = read(source);
    assert!(got.table_present, "{source}");
    assert_eq!(got.rows_rejected, 0, "{:?}", got.errors);
    assert_eq!(got.rows_read, before.rows_read + 3);
    assert_eq!(&got.records[before.records.len()..], &recs[..], "{source}");
}

// ---------------------------------------------------------------- round trips

#[test]
fn jsonl_round_trip_creates_the_file_and_its_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("ops/drills/records.jsonl");
    let source = p.to_str().expect("utf-8");
    round_trip(source);
    let text = std::fs::read_to_string(&p).expect("written");
    assert_eq!(text.lines().count(), 3, "{text}");
    let first: Value = serde_json::from_str(text.lines().next().expect("line")).expect("json");
    assert_eq!(first["passed"], true, "`passed` is a JSON boolean");
    assert_eq!(
        first["scenarios"],
        "clean:passed,rerun:passed,concurrent:passed,crash:passed,retry:passed,stale:passed"
    );
    // Appending keeps what is there.
    round_trip(source);
    assert_eq!(read(source).records.len(), 6);
}

#[test]
fn sqlite_round_trip_creates_the_file_and_its_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("new/drills.db");
    round_trip(&format!("sqlite:{}", p.display()));
    let rows: Vec<(String, i64)> = sqlite_rows(
        &p,
        "SELECT job, passed FROM batchguard_drills ORDER BY rowid",
    );
    assert_eq!(
        rows,
        vec![
            ("settle".to_owned(), 1),
            ("billing/settle".to_owned(), 0),
            ("report".to_owned(), 0)
        ]
    );
}

#[test]
fn sqlite_store_gets_the_drill_table_from_migrate_and_keeps_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("store.db");
    let url = format!("sqlite:{}", p.display());
    bg().args(["store", "migrate", "--store", &url])
        .assert()
        .success();
    let empty = read(&url);
    assert!(empty.table_present, "migrate creates batchguard_drills");
    assert_eq!(empty.rows_read, 0);
    round_trip(&url);
    // The store still works on the same file.
    bg().args(["store", "status", "--store", &url])
        .assert()
        .success();
}

#[test]
fn a_database_without_the_table_holds_no_drill_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("ledger.db");
    ledger_only_sqlite(&p);
    let r = read(&format!("sqlite:{}", p.display()));
    assert!(!r.table_present);
    assert!(r.records.is_empty());
    // A missing file is not "no drills": it is a source that cannot be read.
    let e = batchguard::read_drills(
        &format!("sqlite:{}", dir.path().join("nope.db").display()),
        &LedgerReadOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("no such database file"), "{e}");
    let e = batchguard::read_drills(
        dir.path().join("nope.jsonl").to_str().expect("utf-8"),
        &LedgerReadOptions::default(),
    )
    .unwrap_err();
    assert!(e.contains("nope.jsonl"), "{e}");
}

/// `check` on a fresh database of `kind`; nothing when the server is unreachable outside CI.
fn on(kind: Kind, tag: &str, check: impl FnOnce(&Db)) {
    if let Some(db) = kind.fresh(tag) {
        check(&db);
    }
}

/// A fresh database has no drill table; the first drill creates it (`check` looks at its
/// columns on `db`), and four first drills at once into another fresh one all land.
fn round_trip_creates_the_table(kind: Kind, check: impl FnOnce(&Db)) {
    on(kind, "drills_rt", |db| {
        let before = read(&db.url());
        assert!(!before.table_present, "a fresh database has no drill table");
        round_trip(&db.url());
        check(db);
        on(kind, "drills_race", |db2| {
            concurrent_first_drills(&db2.url())
        });
    });
}

#[test]
fn postgres_round_trip_creates_the_table_once_under_concurrent_first_drills() {
    round_trip_creates_the_table(Kind::Pg, |db| {
        let types = db.rows(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_name = 'batchguard_drills' ORDER BY ordinal_position",
        );
        let types: Vec<(String, String)> = types
            .into_iter()
            .map(|r| {
                (
                    r[0].clone().unwrap_or_default(),
                    r[1].clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(types[2], ("at".into(), "timestamp with time zone".into()));
        assert_eq!(types[3], ("passed".into(), "boolean".into()));
    });
}

#[test]
fn mysql_round_trip_creates_the_table_once_under_concurrent_first_drills() {
    round_trip_creates_the_table(Kind::MySql, |db| {
        // RFC 3339 text with six fractional digits, as the MySQL ledger keeps times.
        let rows = db.rows("SELECT at, CAST(passed AS CHAR) FROM batchguard_drills");
        assert_eq!(rows[1][0].as_deref(), Some("2026-03-10T09:30:00.123456Z"));
        assert_eq!(rows[1][1].as_deref(), Some("0"));
        // A drill's write is one round trip after connecting, as every MySQL store operation.
        let proxy = db.proxy();
        append_drill(proxy.url(), &three()[0]).unwrap_or_else(|e| panic!("{e}"));
        let t = proxy.take();
        assert_eq!(t.round_trips, 1, "{}", t.all);
        assert_eq!(read(&db.url()).rows_read, 4);
    });
}

/// Four first drills at once into a fresh database: one creates the table, all four rows
/// land.
fn concurrent_first_drills(url: &str) {
    std::thread::scope(|s| {
        for i in 0..4 {
            s.spawn(move || {
                let r = rec(
                    &format!("job-{i}"),
                    "2026-03-01T00:00:00Z",
                    &[("clean", true)],
                );
                append_drill(url, &r).unwrap_or_else(|e| panic!("{e}"));
            });
        }
    });
    let got = read(url);
    let jobs: BTreeSet<String> = got.records.iter().map(|r| r.job.clone()).collect();
    assert_eq!(jobs.len(), 4, "{jobs:?}");
}

/// `store migrate` creates the drill table, twice without harm.
fn migrate_creates_the_drill_table(url: &str) {
    bg().args(["store", "migrate", "--store", url])
        .assert()
        .success();
    let r = read(url);
    assert!(r.table_present);
    assert!(r.records.is_empty());
    bg().args(["store", "migrate", "--store", url])
        .assert()
        .success();
}

#[test]
fn postgres_store_migrate_creates_the_drill_table() {
    on(Kind::Pg, "drills_migrate", |db| {
        migrate_creates_the_drill_table(&db.url())
    });
}

#[test]
fn mysql_store_migrate_creates_the_drill_table() {
    on(Kind::MySql, "drills_migrate", |db| {
        migrate_creates_the_drill_table(&db.url())
    });
}

#[test]
fn passwords_are_masked_in_every_drill_message() {
    // Nothing listens on port 1: the connect fails, and the message names the DSN masked.
    let url = "postgres://bob:s3cret-pw@127.0.0.1:1/test";
    let e = append_drill(url, &three()[0]).unwrap_err();
    assert!(!e.contains("s3cret-pw") && e.contains("bob:***@"), "{e}");
    let e = batchguard::read_drills(url, &LedgerReadOptions::default()).unwrap_err();
    assert!(!e.contains("s3cret-pw") && e.contains("bob:***@"), "{e}");
    let my = "mysql://bob:s3cret-pw@127.0.0.1:1/test";
    let e = append_drill(my, &three()[0]).unwrap_err();
    assert!(
        !e.contains("s3cret-pw") && e.contains("bob:***@") && e.contains("cannot connect"),
        "{e}"
    );
    let e = batchguard::read_drills(my, &LedgerReadOptions::default()).unwrap_err();
    assert!(!e.contains("s3cret-pw") && e.contains("bob:***@"), "{e}");
    for url in [url, my] {
        let (code, _, err) = Project::new().audit(&["--ledger", "events.csv", "--drills", url]);
        assert_eq!(code, 2);
        assert!(
            !err.contains("s3cret-pw") && err.contains("bob:***@"),
            "{err}"
        );
    }
}

// ---------------------------------------------------------------- hostile input

#[test]
fn hostile_drill_files_are_counted_and_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("d.jsonl");
    let good =
        |job: &str| batchguard::drill_line(&rec(job, "2026-03-01T00:00:00Z", &[("clean", true)]));
    let mut bytes: Vec<u8> = Vec::new();
    bytes.extend_from_slice(b"\xef\xbb\xbf");
    bytes.extend_from_slice(good("a").as_bytes()); // 1: BOM, then a good line
    bytes.extend_from_slice(b"{\"job\": \"b\", \n"); // 2: bad JSON
    bytes.extend_from_slice(b"\n   \n"); // 3, 4: blank, skipped
    let without_digest = good("c").replace(",\"report_digest\":", ",\"other\":");
    bytes.extend_from_slice(without_digest.as_bytes()); // 5: missing field
    bytes.extend_from_slice(
        good("d")
            .replace("2026-03-01T00:00:00Z", "2026-13-01T00:00:00Z")
            .as_bytes(),
    ); // 6: bad timestamp
    bytes.extend_from_slice(
        good("e")
            .replace("\"passed\":true", "\"passed\":\"yes\"")
            .as_bytes(),
    ); // 7: bad boolean
    bytes.extend_from_slice(
        good("f")
            .replace("clean:passed", "clean:passed,rerun:failed")
            .as_bytes(),
    ); // 8: passed, but a scenario failed
    bytes.extend_from_slice(good("g").replace("{", "{\"job\":\"x\",").as_bytes()); // 9: duplicate key
    bytes.extend_from_slice(b"\x00\x00\xff\xfe garbage\n"); // 10: NUL and invalid UTF-8
    bytes.extend_from_slice(good("h").replace("\"h\"", "\"h\\u0000i\"").as_bytes()); // 11: NUL in a value
    bytes.extend_from_slice(good("i").replace("\"i\"", "[\"i\"]").as_bytes()); // 12: an array
    bytes.extend_from_slice(b"[1, 2]\n"); // 13: not an object
    bytes.extend_from_slice(good("j").as_bytes()); // 14: good
    bytes.extend_from_slice(good("k").trim_end().as_bytes()); // 15: good, no final newline
    std::fs::write(&p, &bytes).expect("write");
    let r = read(p.to_str().expect("utf-8"));
    let jobs: Vec<&str> = r.records.iter().map(|x| x.job.as_str()).collect();
    assert_eq!(jobs, ["a", "j", "k"]);
    assert_eq!(r.rows_read, 13);
    assert_eq!(r.rows_rejected, 10);
    let located: Vec<(u64, Option<&str>)> = r
        .errors
        .iter()
        .map(|e| (e.at.row, e.column.as_deref()))
        .collect();
    assert_eq!(
        located,
        vec![
            (2, None),
            (5, Some("report_digest")),
            (6, Some("at")),
            (7, Some("passed")),
            (8, Some("passed")),
            (9, None),
            (10, None),
            (11, Some("job")),
            (12, Some("job")),
            (13, None),
        ]
    );
    for e in &r.errors {
        assert!(
            e.to_string().starts_with(&format!("{}:", p.display())),
            "{e}"
        );
    }
    assert!(
        r.errors[2].message.contains("2026-13-01"),
        "{}",
        r.errors[2]
    );
    assert!(
        r.errors[4].message.contains("scenario `rerun` failed"),
        "{}",
        r.errors[4]
    );
    assert!(
        r.errors[5].message.contains("duplicate key `job`"),
        "{}",
        r.errors[5]
    );
}

#[test]
fn hostile_drill_rows_in_sqlite_are_counted_and_located() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("d.db");
    sqlite_exec(
        &p,
        "CREATE TABLE batchguard_drills (job TEXT, scheduled_at TEXT, at TEXT, passed, scenarios TEXT, report_digest TEXT, extra TEXT);
         INSERT INTO batchguard_drills VALUES ('a', '2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', 1, 'clean:passed', 'sha256:1', 'x');
         INSERT INTO batchguard_drills VALUES (NULL, '2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', 1, 'clean:passed', 'sha256:1', 'x');
         INSERT INTO batchguard_drills VALUES ('c', '2026-03-01T00:00:00Z', 1772000000, 1, 'clean:passed', 'sha256:1', 'x');
         INSERT INTO batchguard_drills VALUES ('d', '2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', 'maybe', 'clean:passed', 'sha256:1', 'x');
         INSERT INTO batchguard_drills VALUES ('e', '2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', 0, 'clean', 'sha256:1', 'x');
         INSERT INTO batchguard_drills VALUES ('f', '2026-03-01T00:00:00', '2026-03-02T00:00:00Z', 0, '', 'sha256:1', 'x');",
    );
    let src = format!("sqlite:{}", p.display());
    let r = read(&src);
    assert_eq!(r.records.len(), 1);
    assert_eq!(r.rows_read, 6);
    let located: Vec<(String, Option<&str>)> = r
        .errors
        .iter()
        .map(|e| (e.at.to_string(), e.column.as_deref()))
        .collect();
    let at = |n: u32| format!("{src} batchguard_drills:{n}");
    assert_eq!(
        located,
        vec![
            (at(2), Some("job")),
            (at(3), Some("at")),
            (at(4), Some("passed")),
            (at(5), Some("scenarios")),
            (at(6), Some("scheduled_at")),
        ]
    );
    // With the zone the offset-less slot is read.
    let tz = jiff::tz::TimeZone::get("Asia/Seoul").expect("zone");
    let r = batchguard::read_drills(
        &src,
        &LedgerReadOptions {
            assume_tz: Some(tz),
        },
    )
    .expect("read");
    assert_eq!(r.records.len(), 2);
    // A table without a required column cannot be read at all.
    let q = dir.path().join("q.db");
    sqlite_exec(&q, "CREATE TABLE batchguard_drills (job TEXT, at TEXT);");
    let e = batchguard::read_drills(
        &format!("sqlite:{}", q.display()),
        &LedgerReadOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.contains("`scheduled_at`, `passed`, `scenarios`, `report_digest`"),
        "{e}"
    );
}

/// Four rows of a team's own drill table (`scheduled_at` of the type `created` says):
/// one good, three bad in `at`, `passed` and `scheduled_at`.
fn hostile_drill_rows(url: &str, exec: impl Fn(&str), created: &str, slot: &str) {
    exec(created);
    for row in [
        format!("'a', {slot}, '2026-03-02T00:00:00+09:00', 'true', 'clean:passed', 'sha256:1'"),
        format!("'b', {slot}, 'soon', 'true', 'clean:passed', 'sha256:1'"),
        format!("'c', {slot}, '2026-03-02T00:00:00Z', 'yes', 'clean:passed', 'sha256:1'"),
        "'d', NULL, '2026-03-02T00:00:00Z', 'false', 'clean:failed', 'sha256:1'".to_owned(),
    ] {
        exec(&format!("INSERT INTO batchguard_drills VALUES ({row})"));
    }
    let r = read(url);
    assert_eq!(r.records.len(), 1);
    assert_eq!(r.records[0].at, ts("2026-03-01T15:00:00Z"));
    let located: Vec<(u64, Option<&str>)> = r
        .errors
        .iter()
        .map(|e| (e.at.row, e.column.as_deref()))
        .collect();
    assert_eq!(
        located,
        vec![
            (2, Some("at")),
            (3, Some("passed")),
            (4, Some("scheduled_at"))
        ]
    );
    assert!(
        r.errors[0].at.source.ends_with(" batchguard_drills"),
        "{}",
        r.errors[0]
    );
}

#[test]
fn hostile_drill_rows_in_postgres_are_counted_and_located() {
    on(Kind::Pg, "drills_bad", |db| {
        hostile_drill_rows(
            &db.url(),
            |sql| db.exec(sql),
            "CREATE TABLE batchguard_drills (job text, scheduled_at timestamptz, at text, passed text, scenarios text, report_digest text)",
            "'2026-03-01T00:00:00Z'",
        )
    });
}

#[test]
fn hostile_drill_rows_in_mysql_are_counted_and_located() {
    on(Kind::MySql, "drills_bad", |db| {
        // A TIMESTAMP column is read as the instant it is (the session is in UTC).
        hostile_drill_rows(
            &db.url(),
            |sql| db.exec(&format!("SET time_zone = '+00:00'; {sql}")),
            "CREATE TABLE batchguard_drills (job TEXT, scheduled_at TIMESTAMP NULL, at TEXT, passed TEXT, scenarios TEXT, report_digest TEXT)",
            "'2026-03-01 00:00:00'",
        );
        // A table that lacks a required column cannot be read: the columns are named.
        db.exec("DROP TABLE batchguard_drills; CREATE TABLE batchguard_drills (job TEXT, at TEXT)");
        let e = batchguard::read_drills(&db.url(), &LedgerReadOptions::default()).unwrap_err();
        assert!(
            e.contains("`scheduled_at`, `passed`, `scenarios`, `report_digest`"),
            "{e}"
        );
    });
}

// ---------------------------------------------------------------- audit

/// Window arguments: a day whose jobs (yearly, on January 1st) expect no slot, so AU301 is
/// the only thing to look at.
const AUDIT_WINDOW: &[&str] = &[
    "audit",
    "--from",
    "2026-03-31T00:00:00Z",
    "--to",
    "2026-04-01T00:00:00Z",
];

/// `to - 92d`.
const CADENCE_START: &str = "2025-12-30T00:00:00Z";

fn job(name: &str, snapshot: bool, extra: &str) -> String {
    let snap = if snapshot {
        "\n    snapshot: {path: \"s/{job}/{scheduled_at_compact}.jsonl\", key: id, retention: 120d}"
    } else {
        ""
    };
    format!(
        "  - name: {name}\n    schedule: \"0 0 1 1 *\"\n    expected_duration: 1m\n    lock: {{key: \"{{job}}:{{scheduled_at}}\", ttl: 5m}}{snap}{extra}\n"
    )
}

/// A project: the manifest, an empty CSV ledger, and drill records.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut m = String::from("version: 1\nservice: billing\njobs:\n");
        for (name, snap, extra) in [
            ("settle", true, ""),
            ("invoices", true, ""),
            ("export", true, ""),
            ("report", true, ""),
            ("reindex", true, ""),
            ("late", true, ""),
            ("paused", true, "\n    enabled: false"),
            ("cleanup", false, ""),
        ] {
            m.push_str(&job(name, snap, extra));
        }
        std::fs::write(dir.path().join("m.batchguard.yaml"), m).expect("manifest");
        std::fs::write(
            dir.path().join("events.csv"),
            "run_id,job,scheduled_at,event,at\n",
        )
        .expect("ledger");
        Project { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The drills of [`Project::new`]'s jobs, one per case AU301 tells apart.
    fn records() -> Vec<DrillRecord> {
        let six = [
            ("clean", true),
            ("rerun", true),
            ("concurrent", true),
            ("crash", true),
            ("retry", true),
            ("stale", true),
        ];
        let just_before = ts(CADENCE_START)
            .checked_sub(jiff::SignedDuration::from_secs(1))
            .expect("time")
            .to_string();
        vec![
            // Passed inside the cadence: silent.
            rec("settle", "2026-03-20T10:00:00Z", &six),
            // Only failed drills, one inside the cadence: fires.
            rec(
                "billing/invoices",
                "2026-03-25T10:00:00Z",
                &[("clean", true), ("rerun", false), ("crash", false)],
            ),
            rec("invoices", "2026-01-25T10:00:00Z", &[("clean", false)]),
            // Passed one second before the cadence starts: fires.
            rec("export", &just_before, &six),
            // Passed exactly when the cadence starts: silent.
            rec("report", CADENCE_START, &six),
            // reindex: no drill at all: fires.
            // Passed, but at `to`: not counted, so fires.
            rec("late", "2026-04-01T00:00:00Z", &six),
            // Disabled and snapshot-less jobs never fire, drilled or not.
            rec("cleanup", "2025-01-01T00:00:00Z", &[("clean", false)]),
            // A job no manifest declares: ignored.
            rec("ghost", "2026-03-01T00:00:00Z", &six),
        ]
    }

    fn audit(&self, extra: &[&str]) -> (i32, Value, String) {
        let out = bg()
            .current_dir(self.dir.path())
            .args(AUDIT_WINDOW)
            .args(["--format", "json"])
            .args(["--manifest", "m.batchguard.yaml"])
            .args(extra)
            .output()
            .expect("runs");
        let code = out.status.code().expect("exit code");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(code == 0 || code == 1 || code == 2, "{code}: {stderr}");
        let v = if code == 2 {
            Value::Null
        } else {
            serde_json::from_slice(&out.stdout).expect("json")
        };
        (code, v, stderr)
    }
}

fn au301_jobs(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == "AU301")
        .map(|f| f["job"].as_str().expect("job").to_owned())
        .collect()
}

fn skipped_au301(v: &Value) -> Option<String> {
    v["skipped_checks"]
        .as_array()
        .expect("skipped_checks")
        .iter()
        .find(|s| {
            s["codes"]
                .as_array()
                .is_some_and(|c| c.contains(&"AU301".into()))
        })
        .map(|s| s["reason"].as_str().unwrap_or("").to_owned())
}

fn job_entry<'v>(v: &'v Value, name: &str) -> &'v Value {
    v["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["job"] == name)
        .unwrap_or_else(|| panic!("job {name}"))
}

#[test]
fn audit_drills_fires_exactly_for_snapshot_jobs_without_a_passing_drill_in_the_cadence() {
    let p = Project::new();
    let drills = p.path("drills.jsonl");
    for r in Project::records() {
        append_drill(&drills, &r).expect("append");
    }
    let (code, v, _) = p.audit(&["--ledger", "events.csv", "--drills", &drills]);
    assert_eq!(code, 0, "AU301 is a warning: {v}");
    assert_eq!(au301_jobs(&v), ["export", "invoices", "late", "reindex"]);
    assert_eq!(skipped_au301(&v), None);
    let msg = |job: &str| {
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["code"] == "AU301" && f["job"] == job)
            .and_then(|f| f["message"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        msg("reindex").contains("never rehearsed"),
        "{}",
        msg("reindex")
    );
    assert!(
        msg("invoices").contains("never passed a drill")
            && msg("invoices").contains("failed (rerun, crash)"),
        "{}",
        msg("invoices")
    );
    assert!(
        msg("export").contains("last passed a drill on 2025-12-29T23:59:59+00:00"),
        "{}",
        msg("export")
    );
    // Each manifest job's last drill (before `to`) and last pass, in the JSON.
    let inv = job_entry(&v, "invoices");
    assert_eq!(inv["last_drill"]["at"], "2026-03-25T10:00:00Z");
    assert_eq!(inv["last_drill"]["passed"], false);
    assert_eq!(inv["last_drill"]["scenarios"][1]["name"], "rerun");
    assert_eq!(inv["last_drill"]["scenarios"][1]["passed"], false);
    assert_eq!(inv["last_passing_drill_at"], Value::Null);
    assert_eq!(
        job_entry(&v, "report")["last_passing_drill_at"],
        CADENCE_START
    );
    assert_eq!(job_entry(&v, "reindex")["last_drill"], Value::Null);
    assert_eq!(job_entry(&v, "late")["last_drill"], Value::Null);
    assert_eq!(job_entry(&v, "cleanup")["last_drill"]["passed"], false);
    assert_eq!(v["drills"]["rows_read"], 8);
    assert_eq!(v["drills"]["ignored"], 1);
    assert_eq!(v["drills"]["after_to"], 1);
    assert_eq!(v["drills"]["cadence_s"], 92 * 86_400);
    // --job keeps its job's drills only.
    let (_, v, _) = p.audit(&[
        "--ledger",
        "events.csv",
        "--drills",
        &drills,
        "--job",
        "export",
    ]);
    assert_eq!(au301_jobs(&v), ["export"]);
    assert_eq!(v["drills"]["ignored"], 7);
}

#[test]
fn drill_cadence_comes_from_the_config() {
    let p = Project::new();
    let drills = p.path("drills.jsonl");
    for r in Project::records() {
        append_drill(&drills, &r).expect("append");
    }
    std::fs::write(
        p.dir.path().join("batchguard.toml"),
        "[thresholds]\ndrill_cadence = \"100d\"\n",
    )
    .expect("config");
    let (_, v, _) = p.audit(&["--ledger", "events.csv", "--drills", &drills]);
    assert_eq!(au301_jobs(&v), ["invoices", "late", "reindex"]);
    assert_eq!(v["drills"]["cadence_s"], 100 * 86_400);
    std::fs::write(
        p.dir.path().join("batchguard.toml"),
        "[rules]\nAU301 = \"error\"\n",
    )
    .expect("config");
    let (code, v, _) = p.audit(&["--ledger", "events.csv", "--drills", &drills]);
    assert_eq!(code, 1, "AU301 at error fails the audit");
    assert_eq!(au301_jobs(&v).len(), 4);
}

#[test]
fn without_drill_records_au301_is_skipped_with_the_reason() {
    let p = Project::new();
    let (code, v, _) = p.audit(&["--ledger", "events.csv"]);
    assert_eq!(code, 0);
    assert!(au301_jobs(&v).is_empty());
    let why = skipped_au301(&v).expect("AU301 skipped");
    assert!(why.contains("--drills SOURCE"), "{why}");
    assert!(
        v.get("drills").is_none(),
        "no drills section without records"
    );
    assert!(
        job_entry(&v, "settle").get("last_drill").is_none(),
        "no per-job drill fields without records"
    );
    // Without a manifest AU301 is among the checks the manifest enables.
    let out = bg()
        .current_dir(p.dir.path())
        .args(AUDIT_WINDOW)
        .args(["--format", "json"])
        .args(["--ledger", "events.csv", "--drills", "drills.jsonl"])
        .output()
        .expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        skipped_au301(&v)
            .expect("skipped")
            .contains("no --manifest")
    );
    // The pretty report says so too.
    let out = bg()
        .current_dir(p.dir.path())
        .args(AUDIT_WINDOW)
        .args(["--ledger", "events.csv", "--manifest", "m.batchguard.yaml"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("skipped AU301: no drill records"), "{text}");
}

#[test]
fn bad_drill_sources_cannot_run() {
    let p = Project::new();
    for (source, says) in [
        ("drills.csv", "is not a drill record source"),
        ("missing.jsonl", "missing.jsonl"),
        ("sqlite:missing.db", "no such database file"),
    ] {
        let (code, _, err) = p.audit(&["--ledger", "events.csv", "--drills", source]);
        assert_eq!(code, 2, "{source}");
        assert!(
            err.contains("--drills") && err.contains(says),
            "{source}: {err}"
        );
    }
}

#[test]
fn hostile_drill_files_in_the_audit_are_au001_and_the_rest_is_judged() {
    let p = Project::new();
    let drills = p.path("drills.jsonl");
    let mut text = String::new();
    for r in Project::records() {
        text.push_str(&batchguard::drill_line(&r));
    }
    text.push_str("{\"job\": \"reindex\", \"scheduled_at\": \"2026-01-01T00:00:00Z\"}\n");
    text.push_str("\u{0}\u{0}\u{0}\n");
    std::fs::write(&drills, text).expect("write");
    let (code, v, _) = p.audit(&["--ledger", "events.csv", "--drills", &drills]);
    assert_eq!(code, 1, "AU001 is an error");
    let au001: Vec<&Value> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == "AU001")
        .collect();
    assert_eq!(au001.len(), 1);
    assert_eq!(au001[0]["count"], 2);
    assert_eq!(au001[0]["job"], drills.as_str());
    assert_eq!(
        au001[0]["keys"],
        serde_json::json!([format!("{drills}:9"), format!("{drills}:10")])
    );
    assert_eq!(v["drills"]["rows_rejected"], 2);
    assert_eq!(v["drills"]["rejected"][0]["column"], "at");
    assert_eq!(au301_jobs(&v), ["export", "invoices", "late", "reindex"]);
}

#[test]
fn the_reports_show_each_jobs_last_drill() {
    let p = Project::new();
    let drills = p.path("drills.jsonl");
    for r in Project::records() {
        append_drill(&drills, &r).expect("append");
    }
    let render = |format: &str| {
        let out = bg()
            .current_dir(p.dir.path())
            .args(AUDIT_WINDOW)
            .args(["--ledger", "events.csv", "--manifest", "m.batchguard.yaml"])
            .args(["--drills", &drills, "--format", format])
            .output()
            .expect("runs");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let pretty = render("pretty");
    assert!(
        pretty.contains("drill_cadence 92d before 2026-04-01T00:00:00+00:00"),
        "{pretty}"
    );
    let line = |text: &str, job: &str| {
        // The drills table comes after the metrics table, whose rows start with jobs too.
        let from = text.find("drills:").expect("drills section");
        text[from..]
            .lines()
            .find(|l| l.starts_with(job))
            .unwrap_or_else(|| panic!("{job} in {text}"))
            .to_owned()
    };
    let inv = line(&pretty, "invoices ");
    assert!(
        inv.contains("2026-03-25T10:00:00+00:00")
            && inv.contains("failed: rerun, crash")
            && inv.ends_with("overdue"),
        "{inv}"
    );
    assert!(
        line(&pretty, "settle ").contains("passed (6 scenarios)"),
        "{pretty}"
    );
    assert!(
        line(&pretty, "cleanup ").ends_with("no snapshot"),
        "{pretty}"
    );
    assert!(
        pretty.contains("warning AU301 drill-overdue: job `reindex`"),
        "{pretty}"
    );

    let md = render("markdown");
    assert!(md.contains("## Drills"), "{md}");
    assert!(
        md.contains("| `invoices` | 2026-03-25T10:00:00+00:00 | failed | `clean:passed,rerun:failed,crash:failed` | - | overdue |"),
        "{md}"
    );
    let html = render("html");
    assert!(html.contains("<h2>Drills</h2>"), "{html}");
    assert!(
        html.contains("clean:passed,rerun:failed,crash:failed"),
        "{html}"
    );
    // The CSV report is the metrics table: unchanged by drills.
    let csv = render("csv");
    assert!(!csv.contains("drill"), "{csv}");
}

#[test]
fn drill_records_are_read_from_a_sqlite_ledger_database() {
    let p = Project::new();
    let db = p.dir.path().join("store.db");
    let url = format!("sqlite:{}", db.display());
    // A ledger database without the drill table: AU301 skipped, naming it.
    ledger_only_sqlite(&db);
    let (_, v, _) = p.audit(&["--ledger", &url]);
    let why = skipped_au301(&v).expect("skipped");
    assert!(
        why.contains("no `batchguard_drills` table in the ledger") && why.contains("no --drills"),
        "{why}"
    );
    // The drills recorded into the ledger database are read from it.
    for r in Project::records() {
        append_drill(&url, &r).expect("append");
    }
    let (_, v, _) = p.audit(&["--ledger", &url]);
    assert_eq!(au301_jobs(&v), ["export", "invoices", "late", "reindex"]);
    assert_eq!(v["drills"]["source"], url.as_str());
    // --drills wins over the ledger's table.
    let other = p.path("other.jsonl");
    append_drill(
        &other,
        &rec("reindex", "2026-03-30T00:00:00Z", &[("clean", true)]),
    )
    .expect("append");
    let (_, v, _) = p.audit(&["--ledger", &url, "--drills", &other]);
    assert_eq!(
        au301_jobs(&v),
        ["export", "invoices", "late", "report", "settle"]
    );
}

/// A ledger database (its ledger tables made by `ddl`) without the drill table, then with
/// the project's drills recorded into it: AU301 by the cadence, read from the ledger or
/// from `--drills` naming the database.
fn drills_in_a_ledger_database(url: &str, ddl: impl Fn()) {
    let p = Project::new();
    ddl();
    let (_, v, _) = p.audit(&["--ledger", url]);
    let why = skipped_au301(&v).expect("skipped");
    assert!(why.contains("no `batchguard_drills` table"), "{why}");
    // --drills naming the same database says which source lacks it.
    let (_, v, _) = p.audit(&["--ledger", url, "--drills", url]);
    let why = skipped_au301(&v).expect("skipped");
    assert!(why.contains("has no `batchguard_drills` table"), "{why}");
    for r in Project::records() {
        append_drill(url, &r).expect("append");
    }
    for extra in [&[][..], &["--drills", url][..]] {
        let mut args = vec!["--ledger", url];
        args.extend_from_slice(extra);
        let (_, v, _) = p.audit(&args);
        assert_eq!(au301_jobs(&v), ["export", "invoices", "late", "reindex"]);
        assert_eq!(
            job_entry(&v, "export")["last_passing_drill_at"],
            "2025-12-29T23:59:59Z"
        );
    }
}

#[test]
fn drill_records_are_read_from_a_postgres_ledger_database() {
    on(Kind::Pg, "drills_audit", |db| {
        drills_in_a_ledger_database(&db.url(), || db.exec(&ddl("postgres")))
    });
}

#[test]
fn drill_records_are_read_from_a_mysql_ledger_database() {
    on(Kind::MySql, "drills_audit", |db| {
        drills_in_a_ledger_database(&db.url(), || db.exec(&ddl("mysql")))
    });
}

/// The ledger tables of `schemas/ledger.STORE.sql`.
fn ddl(store: &str) -> String {
    std::fs::read_to_string(format!("schemas/ledger.{store}.sql")).expect("ddl")
}

// ---------------------------------------------------------------- helpers

fn sqlite_exec(path: &Path, sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        let mut c = sqlx::SqliteConnection::connect_with(&opts)
            .await
            .expect("open");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut c)
            .await
            .expect("sql");
        c.close().await.expect("close");
    });
}

/// A SQLite ledger with the ledger tables only, as a job runner that is not `run` makes it.
fn ledger_only_sqlite(path: &Path) {
    sqlite_exec(path, &ddl("sqlite"));
}

// ---------------------------------------------------------------- what users see

/// The demo audit of docs/commands/audit.md with the demo's drill records, in one format.
fn demo_with_drills(format: &str) -> String {
    let out = bg()
        .args(["audit", "--ledger", "fixtures/demo/events.csv"])
        .args(["--outputs", "fixtures/demo/outputs.csv"])
        .args(["--manifest", "fixtures/demo/billing.batchguard.yaml"])
        .args(["--drills", "fixtures/demo/drills.jsonl"])
        .args([
            "--from",
            "2026-03-01T00:00:00+09:00",
            "--to",
            "2026-03-02T00:00:00+09:00",
        ])
        .args(["--format", format])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "the demo has errors");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn audit_demo_with_drills_pretty() {
    insta::assert_snapshot!(demo_with_drills("pretty"));
}

#[test]
fn audit_demo_with_drills_markdown() {
    insta::assert_snapshot!(demo_with_drills("markdown"));
}
