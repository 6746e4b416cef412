//! What audit counts (SPEC 7.1 items 21, 24 and 26): a job with no event in the window is
//! missed at every due slot (from its `since:` when later); its slots before its first
//! event are one AU112 warning with the count; no slot after the ledger's clock is due,
//! whatever `--to` says (files: the host's clock; PostgreSQL: the server's); and an
//! attempt that ended `superseded` is counted apart on every reader (CSV, JSONL, SQLite,
//! PostgreSQL, MySQL), never a duplicate, a TTL overrun, an orphan or a failure.

#[path = "common/live.rs"]
mod live;

use jiff::{SignedDuration, Timestamp};
use live::{Case, Ev, bin, manifest, mins, minute, now, ok};
use std::path::Path;
use std::process::{Command, Output, Stdio};

const FROM: &str = "2026-03-01T00:00:00Z";
const TO: &str = "2026-03-01T06:00:00Z";

const HEADER: &str = "run_id,job,scheduled_at,event,at,instance,attempt,status,error_code,snapshot_digest,trigger,fence,detail\n";

/// An hourly job (`lock.ttl` 15m), `extra` lines added to it.
fn hourly(extra: &str) -> String {
    format!(
        "version: 1\nservice: svc\njobs:\n  - name: hourly\n    schedule: \"0 * * * *\"\n    timezone: UTC\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 15m\n{extra}"
    )
}

/// Clean runs of `hourly` on 2026-03-01 at these hours.
fn runs(hours: &[u32]) -> String {
    let mut s = HEADER.to_owned();
    for h in hours {
        s.push_str(&format!(
            "r{h},hourly,2026-03-01T{h:02}:00:00Z,start,2026-03-01T{h:02}:00:01Z,pod-a,1,,,,schedule,,\n\
             r{h},hourly,2026-03-01T{h:02}:00:00Z,end,2026-03-01T{h:02}:02:00Z,pod-a,1,success,,,schedule,,\n"
        ));
    }
    s
}

fn audit_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .arg("audit")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("batchguard runs")
}

