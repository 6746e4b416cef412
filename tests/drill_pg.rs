//! Drills of jobs whose state is a real PostgreSQL database (SPEC 7.3 "External state"):
//! the example jobs of `examples/jobs/settle-pg.batchguard.yaml` drilled against the real
//! server, a schema per sandbox made by `replay.setup` and dropped by `replay.teardown`;
//! a job whose state is shared between sandboxes caught as such, one after the other and
//! at the same time; setup and teardown counted; a failing teardown fails the drill;
//! `replay` keys the drill does not know and one-string commands refused.
//!
//! Each test gets a database of its own (`tests/common/pgdb.rs`); the jobs talk to it with
//! `psql`. Without the server, `node` or `psql` these tests print why and pass, except
//! under `CI=true`.

mod common;
#[path = "common/stores.rs"]
mod stores;

use common::{bg, need_node};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use stores::pgdb;

const SLOT: &str = "2026-03-01T02:00:00Z";
const SHARED: &str = "state shared between sandboxes";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn snapshot() -> PathBuf {
    root().join("examples/snapshots/settle-payments/2026-03-01T02:00:00Z.jsonl")
}

fn script(name: &str) -> String {
    root()
        .join("examples/jobs")
        .join(name)
        .display()
        .to_string()
}

fn has_psql() -> bool {
    let ok = std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "psql is required in CI"
        );
        eprintln!("skipped: psql is not on PATH");
    }
    ok
}

/// A fresh database, when the server, `node` and `psql` are there.
fn database(tag: &str) -> Option<pgdb::TestDb> {
    if !need_node(18) || !has_psql() {
        return None;
    }
    pgdb::fresh(tag)
}

/// `drill` of `job` in `manifest` for the example slot, with the job's database.
fn drill_cmd(db: &pgdb::TestDb, manifest: &Path, job: &str) -> assert_cmd::Command {
    let mut c = bg();
    c.current_dir(root())
        .env("DATABASE_URL", &db.url)
        .env_remove("SETTLE_SCHEMA")
        .args(["drill", "--manifest"])
        .arg(manifest)
        .args(["--job", job, "--snapshot"])
        .arg(snapshot())
        .args(["--scheduled-at", SLOT]);
    c
}

