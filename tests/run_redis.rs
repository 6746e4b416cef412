//! `batchguard run` and `store` on a real Redis server (SPEC 7.2, 10): a Redis store needs
//! a ledger apart; round trips counted by a proxy that reads the protocol; retries with new
//! fences; a held lease names its holder; a fencing counter that went back (what a Redis
//! restart without persistence does) is refused; slots older than the markers' retention
//! are refused; fifty contenders on one slot; and what `audit` reads back. Each test has a
//! key prefix of its own (`tests/common/redisdb.rs`).

mod common;
#[path = "common/held.rs"]
mod held;
#[path = "common/stores.rs"]
mod stores;

use common::bin;
use redisdb::Proxy;
use std::process::{Command, Output, Stdio};
use stores::{mysqldb, redisdb};

/// The `i`th minutely slot from two hours ago: recent, since a Redis store refuses slots
/// older than its markers' retention (35 days).
fn slot(i: i64) -> String {
    let now = jiff::Timestamp::now().as_second();
    let base = now - now.rem_euclid(60) - 7200;
    jiff::Timestamp::from_second(base + 60 * i)
        .unwrap()
        .to_string()
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(ttl: &str, retry: &str, command: &str) -> Case {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: {command}\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {ttl}\n      store: redis\n    retry:\n{retry}"
        );
        std::fs::write(dir.path().join("m.batchguard.yaml"), text).expect("manifest");
        Case { dir }
    }

    /// `run` on `store`, with the JSONL ledger beside the manifest unless `extra` says.
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
        let mut args = vec!["--ledger", "ledger.jsonl"];
        args.extend_from_slice(extra);
        self.cmd(store, &args).output().expect("run")
    }

    /// (event, attempt, fence, status, error_code, detail) of the JSONL ledger, in order.
    fn events(&self) -> Vec<Ev> {
        let text =
            std::fs::read_to_string(self.dir.path().join("ledger.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json line");
                let s = |k: &str| v[k].as_str().map(str::to_owned);
                (
                    s("event").unwrap(),
                    v["attempt"].as_i64(),
                    v["fence"].as_i64(),
                    s("status"),
                    s("error_code"),
                    s("detail"),
                )
            })
            .collect()
    }
}

type Ev = (
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const NO_RETRY: &str = "      max_attempts: 1\n";

#[test]
fn a_redis_store_without_a_ledger_apart_is_refused_before_anything_runs() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("noledger") else {
        return;
    };
    let case = Case::new("60s", NO_RETRY, r#"["touch", "ran"]"#);
    for extra in [vec![], vec!["--ledger".to_owned(), r.url()]] {
        let mut args: Vec<&str> = vec!["--scheduled-at", s0];
        args.extend(extra.iter().map(String::as_str));
        let o = case.cmd(&r.url(), &args).output().expect("run");
        assert_eq!(o.status.code(), Some(125), "{}", err(&o));
        assert!(
            err(&o).contains("is Redis, which keeps no ledger: give --ledger SOURCE"),
            "{}",
            err(&o)
        );
    }
    assert!(!case.dir.path().join("ran").exists(), "the command ran");
    assert!(r.keys().is_empty(), "the store was touched: {:?}", r.keys());
}

#[test]
fn a_successful_run_is_two_round_trips_and_the_acquire_is_one_script() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("rt") else {
        return;
    };
    let proxy = Proxy::start(&redisdb::host_port(&r.url()));
    let url = proxy.url(&r.url());
    let case = Case::new(
        "60s",
        NO_RETRY,
        r#"["sh", "-c", "echo charge-1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );
    // With --scheduled-at: the acquire script, then the finish script. Database 0 without
    // a password needs no set-up command.
    ok(&case.run(&url, &["--scheduled-at", s0]));
    assert_eq!(
        proxy.take(),
        vec![vec!["EVAL".to_owned()], vec!["EVAL".to_owned()]]
    );
    // A skip: the acquire only (the `skip` event goes to the ledger apart).
    let o = case.run(&url, &["--scheduled-at", s0]);
    ok(&o);
    assert!(err(&o).contains("already succeeded (run "), "{}", err(&o));
    assert_eq!(proxy.take(), vec![vec!["EVAL".to_owned()]]);
    // The slot from the store's clock: one `TIME` first.
    ok(&case.run(&url, &[]));
    let names: Vec<Vec<String>> = proxy.take();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[0], vec!["TIME".to_owned()]);

    let ev = case.events();
    let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(kinds, ["start", "end", "skip", "start", "end"], "{ev:#?}");
    let outputs = std::fs::read_to_string(case.dir.path().join("ledger.outputs.jsonl")).unwrap();
    assert_eq!(outputs.lines().count(), 2);
    // What is left in Redis: the counter, two slot markers, the index; no lease, no run key.
    let keys = r.keys();
    let p = &r.prefix;
    assert!(keys.contains(&format!("{p}:fence:j")), "{keys:?}");
    assert!(keys.contains(&format!("{p}:slot:j:{s0}")), "{keys:?}");
    assert!(
        keys.iter()
            .all(|k| !k.contains(":lease:") && !k.contains(":run:")),
        "{keys:?}"
    );
    // The marker is kept for the retention (35 days), not forever.
    let ttl: i64 = r.cmd(&["TTL", &format!("{p}:slot:j:{s0}")]);
    assert!(ttl > 34 * 86_400 && ttl <= 35 * 86_400, "ttl {ttl}");
}