/// `audit --format json` of `manifest` over `ledger` (CSV), `[FROM, TO)`, and its output.
fn audit_csv(manifest: &str, ledger: &str, extra: &[&str]) -> (serde_json::Value, Output) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("m.batchguard.yaml"), manifest).unwrap();
    std::fs::write(d.path().join("events.csv"), ledger).unwrap();
    let mut args = vec![
        "--ledger",
        "events.csv",
        "--manifest",
        "m.batchguard.yaml",
        "--from",
        FROM,
        "--to",
        TO,
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let o = audit_in(d.path(), &args);
    (json(&o), o)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "audit prints JSON ({e}); exit {:?}\nstdout: {}\nstderr: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn of<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

fn slots(v: &serde_json::Value, code: &str) -> Vec<String> {
    of(v, code)
        .iter()
        .map(|f| f["scheduled_at"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn codes(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_job_with_no_event_in_the_window_is_missed_at_every_due_slot() {
    let all: Vec<String> = (0..6)
        .map(|h| format!("2026-03-01T{h:02}:00:00Z"))
        .collect();
    // Its registration was lost: not one event, no since.
    let (v, o) = audit_csv(&hourly(""), HEADER, &[]);
    assert_eq!(o.status.code(), Some(1), "{v}");
    assert_eq!(slots(&v, "AU101"), all, "{v}");
    assert_eq!(v["jobs"][0]["expected"], 6, "{v}");
    assert_eq!(v["jobs"][0]["missed"], 6, "{v}");
    assert!(of(&v, "AU112").is_empty(), "{v}");
    assert!(
        v.get("notes").is_none(),
        "no note instead of the findings: {v}"
    );

    // Its only events are after the window: none in it, so the same.
    let mut later = HEADER.to_owned();
    later.push_str(
        "late,hourly,2026-03-02T00:00:00Z,start,2026-03-02T00:00:01Z,pod-a,1,,,,schedule,,\n",
    );
    let (v, o) = audit_csv(&hourly(""), &later, &[]);
    assert_eq!(o.status.code(), Some(1), "{v}");
    assert_eq!(slots(&v, "AU101"), all, "{v}");

    // A `since:` later than the window's start: missed from it on.
    let (v, o) = audit_csv(&hourly("    since: 2026-03-01T03:30:00Z\n"), HEADER, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        slots(&v, "AU101"),
        ["2026-03-01T04:00:00Z", "2026-03-01T05:00:00Z"],
        "{v}"
    );
    // A `since:` after the window: nothing was due.
    let (v, o) = audit_csv(&hourly("    since: 2026-03-01T07:00:00Z\n"), HEADER, &[]);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(codes(&v), Vec::<String>::new(), "{v}");
}

#[test]
fn slots_before_the_first_run_are_one_au112_warning_with_their_count() {
    // First run at 03:00; 04:00 then went missing.
    let (v, o) = audit_csv(&hourly(""), &runs(&[3, 5]), &[]);
    assert_eq!(o.status.code(), Some(1), "AU101 for 04:00: {v}");
    assert_eq!(slots(&v, "AU101"), ["2026-03-01T04:00:00Z"], "{v}");
    let w = of(&v, "AU112");
    assert_eq!(w.len(), 1, "one per job: {v}");
    assert_eq!(w[0]["name"], "slots-before-first-run");
    assert_eq!(w[0]["severity"], "warning");
    assert_eq!(w[0]["count"], 3, "00:00, 01:00, 02:00: {v}");
    assert_eq!(w[0]["job"], "hourly");
    assert!(w[0]["scheduled_at"].is_null(), "{v}");
    assert!(
        w[0]["message"].as_str().unwrap().contains(
            "3 slots before the first run (2026-03-01T03:00:00+00:00) are not counted: set `since:`"
        ),
        "{v}"
    );
    assert_eq!(v["jobs"][0]["expected"], 3, "only counted slots: {v}");

    // Nothing missed after the first run: a warning, so exit 0 unless --fail-on warning.
    let (v, o) = audit_csv(&hourly(""), &runs(&[3, 4, 5]), &[]);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(codes(&v), ["AU112"], "{v}");
    let (_, o) = audit_csv(&hourly(""), &runs(&[3, 4, 5]), &["--fail-on", "warning"]);
    assert_eq!(o.status.code(), Some(1), "--fail-on warning fails on AU112");

    // The pretty report shows it as a finding (no separate note line).
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("m.batchguard.yaml"), hourly("")).unwrap();
    std::fs::write(d.path().join("events.csv"), runs(&[3, 4, 5])).unwrap();
    let o = audit_in(
        d.path(),
        &[
            "--ledger",
            "events.csv",
            "--manifest",
            "m.batchguard.yaml",
            "--from",
            FROM,
            "--to",
            TO,
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("AU112 slots-before-first-run"), "{text}");
    assert_eq!(text.matches("before the first run").count(), 1, "{text}");
    assert!(!text.contains("note "), "{text}");

    // A `since:` at the window's start makes them count (missed), and AU112 goes.
    let (v, _) = audit_csv(
        &hourly("    since: 2026-03-01T00:00:00Z\n"),
        &runs(&[3, 4, 5]),
        &[],
    );
    assert_eq!(slots(&v, "AU101").len(), 3, "{v}");
    assert!(of(&v, "AU112").is_empty(), "{v}");
}

#[test]
fn au112_is_registered_with_the_other_checks() {
    let o = Command::new(bin()).arg("rules").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("AU112"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("slots-before-first-run") && line.contains("warning"),
        "{line}"
    );
    let o = Command::new(bin())
        .args(["explain", "AU112"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("since:"), "{text}");
    let page = std::fs::read_to_string("docs/rules.md").unwrap();
    assert!(
        page.contains("| AU112 | slots-before-first-run | warning |"),
        "docs/rules.md"
    );
}

/// Every AU101 slot is at or before `until`, and `expected` counts no later slot.
fn nothing_due_after(v: &serde_json::Value, until: Timestamp) {
    let missed = slots(v, "AU101");
    assert!(!missed.is_empty(), "the slots before now are missed: {v}");
    for s in &missed {
        let t: Timestamp = s.parse().unwrap();
        assert!(t <= until, "slot {s} is after now ({until}): {v}");
    }
    assert_eq!(v["jobs"][0]["expected"], missed.len(), "{v}");
}

/// A job every minute deployed ten minutes ago that never ran, audited up to five
/// minutes from now.
fn future_window() -> (String, String, String) {
    let since = minute(now()) - mins(10);
    let m = manifest(&[(
        "tick",
        "* * * * *",
        "1s",
        "30s",
        &format!("    since: {}\n", live::ts(since)),
    )]);
    (m, live::ts(since), live::ts(now() + mins(5)))
}

#[test]
fn a_to_in_the_future_counts_nothing_past_the_hosts_clock_for_a_file_ledger() {
    let (m, from, to) = future_window();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("m.batchguard.yaml"), m).unwrap();
    std::fs::write(d.path().join("events.csv"), HEADER).unwrap();
    let o = audit_in(
        d.path(),
        &[
            "--ledger",
            "events.csv",
            "--manifest",
            "m.batchguard.yaml",
            "--from",
            &from,
            "--to",
            &to,
            "--format",
            "json",
        ],
    );
    nothing_due_after(&json(&o), now());
}

#[test]
fn a_to_in_the_future_counts_nothing_past_the_servers_clock_for_postgres() {
    let (m, from, to) = future_window();
    let Some(c) = Case::pg(&m, "future_to") else {
        return;
    };
    let url = c.url();
    let o = c.bg(&[
        "audit",
        "--ledger",
        &url,
        "--manifest",
        "m.batchguard.yaml",
        "--from",
        &from,
        "--to",
        &to,
        "--format",
        "json",
    ]);
    // The server and the host share a clock here; a minute of margin for either.
    nothing_due_after(&json(&o), now() + mins(1));
}

/// The superseded story on hourly `settle` (ttl 15m, since 01:00), as event rows:
/// - 01:00: r1 (fence 1) paused past its lease; r2 (fence 2) took the slot over and
///   succeeded; r1 then ended `superseded` -> clean;
/// - 02:00: r3 succeeded -> clean;
/// - 03:00: r4 superseded by r5, which failed -> AU111 for r5's failure only.
fn story() -> Vec<Ev> {
    let ev = |run: &str, h: u32, event: &'static str, at: &str, attempt: i64| Ev {
        run_id: run.into(),
        job: "settle".into(),
        scheduled_at: format!("2026-03-01T{h:02}:00:00Z"),
        event,
        at: format!("2026-03-01T{h:02}:{at}Z"),
        instance: Some(format!("host-{run}")),
        attempt: Some(attempt),
        ..Ev::default()
    };
    let end = |e: Ev, status: &'static str, detail: Option<&str>| Ev {
        status: Some(status),
        detail: detail.map(str::to_owned),
        error_code: (status == "failure").then(|| "EXIT_1".to_owned()),
        ..e
    };
    let start = |e: Ev, fence: i64| Ev {
        fence: Some(fence),
        ..e
    };
    vec![
        start(ev("r1", 1, "start", "00:01", 1), 1),
        start(ev("r2", 1, "start", "16:00", 2), 2),
        end(ev("r2", 1, "end", "17:00", 2), "success", None),
        end(
            ev("r1", 1, "end", "25:00", 1),
            "superseded",
            Some("superseded by run r2 (fence 2)"),
        ),
        start(ev("r3", 2, "start", "00:01", 1), 3),
        end(ev("r3", 2, "end", "01:00", 1), "success", None),
        start(ev("r4", 3, "start", "00:01", 1), 4),
        start(ev("r5", 3, "start", "16:00", 2), 5),
        end(ev("r5", 3, "end", "17:00", 2), "failure", None),
        end(
            ev("r4", 3, "end", "18:00", 1),
            "superseded",
            Some("superseded by run r5 (fence 5)"),
        ),
    ]
}

fn story_manifest() -> String {
    "version: 1\nservice: svc\njobs:\n  - name: settle\n    schedule: \"0 * * * *\"\n    timezone: UTC\n    since: 2026-03-01T01:00:00Z\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 15m\n"
        .to_owned()
}

fn csv_field(s: Option<&str>) -> String {
    s.unwrap_or("").to_owned()
}

fn story_csv() -> String {
    let mut s = HEADER.to_owned();
    for e in story() {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},,schedule,{},{}\n",
            e.run_id,
            e.job,
            e.scheduled_at,
            e.event,
            e.at,
            csv_field(e.instance.as_deref()),
            e.attempt.map(|a| a.to_string()).unwrap_or_default(),
            e.status.unwrap_or(""),
            csv_field(e.error_code.as_deref()),
            e.fence.map(|f| f.to_string()).unwrap_or_default(),
            csv_field(e.detail.as_deref()),
        ));
    }
    s
}

