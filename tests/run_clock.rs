//! SPEC 7.1 item 22: the store's clock bounds the slot. A named slot later than the
//! store's clock (plus the tick tolerance) is refused, exit 125, "ahead"; one older than
//! the catch-up reach is refused, "behind"; a host whose clock is off by more than the
//! tick tolerance is told so on stderr and in the event's `detail`. Real servers; the
//! skewed host is a real process under libfaketime.
//!
//! The rest of the suite replays schedules faster than time with the bound off
//! (`.cargo/config.toml`); these tests turn it back on.

#[path = "common/stores.rs"]
mod stores;

use std::process::{Command, Output};
use stores::{Case, Kind, NO_RETRY, err, ok};

/// libfaketime, which moves a process's wall clock (not its monotonic one).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The minutely slot at or before now plus `offset` seconds.
fn minute(offset: i64) -> String {
    let t = jiff::Timestamp::now().as_second() + offset;
    jiff::Timestamp::from_second(t - t.rem_euclid(60))
        .expect("in range")
        .to_string()
}

/// `c` with item 22's bound on, and its host clock `skew` off (libfaketime) when given.
fn tick(mut c: Command, skew: Option<&str>) -> Output {
    c.env_remove("BATCHGUARD_CLOCK_CHECK");
    if let Some(s) = skew {
        c.env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME", s)
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    c.output().expect("run")
}

fn faketime_here() -> bool {
    if std::path::Path::new(FAKETIME).is_file() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "libfaketime is missing ({FAKETIME}); .ci/run installs Debian's faketime"
    );
    eprintln!("skipped: libfaketime is not installed (apt-get install faketime)");
    false
}

#[test]
fn sqlite_named_slots_an_hour_off_are_refused_and_the_current_one_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.batchguard.yaml"),
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: [\"true\"]\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 30s\n    retry:\n      max_attempts: 1\n",
    )
    .expect("manifest");
    let run = |slot: &str| {
        let mut c = Command::new(stores::bin());
        c.current_dir(dir.path())
            .env_remove("BATCHGUARD_STORE")
            .args(["run", "--manifest", "m.batchguard.yaml", "--job", "j"])
            .args(["--scheduled-at", slot]);
        tick(c, None)
    };
    let ahead = minute(3600);
    let o = run(&ahead);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains(&format!("slot {ahead} is 3"))
            && err(&o).contains("ahead of the store's clock")
            && err(&o).contains("this host's clock runs ahead"),
        "{}",
        err(&o)
    );
    let behind = minute(-3600);
    let o = run(&behind);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("behind the store's clock") && err(&o).contains("--manual --reason"),
        "{}",
        err(&o)
    );
    // Nothing was written for either; the current slot runs.
    let o = run(&minute(0));
    ok(&o);
    let ev = batchguard::SqliteStore::open(&dir.path().join(".batchguard/store.db"))
        .expect("store")
        .events_of("j")
        .expect("events");
    let kinds: Vec<&str> = ev.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["start", "end"], "{ev:?}");
}

fn a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own(kind: Kind) {
    if !faketime_here() {
        return;
    }
    let Some(case) = Case::new(kind, "skew", "60s", NO_RETRY, r#"["true"]"#) else {
        return;
    };
    // Without --scheduled-at: the store's clock picks the slot; the skew is said and kept.
    let o = tick(case.cmd(&["--report", "r.json"]), Some("+1h"));
    ok(&o);
    assert!(err(&o).contains("host clock +3"), "{}", err(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.path("r.json")).expect("report")).expect("json");
    let slot = report["scheduled_at"].as_str().expect("slot").to_owned();
    let store_slots = [minute(-60), minute(0), minute(60)];
    assert!(store_slots.contains(&slot), "{slot} is not the store's");
    let ev = case.events();
    let start = ev.iter().find(|e| e.0 == "start").expect("start");
    assert!(
        start
            .5
            .as_deref()
            .is_some_and(|d| d.contains("host clock +3")),
        "{ev:#?}"
    );
    // Its own tick's slot, an hour ahead: refused, nothing written.
    let n = ev.len();
    let own = minute(3600);
    let o = tick(case.cmd(&["--scheduled-at", &own]), Some("+1h"));
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("ahead of the store's clock"),
        "{}",
        err(&o)
    );
    assert_eq!(case.events().len(), n);
    // A host an hour behind naming its tick's slot: refused as behind.
    let o = tick(case.cmd(&["--scheduled-at", &minute(-3600)]), Some("-1h"));
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(err(&o).contains("behind the store's clock"), "{}", err(&o));
    assert_eq!(case.events().len(), n);
}

#[test]
fn postgres_a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own() {
    a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own(Kind::Pg);
}

#[test]
fn mysql_a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own() {
    a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own(Kind::MySql);
}

#[test]
fn redis_a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own() {
    a_host_an_hour_ahead_is_told_and_runs_the_stores_slot_not_its_own(Kind::Redis);
}
