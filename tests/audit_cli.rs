//! `batchguard audit` end to end: formats, exit codes, bad arguments.

use assert_cmd::Command;
use predicates::prelude::*;

fn audit() -> Command {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "fixtures/demo/events.csv",
        "--outputs",
        "fixtures/demo/outputs.csv",
        "--manifest",
        "fixtures/demo/billing.batchguard.yaml",
        "--from",
        "2026-03-01T00:00:00+09:00",
        "--to",
        "2026-03-02T00:00:00+09:00",
    ]);
    c
}

#[test]
fn pretty_groups_findings_by_job_and_exits_1() {
    audit()
        .assert()
        .code(1)
        .stdout(predicate::str::contains("settle-payments (6 findings)"))
        .stdout(predicate::str::contains("AU101 missed-run"))
        .stdout(predicate::str::contains("1 rejected"));
}

#[test]
fn json_has_the_spec_8_shape() {
    let out = audit().args(["--format", "json"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["version"], 1);
    assert_eq!(v["tool"], "batchguard");
    assert_eq!(v["window"]["from"], "2026-02-28T15:00:00Z");
    assert_eq!(v["input"]["rows_read"], 120);
    assert_eq!(v["input"]["rows_rejected"], 1);
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    for c in [
        "AU101", "AU102", "AU103", "AU106", "AU107", "AU111", "AU201",
    ] {
        assert!(codes.contains(&c), "{c} in {codes:?}");
    }
    let f = &v["findings"][0];
    for k in [
        "code",
        "name",
        "severity",
        "message",
        "job",
        "scheduled_at",
        "run_ids",
    ] {
        assert!(f.get(k).is_some(), "finding lacks {k}: {f}");
    }
    let job = &v["jobs"][2];
    assert_eq!(job["job"], "settle-payments");
    for k in [
        "expected",
        "started",
        "succeeded",
        "missed",
        "failed",
        "duplicated",
        "lost",
        "skipped",
        "lock_contention_ratio",
        "first_attempt_success_rate",
        "success_after_retry_rate",
        "dead_lettered",
        "manual_recoveries",
        "duration_p50_s",
        "duration_p95_s",
        "duration_p99_s",
        "duration_max_s",
        "latency_p50_s",
        "latency_p95_s",
        "latency_p99_s",
        "latency_max_s",
        "outputs",
        "duplicate_outputs",
        "missing_outputs",
    ] {
        assert!(job.get(k).is_some(), "job metrics lack {k}");
        assert!(v["totals"].get(k).is_some(), "totals lack {k}");
    }
    assert_eq!(job["expected"], 24);
    assert_eq!(job["missed"], 1);
}

#[test]
fn fail_on_warning_and_error() {
    // Only the latency breach (a warning) in a window around 20:00 KST, in the demo ledger
    // without its malformed row (a rejected row is AU001, an error).
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = dir.path().join("events.csv");
    let demo = std::fs::read_to_string("fixtures/demo/events.csv").expect("demo ledger");
    let kept: Vec<&str> = demo.lines().filter(|l| !l.contains("yesterday")).collect();
    std::fs::write(&ledger, kept.join("\n") + "\n").expect("write");
    let ledger = ledger.display().to_string();
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    let args = [
        "audit",
        "--ledger",
        ledger.as_str(),
        "--manifest",
        "fixtures/demo/billing.batchguard.yaml",
        "--from",
        "2026-03-01T20:00:00+09:00",
        "--to",
        "2026-03-01T21:00:00+09:00",
    ];
    c.args(args).assert().code(0);
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args(args)
        .args(["--fail-on", "warning"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("AU106"));
}

#[test]
fn markdown_csv_and_html_formats() {
    audit()
        .args(["--format", "markdown"])
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with("# Batch audit"))
        .stdout(predicate::str::contains("### `settle-payments`"));
    let out = audit().args(["--format", "csv"]).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("job,expected,started,succeeded,missed"));
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[4].starts_with("TOTAL,"));
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("audit.html");
    audit()
        .args(["--format", "html", "--out"])
        .arg(&file)
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty());
    let html = std::fs::read_to_string(&file).expect("html written");
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.matches("<svg").count() >= 2);
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
}

#[test]
fn without_manifest_says_what_was_skipped() {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "fixtures/demo/events.csv",
        "--outputs",
        "fixtures/demo/outputs.csv",
        "--from",
        "2026-03-01T00:00:00+09:00",
        "--to",
        "2026-03-02T00:00:00+09:00",
    ])
    .assert()
    .code(1)
    .stdout(predicate::str::contains("skipped AU101"))
    .stdout(predicate::str::contains("no --manifest"))
    .stdout(predicate::str::contains("AU102"));
}

#[test]
fn unreadable_sources_and_bad_arguments_exit_2() {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "nope/events.csv",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ])
    .assert()
    .code(2)
    .stderr(predicate::str::contains("nope/events.csv"));
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "fixtures/demo/events.csv",
        "--from",
        "2026-03-02T00:00:00Z",
        "--to",
        "2026-03-01T00:00:00Z",
    ])
    .assert()
    .code(2);
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "fixtures/demo/events.csv",
        "--from",
        "yesterday",
        "--to",
        "2026-03-01T00:00:00Z",
    ])
    .assert()
    .code(2);
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args([
        "audit",
        "--ledger",
        "postgres://u:secret@127.0.0.1:1/x",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ])
    .assert()
    .code(2)
    .stderr(predicate::str::contains("secret").not());
}

#[test]
fn rules_and_explain_list_audit_checks() {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.arg("rules")
        .assert()
        .success()
        .stdout(predicate::str::contains("AU204"));
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args(["explain", "duplicate-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("AU102"));
}

/// `run --ledger l.jsonl` creates `l.outputs.jsonl` at the first output a run reports:
/// before any, auditing with `--outputs l.outputs.jsonl` reads zero outputs (the output
/// checks run and find nothing); another missing file is still refused (exit 2).
#[test]
fn the_outputs_file_run_has_not_created_yet_means_zero_outputs() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        d.path().join("m.batchguard.yaml"),
        "version: 1\nservice: svc\njobs:\n  - name: j\n    schedule: \"0 * * * *\"\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 10m\n",
    )
    .expect("manifest");
    let bg = || {
        let mut c = Command::cargo_bin("batchguard").expect("binary");
        c.current_dir(d.path());
        c
    };
    bg().args([
        "run",
        "--manifest",
        "m.batchguard.yaml",
        "--job",
        "j",
        "--store",
        "sqlite:store.db",
        "--ledger",
        "l.jsonl",
        "--scheduled-at",
        "2026-03-01T01:00:00Z",
        "--",
        "true",
    ])
    .assert()
    .code(0);
    assert!(d.path().join("l.jsonl").is_file());
    assert!(!d.path().join("l.outputs.jsonl").exists());
    let audit = |outputs: &str| {
        bg().args([
            "audit",
            "--ledger",
            "l.jsonl",
            "--outputs",
            outputs,
            "--from",
            "2026-03-01T01:00:00Z",
            "--to",
            "2026-03-01T02:00:00Z",
            "--format",
            "json",
        ])
        .output()
        .expect("runs")
    };
    let out = audit("l.outputs.jsonl");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["input"]["outputs"], 0);
    let skipped = v["skipped_checks"].to_string();
    assert!(!skipped.contains("AU201"), "AU201 runs: {skipped}");
    let out = audit("l.output.jsonl");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("l.output.jsonl: No such file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