fn story_jsonl() -> String {
    let mut s = String::new();
    for e in story() {
        let v = serde_json::json!({
            "run_id": e.run_id, "job": e.job, "scheduled_at": e.scheduled_at,
            "event": e.event, "at": e.at, "instance": e.instance, "attempt": e.attempt,
            "status": e.status, "error_code": e.error_code, "fence": e.fence,
            "detail": e.detail,
        });
        s.push_str(&v.to_string());
        s.push('\n');
    }
    s
}

const STORY_WINDOW: [&str; 4] = [
    "--from",
    "2026-03-01T01:00:00Z",
    "--to",
    "2026-03-01T04:00:00Z",
];

/// What every reader must make of [`story`].
fn judged_as_the_story(v: &serde_json::Value, source: &str) {
    assert_eq!(codes(v), ["AU111"], "{source}: {v}");
    let f = &of(v, "AU111")[0];
    assert_eq!(f["scheduled_at"], "2026-03-01T03:00:00Z", "{source}: {v}");
    let j = &v["jobs"][0];
    assert_eq!(j["superseded"], 2, "{source}: {v}");
    assert_eq!(v["totals"]["superseded"], 2, "{source}: {v}");
    assert_eq!(j["succeeded"], 2, "{source}: {v}");
    assert_eq!(j["failed"], 1, "{source}: {v}");
    assert_eq!(j["duplicated"], 0, "{source}: {v}");
    assert_eq!(j["lost"], 0, "{source}: {v}");
    assert_eq!(v["input"]["rows_rejected"], 0, "{source}: {v}");
}

