//! `batchguard slots` end to end: both forms, DST under two dialects, errors (exit 2).

mod common;

use common::bg;
use predicates::prelude::*;
use std::fs;

fn stdout_of(args: &[&str]) -> String {
    let out = bg().arg("slots").args(args).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).expect("UTF-8 output")
}

const MANIFEST: &str = r#"version: 1
service: billing
deployment:
  platform: kubernetes
jobs:
  - name: nightly-settle
    schedule: "30 1 * * *"
    timezone: America/New_York
    expected_duration: 10m
  - name: paused
    schedule: "0 12 * * *"
    enabled: false
"#;

fn manifest() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("billing.batchguard.yaml");
    fs::write(&path, MANIFEST).expect("write manifest");
    let shown = path.display().to_string();
    (dir, shown)
}

#[test]
fn expression_form_prints_one_instant_per_line() {
    let out = stdout_of(&[
        "--schedule",
        "0 */6 * * *",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ]);
    assert_eq!(
        out,
        "2026-03-01T00:00:00+00:00\n2026-03-01T06:00:00+00:00\n\
         2026-03-01T12:00:00+00:00\n2026-03-01T18:00:00+00:00\n"
    );
}

#[test]
fn from_is_included_and_to_excluded_across_days() {
    let out = stdout_of(&[
        "--schedule",
        "0 0 * * *",
        "--timezone",
        "Europe/Berlin",
        "--from",
        "2026-03-01T00:00:00+01:00",
        "--to",
        "2026-03-04T00:00:00+01:00",
    ]);
    assert_eq!(
        out,
        "2026-03-01T00:00:00+01:00\n2026-03-02T00:00:00+01:00\n2026-03-03T00:00:00+01:00\n"
    );
}

/// New York falls back on 2026-11-01: 01:30 happens at -04:00 and again at -05:00.
const FALL_BACK: [&str; 4] = [
    "--from",
    "2026-11-01T00:00:00-04:00",
    "--to",
    "2026-11-02T00:00:00-05:00",
];

#[test]
fn repeated_hour_runs_twice_under_kubernetes() {
    let mut args = vec![
        "--schedule",
        "30 1 * * *",
        "--dialect",
        "kubernetes",
        "--timezone",
        "America/New_York",
    ];
    args.extend(FALL_BACK);
    assert_eq!(
        stdout_of(&args),
        "2026-11-01T01:30:00-04:00\n2026-11-01T01:30:00-05:00\n"
    );
}

#[test]
fn repeated_hour_runs_once_under_crontab() {
    let mut args = vec![
        "--schedule",
        "30 1 * * *",
        "--dialect",
        "crontab",
        "--timezone",
        "America/New_York",
    ];
    args.extend(FALL_BACK);
    assert_eq!(stdout_of(&args), "2026-11-01T01:30:00-04:00\n");
}

#[test]
fn manifest_form_uses_the_jobs_dialect_and_zone() {
    let (_dir, path) = manifest();
    let mut args = vec!["--manifest", path.as_str(), "--job", "nightly-settle"];
    args.extend(FALL_BACK);
    // The manifest's platform is kubernetes: both passes of 01:30.
    assert_eq!(
        stdout_of(&args),
        "2026-11-01T01:30:00-04:00\n2026-11-01T01:30:00-05:00\n"
    );
}

#[test]
fn disabled_job_prints_its_slots_with_a_note() {
    let (_dir, path) = manifest();
    bg().args(["slots", "--manifest", &path, "--job", "paused"])
        .args([
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-02T00:00:00Z",
        ])
        .assert()
        .success()
        .stdout("2026-03-01T12:00:00+00:00\n")
        .stderr(predicate::str::contains("disabled"));
}

#[test]
fn unknown_job_suggests_the_closest() {
    let (_dir, path) = manifest();
    bg().args(["slots", "--manifest", &path, "--job", "nightly-setle"])
        .args([
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-02T00:00:00Z",
        ])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("no job named `nightly-setle`"))
        .stderr(predicate::str::contains("did you mean `nightly-settle`?"));
}

#[test]
fn broken_or_missing_manifest_is_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.batchguard.yaml");
    fs::write(&bad, "version: 1\njobs: [\n").expect("write");
    for path in [bad, dir.path().join("missing.yaml")] {
        bg().arg("slots")
            .arg("--manifest")
            .arg(&path)
            .args(["--job", "x", "--from", "2026-03-01T00:00:00Z"])
            .args(["--to", "2026-03-02T00:00:00Z"])
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("batchguard lint")
                    .or(predicate::str::contains("cannot read")),
            );
    }
}

#[test]
fn bad_expression_marks_the_field() {
    bg().args([
        "slots",
        "--schedule",
        "0 6 * * 7",
        "--dialect",
        "kubernetes",
    ])
    .args([
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ])
    .assert()
    .code(2)
    .stdout("")
    .stderr(predicate::str::contains("7 is out of range 0-6"))
    .stderr(predicate::str::contains("0 6 * * 7"))
    .stderr(predicate::str::contains("here"));
}

#[test]
fn unsupported_feature_names_the_dialects_that_accept_it() {
    bg().args([
        "slots",
        "--schedule",
        "0 0 L * *",
        "--dialect",
        "kubernetes",
    ])
    .args([
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ])
    .assert()
    .code(2)
    .stderr(predicate::str::contains(
        "accepted by: node-cron, pm2, croner",
    ));
}

#[test]
fn unknown_zone_suggests_the_closest() {
    bg().args([
        "slots",
        "--schedule",
        "0 0 * * *",
        "--timezone",
        "Europe/Berln",
    ])
    .args([
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ])
    .assert()
    .code(2)
    .stderr(predicate::str::contains("did you mean `Europe/Berlin`?"));
}

#[test]
fn bad_arguments_are_exit_2() {
    let window = [
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z",
    ];
    // Neither form.
    bg().arg("slots").args(window).assert().code(2);
    // Both forms.
    bg().args([
        "slots",
        "--schedule",
        "* * * * *",
        "--manifest",
        "m.yaml",
        "--job",
        "j",
    ])
    .args(window)
    .assert()
    .code(2);
    // No window, a reversed window, an instant without an offset, an unknown dialect.
    bg().args(["slots", "--schedule", "* * * * *"])
        .assert()
        .code(2);
    bg().args(["slots", "--schedule", "* * * * *"])
        .args([
            "--from",
            "2026-03-02T00:00:00Z",
            "--to",
            "2026-03-01T00:00:00Z",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not before"));
    bg().args(["slots", "--schedule", "* * * * *"])
        .args([
            "--from",
            "2026-03-01T00:00:00",
            "--to",
            "2026-03-02T00:00:00Z",
        ])
        .assert()
        .code(2);
    bg().args(["slots", "--schedule", "* * * * *", "--dialect", "quartz"])
        .args(window)
        .assert()
        .code(2);
}

#[test]
fn a_month_of_a_minutely_schedule_streams_every_slot() {
    let out = stdout_of(&[
        "--schedule",
        "* * * * *",
        "--timezone",
        "America/New_York",
        "--from",
        "2026-03-01T00:00:00-05:00",
        "--to",
        "2026-04-01T00:00:00-04:00",
    ]);
    // 31 days of 1,440 minutes, less the hour that does not exist on 2026-03-08.
    assert_eq!(out.lines().count(), 31 * 1440 - 60);
    assert_eq!(out.lines().next(), Some("2026-03-01T00:00:00-05:00"));
    assert_eq!(out.lines().last(), Some("2026-03-31T23:59:00-04:00"));
}
