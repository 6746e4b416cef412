//! First sight (SPEC 7.1 item 21): a job's expected slots count from its `since:` or,
//! without one, from its first event in the ledger. Slots before are one AU112 warning
//! (and a note for `watch`), never an AU101 each; a job with no event at all is missed at
//! every due slot (item 26). Held for `audit` (fixed
//! windows and `--since`), `watch` (the deploy step of docs/commands/watch.md, `--for` with
//! `--exit-on-alert`) and `metrics`, and `since:` values checked by lint.

#[path = "common/live.rs"]
mod live;

use live::{Case, bin, manifest, mins, minute, now, ok};
use std::path::Path;
use std::process::{Command, Output, Stdio};

const FROM: &str = "2026-03-01T00:00:00Z";
const TO: &str = "2026-03-01T06:00:00Z";

const HEADER: &str =
    "run_id,job,scheduled_at,event,at,instance,attempt,status,error_code,snapshot_digest,trigger\n";

/// An hourly job, `extra` lines added to it.
fn hourly(extra: &str) -> String {
    format!(
        "version: 1\nservice: svc\njobs:\n  - name: hourly\n    schedule: \"0 * * * *\"\n    timezone: UTC\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 15m\n{extra}"
    )
}

/// `hours` of hourly runs on 2026-03-01, each started and ended cleanly.
fn runs(hours: &[u32]) -> String {
    let mut s = HEADER.to_owned();
    for h in hours {
        s.push_str(&format!(
            "r{h},hourly,2026-03-01T0{h}:00:00Z,start,2026-03-01T0{h}:00:01Z,pod-a,1,,,,schedule\n\
             r{h},hourly,2026-03-01T0{h}:00:00Z,end,2026-03-01T0{h}:02:00Z,pod-a,1,success,,,schedule\n"
        ));
    }
    s
}

