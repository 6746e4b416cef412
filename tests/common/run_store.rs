//! The `run` and `store` scenarios every store is held to (SPEC 7.2, 10), each written once
//! and run on the stores it applies to by a `#[test]` in the store's own file
//! (`run_store::tests!`): round trips counted by a proxy that reads the protocol, the
//! refusal of an unmigrated database, an idempotent migrate, retries with new fences, a
//! held lease naming its holder, fifty contenders on one slot, what `audit` reads back,
//! the catch-up of runs that died, and the leases `watch` and `metrics` list.
//!
//! The test file declares `stores` and `held` (`tests/common/`) at its root.
#![allow(dead_code)]

use crate::held;
use crate::stores::{Case, Ev, Kind, NO_RETRY, audit_codes, empty, err, ok};

/// `#[test] fn NAME() { run_store::NAME(KIND) }` for each scenario named.
#[allow(unused_macros)] // not every store runs every list
macro_rules! tests {
    ($kind:expr => $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_store::$name($kind)
            }
        )+
    };
}
#[allow(unused_imports)]
pub(crate) use tests;

/// The scenarios of every store.
#[allow(unused_macros)] // not every store runs every list
macro_rules! every_store {
    ($kind:expr) => {
        run_store::tests!($kind =>
            exit_75_is_retried_with_a_new_fence_and_a_succeeded_slot_never_reruns,
            a_held_lease_is_skipped_naming_the_holder_and_an_expired_one_is_retaken,
            fifty_contenders_on_one_slot_give_one_start_and_forty_nine_skips,
            outputs_of_dead_runs_are_written_once_when_many_catch_up_at_once,
            interrupted_and_lost_slots_are_caught_up_once_by_the_next_tick,
            every_event_of_run_is_in_the_stores_time_however_the_host_clock_is_off,
            a_spooled_finish_flushed_by_four_hosts_at_once_is_written_once,
            a_holder_stopped_past_its_lease_writes_only_a_superseded_end,
        );
    };
}
#[allow(unused_imports)]
pub(crate) use every_store;

/// The scenarios of a store that is a database (PostgreSQL, MySQL / MariaDB).
#[allow(unused_macros)] // not every store runs every list
macro_rules! databases {
    ($kind:expr) => {
        run_store::tests!($kind =>
            a_successful_run_is_at_most_three_round_trips_and_the_acquire_is_one,
            an_unmigrated_database_is_refused_naming_store_migrate,
            watch_and_metrics_list_the_leases_held_and_not_the_released_ones,
            store_repair_moves_a_counter_that_went_back_past_the_ledger,
        );
    };
}
#[allow(unused_imports)]
pub(crate) use databases;

/// The acquire's one statement, as the store writes it.
fn is_acquire(kind: Kind, q: &str) -> bool {
    match kind {
        Kind::Pg => q.contains("WITH slot AS"),
        _ => {
            q.contains("FROM batchguard_fence WHERE id = 1 FOR UPDATE")
                || q.starts_with("SET @bg_used")
        }
    }
}

/// The finish's one statement (`end`, outputs, release); on MySQL it opens with the run's
/// lock (the proxy keeps a query's first characters only).
fn is_finish(kind: Kind, q: &str) -> bool {
    match kind {
        Kind::Pg => q.contains("WITH done AS"),
        _ => q.starts_with("SET @bg_lk = IF(IS_USED_LOCK(CONCAT('batchguard:end:'"),
    }
}