#[test]
fn exit_75_is_retried_with_a_new_fence_and_a_succeeded_slot_never_reruns() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("retry") else {
        return;
    };
    let case = Case::new(
        "60s",
        "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n",
        r#"["sh", "-c", "if [ \"$BATCHGUARD_ATTEMPT\" = 1 ]; then exit 75; fi; echo ok >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );
    ok(&case.run(&r.url(), &["--scheduled-at", s0]));
    let o = case.run(&r.url(), &["--scheduled-at", s0]);
    ok(&o);
    assert!(err(&o).contains("already succeeded (run "), "{}", err(&o));
    let ev = case.events();
    let starts: Vec<&Ev> = ev.iter().filter(|e| e.0 == "start").collect();
    assert_eq!(starts.len(), 2, "{ev:#?}");
    assert_eq!((starts[0].1, starts[1].1), (Some(1), Some(2)));
    assert!(starts[0].2 < starts[1].2, "fences rise: {ev:#?}");
    let ends: Vec<&Ev> = ev.iter().filter(|e| e.0 == "end").collect();
    assert_eq!(ends[0].4.as_deref(), Some("EX_TEMPFAIL"));
    assert_eq!(ends[1].3.as_deref(), Some("success"));

    let st = Command::new(bin())
        .args(["store", "status", "--store", &r.url()])
        .output()
        .unwrap();
    ok(&st);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains(&format!("j  {s0}  succeeded  attempts 2")),
        "{text}"
    );
    let audit = Command::new(bin())
        .current_dir(case.dir.path())
        .args(["audit", "--ledger", "ledger.jsonl"])
        .args(["--outputs", "ledger.outputs.jsonl"])
        .args(["--manifest", "m.batchguard.yaml"])
        .args(["--from", s0, "--to", &slot(1)])
        .args(["--format", "json"])
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
        !codes
            .iter()
            .any(|c| ["AU101", "AU102", "AU201"].contains(c)),
        "{codes:?}"
    );
}

#[test]
fn a_held_lease_is_skipped_naming_the_holder_and_an_expired_one_is_retaken() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("held") else {
        return;
    };
    let case = Case::new("60s", "      max_attempts: 5\n", r#"["true"]"#);
    let p = &r.prefix;
    let lease = format!("{p}:lease:j:{s0}");
    let _: i64 = r.cmd(&["INCR", &format!("{p}:fence:j")]);
    let _: String = r.cmd(&[
        "SET",
        &lease,
        &format!(
            r#"{{"holder":"ghost","run_id":"r-ghost","fence":1,"job":"j","scheduled_at":"{s0}"}}"#
        ),
        "PX",
        "60000",
    ]);
    let _: i64 = r.cmd(&[
        "HSET",
        &format!("{p}:slot:j:{s0}"),
        "attempts",
        "1",
        "state",
        "running",
        "run_id",
        "r-ghost",
    ]);
    let o = case.run(&r.url(), &["--scheduled-at", s0]);
    ok(&o);
    assert!(
        err(&o).contains("held by ghost (run r-ghost, fence 1, lease ends in "),
        "{}",
        err(&o)
    );
    // `store status` lists the live lease.
    let st = Command::new(bin())
        .args(["store", "status", "--store", &r.url(), "--job", "j"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains("held by ghost (run r-ghost, fence 1,"),
        "{text}"
    );
    // The lease expires in Redis time: the next run takes attempt 2 with a higher fence.
    let _: i64 = r.cmd(&["PEXPIRE", &lease, "1"]);
    while r.cmd::<i64>(&["EXISTS", &lease]) == 1 {
        std::thread::yield_now();
    }
    ok(&case.run(&r.url(), &["--scheduled-at", s0]));
    let ev = case.events();
    let start = ev.iter().find(|e| e.0 == "start").expect("start");
    assert_eq!((start.1, start.2), (Some(2), Some(2)), "{ev:#?}");
}

#[test]
fn a_fencing_counter_that_went_back_is_refused_until_it_is_moved_past() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("back") else {
        return;
    };
    let case = Case::new("60s", NO_RETRY, r#"["touch", "ran"]"#);
    ok(&case.run(&r.url(), &["--scheduled-at", s0]));
    ok(&case.run(&r.url(), &["--scheduled-at", &slot(1)]));
    let _ = std::fs::remove_file(case.dir.path().join("ran"));
    // What a restart without persistence does to the counter (and the rest of the keys).
    for k in r.keys() {
        let _: i64 = r.cmd(&["DEL", &k]);
    }
    let o = case.run(&r.url(), &["--scheduled-at", &slot(2)]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("the store refused the lease"), "{e}");
    assert!(
        e.contains("the fencing counter of job `j` went back: Redis handed out fence 1, but this host was already given fence 2"),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "redis-cli -u '{}' SET '{}:fence:j' 1002",
            redisdb::server_url(),
            r.prefix
        )),
        "{e}"
    );
    assert!(e.contains(&format!("--scheduled-at {}", slot(2))), "{e}");
    assert!(!case.dir.path().join("ran").exists(), "the command ran");
    assert_eq!(case.events().iter().filter(|e| e.0 == "start").count(), 2);
    // The lease was not taken: nothing holds the slot.
    assert!(
        r.keys().iter().all(|k| !k.contains(":lease:")),
        "{:?}",
        r.keys()
    );
    // Moved past every fence handed out, the job runs again with a fence above them.
    let _: String = r.cmd(&["SET", &format!("{}:fence:j", r.prefix), "1002"]);
    ok(&case.run(&r.url(), &["--scheduled-at", &slot(2)]));
    assert!(case.dir.path().join("ran").exists());
    let last = case.events().into_iter().rfind(|e| e.0 == "start").unwrap();
    assert_eq!(last.2, Some(1003));
}

