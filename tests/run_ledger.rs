//! `batchguard run --ledger SOURCE` apart from `--store` (SPEC 7.1, 7.2): the lease stays in
//! the store, the events and outputs go to a JSONL file or another SQLite database, and an
//! unreachable ledger is spooled and written later. Real processes, real files.

mod common;
#[path = "common/stores.rs"]
mod stores;

use common::{bin, sh, sqlite_rows};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use stores::pgdb;

const SLOT: &str = "2026-03-01T02:00:00Z";
const NEXT: &str = "2026-03-01T02:01:00Z";

/// A job that applies output `k1`, says it started, and waits for `go` before exiting 0.
fn case() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let cmd = sh(
        "echo \"k-$BATCHGUARD_SCHEDULED_AT\" >> \"$BATCHGUARD_OUTPUTS\"; touch started; \
         while [ ! -e go ]; do sleep 0.02; done",
    );
    let text = format!(
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {cmd}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 10m\n    retry:\n      max_attempts: 1\n"
    );
    std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
    dir
}

fn run(dir: &Path, store: &str, ledger: &str) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
        .args(["--store", store, "--ledger", ledger, "--scheduled-at", SLOT])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn wait_for(p: &Path) {
    let t = Instant::now();
    while !p.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Two instances on one slot: the first runs (held until `go`), the second skips.
fn race(dir: &Path, store: &str, ledger: &str) -> (Output, Output) {
    let first = run(dir, store, ledger)
        .arg("--instance")
        .arg("a")
        .spawn()
        .expect("spawn");
    wait_for(&dir.join("started"));
    let second = run(dir, store, ledger)
        .args(["--instance", "b"])
        .output()
        .expect("second");
    std::fs::write(dir.join("go"), "").expect("go");
    let first = first.wait_with_output().expect("first");
    (first, second)
}

fn audit(dir: &Path, ledger: &str, outputs: Option<&str>) -> serde_json::Value {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args([
            "audit",
            "--ledger",
            ledger,
            "--manifest",
            "m.batchguard.yaml",
        ])
        .args(["--from", SLOT, "--to", NEXT, "--format", "json"]);
    if let Some(o) = outputs {
        c.args(["--outputs", o]);
    }
    let out = c.output().expect("audit");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit json ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn findings(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| format!("{} {}", f["code"], f["message"]))
                .collect()
        })
        .unwrap_or_default()
}