/// A database store (SPEC 7.1 item 27): a run of a named slot is two round trips (each a
/// simple query, never a prepared statement, which is two round trips more in a new
/// process): the acquire (with `start`, the clock bound and the unfinished slots to catch
/// up folded in) and the finish (`end`, outputs, release). Without `--scheduled-at` the
/// slot needs the store's clock first: the unfinished slots' read carries it, one round
/// trip more; one more again only when leftovers of a run that died here are looked up.
pub fn a_successful_run_is_at_most_three_round_trips_and_the_acquire_is_one(kind: Kind) {
    let Some(case) = Case::new(
        kind,
        "rt",
        "60s",
        REACH,
        r#"["sh", "-c", "echo charge-1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    ) else {
        return;
    };
    let slot = recent_slot();
    let proxy = case.db.proxy();
    let url = proxy.url();

    // With --scheduled-at: the acquire (with `start`) and the finish (`end`, outputs,
    // release).
    ok(&case.run_on(url, &["--scheduled-at", &slot]));
    let t = proxy.take();
    assert!(t.only_simple, "only simple queries: {}", t.all);
    assert_eq!(t.round_trips, 2, "{:#?}", t.queries);
    assert!(
        is_acquire(kind, &t.queries[0])
            && (t.queries[0].contains("unf AS") || t.queries[0].contains("@bg_behind")),
        "the acquire first, the unfinished slots read in it: {:#?}",
        t.queries
    );
    assert!(
        is_finish(kind, &t.queries[1]),
        "finish second: {:#?}",
        t.queries
    );

    // A skip: the acquire, then the `skip` event.
    ok(&case.run_on(url, &["--scheduled-at", &slot]));
    let t = proxy.take();
    assert_eq!(t.round_trips, 2, "{}", t.all);
    assert!(is_acquire(kind, &t.queries[0]), "{:#?}", t.queries);

    // The slot from the store's clock: the answer about unfinished slots carries it, so no
    // round trip more.
    ok(&case.run_on(url, &[]));
    let t = proxy.take();
    assert_eq!(t.round_trips, 3, "{}", t.all);

    // Leftovers of a run that died here are looked up first: one round trip more. (The
    // current slot succeeded just now: forget it, so this run runs rather than skips.)
    case.forget_slots();
    std::fs::create_dir_all(case.path(".batchguard/runs/20260301T020000-1-dead")).unwrap();
    ok(&case.run_on(url, &[]));
    let t = proxy.take();
    assert_eq!(t.round_trips, 4, "{}", t.all);

    let ev = case.events();
    let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "start").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(kinds[2], "skip");
    assert_eq!(case.output_keys().len(), 3);
}

pub fn an_unmigrated_database_is_refused_naming_store_migrate(kind: Kind) {
    let Some(case) = Case::unmigrated(kind, "unmig", "60s", NO_RETRY, r#"["touch", "ran"]"#) else {
        return;
    };
    let slot = kind.slot(0);
    // A password in the URL is never shown (the PostgreSQL test server trusts the host,
    // so it takes any; MariaDB's root has none, so it would refuse one).
    let url = match kind {
        Kind::Pg => case.url().replacen("postgres@", "postgres:sekrit@", 1),
        _ => case.url(),
    };
    let o = case.run_on(&url, &["--scheduled-at", &slot]);
    assert_eq!(o.status.code(), Some(125));
    let e = err(&o);
    assert!(e.contains(") has no batchguard tables, so job `j`"), "{e}");
    assert!(
        e.contains("table `batchguard_"),
        "names the missing table: {e}"
    );
    assert!(e.contains("batchguard store migrate --store"), "{e}");
    assert!(e.contains(&format!("--scheduled-at {slot}")), "{e}");
    assert!(!e.contains("unreachable"), "{e}");
    assert!(
        !e.contains(" at line "),
        "the server's source location: {e}"
    );
    assert!(!e.contains("sekrit"), "{e}");
    assert!(!case.path("ran").exists(), "the command ran");
    // A first migrate says what it created; a second, that there is nothing to create.
    let first = case.bg(&["store", "migrate", "--store", &url]);
    ok(&first);
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(
        said.contains(": created batchguard_claims, batchguard_drills, batchguard_events"),
        "{said}"
    );
    assert!(
        !said.contains("current") && !said.contains("sekrit"),
        "{said}"
    );
    let again = case.migrate();
    ok(&again);
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(
        said.contains(": tables are current (batchguard_claims, batchguard_drills, "),
        "{said}"
    );
    assert!(said.contains("nothing to create"), "{said}");
    ok(&case.run(&["--scheduled-at", &slot]));
    assert!(case.path("ran").exists());
}