#[test]
fn a_slot_older_than_the_markers_retention_is_refused() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("old") else {
        return;
    };
    let case = Case::new("60s", NO_RETRY, r#"["touch", "ran"]"#);
    let o = case.run(&r.url(), &["--scheduled-at", "2020-01-01T00:00:00Z"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains(
            "slot 2020-01-01T00:00:00Z is older than this store keeps its markers (retention 35d)"
        ),
        "{}",
        err(&o)
    );
    assert!(!case.dir.path().join("ran").exists());
    // A longer retention guards it.
    let url = format!("{}&retention=10000d", r.url());
    ok(&case.run(&url, &["--scheduled-at", "2020-01-01T00:00:00Z"]));
    assert!(case.dir.path().join("ran").exists());
    // A retention shorter than a day is a bad URL, said before anything runs.
    let o = case.run(
        &format!("{}&retention=1h", r.url()),
        &["--scheduled-at", s0],
    );
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err(&o).contains("`retention=1h` is not a retention of at least 1d"),
        "{}",
        err(&o)
    );
}

#[test]
fn a_mysql_ledger_apart_takes_what_a_redis_store_guarded() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("myledger") else {
        return;
    };
    let Some(db) = mysqldb::fresh("redisledger") else {
        return;
    };
    let m = Command::new(bin())
        .args(["store", "migrate", "--store", &db.url])
        .output()
        .unwrap();
    ok(&m);
    let case = Case::new(
        "60s",
        NO_RETRY,
        r#"["sh", "-c", "echo k >> \"$BATCHGUARD_OUTPUTS\""]"#,
    );
    for _ in 0..2 {
        let o = case
            .cmd(&r.url(), &["--ledger", &db.url, "--scheduled-at", s0])
            .output()
            .unwrap();
        ok(&o);
    }
    let rows = db.rows("SELECT event, CAST(fence AS CHAR) FROM batchguard_events ORDER BY id");
    let kinds: Vec<&str> = rows.iter().map(|r| r[0].as_deref().unwrap()).collect();
    assert_eq!(kinds, ["start", "end", "skip"]);
    assert_eq!(rows[0][1].as_deref(), Some("1"));
    assert_eq!(
        db.rows("SELECT output_key FROM batchguard_outputs").len(),
        1
    );
}

