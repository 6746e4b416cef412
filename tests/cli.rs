//! The binary end to end: formats, --fail-on, exit codes 0/1/2, several paths, missing paths.

mod common;

use common::{NOW, bg};
use predicates::prelude::*;
use std::fs;

fn clean_job(name: &str) -> String {
    format!(
        r##"version: 1
service: billing
jobs:
  - name: {name}
    schedule: "0 * * * *"
    expected_duration: 10m
    command: ["node", "jobs/{name}.js"]
    lock:
      key: "{{job}}:{{scheduled_at}}"
      ttl: 25m
      store: postgres
    idempotency:
      strategy: processed_at
      key: payment_id
    retry:
      max_attempts: 3
      backoff: exponential
      initial_delay: 30s
      max_delay: 5m
      retryable: [ETIMEDOUT]
      fatal: [VALIDATION_ERROR]
      on_unknown: dead_letter
    dead_letter:
      target: {name}-dlq
    alerts:
      max_latency: 15m
      channel: "#billing-oncall"
    snapshot:
      path: "snapshots/{name}/{{scheduled_at_compact}}.jsonl"
      format: jsonl
      key: payment_id
      retention: 120d
    runbook:
      owner: billing-team
      on_call: "#billing-oncall"
      emergency_stop: "Set ENABLED=false"
      resume: "Re-enable and audit the gap"
      communication: "#billing-incidents"
"##
    )
}

/// Lints `dir` after writing its `batchguard.toml`.
fn lint_with_config(dir: &tempfile::TempDir, toml: &str) -> assert_cmd::assert::Assert {
    fs::write(dir.path().join("batchguard.toml"), toml).unwrap();
    bg().args(["lint", "--now", NOW]).arg(dir.path()).assert()
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn clean_manifest_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.batchguard.yaml"), clean_job("settle")).unwrap();
    bg().args(["lint", "--now", NOW])
        .arg(dir.path())
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "1 file, 1 job: 0 errors, 0 warnings",
        ));
}

#[test]
fn findings_exit_1_and_every_format_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let bad = clean_job("settle").replace("ttl: 25m", "ttl: 15m");
    let path = dir.path().join("a.batchguard.yaml");
    fs::write(&path, bad).unwrap();

    bg().args(["lint", "--now", NOW])
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("BG202 lock-ttl-too-short").and(
            predicate::str::contains("lock.ttl 15m is less than 2 x expected_duration 10m = 20m"),
        ));

    let out = bg()
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(v["version"], 1);
    assert_eq!(v["tool"], "batchguard");
    let f = &v["findings"][0];
    assert_eq!(f["code"], "BG202");
    assert_eq!(f["name"], "lock-ttl-too-short");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["job"], "settle");
    assert_eq!(f["service"], "billing");
    assert_eq!(
        (f["line"].as_u64(), f["column"].as_u64()),
        (Some(10), Some(12))
    );
    assert_eq!(
        (f["end_line"].as_u64(), f["end_column"].as_u64()),
        (Some(10), Some(15))
    );
    assert_eq!(v["summary"]["errors"], 1);
    assert_eq!(v["summary"]["files"], 1);
    assert_eq!(v["summary"]["jobs"], 1);

    let out = bg()
        .args(["lint", "--format", "sarif", "--now", NOW])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let s = json_of(&out);
    assert_eq!(s["version"], "2.1.0");
    let run = &s["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|r| r["id"] == "BG202" && r["name"] == "lock-ttl-too-short")
    );
    let r = &run["results"][0];
    assert_eq!(r["ruleId"], "BG202");
    assert_eq!(r["level"], "error");
    let region = &r["locations"][0]["physicalLocation"]["region"];
    assert_eq!(
        (region["startLine"].as_u64(), region["startColumn"].as_u64()),
        (Some(10), Some(12))
    );

    bg().args(["lint", "--format", "github", "--now", NOW]).arg(&path).assert().code(1).stdout(
        predicate::str::is_match(
            r"(?m)^::error file=.*a\.batchguard\.yaml,line=10,col=12,endLine=10,endColumn=15,title=BG202 lock-ttl-too-short::job `settle`",
        )
        .unwrap(),
    );
}

