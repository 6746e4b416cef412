//! `audit --since` windows end at the ledger's clock (the host's for SQLite, PostgreSQL's
//! `now()` for a postgres:// ledger, MySQL's `UTC_TIMESTAMP(6)` for a mysql:// one), and `watch --once --format json` shows the figures
//! `audit` computes over the same window: per job every SPEC 6 metric, the totals and the
//! findings. The ledgers are written by real `batchguard run`s.

#[path = "common/live.rs"]
mod live;

use jiff::Timestamp;
use live::{Case, manifest, mins, minute, minute_of_hour, now, ok};
use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON ({e}); exit {:?}\nstdout: {}\nstderr: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn ts(v: &Value) -> Timestamp {
    v.as_str().expect("a timestamp").parse().expect("RFC 3339")
}

const RETRY: &str = "    retry:\n      max_attempts: 1\n    alerts:\n      max_latency: 10m\n";

/// Two hourly jobs whose slots fall 30 minutes from both ends of a 3-hour window that
/// ends now (so the seconds between two commands move no slot across an edge), and what
/// `run` wrote for them: successes, a failure, a skip of a slot that had succeeded, and a
/// slot nobody ran.
fn ran(c: &Case, slots: &[Timestamp]) {
    let url = c.url();
    let run = |job: &str, slot: Timestamp, instance: &str, cmd: &str| {
        let at = live::ts(slot);
        c.bg(&[
            "run",
            "--manifest",
            "m.batchguard.yaml",
            "--job",
            job,
            "--store",
            &url,
            "--scheduled-at",
            &at,
            "--instance",
            instance,
            "--",
            cmd,
        ])
    };
    ok(&run("hourly", slots[2], "host-a", "true"));
    assert_eq!(
        run("hourly", slots[1], "host-a", "false").status.code(),
        Some(1)
    );
    ok(&run("hourly", slots[0], "host-a", "true"));
    // Another instance woken by the same tick: the slot had succeeded, so it skips.
    let skip = run("hourly", slots[0], "host-b", "true");
    ok(&skip);
    assert!(String::from_utf8_lossy(&skip.stderr).contains("already succeeded"));
    ok(&run("other", slots[2], "host-a", "true"));
    ok(&run("other", slots[0], "host-b", "true"));
}

fn case_manifest() -> (String, Vec<Timestamp>) {
    let now = now();
    let first = minute(now - mins(30));
    let hourly = format!("{} * * * *", minute_of_hour(first));
    let slots = (0..3).map(|k| first - mins(60 * k)).collect();
    let m = manifest(&[
        ("hourly", &hourly, "1m", "5m", RETRY),
        ("other", &hourly, "1m", "5m", RETRY),
    ]);
    (m, slots)
}

