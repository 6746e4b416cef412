//! `batchguard store` on the default SQLite store (SPEC 7.2, 7.1 items 16, 19, 21):
//! `migrate` says what it created, `status` lists a stale lease as `watch` does, and
//! `repair` moves a fencing counter that went back (a file restored from an older copy)
//! past the ledger's highest fence.

mod common;

use common::{bg, sqlite_rows};
use std::path::Path;

const MANIFEST: &str = "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"* * * * *\"\n    expected_duration: 1s\n    command: [\"true\"]\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 60s\n    retry:\n      max_attempts: 1\n";

const DB: &str = ".batchguard/store.db";

fn batchguard(dir: &Path, args: &[&str]) -> std::process::Output {
    bg().current_dir(dir)
        .args(args)
        .output()
        .expect("batchguard runs")
}

fn stdout(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run(dir: &Path, slot: &str) {
    stdout(&batchguard(
        dir,
        &[
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            "j",
            "--scheduled-at",
            slot,
        ],
    ));
}

#[test]
fn migrate_status_and_repair_on_a_sqlite_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.batchguard.yaml"), MANIFEST).unwrap();

    let first = stdout(&batchguard(dir, &["store", "migrate"]));
    assert!(
        first.starts_with("sqlite:.batchguard/store.db: created batchguard_claims, batchguard_drills, batchguard_events, batchguard_fence, batchguard_leases, batchguard_outputs, batchguard_slots"),
        "{first}"
    );
    let again = stdout(&batchguard(dir, &["store", "migrate"]));
    assert!(again.contains("tables are current ("), "{again}");
    assert!(again.contains("nothing to create"), "{again}");

    run(dir, "2026-03-01T02:00:00Z");
    run(dir, "2026-03-01T02:01:00Z");

    // A holder that died: its lease still `held`, past its end.
    let _: Vec<(String,)> = sqlite_rows(
        &dir.join(DB),
        "INSERT INTO batchguard_leases VALUES ('j:dead', 'j', '2026-03-01T02:05:00Z', 'ghost', 'r-dead', 7, 0, 1, 'held') RETURNING key",
    );
    let st = stdout(&batchguard(dir, &["store", "status"]));
    assert!(
        st.contains("live leases: none\nstale leases (expired, never released):\n  j:dead  job j slot 2026-03-01T02:05:00Z  STALE LEASE of ghost (run r-dead, fence 7, expired "),
        "{st}"
    );

    // The counter went back (the file restored from an older copy).
    let _: Vec<(i64,)> = sqlite_rows(
        &dir.join(DB),
        "UPDATE batchguard_fence SET value = 0 RETURNING value",
    );
    let rep = stdout(&batchguard(dir, &["store", "repair"]));
    assert!(rep.contains("the highest fence there is 2"), "{rep}");
    assert!(rep.contains("the next fence is 3"), "{rep}");
    run(dir, "2026-03-01T02:02:00Z");
    let fences: Vec<(i64,)> = sqlite_rows(
        &dir.join(DB),
        "SELECT fence FROM batchguard_events WHERE event = 'start' ORDER BY rowid",
    );
    assert_eq!(fences, [(1,), (2,), (3,)]);
}