pub fn exit_75_is_retried_with_a_new_fence_and_a_succeeded_slot_never_reruns(kind: Kind) {
    let Some(case) = Case::new(
        kind,
        "retry",
        "60s",
        "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n",
        r#"["sh", "-c", "if [ \"$BATCHGUARD_ATTEMPT\" = 1 ]; then exit 75; fi; echo ok >> \"$BATCHGUARD_OUTPUTS\""]"#,
    ) else {
        return;
    };
    let slot = kind.slot(0);
    ok(&case.run(&["--scheduled-at", &slot]));
    let o = case.run(&["--scheduled-at", &slot]);
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
    assert_eq!(ev.last().map(|e| e.0.as_str()), Some("skip"));

    // `store status` names the slot; the audit reads what run wrote.
    let st = case.bg(&["store", "status", "--store", &case.url()]);
    ok(&st);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains(&format!("j  {slot}  succeeded  attempts 2")),
        "{text}"
    );
    let to = kind.slot(1);
    let mut args = vec!["audit", "--manifest", "m.batchguard.yaml"];
    args.extend(["--from", &slot, "--to", &to, "--format", "json"]);
    let ledger = case.ledger_args();
    args.extend(ledger.iter().map(String::as_str));
    let codes = audit_codes(&case.bg(&args));
    let has = |c: &str| codes.iter().any(|x| x == c);
    assert!(!has("AU102") && !has("AU201"), "{codes:?}");
    assert!(!has("AU101"), "the slot ran: {codes:?}");
}

pub fn a_held_lease_is_skipped_naming_the_holder_and_an_expired_one_is_retaken(kind: Kind) {
    let Some(case) = Case::new(
        kind,
        "held",
        "60s",
        "      max_attempts: 5\n",
        r#"["true"]"#,
    ) else {
        return;
    };
    let slot = kind.slot(0);
    // A holder that died mid-run: its lease is live for a minute of the store's time.
    case.plant_ghost(&slot);
    let o = case.run(&["--scheduled-at", &slot]);
    ok(&o);
    assert!(
        err(&o).contains("held by ghost (run r-ghost, fence 1, lease ends in "),
        "{}",
        err(&o)
    );
    // `store status` lists the live lease.
    let st = case.bg(&["store", "status", "--store", &case.url(), "--job", "j"]);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains("held by ghost (run r-ghost, fence 1,"),
        "{text}"
    );
    // Expired in the store's time: `store status` names it stale, as `watch` does (a
    // Redis lease that expired is gone), and the next run takes attempt 2 with the next
    // fence (the refused acquire drew none).
    case.expire_leases();
    let st = case.bg(&["store", "status", "--store", &case.url(), "--job", "j"]);
    let text = String::from_utf8_lossy(&st.stdout);
    if kind == Kind::Redis {
        assert!(text.contains("live leases: none"), "{text}");
    } else {
        assert!(
            text.contains("live leases: none\nstale leases (expired, never released):\n"),
            "{text}"
        );
        assert!(
            text.contains("STALE LEASE of ghost (run r-ghost, fence 1, expired "),
            "{text}"
        );
    }
    ok(&case.run(&["--scheduled-at", &slot]));
    let ev = case.events();
    let start = ev.iter().find(|e| e.0 == "start").expect("start");
    assert_eq!(start.1, Some(2), "{ev:#?}");
    assert_eq!(start.2, Some(2), "the next fence: {ev:#?}");
    // Deleting every lease never makes a fence go back.
    case.delete_leases();
    ok(&case.run(&["--scheduled-at", &kind.slot(1)]));
    let fences: Vec<i64> = case
        .events()
        .iter()
        .filter_map(|e| (e.0 == "start").then_some(e.2).flatten())
        .collect();
    assert_eq!(fences.len(), 2, "{fences:?}");
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