/// `audit --since 3h` and `watch --once --since 3h` over one store agree.
fn agree(c: &Case) {
    let url = c.url();
    let audit = json(&c.bg(&[
        "audit",
        "--ledger",
        &url,
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "3h",
        "--format",
        "json",
    ]));
    let (watch, o) = c.watch_json(&["--since", "3h"]);
    ok(&o);
    let audited = audit["jobs"].as_array().expect("jobs");
    let watched = watch["jobs"].as_array().expect("jobs");
    assert_eq!(audited.len(), 2);
    assert_eq!(watched.len(), audited.len());
    for (a, w) in audited.iter().zip(watched) {
        assert_eq!(a["job"], w["job"]);
        let mut a = a.clone();
        // The job's identity and its drills are the audit's columns, not the metrics.
        for k in ["job", "last_drill", "last_passing_drill_at"] {
            a.as_object_mut().unwrap().remove(k);
        }
        assert_eq!(a, w["metrics"], "job {}", w["job"]);
    }
    assert_eq!(audit["totals"], watch["totals"]);
    let mut codes = std::collections::BTreeMap::<String, u64>::new();
    for f in audit["findings"].as_array().unwrap() {
        *codes
            .entry(f["code"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let watched: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(watch["findings"].clone()).unwrap();
    assert_eq!(codes, watched);

    // The figures are the ones the runs made.
    let h = &watched_job(&watch, "hourly");
    assert_eq!(h["metrics"]["expected"], 3);
    assert_eq!(h["metrics"]["succeeded"], 2);
    assert_eq!(h["metrics"]["failed"], 1);
    assert_eq!(h["starts"], 3);
    assert_eq!(h["skips"], 1);
    assert_eq!(h["skip_reasons"]["already_succeeded"], 1);
    assert_eq!(h["lock_contention_ratio"], 0.25);
    assert_eq!(h["last_skip"]["instance"], "host-b");
    assert_eq!(watched_job(&watch, "other")["missed"], 1);
    assert!(
        codes.contains_key("AU101") && codes.contains_key("AU111"),
        "{codes:?}"
    );
}

fn watched_job(watch: &Value, name: &str) -> Value {
    watch["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no job {name}"))
}

#[test]
fn watch_once_equals_audit_over_the_same_window_sqlite() {
    let (m, slots) = case_manifest();
    let c = Case::sqlite(&m);
    ran(&c, &slots);
    agree(&c);
}

#[test]
fn watch_once_equals_audit_over_the_same_window_postgres() {
    let (m, slots) = case_manifest();
    let Some(c) = Case::pg(&m, "watch_eq") else {
        return;
    };
    ran(&c, &slots);
    agree(&c);
}

#[test]
fn watch_once_equals_audit_over_the_same_window_mysql() {
    let (m, slots) = case_manifest();
    let Some(c) = Case::mysql(&m, "watch_eq") else {
        return;
    };
    ran(&c, &slots);
    agree(&c);
}

#[test]
fn since_ends_at_the_host_clock_for_sqlite() {
    let c = Case::sqlite(&manifest(&[("j", "0 * * * *", "1m", "5m", "")]));
    let before = Timestamp::now();
    let audit = json(&c.bg(&[
        "audit",
        "--ledger",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "30m",
        "--format",
        "json",
    ]));
    let after = Timestamp::now();
    let (from, to) = (ts(&audit["window"]["from"]), ts(&audit["window"]["to"]));
    // The ledger keeps microseconds; so does the window's end.
    assert!(
        to >= Timestamp::from_microsecond(before.as_microsecond()).unwrap() && to <= after,
        "{to}"
    );
    assert_eq!(to.duration_since(from), jiff::SignedDuration::from_mins(30));
}

#[test]
fn since_ends_at_the_database_clock_for_postgres() {
    let Some(c) = Case::pg(
        &manifest(&[(
            "j",
            "0 * * * *",
            "1m",
            "5m",
            "    since: 2031-01-01T00:00:00Z\n",
        )]),
        "since_clock",
    ) else {
        return;
    };
    // The database's clock, set apart from the host's: a `now()` earlier in the search
    // path than pg_catalog's, for every new connection to this database.
    let live::Db::Server(live::stores::Db::Pg(db)) = &c.db else {
        unreachable!()
    };
    c.exec(
        "CREATE SCHEMA clock; CREATE FUNCTION clock.now() RETURNS timestamptz LANGUAGE sql \
         AS $$ SELECT '2031-05-01T12:00:00Z'::timestamptz $$",
    );
    c.exec(&format!(
        "ALTER DATABASE {} SET search_path = clock, pg_catalog, public",
        db.name
    ));
    let audit = json(&c.bg(&[
        "audit",
        "--ledger",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "1h",
        "--format",
        "json",
    ]));
    assert_eq!(audit["window"]["to"], "2031-05-01T12:00:00Z");
    assert_eq!(audit["window"]["from"], "2031-05-01T11:00:00Z");
    // Eleven hourly slots before it are expected, by the database's clock.
    let (watch, o) = c.watch_json(&["--since", "11h"]);
    ok(&o);
    assert_eq!(watch["window"]["to"], "2031-05-01T12:00:00Z");
    assert_eq!(watch["jobs"][0]["expected"], 11);
}

#[test]
fn since_and_from_to_exclude_each_other_with_a_clear_message() {
    let c = Case::sqlite(&manifest(&[("j", "0 * * * *", "1m", "5m", "")]));
    let url = c.url();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--since", "30m", "--from", "2026-03-01T00:00:00Z"],
            "cannot be used with",
        ),
        (
            &["--since", "30m", "--to", "2026-03-01T00:00:00Z"],
            "cannot be used with",
        ),
        (
            &[],
            "audit needs a window: give --since D, or --from and --to",
        ),
        (
            &["--from", "2026-03-01T00:00:00Z"],
            "give --to (with --from), or --since D alone",
        ),
        (&["--since", "0m"], "more than zero"),
    ];
    for (extra, message) in cases {
        let mut args = vec!["audit", "--ledger", &url];
        args.extend_from_slice(extra);
        let o = c.bg(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{extra:?}: {err}");
    }
    let o = c.bg(&["audit", "--ledger", &url, "--since", "half an hour"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("such as 30m"));
}