fn lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn events(p: &Path) -> Vec<String> {
    lines(p)
        .iter()
        .map(|v| v["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn sqlite_count(db: &Path, sql: &str) -> i64 {
    sqlite_rows::<(i64,)>(db, sql).first().map_or(0, |r| r.0)
}

#[test]
fn jsonl_ledger_gets_start_end_skip_and_outputs_and_audits_clean() {
    let d = case();
    let (first, second) = race(d.path(), "sqlite:locks/store.db", "ledger.jsonl");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("held by a"),
        "{second:?}"
    );
    let mut kinds = events(&d.path().join("ledger.jsonl"));
    kinds.sort();
    assert_eq!(kinds, ["end", "skip", "start"]);
    let outs = lines(&d.path().join("ledger.outputs.jsonl"));
    assert_eq!(outs.len(), 1, "{outs:?}");
    assert_eq!(outs[0]["output_key"], format!("k-{SLOT}"));
    let start = lines(&d.path().join("ledger.jsonl"))
        .into_iter()
        .find(|v| v["event"] == "start")
        .expect("start");
    assert!(start["fence"].as_i64().is_some_and(|f| f >= 1), "{start}");
    assert_eq!(start["attempt"], 1);
    // The store kept the lease and the slot, not the events.
    let store = d.path().join("locks/store.db");
    assert_eq!(
        sqlite_count(&store, "SELECT count(*) FROM batchguard_events"),
        0
    );
    assert_eq!(
        sqlite_count(
            &store,
            "SELECT count(*) FROM batchguard_slots WHERE state = 'succeeded'"
        ),
        1
    );
    let v = audit(d.path(), "ledger.jsonl", Some("ledger.outputs.jsonl"));
    assert!(findings(&v).is_empty(), "{:?}", findings(&v));
    // A third run finds the slot succeeded, in the store.
    let third = run(d.path(), "sqlite:locks/store.db", "ledger.jsonl")
        .output()
        .expect("third");
    assert!(
        String::from_utf8_lossy(&third.stderr).contains("already succeeded"),
        "{third:?}"
    );
    assert_eq!(events(&d.path().join("ledger.jsonl")).len(), 4);
}

#[test]
fn sqlite_ledger_apart_from_the_store() {
    let d = case();
    let (first, second) = race(d.path(), "sqlite:locks.db", "sqlite:ledger.db");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    let ledger = d.path().join("ledger.db");
    assert_eq!(
        sqlite_count(&ledger, "SELECT count(*) FROM batchguard_events"),
        3
    );
    assert_eq!(
        sqlite_count(&ledger, "SELECT count(*) FROM batchguard_outputs"),
        1
    );
    // Only the ledger tables: the lease lives in the store.
    assert_eq!(
        sqlite_count(
            &ledger,
            "SELECT count(*) FROM sqlite_master WHERE name = 'batchguard_leases'"
        ),
        0
    );
    assert_eq!(
        sqlite_count(
            &d.path().join("locks.db"),
            "SELECT count(*) FROM batchguard_events"
        ),
        0
    );
    let v = audit(d.path(), "sqlite:ledger.db", None);
    assert!(findings(&v).is_empty(), "{:?}", findings(&v));
    assert_eq!(v["metrics"]["executions"].as_u64().unwrap_or(1), 1, "{v}");
}

#[test]
fn unreachable_ledger_is_spooled_then_flushed_there() {
    let d = case();
    std::fs::write(d.path().join("go"), "").expect("go");
    // The ledger's directory does not exist yet: every ledger write fails after the acquire.
    let out = run(d.path(), "sqlite:store.db", "later/ledger.jsonl")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spooled to .batchguard/spool/"), "{err}");
    let spool: Vec<_> = std::fs::read_dir(d.path().join(".batchguard/spool"))
        .expect("spool")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(spool.len(), 2, "start, then end with outputs: {spool:?}");
    for p in &spool {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
    // Still unreachable: flush keeps them and says so.
    let flush = |d: &Path| {
        Command::new(bin())
            .current_dir(d)
            .args(["store", "flush", "--store", "sqlite:store.db"])
            .output()
            .expect("flush")
    };
    let kept = flush(d.path());
    assert_eq!(kept.status.code(), Some(1), "{kept:?}");
    assert!(
        String::from_utf8_lossy(&kept.stderr).contains("stays spooled"),
        "{kept:?}"
    );
    assert_eq!(
        std::fs::read_dir(d.path().join(".batchguard/spool"))
            .expect("spool")
            .count(),
        2
    );
    std::fs::create_dir(d.path().join("later")).expect("mkdir");
    let ok = flush(d.path());
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert_eq!(
        std::fs::read_dir(d.path().join(".batchguard/spool"))
            .expect("spool")
            .count(),
        0
    );
    assert_eq!(
        events(&d.path().join("later/ledger.jsonl")),
        ["start", "end"]
    );
    assert_eq!(lines(&d.path().join("later/ledger.outputs.jsonl")).len(), 1);
    let v = audit(
        d.path(),
        "later/ledger.jsonl",
        Some("later/ledger.outputs.jsonl"),
    );
    assert!(findings(&v).is_empty(), "{:?}", findings(&v));
}

#[test]
fn a_ledger_run_cannot_write_is_refused_before_the_acquire() {
    let d = case();
    let out = run(d.path(), "sqlite:store.db", "ledger.csv")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a ledger `run` can write"),
        "{out:?}"
    );
    assert!(!d.path().join("started").exists());
}

#[test]
fn concurrent_appends_never_interleave_lines() {
    // Many short runs, each on its own slot, appending to one file at once.
    let dir = tempfile::tempdir().expect("tempdir");
    let big = "x".repeat(900);
    let cmd = sh(&format!(
        "i=0; while [ $i -lt 50 ]; do echo \"{big}-$BATCHGUARD_RUN_ID-$i\" >> \"$BATCHGUARD_OUTPUTS\"; i=$((i+1)); done"
    ));
    let text = format!(
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {cmd}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 10m\n    retry:\n      max_attempts: 1\n"
    );
    std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
    let kids: Vec<_> = (0..8)
        .map(|i| {
            Command::new(bin())
                .current_dir(dir.path())
                .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
                .args(["--ledger", "l.jsonl"])
                .args(["--scheduled-at", &format!("2026-03-01T02:{i:02}:00Z")])
                .stdin(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for k in kids {
        let o = k.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(0), "{o:?}");
    }
    assert_eq!(events(&dir.path().join("l.jsonl")).len(), 16);
    let outs = lines(&dir.path().join("l.outputs.jsonl"));
    assert_eq!(outs.len(), 400);
}

#[test]
fn postgres_store_with_a_jsonl_ledger_and_sqlite_store_with_a_postgres_ledger() {
    let Some(store_db) = pgdb::fresh("lsep_store") else {
        return;
    };
    let Some(ledger_db) = pgdb::fresh("lsep_ledger") else {
        return;
    };
    for url in [&store_db.url, &ledger_db.url] {
        let m = Command::new(bin())
            .args(["store", "migrate", "--store", url])
            .output()
            .expect("migrate");
        assert!(m.status.success(), "{m:?}");
    }
    // The lease in PostgreSQL, the ledger in a file.
    let d = case();
    let (first, second) = race(d.path(), &store_db.url, "l.jsonl");
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    let mut kinds = events(&d.path().join("l.jsonl"));
    kinds.sort();
    assert_eq!(kinds, ["end", "skip", "start"]);
    assert_eq!(
        store_db.rows("SELECT count(*)::text FROM batchguard_events")[0][0].as_deref(),
        Some("0")
    );
    let v = audit(d.path(), "l.jsonl", Some("l.outputs.jsonl"));
    assert!(findings(&v).is_empty(), "{:?}", findings(&v));

    // The lease in SQLite, the ledger in PostgreSQL.
    let d = case();
    let (first, second) = race(d.path(), "sqlite:s.db", &ledger_db.url);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    assert_eq!(
        ledger_db.rows("SELECT count(*)::text FROM batchguard_events")[0][0].as_deref(),
        Some("3")
    );
    assert_eq!(
        ledger_db.rows("SELECT count(*)::text FROM batchguard_outputs")[0][0].as_deref(),
        Some("1")
    );
    let v = audit(d.path(), &ledger_db.url, None);
    assert!(findings(&v).is_empty(), "{:?}", findings(&v));
}