fn audit_story_file(name: &str, text: &str, format: &str) -> Output {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("m.batchguard.yaml"), story_manifest()).unwrap();
    std::fs::write(d.path().join(name), text).unwrap();
    let mut args = vec!["--ledger", name, "--manifest", "m.batchguard.yaml"];
    args.extend_from_slice(&STORY_WINDOW);
    args.extend_from_slice(&["--format", format]);
    audit_in(d.path(), &args)
}

#[test]
fn a_superseded_attempt_is_counted_apart_from_csv_and_jsonl() {
    for (name, text) in [("events.csv", story_csv()), ("events.jsonl", story_jsonl())] {
        let o = audit_story_file(name, &text, "json");
        assert_eq!(o.status.code(), Some(1), "AU111 for 03:00");
        judged_as_the_story(&json(&o), name);
    }
}

#[test]
fn superseded_is_a_column_of_the_reports_when_an_attempt_was() {
    let csv = story_csv();
    let o = audit_story_file("events.csv", &csv, "csv");
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = head
        .iter()
        .position(|c| *c == "superseded")
        .expect("column");
    assert_eq!(head[at - 1], "lost");
    for row in lines {
        assert_eq!(row.split(',').nth(at), Some("2"), "{text}");
    }
    let o = audit_story_file("events.csv", &csv, "pretty");
    let text = String::from_utf8_lossy(&o.stdout);
    let head = text
        .lines()
        .find(|l| l.starts_with("job "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(head.contains(" lost  superseded "), "{text}");
    let o = audit_story_file("events.csv", &csv, "markdown");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("| lost | superseded | skipped |"), "{text}");
    let o = audit_story_file("events.csv", &csv, "html");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("<b>2</b>superseded attempts") && text.contains("<th>superseded</th>"),
        "html"
    );
    // Without a superseded attempt the tables are as they were.
    let o = audit_story_file(
        "events.csv",
        &runs(&[1, 2, 3]).replace("hourly", "settle"),
        "pretty",
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("superseded"), "{text}");
}

/// [`story`] written into a migrated store's ledger, audited from it.
fn audit_story_in(c: &Case) -> serde_json::Value {
    for e in story() {
        c.event(&e);
    }
    let url = c.url();
    let mut args = vec!["audit", "--ledger", &url, "--manifest", "m.batchguard.yaml"];
    args.extend_from_slice(&STORY_WINDOW);
    args.extend_from_slice(&["--format", "json"]);
    let o = c.bg(&args);
    json(&o)
}

#[test]
fn a_superseded_attempt_is_read_from_sqlite() {
    let c = Case::sqlite(&story_manifest());
    judged_as_the_story(&audit_story_in(&c), "sqlite");
}

