//! `batchguard run` and `store` on a real Redis server (SPEC 7.2, 10): the scenarios of
//! `tests/common/run_store.rs`, with the JSONL ledger apart a Redis store needs, and what
//! only Redis has: the refusal of a store without a ledger apart; round trips counted by a
//! proxy that reads the protocol; a fencing counter that went back (what a Redis restart
//! without persistence does) is refused; slots older than the markers' retention are
//! refused; a MySQL ledger apart; the leases `watch` lists. Each test has a key prefix of
//! its own (`tests/common/redisdb.rs`).

#[path = "common/held.rs"]
mod held;
#[path = "common/run_store.rs"]
mod run_store;
#[path = "common/stores.rs"]
mod stores;

use stores::{Case, Kind, NO_RETRY, err, mysqldb, ok, redisdb};

/// The `i`th minutely slot from two hours ago: recent, since a Redis store refuses slots
/// older than its markers' retention (35 days).
fn slot(i: i64) -> String {
    Kind::Redis.slot(i)
}

run_store::every_store!(Kind::Redis);

/// A case on a fresh prefix, its epoch written by `store migrate`; `None` when the server
/// is unreachable outside CI.
fn case(tag: &str, command: &str) -> Option<Case> {
    Case::new(Kind::Redis, tag, "60s", NO_RETRY, command)
}

#[test]
fn a_redis_store_without_a_ledger_apart_is_refused_before_anything_runs() {
    let s0 = slot(0);
    let Some(case) = Case::unmigrated(
        Kind::Redis,
        "noledger",
        "60s",
        NO_RETRY,
        r#"["touch", "ran"]"#,
    ) else {
        return;
    };
    let r = case.db.redis();
    for extra in [vec![], vec!["--ledger".to_owned(), r.url()]] {
        let mut args: Vec<&str> = vec!["--scheduled-at", &s0];
        args.extend(extra.iter().map(String::as_str));
        let o = case.cmd_on(&r.url(), &args).output().expect("run");
        assert_eq!(o.status.code(), Some(125), "{}", err(&o));
        assert!(
            err(&o).contains("is Redis, which keeps no ledger: give --ledger SOURCE"),
            "{}",
            err(&o)
        );
    }
    assert!(!case.path("ran").exists(), "the command ran");
    assert!(r.keys().is_empty(), "the store was touched: {:?}", r.keys());
}

/// SPEC 7.1 item 27: a run of a named slot is two scripts, the acquire (with the clock
/// bound and the unfinished slots to catch up read in it) and the finish; a skip is the
/// acquire alone (its event goes to the ledger apart); without `--scheduled-at` the slot
/// needs Redis's clock first, which the unfinished slots' script answers: three.
#[test]
fn a_successful_run_is_two_round_trips_and_the_acquire_is_one_script() {
    let s0 = run_store::recent_slot();
    let Some(case) = Case::new(
        Kind::Redis,
        "rt",
        "60s",
        run_store::REACH,
        r#"["sh", "-c", "echo charge-1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    ) else {
        return;
    };
    let r = case.db.redis();
    let proxy = redisdb::Proxy::start(&redisdb::host_port(&r.url()));
    let url = proxy.url(&r.url());
    // With --scheduled-at: the acquire script, then the finish script. Database 0 without
    // a password needs no set-up command.
    let eval = || vec!["EVAL".to_owned()];
    ok(&case.run_on(&url, &["--scheduled-at", &s0]));
    assert_eq!(proxy.take(), vec![eval(), eval()]);
    // A skip: the acquire (the `skip` event goes to the ledger apart).
    let o = case.run_on(&url, &["--scheduled-at", &s0]);
    ok(&o);
    assert!(err(&o).contains("already succeeded (run "), "{}", err(&o));
    assert_eq!(proxy.take(), vec![eval()]);
    // The slot from the store's clock: the unfinished slots' script carries it.
    ok(&case.run_on(&url, &[]));
    let names: Vec<Vec<String>> = proxy.take();
    assert_eq!(names, vec![eval(), eval(), eval()]);

    let ev = case.events();
    let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(kinds, ["start", "end", "skip", "start", "end"], "{ev:#?}");
    assert_eq!(case.output_keys().len(), 2);
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
fn a_redis_without_its_epoch_is_refused_until_store_repair_and_the_counter_does_not_move() {
    let Some(case) = case("epoch", r#"["touch", "ran"]"#) else {
        return;
    };
    let r = case.db.redis();
    let fence_key = format!("{}:fence:j", r.prefix);
    ok(&case.run(&["--scheduled-at", &slot(0)]));
    ok(&case.run(&["--scheduled-at", &slot(1)]));
    let _ = std::fs::remove_file(case.path("ran"));
    // What a restart without persistence does: every key gone, the epoch too.
    for k in r.keys() {
        let _: i64 = r.cmd(&["DEL", &k]);
    }
    for s in [slot(0), slot(2), slot(2)] {
        let o = case.run(&["--scheduled-at", &s]);
        assert_eq!(o.status.code(), Some(125), "{}", err(&o));
        let e = err(&o);
        assert!(e.contains("refused the lease, so job `j` slot"), "{e}");
        assert!(e.contains("Redis has no batchguard epoch"), "{e}");
        assert!(e.contains("batchguard store repair --store"), "{e}");
        assert!(e.contains("--ledger SOURCE"), "{e}");
        assert!(e.contains(&format!("--scheduled-at {s}")), "{e}");
    }
    assert!(!case.path("ran").exists(), "the command ran");
    assert!(
        r.keys().is_empty(),
        "a refusal wrote nothing: {:?}",
        r.keys()
    );
    let st = case.bg(&["store", "status", "--store", &case.url()]);
    ok(&st);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.starts_with("epoch: none: every acquire is refused until `batchguard store repair"),
        "{text}"
    );
    // `store migrate` will not set up a Redis this working directory was given fences by.
    let m = case.migrate();
    assert_eq!(m.status.code(), Some(2), "{}", err(&m));
    assert!(err(&m).contains("it lost its data"), "{}", err(&m));
    // `store repair` from the ledger: the succeeded slots stay done, the fences go on.
    let rep = case.bg(&[
        "store",
        "repair",
        "--store",
        &case.url(),
        "--ledger",
        "ledger.jsonl",
    ]);
    ok(&rep);
    let said = String::from_utf8_lossy(&rep.stdout);
    assert!(
        said.contains("job j: fencing counter at 2: the next fence is 3"),
        "{said}"
    );
    assert!(
        said.contains("2 slot markers restored (2 succeeded, 0 dead-lettered)"),
        "{said}"
    );
    let st = case.bg(&["store", "status", "--store", &case.url()]);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(text.starts_with("epoch: repair "), "{text}");
    let o = case.run(&["--scheduled-at", &slot(0)]);
    ok(&o);
    assert!(err(&o).contains("already succeeded"), "{}", err(&o));
    ok(&case.run(&["--scheduled-at", &slot(2)]));
    assert!(case.path("ran").exists());
    let last = case.events().into_iter().rfind(|e| e.0 == "start").unwrap();
    assert_eq!(last.2, Some(3));

    // A failover to a replica that kept the epoch but lagged: the counter is below what
    // this working directory was given. Refused without moving it, and the epoch is
    // deleted, so every host stops until `store repair`.
    let _: String = r.cmd(&["SET", &fence_key, "1"]);
    let o = case.run(&["--scheduled-at", &slot(3)]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("the fencing counter of job `j` went back: Redis would hand out fence 2, but this working directory was already given fence 3"),
        "{e}"
    );
    assert_eq!(
        r.cmd::<String>(&["GET", &fence_key]),
        "1",
        "the counter did not move"
    );
    assert_eq!(r.cmd::<i64>(&["EXISTS", &format!("{}:epoch", r.prefix)]), 0);
    ok(&case.bg(&[
        "store",
        "repair",
        "--store",
        &case.url(),
        "--ledger",
        "ledger.jsonl",
    ]));
    ok(&case.run(&["--scheduled-at", &slot(3)]));
    let last = case.events().into_iter().rfind(|e| e.0 == "start").unwrap();
    assert_eq!(last.2, Some(4));
}