/// `audit` of `m.batchguard.yaml` over `events.csv` in `dir`, `[FROM, TO)`.
fn audit(dir: &Path, extra: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .args([
            "audit",
            "--ledger",
            "events.csv",
            "--manifest",
            "m.batchguard.yaml",
            "--from",
            FROM,
            "--to",
            TO,
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn audit_json(dir: &Path, manifest: &str, ledger: &str) -> (serde_json::Value, Output) {
    std::fs::write(dir.join("m.batchguard.yaml"), manifest).unwrap();
    std::fs::write(dir.join("events.csv"), ledger).unwrap();
    let o = audit(dir, &["--format", "json"]);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "audit prints JSON ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (v, o)
}

fn missed(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "AU101")
        .map(|f| f["scheduled_at"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn audit_counts_from_the_first_run_and_says_how_many_slots_it_did_not_count() {
    let d = tempfile::tempdir().unwrap();
    // First run at 03:00; 04:00 then went missing.
    let (v, o) = audit_json(d.path(), &hourly(""), &runs(&[3, 5]));
    assert_eq!(o.status.code(), Some(1), "04:00 is missed: {v}");
    assert_eq!(missed(&v), ["2026-03-01T04:00:00Z"], "{v}");
    assert_eq!(v["jobs"][0]["expected"], 3, "03:00, 04:00, 05:00: {v}");
    assert_eq!(v["jobs"][0]["missed"], 1);
    let notes = v["notes"].as_array().expect("notes");
    assert_eq!(notes.len(), 1, "{v}");
    assert_eq!(notes[0]["job"], "hourly");
    assert_eq!(notes[0]["reason"], "before_first_run");
    assert_eq!(notes[0]["slots"], 3);
    assert_eq!(notes[0]["counted_from"], "2026-03-01T03:00:00Z");

    // The pretty report says it once, with what to do.
    let o = audit(d.path(), &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "3 slots before the first run (2026-03-01T03:00:00+00:00) are not counted: set `since:`"
        ),
        "{text}"
    );
    assert_eq!(text.matches("AU101").count(), 1, "{text}");
}

#[test]
fn audit_counts_from_since_when_the_manifest_gives_it() {
    let d = tempfile::tempdir().unwrap();
    let (v, o) = audit_json(
        d.path(),
        &hourly("    since: 2026-03-01T01:30:00Z\n"),
        &runs(&[3, 5]),
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        missed(&v),
        ["2026-03-01T02:00:00Z", "2026-03-01T04:00:00Z"],
        "slots from since on count, those before do not: {v}"
    );
    assert_eq!(v["jobs"][0]["expected"], 4);
    assert!(v.get("notes").is_none(), "nothing to note: {v}");
}

#[test]
fn a_job_that_never_ran_is_missed_at_every_slot_or_from_its_since() {
    let d = tempfile::tempdir().unwrap();
    // Without since (SPEC 7.1 item 26): every due slot of the window is an AU101.
    let (v, o) = audit_json(d.path(), &hourly(""), HEADER);
    assert_eq!(o.status.code(), Some(1), "{v}");
    assert_eq!(v["jobs"][0]["job"], "hourly");
    assert_eq!(v["jobs"][0]["expected"], 6);
    assert_eq!(missed(&v).len(), 6, "{v}");
    assert!(v.get("notes").is_none(), "{v}");
    // With since: every slot from it is missed.
    let (v, o) = audit_json(
        d.path(),
        &hourly("    since: \"2026-03-01T04:00:00+00:00\"\n"),
        HEADER,
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        missed(&v),
        ["2026-03-01T04:00:00Z", "2026-03-01T05:00:00Z"],
        "{v}"
    );
}

/// A job every minute whose first-ever run is now, by `batchguard run` on a SQLite store.
fn deployed_now(extra: &str) -> Case {
    let c = Case::sqlite(&manifest(&[("tick", "* * * * *", "1s", "1m", extra)]));
    let slot = live::ts(minute(now()));
    ok(&c.bg(&[
        "run",
        "--manifest",
        "m.batchguard.yaml",
        "--job",
        "tick",
        "--store",
        &c.url(),
        "--scheduled-at",
        &slot,
        "--",
        "true",
    ]));
    c
}

/// The deploy step of docs/commands/watch.md, right after the job's first-ever run.
fn deploy_step(c: &Case) -> Output {
    c.bg(&[
        "watch",
        "--store",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "30m",
        "--for",
        "1s",
        "--exit-on-alert",
        "--format",
        "json",
    ])
}

fn first_line(o: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.lines().next().expect("a JSON line")).expect("JSON")
}

#[test]
fn the_readme_deploy_step_passes_right_after_the_first_run() {
    let c = deployed_now("");
    let o = deploy_step(&c);
    let v = first_line(&o);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(v["alert_counts"]["total"], 0, "{v}");
    assert_eq!(v["jobs"][0]["missed"], 0, "{v}");
    assert_eq!(v["notes"][0]["reason"], "before_first_run", "{v}");
    assert!(
        v["notes"][0]["slots"].as_u64().unwrap() >= 27,
        "the slots of the half hour before: {v}"
    );

    // A job deployed half an hour ago that only ran now did miss its slots.
    let since = live::ts(now() - mins(30));
    let c = deployed_now(&format!("    since: {since}\n"));
    let o = deploy_step(&c);
    let v = first_line(&o);
    assert_eq!(o.status.code(), Some(1), "{v}");
    assert_eq!(v["alerts"][0]["kind"], "missed", "{v}");
    assert!(v["jobs"][0]["missed"].as_u64().unwrap() >= 27, "{v}");
}

#[test]
fn audit_since_and_metrics_count_from_the_first_run_too() {
    let c = deployed_now("");
    let o = c.bg(&[
        "audit",
        "--ledger",
        &c.url(),
        "--manifest",
        "m.batchguard.yaml",
        "--since",
        "30m",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(v["notes"][0]["reason"], "before_first_run", "{v}");

    let gauge = |c: &Case, name: &str| -> f64 {
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
        let text = std::fs::read_to_string(&file).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{job_name=\"tick\"}}")))
            .unwrap_or_else(|| panic!("{name} for tick in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(gauge(&c, "batchguard_missed_slots"), 0.0);
    assert!(gauge(&c, "batchguard_uncounted_slots") >= 27.0);
    let since = live::ts(now() - mins(30));
    let c = deployed_now(&format!("    since: {since}\n"));
    assert!(gauge(&c, "batchguard_missed_slots") >= 27.0);
    assert_eq!(gauge(&c, "batchguard_uncounted_slots"), 0.0);
}

fn lint(manifest: &str) -> Output {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("m.batchguard.yaml"), manifest).unwrap();
    Command::new(bin())
        .current_dir(d.path())
        .env("NO_COLOR", "1")
        .args(["lint", "m.batchguard.yaml", "--format", "json"])
        .output()
        .unwrap()
}

#[test]
fn lint_reports_a_bad_since_as_bg004_at_its_value() {
    for (value, says) in [
        ("2026-03-01", "has no UTC offset"),
        ("\"2026-03-01T09:00:00\"", "has no UTC offset"),
        ("yesterday", "is not an RFC 3339 time"),
        ("\"2026-03-01 09:00:00Z\"", "is not an RFC 3339 time"),
        ("20260301", "expected an RFC 3339 time"),
    ] {
        let m = hourly(&format!("    since: {value}\n"));
        let o = lint(&m);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        let f = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "BG004")
            .unwrap_or_else(|| panic!("BG004 for {value}: {v}"));
        assert!(
            f["message"].as_str().unwrap().contains(says),
            "{value}: {f}"
        );
        let line = m.lines().position(|l| l.contains("since:")).unwrap() + 1;
        assert_eq!(f["line"], line, "{value}: {f}");
        assert_eq!(f["column"], 12, "the value, after `    since: `: {f}");
    }
    for good in ["2026-03-01T09:00:00Z", "\"2026-03-01T09:00:00.5+09:00\""] {
        let o = lint(&hourly(&format!("    since: {good}\n")));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!text.contains("BG004"), "{good}: {text}");
    }
}