#[test]
fn fail_on_warning_turns_warnings_into_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    // A reasoned suppression that suppresses nothing: BG902, a warning.
    let text = clean_job("settle").replace(
        "ttl: 25m",
        "ttl: 25m # batchguard: allow BG202 -- month end runs long",
    );
    let path = dir.path().join("a.batchguard.yaml");
    fs::write(&path, text).unwrap();
    bg().args(["lint", "--now", NOW])
        .arg(&path)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("BG902"));
    bg().args(["lint", "--fail-on", "warning", "--now", NOW])
        .arg(&path)
        .assert()
        .code(1);
}

#[test]
fn suppression_with_reason_is_counted_not_reported() {
    let dir = tempfile::tempdir().unwrap();
    let text = clean_job("settle").replace(
        "ttl: 25m",
        "ttl: 15m # batchguard: allow BG202 -- measured p99 is 6m",
    );
    let path = dir.path().join("a.batchguard.yaml");
    fs::write(&path, text).unwrap();
    let out = bg()
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out);
    assert_eq!(v["summary"]["suppressed"], 1);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["code"] != "BG202")
    );
    let out = bg()
        .args(["lint", "--format", "sarif", "--now", NOW])
        .arg(&path)
        .output()
        .unwrap();
    let s = json_of(&out);
    let results = s["runs"][0]["results"].as_array().unwrap();
    let r = results
        .iter()
        .find(|r| r["ruleId"] == "BG202")
        .expect("suppressed result kept in SARIF");
    assert_eq!(r["suppressions"][0]["justification"], "measured p99 is 6m");
}

#[test]
fn job_level_suppression_above_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let text = clean_job("settle").replace("ttl: 25m", "ttl: 15m").replace(
        "  - name: settle",
        "  # batchguard: allow BG202 -- this job is idempotent and cheap\n  - name: settle",
    );
    let path = dir.path().join("a.batchguard.yaml");
    fs::write(&path, text).unwrap();
    let v = json_of(
        &bg()
            .args(["lint", "--format", "json", "--now", NOW])
            .arg(&path)
            .output()
            .unwrap(),
    );
    assert_eq!(v["summary"]["suppressed"], 1, "{v}");
    assert_eq!(v["findings"].as_array().unwrap().len(), 0, "{v}");
}

#[test]
fn suppression_without_reason_suppresses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = clean_job("settle").replace("ttl: 25m", "ttl: 15m # batchguard: allow BG202");
    let path = dir.path().join("a.batchguard.yaml");
    fs::write(&path, text).unwrap();
    let v = json_of(
        &bg()
            .args(["lint", "--format", "json", "--now", NOW])
            .arg(&path)
            .output()
            .unwrap(),
    );
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"BG202") && codes.contains(&"BG901") && !codes.contains(&"BG902"),
        "{codes:?}"
    );
}

#[test]
fn several_paths_and_broken_files_are_all_reported() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.batchguard.yaml");
    let b = dir.path().join("b.batchguard.yaml");
    fs::write(&a, clean_job("one")).unwrap();
    fs::write(&b, "version: 1\njobs: [\n").unwrap();
    let sub = dir.path().join("more");
    fs::create_dir(&sub).unwrap();
    fs::write(
        sub.join("c.batchguard.yaml"),
        clean_job("two").replace("ttl: 25m", "ttl: 5m"),
    )
    .unwrap();
    // Not a manifest: ignored when walking a directory.
    fs::write(sub.join("values.yaml"), "replicas: 3\n").unwrap();
    let out = bg()
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(&a)
        .arg(&b)
        .arg(&sub)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(v["summary"]["files"], 3);
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"BG001"), "{codes:?}");
    assert!(codes.contains(&"BG202"), "{codes:?}");
}