pub fn fifty_contenders_on_one_slot_give_one_start_and_forty_nine_skips(kind: Kind) {
    let Some(case) = Case::new(kind, "fifty", "60s", NO_RETRY, r#"["sleep", "1"]"#) else {
        return;
    };
    let slot = kind.slot(0);
    let children: Vec<_> = (0..50)
        .map(|i| {
            case.cmd(&["--scheduled-at", &slot, "--instance", &format!("i{i}")])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
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

/// Forty runs that wrote `start` and died (no `end`, no live lease, their outputs on disk),
/// caught up by twelve `store flush` at once: each output reaches the ledger once.
pub fn outputs_of_dead_runs_are_written_once_when_many_catch_up_at_once(kind: Kind) {
    let Some(case) = Case::new(kind, "catchup", "60s", NO_RETRY, r#"["true"]"#) else {
        return;
    };
    let slot = kind.slot(0);
    for i in 0..40 {
        case.plant_dead_run(
            &format!("20260301T020000-1-dead{i}"),
            &slot,
            &format!("a{i}\nb{i}\n"),
        );
    }
    let url = case.url();
    let flushes: Vec<_> = (0..12)
        .map(|_| {
            case.command(&["store", "flush", "--store", &url])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for f in flushes {
        let o = f.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", err(&o));
    }
    let mut want: Vec<String> = (0..40)
        .flat_map(|i| [format!("a{i}"), format!("b{i}")])
        .collect();
    want.sort();
    assert_eq!(case.output_keys(), want, "each output once");
    assert!(empty(&case.path(".batchguard/runs")), "every run caught up");
}

/// `retry:` of a job never retried whose catch-up reach (10 minutes) keeps
/// [`recent_slot`] within the store's clock bound (SPEC 7.1 item 22) for minutes.
pub const REACH: &str = "      max_attempts: 1\n      catch_up: 10m\n";

/// The minute two minutes ago, as `--scheduled-at` (inside `watch --since 3h`).
pub fn recent_slot() -> String {
    let now = jiff::Timestamp::now().as_second();
    jiff::Timestamp::from_second(now - now.rem_euclid(60) - 120)
        .unwrap()
        .to_string()
}

/// A run holding its lease of `slot` (returned, to release), and what `watch` and `metrics`
/// show of it meanwhile: the lease and its run, running. The run's id is returned too.
pub fn a_held_lease_is_listed(case: &Case, slot: &str) -> (held::Paused, String) {
    let url = case.url();
    let dir = case.dir.path();
    let ledger = case.ledger_apart_file();
    let paused = held::paused_run(dir, "j", slot, &url, ledger);
    let run_id = case.run_ids("start").pop().expect("the run's start");
    let v = held::watch(dir, &url, ledger);
    assert_eq!(held::lease_runs(&v), std::slice::from_ref(&run_id));
    let l = &v["leases"][0];
    assert_eq!(l["job"], "j");
    assert_eq!(l["fence"], 1);
    assert_eq!(l["expired"], false);
    assert!(l["holder"].as_str().unwrap().contains("host-a"), "{l}");
    let left = l["secs_left"].as_i64().unwrap();
    assert!(left > 0 && left <= 600, "{l}");
    // What runs now is the lease's run, with the lease's time left.
    let running = held::running(&v, "j");
    assert_eq!(running.len(), 1);
    assert_eq!(running[0]["run_id"], run_id.as_str());
    assert!(running[0]["lease_secs_left"].as_i64().unwrap() > 0);
    assert!(
        !held::watch_text(dir, &url, ledger).contains("does not list its leases"),
        "the store lists its leases"
    );
    let prom = held::metrics(dir, &url, ledger);
    assert!(
        prom.contains("batchguard_live_leases{job_name=\"j\"} 1"),
        "{prom}"
    );
    (paused, run_id)
}

/// A database store: beside a held lease, a holder that died (still `held`, past its
/// `lease_until`) is listed as expired, and a released lease is not listed.
pub fn watch_and_metrics_list_the_leases_held_and_not_the_released_ones(kind: Kind) {
    let Some(case) = Case::new(kind, "leases", "10m", NO_RETRY, r#"["true"]"#) else {
        return;
    };
    let (url, dir) = (case.url(), case.dir.path());
    let slot = recent_slot();
    let (paused, run_id) = a_held_lease_is_listed(&case, &slot);
    let v = held::watch(dir, &url, None);
    let l = &v["leases"][0];
    let (acquired, until): (jiff::Timestamp, jiff::Timestamp) = (
        l["acquired_at"].as_str().unwrap().parse().unwrap(),
        l["lease_until"].as_str().unwrap().parse().unwrap(),
    );
    assert_eq!(until.duration_since(acquired).as_secs(), 600);

    case.insert_lease("j:dead", &slot, ("ghost", "r-dead", 7), (-120, -60), "held");
    case.insert_lease(
        "j:done",
        &slot,
        ("ghost", "r-done", 8),
        (-120, 60),
        "released",
    );
    let v = held::watch(dir, &url, None);
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
    let v = held::watch(dir, &url, None);
    assert_eq!(held::lease_runs(&v), ["r-dead"]);
    assert!(held::running(&v, "j").is_empty(), "{v}");
    let prom = held::metrics(dir, &url, None);
    assert!(
        prom.contains("batchguard_live_leases{job_name=\"j\"} 0")
            && prom.contains("batchguard_expired_leases{job_name=\"j\"} 1"),
        "{prom}"
    );
}

/// SPEC 7.1 item 20 on every store: a slot a deploy's TERM cut short, and one whose holder
/// died, are each worked once more by the next tick (`trigger: catch_up`), then never again.
pub fn interrupted_and_lost_slots_are_caught_up_once_by_the_next_tick(kind: Kind) {
    let Some(case) = Case::new(
        kind,
        "catchup",
        "60s",
        "      max_attempts: 3\n",
        r#"["sh", "-c", "echo \"k-$BATCHGUARD_SCHEDULED_AT\" >> \"$BATCHGUARD_OUTPUTS\"; [ \"$HOLD\" = 1 ] && exec sleep 600; exit 0"]"#,
    ) else {
        return;
    };
    let (s0, s1, s2, s3) = (kind.slot(0), kind.slot(1), kind.slot(2), kind.slot(3));
    let child = case
        .cmd(&["--scheduled-at", &s0])
        .env("HOLD", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !case.events().iter().any(|e| e.0 == "start") {
        assert!(std::time::Instant::now() < until, "never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(143), "{}", err(&o));
    let o = case.run(&["--scheduled-at", &s1]);
    ok(&o);
    assert!(
        err(&o).contains("was interrupted (attempt 1 of 3): catching it up"),
        "{}",
        err(&o)
    );
    // A holder that died, its lease ended: lost, caught up by the next tick.
    case.plant_ghost(&s2);
    case.expire_leases();
    let o = case.run(&["--scheduled-at", &s3]);
    ok(&o);
    assert!(
        err(&o).contains(&format!("slot {s2} lost its holder")),
        "{}",
        err(&o)
    );
    // Nothing is left behind: the same tick again only skips.
    let o = case.run(&["--scheduled-at", &s3]);
    ok(&o);
    assert!(!err(&o).contains("catching"), "{}", err(&o));
    let ends: Vec<Option<String>> = case
        .events()
        .into_iter()
        .filter(|e| e.0 == "end")
        .map(|e| e.4)
        .collect();
    assert_eq!(
        ends,
        [Some("INTERRUPTED".to_owned()), None, None, None, None],
        "s0 interrupted, s0 caught up, s1, s2 caught up, s3"
    );
    let mut keys = case.output_keys();
    keys.dedup();
    assert_eq!(keys.len(), 4, "{keys:?}");
}

/// libfaketime, which moves this process's wall clock (not its monotonic one).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// SPEC 7.1 item 21's "two clocks": on a host an hour behind, a `skip` and an operator's
/// `manual` recovery are recorded in the store's time, after the dead letter they follow,
/// as `start` and `end` are.
pub fn every_event_of_run_is_in_the_stores_time_however_the_host_clock_is_off(kind: Kind) {
    if !std::path::Path::new(FAKETIME).is_file() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "libfaketime is missing ({FAKETIME}); .ci/run installs Debian's faketime"
        );
        eprintln!("skipped: libfaketime is not installed (apt-get install faketime)");
        return;
    }
    let Some(case) = Case::new(kind, "clock", "60s", NO_RETRY, r#"["false"]"#) else {
        return;
    };
    let s0 = kind.slot(0);
    // Dead-lettered on an honest host.
    let o = case.run(&["--scheduled-at", &s0]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    // The same slot again, then its recovery, from a host an hour behind.
    let behind = |args: &[&str]| {
        let mut c = case.cmd(args);
        c.env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME", "-1h")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        c.output().expect("run")
    };
    let o = behind(&["--scheduled-at", &s0]);
    ok(&o);
    assert!(err(&o).contains("dead-lettered"), "{}", err(&o));
    let o = behind(&[
        "--scheduled-at",
        &s0,
        "--manual",
        "--reason",
        "bank fixed the file",
        "--",
        "true",
    ]);
    ok(&o);
    let ats = case.event_times();
    let mut kinds: Vec<&str> = ats.iter().map(|a| a.0.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "dead_letter",
            "end",
            "end",
            "manual",
            "skip",
            "start",
            "start"
        ],
        "{ats:#?}"
    );
    let at = |k: &str| {
        ats.iter()
            .filter(|a| a.0 == k)
            .map(|a| a.1)
            .collect::<Vec<_>>()
    };
    let (dead, skip, manual) = (at("dead_letter")[0], at("skip")[0], at("manual")[0]);
    let recovery_start = *at("start").iter().max().expect("start");
    assert!(
        dead <= skip && skip <= manual && manual <= recovery_start,
        "events out of the store's order: {ats:#?}"
    );
}

/// A database restored from a backup older than its ledger: the counter went back.
/// `store repair` (the ledger: the store's own tables) moves it past the ledger's highest
/// fence, and the next run's fence is above every fence handed out.
pub fn store_repair_moves_a_counter_that_went_back_past_the_ledger(kind: Kind) {
    let Some(case) = Case::new(kind, "repair", "60s", NO_RETRY, r#"["true"]"#) else {
        return;
    };
    ok(&case.run(&["--scheduled-at", &kind.slot(0)]));
    ok(&case.run(&["--scheduled-at", &kind.slot(1)]));
    case.db.exec(match kind {
        Kind::Pg => "SELECT setval('batchguard_fence', 1, false)",
        _ => "UPDATE batchguard_fence SET value = 0 WHERE id = 1",
    });
    let rep = case.bg(&["store", "repair", "--store", &case.url()]);
    ok(&rep);
    let said = String::from_utf8_lossy(&rep.stdout);
    assert!(said.contains("the highest fence there is 2"), "{said}");
    assert!(said.contains("the next fence is 3"), "{said}");
    ok(&case.run(&["--scheduled-at", &kind.slot(2)]));
    let fences: Vec<Option<i64>> = case
        .events()
        .iter()
        .filter(|e| e.0 == "start")
        .map(|e| e.2)
        .collect();
    assert_eq!(fences, [Some(1), Some(2), Some(3)]);
}

/// Waits (up to a minute, to fail rather than hang) until `done` says so.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < until, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `audit` of `slot`'s minute: no finding that says the ledger contradicts itself or the
/// store (two holders, a start without an end, an end without a start, a lease overrun, a
/// failure, an output applied twice).
fn audit_is_clean(case: &Case, slot: &str) {
    let to =
        jiff::Timestamp::from_second(slot.parse::<jiff::Timestamp>().unwrap().as_second() + 60)
            .unwrap()
            .to_string();
    let mut args = vec!["audit", "--manifest", "m.batchguard.yaml"];
    args.extend(["--from", slot, "--to", &to, "--format", "json"]);
    let ledger = case.ledger_args();
    args.extend(ledger.iter().map(String::as_str));
    let codes = audit_codes(&case.bg(&args));
    for c in ["AU102", "AU103", "AU104", "AU105", "AU111", "AU201"] {
        assert!(!codes.iter().any(|x| x == c), "{c}: {codes:?}");
    }
}

/// SPEC 7.1 item 23 on every store: a finish spooled while the store was cut off, then
/// flushed by four hosts (working directories, each with a copy of the spool) with two
/// processes each, all at once, is in the ledger once: one `end`, each output once, the
/// slot succeeded, every spool empty. The spool's file lock keeps two processes of one
/// host apart; only the store's own lock (or constraint) keeps the hosts apart. On a
/// database the test holds the slot's row until every host's finish waits on the store,
/// so they do meet there (a check-then-insert writes four); a Redis script runs alone.
pub fn a_spooled_finish_flushed_by_four_hosts_at_once_is_written_once(kind: Kind) {
    let Some(case) = Case::new(
        kind,
        "spool4",
        "60s",
        REACH,
        r#"["sh", "-c", "touch held; while [ ! -e go ]; do sleep 0.05; done; echo charge-1 >> \"$BATCHGUARD_OUTPUTS\""]"#,
    ) else {
        return;
    };
    let slot = recent_slot();
    let (mut relay, through) = case.db.relay();
    let child = case
        .cmd_ledger(&through, &["--scheduled-at", &slot])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for("the command started", || case.path("held").exists());
    // The store goes away while the command works: its finish is spooled.
    relay.cut();
    std::fs::write(case.path("go"), "").unwrap();
    let o = child.wait_with_output().expect("wait");
    assert!(err(&o).contains("spooled to"), "{}", err(&o));
    let spool = case.path(".batchguard/spool");
    assert!(!empty(&spool), "nothing spooled: {}", err(&o));
    let run = case.run_ids("start").pop().expect("the run's start");

    let hosts: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for h in &hosts {
        let to = h.path().join(".batchguard/spool");
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&spool).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
    let url = case.url();
    let mut dirs: Vec<&std::path::Path> = hosts.iter().map(|h| h.path()).collect();
    dirs.push(case.dir.path());
    let hold = kind.keeps_ledger().then(|| {
        let mut s = case.db.session();
        s.exec(if kind == Kind::Pg {
            "BEGIN"
        } else {
            "START TRANSACTION"
        });
        s.exec("SELECT run_id FROM batchguard_slots WHERE job = 'j' FOR UPDATE");
        s
    });
    let flushes: Vec<_> = dirs
        .iter()
        .flat_map(|d| [d, d])
        .map(|d| {
            std::process::Command::new(crate::stores::bin())
                .current_dir(d)
                .args(["store", "flush", "--store", &url])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    if let Some(mut s) = hold {
        wait_for("every host's flush waits on the store", || {
            case.db.lock_waiters() >= dirs.len()
        });
        s.exec("COMMIT");
    }
    for f in flushes {
        let o = f.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", err(&o));
    }
    for d in &dirs {
        assert!(
            empty(&d.join(".batchguard/spool")),
            "{} kept its spool",
            d.display()
        );
    }
    assert_eq!(case.run_ids("end"), std::slice::from_ref(&run), "one end");
    let ends: Vec<Ev> = case.events().into_iter().filter(|e| e.0 == "end").collect();
    assert_eq!(ends[0].3.as_deref(), Some("success"), "{ends:#?}");
    assert_eq!(case.output_keys(), ["charge-1"], "each output once");
    let st = case.bg(&["store", "status", "--store", &url, "--job", "j"]);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains(&format!("j  {slot}  succeeded  attempts 1")),
        "{text}"
    );
    if let crate::stores::Db::Redis(r) = &case.db {
        // The finish script's mark of what this run's finish came to.
        let mark: String = r.cmd(&[
            "HGET",
            &format!("{}:slot:j:{slot}", r.prefix),
            &format!("end:{run}"),
        ]);
        assert_eq!(mark, "written");
    }
    audit_is_clean(&case, &slot);
}

/// SPEC 7.1 item 24 on every store: a guard frozen (SIGSTOP) after its job succeeded,
/// past its lease; another instance takes the slot as the next attempt and succeeds; the
/// first one, let go (SIGCONT), writes `end` `superseded` naming the newer run and its
/// fence: no verdict, no dead letter, the slot still succeeded, `audit` clean. Its outputs
/// are recorded (they were applied: a double apply must show). It exits 0, saying so.
pub fn a_holder_stopped_past_its_lease_writes_only_a_superseded_end(kind: Kind) {
    let Some(case) = Case::new(
        kind,
        "superseded",
        "60s",
        "      max_attempts: 3\n      catch_up: 10m\n",
        r#"["sh", "-c", "touch held; while [ ! -e go ]; do sleep 0.05; done; echo \"k-$BATCHGUARD_FENCE\" >> \"$BATCHGUARD_OUTPUTS\"; touch \"done-$BATCHGUARD_FENCE\""]"#,
    ) else {
        return;
    };
    let slot = recent_slot();
    let first = case
        .cmd(&["--scheduled-at", &slot, "--instance", "host-a"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for("the command started", || case.path("held").exists());
    let pid = first.id() as i32;
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Its job succeeds while it is frozen; then its lease ends in the store's time.
    std::fs::write(case.path("go"), "").unwrap();
    wait_for("the first job's end", || case.path("done-1").exists());
    case.expire_leases();
    let o = case.run(&["--scheduled-at", &slot, "--instance", "host-b"]);
    ok(&o);
    let newer = case.run_ids("start").pop().expect("the newer start");
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let o = first.wait_with_output().expect("wait");
    ok(&o);
    let said = format!("superseded by run {newer} (fence 2)");
    assert!(err(&o).contains(&said), "{}", err(&o));

    let ev = case.events();
    let ends: Vec<&Ev> = ev.iter().filter(|e| e.0 == "end").collect();
    assert_eq!(ends.len(), 2, "{ev:#?}");
    let old = ends
        .iter()
        .find(|e| e.1 == Some(1))
        .expect("the first attempt's end");
    assert_eq!(old.3.as_deref(), Some("superseded"), "{ev:#?}");
    assert_eq!(
        (old.2, old.4.as_deref()),
        (None, None),
        "no fence, no code: {ev:#?}"
    );
    assert_eq!(old.5.as_deref(), Some(said.as_str()), "{ev:#?}");
    let new = ends
        .iter()
        .find(|e| e.1 == Some(2))
        .expect("the second attempt's end");
    assert_eq!(new.3.as_deref(), Some("success"), "{ev:#?}");
    assert!(!ev.iter().any(|e| e.0 == "dead_letter"), "{ev:#?}");
    assert_eq!(
        case.output_keys(),
        ["k-1", "k-2"],
        "the superseded run applied its outputs: recorded"
    );
    let st = case.bg(&["store", "status", "--store", &case.url(), "--job", "j"]);
    let text = String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains(&format!("j  {slot}  succeeded  attempts 2")),
        "{text}"
    );
    assert!(text.contains("live leases: none"), "{text}");
    audit_is_clean(&case, &slot);
}