#[test]
fn fifty_contenders_on_one_slot_give_one_start_and_forty_nine_skips() {
    let slot0 = slot(0);
    let s0 = slot0.as_str();
    let Some(r) = redisdb::fresh("fifty") else {
        return;
    };
    let case = Case::new("60s", NO_RETRY, r#"["sleep", "1"]"#);
    let url = r.url();
    let children: Vec<_> = (0..50)
        .map(|i| {
            case.cmd(
                &url,
                &[
                    "--ledger",
                    "ledger.jsonl",
                    "--scheduled-at",
                    s0,
                    "--instance",
                    &format!("i{i}"),
                ],
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
    let ev = case.events();
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
fn outputs_of_a_dead_run_reach_the_ledger_apart_once_when_many_catch_up_at_once() {
    let Some(r) = redisdb::fresh("catchup") else {
        return;
    };
    let slot0 = slot(0);
    let case = Case::new("60s", NO_RETRY, r#"["true"]"#);
    let d = case.dir.path();
    // What runs killed mid-run leave: their directories, naming the ledger they wrote to.
    let runs: Vec<_> = (0..40)
        .map(|i| {
            let run = d.join(format!(".batchguard/runs/20260301T020000-1-dead{i}"));
            std::fs::create_dir_all(&run).unwrap();
            std::fs::write(
                run.join("run.json"),
                serde_json::json!({"store": r.url(), "ledger": "ledger.jsonl", "job": "j", "scheduled_at": slot0})
                    .to_string(),
            )
            .unwrap();
            std::fs::write(run.join("outputs"), format!("a{i}\nb{i}\n")).unwrap();
            run
        })
        .collect();
    let flushes: Vec<_> = (0..12)
        .map(|_| {
            Command::new(bin())
                .current_dir(d)
                .args(["store", "flush", "--store", &r.url()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut f in flushes {
        assert!(f.wait().unwrap().success());
    }
    let outputs = std::fs::read_to_string(d.join("ledger.outputs.jsonl")).unwrap();
    let mut keys: Vec<String> = outputs
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["output_key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    keys.sort();
    let mut want: Vec<String> = (0..40)
        .flat_map(|i| [format!("a{i}"), format!("b{i}")])
        .collect();
    want.sort();
    assert_eq!(keys, want, "each output once");
    assert!(runs.iter().all(|r| !r.exists()));
}

#[test]
fn watch_and_metrics_list_the_leases_held_and_not_the_expired_ones() {
    let Some(r) = redisdb::fresh("leases") else {
        return;
    };
    let Some(other) = redisdb::fresh("leases_other") else {
        return;
    };
    let url = r.url();
    let case = Case::new("10m", NO_RETRY, r#"["true"]"#);
    let dir = case.dir.path();
    let ledger = Some("ledger.jsonl");
    let slot = slot(100);
    let paused = held::paused_run(dir, "j", &slot, &url, ledger);
    let text = std::fs::read_to_string(dir.join("ledger.jsonl")).expect("ledger");
    let start: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let run_id = start["run_id"].as_str().unwrap().to_owned();

    // Beside it: an expired lease (Redis deletes it), a key with no time to live (no lease
    // this store wrote), and a live lease of another prefix.
    let lease = |run: &str| {
        format!(
            r#"{{"holder":"ghost","run_id":"{run}","fence":"9","job":"j","scheduled_at":"{slot}"}}"#
        )
    };
    let gone = format!("{}:lease:j:gone", r.prefix);
    let _: () = r.cmd(&["SET", &gone, &lease("r-gone"), "PX", "1"]);
    let _: () = r.cmd(&["SET", &format!("{}:lease:j:odd", r.prefix), &lease("r-odd")]);
    let _: () = r.cmd(&[
        "SET",
        &format!("{}:lease:j:x", other.prefix),
        &lease("r-other"),
        "PX",
        "600000",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while r.cmd::<i64>(&["EXISTS", &gone]) == 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never expired"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    let v = held::watch(dir, &url, ledger);
    assert_eq!(held::lease_runs(&v), std::slice::from_ref(&run_id));
    let l = &v["leases"][0];
    assert_eq!(l["job"], "j");
    assert_eq!(l["fence"], 1);
    assert_eq!(l["expired"], false);
    assert!(l["holder"].as_str().unwrap().contains("host-a"), "{l}");
    let left = l["secs_left"].as_i64().unwrap();
    assert!(left > 0 && left <= 600, "{l}");
    // Taken when the run's `start` says (Redis's clock, kept in the lease).
    let acquired: jiff::Timestamp = l["acquired_at"].as_str().unwrap().parse().unwrap();
    let started: jiff::Timestamp = start["at"].as_str().unwrap().parse().unwrap();
    assert!(
        acquired.duration_since(started).abs() < jiff::SignedDuration::from_secs(1),
        "{acquired} vs {started}"
    );
    let running = held::running(&v, "j");
    assert_eq!(running.len(), 1);
    assert_eq!(running[0]["run_id"], run_id.as_str());
    assert!(
        !held::watch_text(dir, &url, ledger).contains("does not list its leases"),
        "the store lists its leases"
    );
    let prom = held::metrics(dir, &url, ledger);
    assert!(
        prom.contains("batchguard_live_leases{job_name=\"j\"} 1"),
        "{prom}"
    );

    ok(&paused.release());
    let v = held::watch(dir, &url, ledger);
    assert!(held::lease_runs(&v).is_empty(), "{v}");
    assert!(held::running(&v, "j").is_empty(), "{v}");
    let prom = held::metrics(dir, &url, ledger);
    assert!(
        prom.contains("batchguard_live_leases{job_name=\"j\"} 0"),
        "{prom}"
    );
}