/// `drill --format json`: the exit code, the report and stderr.
fn drill_json(mut c: assert_cmd::Command, extra: &[&str]) -> (i32, Value, String) {
    let out = c
        .args(["--format", "json"])
        .args(extra)
        .output()
        .expect("drill runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("drill prints JSON ({e}); stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

fn drill(db: &pgdb::TestDb, manifest: &Path, job: &str, extra: &[&str]) -> (i32, Value, String) {
    drill_json(drill_cmd(db, manifest, job), extra)
}

fn scenarios(r: &Value) -> BTreeMap<String, Value> {
    r["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| (s["name"].as_str().expect("name").to_owned(), s.clone()))
        .collect()
}

fn names(r: &Value) -> Vec<String> {
    r["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_owned())
        .collect()
}

/// The schemas the drills left in the database.
fn leftover_schemas(db: &pgdb::TestDb) -> Vec<String> {
    db.rows("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'settle\\_%' ORDER BY 1")
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect()
}

const ALL: [&str; 6] = ["clean", "rerun", "concurrent", "crash", "retry", "stale"];

#[test]
fn the_correct_job_passes_and_check_then_insert_fails_stale_with_keys() {
    let Some(db) = database("drill_pg_example") else {
        return;
    };
    let manifest = root().join("examples/jobs/settle-pg.batchguard.yaml");
    let (code, r, err) = drill(&db, &manifest, "settle-pg", &["--jobs", "2"]);
    assert_eq!(code, 0, "{r:#}\n{err}");
    assert_eq!(names(&r), ALL);
    assert_eq!(r["counted_by"], "verify");
    assert_eq!(
        r["scenarios_at_once"], 2,
        "replay.setup makes the sandboxes apart"
    );
    for (name, s) in scenarios(&r) {
        assert_eq!(s["passed"], true, "{name}: {s:#}");
        assert_eq!(s["inputs"], 40);
    }

    let (code, r, err) = drill(&db, &manifest, "settle-pg-naive", &[]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(names(&r), ALL, "the fixed order, whatever finished first");
    let sc = scenarios(&r);
    let stale = &sc["stale"];
    assert_eq!(stale["passed"], false);
    assert!(stale["duplicates"].as_u64().unwrap_or(0) > 0, "{stale:#}");
    let reason = stale["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("applied more than once"), "{reason}");
    assert!(!reason.contains(SHARED), "{reason}");
    let keys = stale["offending_keys"].as_array().expect("keys");
    assert!(!keys.is_empty());
    assert!(
        keys.iter()
            .all(|k| k.as_str().is_some_and(|k| k.starts_with("pay-")))
    );
    // Reading the list afresh on each run is right for every other scenario.
    for name in ["clean", "rerun", "concurrent", "crash", "retry"] {
        assert_eq!(sc[name]["passed"], true, "{name}: {:#}", sc[name]);
    }
    assert!(r.get("teardown_failures").is_none());
    assert_eq!(leftover_schemas(&db), Vec::<String>::new());
}

/// A manifest of the example job in `dir`, its `replay` given whole.
fn manifest(dir: &Path, replay: &str) -> PathBuf {
    let text = format!(
        r#"version: 1
service: billing
jobs:
  - name: settle
    schedule: "0 2 * * *"
    expected_duration: 30s
    lock: {{ key: "{{job}}:{{scheduled_at}}", ttl: 90s, store: postgres }}
    idempotency: {{ strategy: processed_at, key: payment_id }}
    retry: {{ max_attempts: 3, backoff: fixed, initial_delay: 1s, retryable: [EX_TEMPFAIL], fatal: [STALE_FENCE], on_unknown: dead_letter }}
    dead_letter: {{ target: dlq }}
    runbook: {{ owner: t, on_call: t, emergency_stop: s, resume: r, communication: c }}
    snapshot: {{ path: "s/{{scheduled_at}}.jsonl", format: jsonl, key: payment_id, retention: 120d }}
    replay:
{replay}"#
    );
    let path = dir.join("settle.batchguard.yaml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

fn list(words: &[&str]) -> String {
    serde_json::to_string(words).expect("json")
}

/// State in one schema for every sandbox is caught, and no scenario passes: one after
/// the other (no setup), and at the same time (a setup that makes the same schema).
#[test]
fn state_shared_between_sandboxes_is_caught_serial_and_parallel() {
    let Some(db) = database("drill_pg_shared") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let state = script("pg-state.js");
    let command = format!(
        "      command: {}\n",
        list(&["node", &script("settle-pg.js"), "--input", "{snapshot}"])
    );
    let verify = format!("      verify: {}\n", list(&["node", &state, "list"]));
    let setup = format!("      setup: {}\n", list(&["node", &state, "setup"]));
    for (tag, replay, jobs) in [
        ("serial", format!("{command}{verify}"), "1"),
        ("parallel", format!("{command}{verify}{setup}"), "2"),
    ] {
        let schema = format!("settle_shared_{tag}");
        let m = manifest(dir.path(), &replay);
        // The one schema every run uses, made before the drill as in production.
        let made = std::process::Command::new("node")
            .args([&state, "setup"])
            .env("DATABASE_URL", &db.url)
            .env("SETTLE_SCHEMA", &schema)
            .status()
            .expect("node runs");
        assert!(made.success());
        let mut c = drill_cmd(&db, &m, "settle");
        c.env("SETTLE_SCHEMA", &schema);
        let (code, r, err) = drill_json(c, &["--jobs", jobs]);
        assert_eq!(code, 1, "{tag}: {err}");
        assert_eq!(r["passed"], false);
        assert_eq!(names(&r), ALL);
        for (name, s) in scenarios(&r) {
            let reason = s["reason"].as_str().unwrap_or_default();
            assert_eq!(s["passed"], false, "{tag} {name} passed falsely: {s:#}");
            assert!(reason.contains(SHARED), "{tag} {name}: {reason}");
            assert!(
                !reason.contains("BATCHGUARD_OUTPUTS"),
                "{tag} {name}: {reason}"
            );
        }
        let expect_at_once = if jobs == "1" { 1 } else { 2 };
        assert_eq!(r["scenarios_at_once"], expect_at_once, "{tag}");
        db.exec(&format!("DROP SCHEMA {schema} CASCADE"));
    }
}

/// `setup` and `teardown` wrapped to log each call: once per sandbox each (five
/// sandboxes for six scenarios, `rerun` in `clean`'s, and the untouched one the leak check
/// reads), every schema dropped.
#[test]
fn setup_and_teardown_run_once_per_sandbox() {
    let Some(db) = database("drill_pg_counted") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("calls.log");
    let state = script("pg-state.js");
    let wrap = |what: &str| {
        let sh = format!(
            "echo {what} {{sandbox}} >> '{}' && exec node '{state}' {what}",
            log.display()
        );
        list(&["sh", "-c", &sh])
    };
    let replay = format!(
        "      command: {}\n      verify: {}\n      setup: {}\n      teardown: {}\n",
        list(&["node", &script("settle-pg.js"), "--input", "{snapshot}"]),
        list(&["node", &state, "list"]),
        wrap("setup"),
        wrap("teardown"),
    );
    let m = manifest(dir.path(), &replay);
    for (scenarios, sandboxes) in [("all", 6), ("clean,rerun", 2)] {
        let _ = std::fs::remove_file(&log);
        let (code, r, err) = drill(&db, &m, "settle", &["--scenarios", scenarios]);
        assert_eq!(code, 0, "{r:#}\n{err}");
        let text = std::fs::read_to_string(&log).expect("the calls were logged");
        let mut calls: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in text.lines() {
            let (what, sandbox) = line.split_once(' ').expect("what sandbox");
            calls
                .entry(sandbox.to_owned())
                .or_default()
                .push(what.to_owned());
        }
        assert_eq!(calls.len(), sandboxes, "{scenarios}: {text}");
        for (sandbox, seq) in &calls {
            assert_eq!(
                seq,
                &["setup", "teardown"],
                "{scenarios}: {sandbox}: {text}"
            );
        }
        assert_eq!(leftover_schemas(&db), Vec::<String>::new());
    }
}

#[test]
fn a_failing_teardown_is_reported_and_fails_the_drill() {
    let Some(db) = database("drill_pg_teardown") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let state = script("pg-state.js");
    let teardown = format!(
        "node '{state}' teardown && echo 'the bucket prefix could not be removed' >&2 && exit 3"
    );
    let replay = format!(
        "      command: {}\n      verify: {}\n      setup: {}\n      teardown: {}\n",
        list(&["node", &script("settle-pg.js"), "--input", "{snapshot}"]),
        list(&["node", &state, "list"]),
        list(&["node", &state, "setup"]),
        list(&["sh", "-c", &teardown]),
    );
    let m = manifest(dir.path(), &replay);
    let (code, r, err) = drill(&db, &m, "settle", &["--scenarios", "clean,concurrent"]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(r["passed"], false);
    for (name, s) in scenarios(&r) {
        assert_eq!(s["passed"], true, "{name}: the scenarios themselves passed");
    }
    let failures = r["teardown_failures"]
        .as_array()
        .expect("teardown_failures");
    let mut sandboxes: Vec<&str> = failures
        .iter()
        .map(|f| f["sandbox"].as_str().expect("sandbox"))
        .collect();
    sandboxes.sort_unstable();
    assert_eq!(sandboxes, ["clean", "concurrent", "untouched"]);
    for f in failures {
        let why = f["reason"].as_str().expect("reason");
        assert!(why.starts_with("replay.teardown (`sh`) failed"), "{why}");
        assert!(
            why.contains("the bucket prefix could not be removed"),
            "{why}"
        );
    }
    // The pretty report says it too.
    let out = drill_cmd(&db, &m, "settle")
        .args(["--scenarios", "clean"])
        .output()
        .expect("drill runs");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("teardown of sandbox `clean`: replay.teardown"),
        "{text}"
    );
    assert!(
        text.contains("FAILED: 1 of 1 scenarios passed, but 2 teardowns failed"),
        "{text}"
    );
    assert_eq!(leftover_schemas(&db), Vec::<String>::new());
}

/// A `replay` key the drill does not know, and a one-string setup, stop the drill before
/// anything runs (exit 2), with the key's line and column.
#[test]
fn unknown_replay_keys_and_string_commands_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    let command = list(&["sh", "-c", &format!("touch '{}'", marker.display())]);
    for (replay, expect) in [
        (
            format!("      command: {command}\n      teardwon: [\"true\"]\n"),
            vec![
                "settle.batchguard.yaml:15:7: unknown field `teardwon` in `replay` (did you mean `teardown`?)",
            ],
        ),
        (
            format!("      command: {command}\n      setup: \"psql -c 'create schema x'\"\n"),
            vec![
                "one-string `replay.setup`",
                "never hands a command to a shell",
            ],
        ),
        (
            format!("      command: {command}\n      teardown: \"drop-it {{sandbox}}\"\n"),
            vec!["one-string `replay.teardown`"],
        ),
    ] {
        let m = manifest(dir.path(), &replay);
        let out = bg()
            .args(["drill", "--manifest"])
            .arg(&m)
            .args(["--job", "settle", "--snapshot"])
            .arg(snapshot())
            .args(["--scheduled-at", SLOT])
            .output()
            .expect("drill runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        for e in expect {
            assert!(err.contains(e), "{e} not in: {err}");
        }
        assert!(!marker.exists(), "the job ran: {err}");
    }
}