#[test]
fn a_superseded_attempt_is_read_from_postgres_also_from_a_table_migrated_before() {
    let Some(c) = Case::pg(&story_manifest(), "superseded") else {
        return;
    };
    // A table made before round 4: its status check knew two words; migrate widens it.
    c.exec(
        "ALTER TABLE batchguard_events DROP CONSTRAINT IF EXISTS batchguard_events_status_check; \
         ALTER TABLE batchguard_events ADD CONSTRAINT batchguard_events_status_check \
         CHECK (status IN ('success', 'failure'))",
    );
    ok(&c.bg(&["store", "migrate", "--store", &c.url()]));
    judged_as_the_story(&audit_story_in(&c), "postgres");
}

#[test]
fn a_superseded_attempt_is_read_from_mysql() {
    let Some(c) = Case::mysql(&story_manifest(), "superseded") else {
        return;
    };
    judged_as_the_story(&audit_story_in(&c), "mysql");
}

/// `store migrate` widens an older table's `status` check, as it widens `trigger`'s.
#[test]
fn a_superseded_attempt_is_read_from_a_mysql_table_migrated_before() {
    let Some(c) = Case::mysql(&story_manifest(), "superseded_old") else {
        return;
    };
    // A table made before round 4 (MariaDB keeps a column's check with the column).
    c.exec(
        "ALTER TABLE batchguard_events MODIFY status VARCHAR(16) \
         CHECK (status IN ('success', 'failure'))",
    );
    ok(&c.bg(&["store", "migrate", "--store", &c.url()]));
    judged_as_the_story(&audit_story_in(&c), "mysql");
}

/// A run of `tick` on a migrated SQLite store: `start` by `instance` with `detail`.
fn start(c: &Case, run: &str, instance: &str, at: Timestamp, detail: Option<&str>) {
    c.event(&Ev {
        run_id: run.into(),
        job: "tick".into(),
        scheduled_at: live::ts(minute(at)),
        event: "start",
        at: live::ts(at),
        instance: Some(instance.into()),
        attempt: Some(1),
        fence: Some(1),
        detail: detail.map(str::to_owned),
        ..Ev::default()
    });
}

fn metrics_text(c: &Case) -> String {
    let file = c.path("m.prom");
    ok(&c.bg(&[
        "metrics",
        "--store",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "30m",
        "--textfile",
        file.to_str().unwrap(),
    ]));
    std::fs::read_to_string(&file).unwrap()
}

#[test]
fn metrics_exports_each_instances_last_host_clock_skew_and_superseded_runs() {
    let c = Case::sqlite(&manifest(&[("tick", "* * * * *", "1s", "1m", "")]));
    let t = now() - mins(10);
    let s = SignedDuration::from_secs;
    start(
        &c,
        "a1",
        "host-a",
        t,
        Some("store: sqlite; host clock +3600.2 s"),
    );
    start(&c, "b1", "host-b", t, Some("host clock -12.5 s"));
    // host-b's later tick is within tolerance again: its gauge reads 0.
    c.event(&Ev {
        run_id: "b2".into(),
        job: "tick".into(),
        scheduled_at: live::ts(minute(t + s(60))),
        event: "skip",
        at: live::ts(t + s(61)),
        instance: Some("host-b".into()),
        detail: Some("held by host-a (run a2, fence 2)".into()),
        ..Ev::default()
    });
    start(&c, "c1", "host-c", t, Some("store: sqlite"));
    c.event(&Ev {
        run_id: "a1".into(),
        job: "tick".into(),
        scheduled_at: live::ts(minute(t)),
        event: "end",
        at: live::ts(t + s(5)),
        instance: Some("host-a".into()),
        attempt: Some(1),
        status: Some("superseded"),
        detail: Some("superseded by run c1 (fence 2)".into()),
        ..Ev::default()
    });
    let text = metrics_text(&c);
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        line("batchguard_host_clock_skew_seconds{job_name=\"tick\",instance=\"host-a\"}"),
        "3600.2"
    );
    assert_eq!(
        line("batchguard_host_clock_skew_seconds{job_name=\"tick\",instance=\"host-b\"}"),
        "0"
    );
    assert!(
        !text.contains("instance=\"host-c\""),
        "an instance that never said its clock was off has no series:\n{text}"
    );
    assert!(
        text.contains("# TYPE batchguard_host_clock_skew_seconds gauge"),
        "{text}"
    );
    assert_eq!(
        line("batchguard_runs_total{job_name=\"tick\",outcome=\"superseded\"}"),
        "1"
    );
    assert_eq!(
        line("batchguard_runs_total{job_name=\"tick\",outcome=\"succeeded\"}"),
        "0",
        "a superseded end is no success"
    );
}
