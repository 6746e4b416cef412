//! `batchguard run` and `store` on a real PostgreSQL server (SPEC 7.2, 10): round trips
//! counted by a proxy that reads the protocol, the refusal of an unmigrated database, an
//! idempotent migrate, retries with new fences, fifty contenders on one slot, and what
//! `audit` reads back. Each test has a database of its own (`tests/common/pgdb.rs`).

mod common;
#[path = "common/stores.rs"]
mod stores;

use common::bin;
use pgdb::{Proxy, TestDb, round_trips};
use std::process::{Command, Output, Stdio};
use stores::pgdb;

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
        "SELECT event, attempt::text, fence::text, status, error_code, detail \
         FROM batchguard_events ORDER BY at, ctid",
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
    let Some(db) = pgdb::fresh("rt") else { return };
    ok(&migrate(&db.url));
    let proxy = Proxy::start(&pgdb::host_port(&db.url));
    let url = proxy.url(&db);
    let case = Case::new(
        "60s",
        NO_RETRY,
        r#"["sh", "-c", "echo charge-1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );

    // With --scheduled-at: the acquire (with `start`) and the finish (`end`, outputs, release).
    ok(&case.run(&url, &["--scheduled-at", SLOT]));
    let msgs = proxy.take();
    let queries: Vec<&str> = msgs
        .iter()
        .filter(|(t, _)| *t == 'Q')
        .map(|(_, q)| q.as_str())
        .collect();
    assert!(
        msgs.iter().all(|(t, _)| matches!(t, 'Q' | 'X')),
        "only simple queries (and the final Terminate): {msgs:?}"
    );
    assert_eq!(round_trips(&msgs), 2, "{queries:#?}");
    assert!(
        queries[0].contains("WITH slot AS"),
        "acquire first: {queries:#?}"
    );
    assert!(
        queries[1].contains("WITH done AS"),
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
    db.exec("DELETE FROM batchguard_slots; DELETE FROM batchguard_leases");
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
    let Some(db) = pgdb::fresh("unmig") else {
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
    let Some(db) = pgdb::fresh("retry") else {
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
    let Some(db) = pgdb::fresh("held") else {
        return;
    };
    ok(&migrate(&db.url));
    let case = Case::new("5s", "      max_attempts: 5\n", r#"["true"]"#);
    // A holder that died mid-run: its lease row is live for 5 s of database time.
    db.exec(&format!(
        "INSERT INTO batchguard_leases VALUES ('j:{SLOT}', 'j', '{SLOT}', 'ghost', 'r-ghost', \
         nextval('batchguard_fence'), now(), now() + interval '5 seconds', 'held'); \
         INSERT INTO batchguard_slots VALUES ('j', '{SLOT}', 1, 'running', 'r-ghost')"
    ));
    let o = case.run(&db.url, &["--scheduled-at", SLOT]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("held by ghost (run r-ghost, fence 1, lease ends in "),
        "{err}"
    );
    // Expire it in database time: the next run takes attempt 2 with a higher fence.
    db.exec("UPDATE batchguard_leases SET lease_until = now() - interval '1 second'");
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
    let Some(db) = pgdb::fresh("fifty") else {
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
