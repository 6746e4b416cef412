//! `batchguard run` and `store` on a real MySQL / MariaDB server (SPEC 7.2, 10): round trips
//! counted by a proxy that reads the protocol, the refusal of an unmigrated database, an
//! idempotent migrate, retries with new fences, fifty contenders on one slot, and what
//! `audit` reads back. Each test has a database of its own (`tests/common/mysqldb.rs`).

mod common;
#[path = "common/held.rs"]
mod held;
#[path = "common/stores.rs"]
mod stores;

use common::bin;
use mysqldb::{COM_QUERY, COM_STMT_EXECUTE, COM_STMT_PREPARE, Proxy, TestDb, round_trips};
use std::process::{Command, Output, Stdio};
use stores::mysqldb;

const SLOT: &str = "2026-03-01T02:00:00Z";

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(ttl: &str, retry: &str, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n    retry:\n{retry}"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Case { dir }
    }

    fn cmd(&self, store: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(self.dir.path())
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
            .args(["--store", store])
            .args(extra)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, store: &str, extra: &[&str]) -> Output {
        self.cmd(store, extra).output().expect("run")
    }
}

fn migrate(url: &str) -> Output {
    Command::new(bin())
        .args(["store", "migrate", "--store", url])
        .output()
        .expect("migrate")
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// (event, attempt, fence, status, error_code, detail) in order of writing.
type Ev = (
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn events(db: &TestDb) -> Vec<Ev> {
    db.rows(
        "SELECT event, CAST(attempt AS CHAR), CAST(fence AS CHAR), status, error_code, detail \
         FROM batchguard_events ORDER BY id",
    )
    .into_iter()
    .map(|r| {
        let n = |i: usize| r[i].as_deref().and_then(|s| s.parse().ok());
        (
            r[0].clone().unwrap(),
            n(1),
            n(2),
            r[3].clone(),
            r[4].clone(),
            r[5].clone(),
        )
    })
    .collect()
}

const NO_RETRY: &str = "      max_attempts: 1\n";

#[test]
fn a_successful_run_is_at_most_three_round_trips_and_the_acquire_is_one() {
    let Some(db) = mysqldb::fresh("rt") else {
        return;
    };
    ok(&migrate(&db.url));
    let proxy = Proxy::start(&mysqldb::host_port(&db.url));
    let url = proxy.url(&db);
    let case = Case::new(
        "60s",
        NO_RETRY,
        r#"["sh", "-c", "echo charge-1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );

    // With --scheduled-at: the acquire (with `start`) and the finish (`end`, outputs, release),
    // each one COM_QUERY; never a prepared statement (two round trips each in a new process).
    ok(&case.run(&url, &["--scheduled-at", SLOT]));
    let msgs = proxy.take();
    let queries: Vec<&str> = msgs
        .iter()
        .filter(|(t, _)| *t == COM_QUERY)
        .map(|(_, q)| q.as_str())
        .collect();
    assert!(
        msgs.iter()
            .all(|(t, _)| *t != COM_STMT_PREPARE && *t != COM_STMT_EXECUTE),
        "no prepared statements: {msgs:?}"
    );
    assert_eq!(round_trips(&msgs), 2, "{queries:#?}");
    assert!(
        queries[0].contains("FROM batchguard_fence WHERE id = 1 FOR UPDATE")
            || queries[0].starts_with("SET @bg_used"),
        "acquire first: {queries:#?}"
    );
    assert!(
        queries[1].starts_with("START TRANSACTION"),
        "finish second: {queries:#?}"
    );

    // A skip: the acquire, then the `skip` event.
    ok(&case.run(&url, &["--scheduled-at", SLOT]));
    let msgs = proxy.take();
    assert_eq!(round_trips(&msgs), 2, "{msgs:#?}");

    // The slot from the store's clock: one more round trip for `now()`.
    ok(&case.run(&url, &[]));
    let msgs = proxy.take();
    assert_eq!(round_trips(&msgs), 3, "{msgs:#?}");

    // Leftovers of a run that died are looked up, and that answer carries the clock. (The
    // current slot succeeded just now: forget it, so this run runs rather than skips.)
    db.exec("DELETE FROM batchguard_slots");
    db.exec("DELETE FROM batchguard_leases");
    std::fs::create_dir_all(
        case.dir
            .path()
            .join(".batchguard/runs/20260301T020000-1-dead"),
    )
    .unwrap();
    let o = case.run(&url, &[]);
    ok(&o);
    let msgs = proxy.take();
    assert_eq!(round_trips(&msgs), 3, "{msgs:#?}");

    let ev = events(&db);
    let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "start").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(kinds[2], "skip");
    let outputs = db.rows("SELECT output_key FROM batchguard_outputs");
    assert_eq!(outputs.len(), 3);
}

#[test]
fn an_unmigrated_database_is_refused_naming_store_migrate() {
    let Some(db) = mysqldb::fresh("unmig") else {
        return;
    };
    let case = Case::new("60s", NO_RETRY, r#"["touch", "ran"]"#);
    let o = case.run(&db.url, &["--scheduled-at", SLOT]);
    assert_eq!(o.status.code(), Some(125));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("batchguard store migrate --store"), "{err}");
    assert!(err.contains("--scheduled-at 2026-03-01T02:00:00Z"), "{err}");
    assert!(!case.dir.path().join("ran").exists(), "the command ran");
    // migrate is idempotent, and then the run works.
    ok(&migrate(&db.url));
    ok(&migrate(&db.url));
    ok(&case.run(&db.url, &["--scheduled-at", SLOT]));
    assert!(case.dir.path().join("ran").exists());
}

#[test]
fn exit_75_is_retried_with_a_new_fence_and_a_succeeded_slot_never_reruns() {
    let Some(db) = mysqldb::fresh("retry") else {
        return;
    };
    ok(&migrate(&db.url));
    let case = Case::new(
        "60s",
        "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n",
        r#"["sh", "-c", "if [ \"$BATCHGUARD_ATTEMPT\" = 1 ]; then exit 75; fi; echo ok >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );
    ok(&case.run(&db.url, &["--scheduled-at", SLOT]));
    let o = case.run(&db.url, &["--scheduled-at", SLOT]);
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already succeeded (run "),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ev = events(&db);
    let starts: Vec<&Ev> = ev.iter().filter(|e| e.0 == "start").collect();
    assert_eq!(starts.len(), 2, "{ev:#?}");
    assert_eq!((starts[0].1, starts[1].1), (Some(1), Some(2)));
    assert!(starts[0].2 < starts[1].2, "fences rise: {ev:#?}");
    let ends: Vec<&Ev> = ev.iter().filter(|e| e.0 == "end").collect();
    assert_eq!(ends[0].4.as_deref(), Some("EX_TEMPFAIL"));
    assert_eq!(ends[1].3.as_deref(), Some("success"));
    assert_eq!(ev.last().map(|e| e.0.as_str()), Some("skip"));

    // `store status` names the slot; the audit reads what run wrote.
    let st = Command::new(bin())
        .args(["store", "status", "--store", &db.url])
        .output()
        .unwrap();
    ok(&st);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains("2026-03-01T02:00:00Z  succeeded  attempts 2"),
        "{text}"
    );
    let audit = Command::new(bin())
        .current_dir(case.dir.path())
        .args([
            "audit",
            "--ledger",
            &db.url,
            "--manifest",
            "m.batchguard.yaml",
        ])
        .args([
            "--from",
            SLOT,
            "--to",
            "2026-03-01T02:01:00Z",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).expect("audit json");
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(
        !codes.contains(&"AU102") && !codes.contains(&"AU201"),
        "{codes:?}"
    );
    assert!(!codes.contains(&"AU101"), "the slot ran: {codes:?}");
}

#[test]
fn a_held_lease_is_skipped_naming_the_holder_and_a_dead_holder_is_retaken() {
    let Some(db) = mysqldb::fresh("held") else {
        return;
    };
    ok(&migrate(&db.url));
    let case = Case::new("5s", "      max_attempts: 5\n", r#"["true"]"#);
    // A holder that died mid-run: its lease row is live for 5 s of database time.
    let now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
    db.exec("UPDATE batchguard_fence SET value = value + 1 WHERE id = 1");
    db.exec(&format!(
        "INSERT INTO batchguard_leases VALUES ('j:{SLOT}', 'j', '2026-03-01T02:00:00.000000Z', 'ghost', 'r-ghost', \
         1, {now}, {now} + 5000000, 'held')"
    ));
    db.exec("INSERT INTO batchguard_slots VALUES ('j', '2026-03-01T02:00:00.000000Z', 1, 'running', 'r-ghost')");
    let o = case.run(&db.url, &["--scheduled-at", SLOT]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("held by ghost (run r-ghost, fence 1, lease ends in "),
        "{err}"
    );
    // Expire it in database time: the next run takes attempt 2 with a higher fence.
    db.exec(&format!(
        "UPDATE batchguard_leases SET lease_until = {now} - 1000000"
    ));
    ok(&case.run(&db.url, &["--scheduled-at", SLOT]));
    let ev = events(&db);
    let start = ev.iter().find(|e| e.0 == "start").expect("start");
    assert_eq!(start.1, Some(2));
    assert!(start.2 > Some(1));
    // Deleting every lease row never makes a fence go back.
    db.exec("DELETE FROM batchguard_leases");
    ok(&case.run(&db.url, &["--scheduled-at", "2026-03-01T02:01:00Z"]));
    let fences: Vec<i64> = events(&db)
        .iter()
        .filter_map(|e| (e.0 == "start").then_some(e.2).flatten())
        .collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[test]
fn fifty_contenders_on_one_slot_give_one_start_and_forty_nine_skips() {
    let Some(db) = mysqldb::fresh("fifty") else {
        return;
    };
    ok(&migrate(&db.url));
    let case = Case::new("60s", NO_RETRY, r#"["sleep", "1"]"#);
    let children: Vec<_> = (0..50)
        .map(|i| {
            case.cmd(
                &db.url,
                &["--scheduled-at", SLOT, "--instance", &format!("i{i}")],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let ev = events(&db);
    let n = |k: &str| ev.iter().filter(|e| e.0 == k).count();
    assert_eq!((n("start"), n("skip"), n("end")), (1, 49, 1), "{ev:#?}");
    assert!(
        ev.iter().filter(|e| e.0 == "skip").all(|e| e
            .5
            .as_deref()
            .is_some_and(|d| d.starts_with("held by i") || d.starts_with("already succeeded"))),
        "{ev:#?}"
    );
}

#[test]
fn outputs_of_dead_runs_are_written_once_when_many_catch_up_at_once() {
    let Some(db) = mysqldb::fresh("catchup") else {
        return;
    };
    ok(&migrate(&db.url));
    let case = Case::new("60s", NO_RETRY, r#"["true"]"#);
    let d = case.dir.path();
    // Forty runs that wrote `start` and died: no `end`, no live lease, their outputs on disk.
    for i in 0..40 {
        let run = format!("20260301T020000-1-dead{i}");
        db.exec(&format!(
            "INSERT INTO batchguard_events (run_id, job, scheduled_at, event, at, `trigger`) \
             VALUES ('{run}', 'j', '2026-03-01T02:00:00.000000Z', 'start', '2026-03-01T02:00:01.000000Z', 'schedule')"
        ));
        let dir = d.join(".batchguard/runs").join(&run);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("outputs"), format!("a{i}\nb{i}\n")).unwrap();
    }
    let flushes: Vec<_> = (0..12)
        .map(|_| {
            Command::new(bin())
                .current_dir(d)
                .args(["store", "flush", "--store", &db.url])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for f in flushes {
        let o = f.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let keys = db.rows("SELECT output_key FROM batchguard_outputs ORDER BY output_key");
    assert_eq!(keys.len(), 80, "each output once: {keys:?}");
    assert!(
        std::fs::read_dir(d.join(".batchguard/runs"))
            .unwrap()
            .next()
            .is_none()
    );
}

/// The minute two minutes ago, as `--scheduled-at` (inside `watch --since 3h`).
fn recent_slot() -> String {
    let now = jiff::Timestamp::now().as_second();
    jiff::Timestamp::from_second(now - now.rem_euclid(60) - 120)
        .unwrap()
        .to_string()
}

#[test]
fn watch_and_metrics_list_the_leases_held_and_not_the_released_ones() {
    let Some(db) = mysqldb::fresh("leases") else {
        return;
    };
    ok(&migrate(&db.url));
    let case = Case::new("10m", "      max_attempts: 1\n", r#"["true"]"#);
    let dir = case.dir.path();
    let slot = recent_slot();
    let paused = held::paused_run(dir, "j", &slot, &db.url, None);
    let run_id = db.rows("SELECT run_id FROM batchguard_events WHERE event = 'start'")[0][0]
        .clone()
        .expect("the run's start");
    let v = held::watch(dir, &db.url, None);
    assert_eq!(held::lease_runs(&v), std::slice::from_ref(&run_id));
    let l = &v["leases"][0];
    assert_eq!(l["job"], "j");
    assert_eq!(l["fence"], 1);
    assert_eq!(l["expired"], false);
    assert!(l["holder"].as_str().unwrap().contains("host-a"), "{l}");
    let left = l["secs_left"].as_i64().unwrap();
    assert!(left > 0 && left <= 600, "{l}");
    let (acquired, until): (jiff::Timestamp, jiff::Timestamp) = (
        l["acquired_at"].as_str().unwrap().parse().unwrap(),
        l["lease_until"].as_str().unwrap().parse().unwrap(),
    );
    assert_eq!(until.duration_since(acquired).as_secs(), 600);
    // What runs now is the lease's run, with the lease's time left.
    let running = held::running(&v, "j");
    assert_eq!(running.len(), 1);
    assert_eq!(running[0]["run_id"], run_id.as_str());
    assert!(running[0]["lease_secs_left"].as_i64().unwrap() > 0);
    assert!(
        !held::watch_text(dir, &db.url, None).contains("does not list its leases"),
        "the store lists its leases"
    );
    let prom = held::metrics(dir, &db.url, None);
    assert!(
        prom.contains("batchguard_live_leases{job_name=\"j\"} 1"),
        "{prom}"
    );

    // A holder that died (still `held`, past its lease_until) is listed as expired; a
    // released lease is not listed.
    let now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
    db.exec(&format!(
        "INSERT INTO batchguard_leases VALUES ('j:dead', 'j', '{slot}', 'ghost', 'r-dead', 7, {now} - 120000000, {now} - 60000000, 'held'); \
         INSERT INTO batchguard_leases VALUES ('j:done', 'j', '{slot}', 'ghost', 'r-done', 8, {now} - 120000000, {now} + 60000000, 'released')"
    ));
    let v = held::watch(dir, &db.url, None);
    let mut runs = held::lease_runs(&v);
    runs.sort();
    let mut want = vec![run_id.clone(), "r-dead".to_owned()];
    want.sort();
    assert_eq!(runs, want);
    let dead = v["leases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["run_id"] == "r-dead")
        .unwrap();
    assert_eq!(dead["expired"], true);

    // Released by its run's end: only the dead holder's lease is left.
    ok(&paused.release());
    let v = held::watch(dir, &db.url, None);
    assert_eq!(held::lease_runs(&v), ["r-dead"]);
    assert!(held::running(&v, "j").is_empty(), "{v}");
    let prom = held::metrics(dir, &db.url, None);
    assert!(
        prom.contains("batchguard_live_leases{job_name=\"j\"} 0")
            && prom.contains("batchguard_expired_leases{job_name=\"j\"} 1"),
        "{prom}"
    );
}