#[test]
fn a_slot_older_than_the_markers_retention_is_refused() {
    let Some(case) = case("old", r#"["touch", "ran"]"#) else {
        return;
    };
    let o = case.run(&["--scheduled-at", "2020-01-01T00:00:00Z"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains(
            "slot 2020-01-01T00:00:00Z is older than this store keeps its markers (retention 35d)"
        ),
        "{}",
        err(&o)
    );
    assert!(!case.path("ran").exists());
    // A longer retention guards it.
    let url = format!("{}&retention=10000d", case.url());
    ok(&case.run_on(&url, &["--scheduled-at", "2020-01-01T00:00:00Z"]));
    assert!(case.path("ran").exists());
    // A retention shorter than a day is a bad URL, said before anything runs.
    let o = case.run_on(
        &format!("{}&retention=1h", case.url()),
        &["--scheduled-at", &slot(0)],
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
    let s0 = slot(0);
    let Some(case) = case(
        "myledger",
        r#"["sh", "-c", "echo k >> \"$BATCHGUARD_OUTPUTS\""]"#,
    ) else {
        return;
    };
    let Some(db) = mysqldb::fresh("redisledger") else {
        return;
    };
    ok(&case.bg(&["store", "migrate", "--store", &db.url]));
    for _ in 0..2 {
        let o = case
            .cmd_on(&case.url(), &["--ledger", &db.url, "--scheduled-at", &s0])
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
fn watch_and_metrics_list_the_leases_held_and_not_the_expired_ones() {
    let Some(case) = Case::new(Kind::Redis, "leases", "10m", NO_RETRY, r#"["true"]"#) else {
        return;
    };
    let Some(other) = redisdb::fresh("leases_other") else {
        return;
    };
    let r = case.db.redis();
    let (url, dir) = (case.url(), case.dir.path());
    let ledger = case.ledger_apart_file();
    let slot = run_store::recent_slot();

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

    let (paused, _) = run_store::a_held_lease_is_listed(&case, &slot);
    // Taken when the run's `start` says (Redis's clock, kept in the lease).
    let v = held::watch(dir, &url, ledger);
    let text = std::fs::read_to_string(case.path("ledger.jsonl")).expect("ledger");
    let start: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let acquired: jiff::Timestamp = v["leases"][0]["acquired_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let started: jiff::Timestamp = start["at"].as_str().unwrap().parse().unwrap();
    assert!(
        acquired.duration_since(started).abs() < jiff::SignedDuration::from_secs(1),
        "{acquired} vs {started}"
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