#[test]
fn missing_path_exits_2_but_lints_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.batchguard.yaml");
    fs::write(&a, clean_job("one").replace("ttl: 25m", "ttl: 5m")).unwrap();
    bg().args(["lint", "--now", NOW])
        .arg(&a)
        .arg(dir.path().join("nope"))
        .assert()
        .code(2)
        .stdout(predicate::str::contains("BG202"))
        .stderr(predicate::str::contains("nope").and(predicate::str::contains("no such file")));
}

#[test]
fn bad_arguments_exit_2() {
    bg().args(["lint", "--format", "xml"]).assert().code(2);
    bg().args(["lint", "--now", "yesterday"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("RFC 3339"));
    bg().args(["explain", "BG999"]).assert().code(2);
    bg().args(["explain", "lock-ttl-too-shrt"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("lock-ttl-too-short"));
    bg().arg("frobnicate").assert().code(2);
}

#[test]
fn invalid_config_exits_2_with_location() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.batchguard.yaml"), clean_job("one")).unwrap();
    lint_with_config(&dir, "[rules]\nBG202 = \"loud\"\n")
        .code(2)
        .stderr(predicate::str::contains("batchguard.toml"));
    lint_with_config(&dir, "[rules]\nBG999 = \"off\"\n")
        .code(2)
        .stderr(predicate::str::contains("BG999"));
}

#[test]
fn config_changes_severity_and_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("a.batchguard.yaml"),
        clean_job("one").replace("ttl: 25m", "ttl: 15m"),
    )
    .unwrap();
    lint_with_config(&dir, "[rules]\nlock-ttl-too-short = \"warning\"\n")
        .code(0)
        .stdout(predicate::str::contains("BG202"));
    lint_with_config(&dir, "[thresholds]\nlock_ttl_min_factor = 1.5\n")
        .code(0)
        .stdout(predicate::str::contains("BG202").not());
    lint_with_config(&dir, "[rules]\nBG202 = \"off\"\n")
        .code(0)
        .stdout(predicate::str::contains("BG202").not());
}

#[test]
fn rules_explain_schema_completions() {
    bg().arg("rules")
        .assert()
        .code(0)
        .stdout(predicate::str::contains("BG202  lock-ttl-too-short"));
    bg().args(["explain", "BG202"]).assert().code(0).stdout(
        predicate::str::contains("## Why it matters").and(predicate::str::contains("Use instead")),
    );
    bg().args(["explain", "lock-ttl-too-short"])
        .assert()
        .code(0);
    bg().args(["schema", "manifest"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("draft-07"));
    bg().args(["schema", "config"]).assert().code(0);
    for shell in ["bash", "zsh", "fish", "powershell"] {
        bg().args(["completions", shell])
            .assert()
            .code(0)
            .stdout(predicate::str::contains("batchguard"));
    }
}

#[test]
fn secrets_never_reach_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let text = clean_job("one").replace(
        "command: [\"node\", \"jobs/one.js\"]",
        "command: [\"node\", \"jobs/one.js\", \"postgres://app:Xq9vLm2Tz@db/x\"]",
    );
    let path = dir.path().join("a.batchguard.yaml");
    fs::write(&path, text).unwrap();
    for format in ["pretty", "json", "sarif", "github"] {
        let out = bg()
            .args(["lint", "--format", format, "--now", NOW])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}");
        let all = String::from_utf8_lossy(&out.stdout);
        assert!(all.contains("BG801"), "{format}");
        assert!(!all.contains("Xq9vLm2Tz"), "{format} leaks the secret");
    }
}

#[test]
fn demo_lints_with_its_deliberate_mistakes() {
    let out = bg()
        .args(["lint", "fixtures/demo", "--format", "json", "--now", NOW])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"BG202") && codes.contains(&"BG801"),
        "{codes:?}"
    );
}
