//! Schedule rules on registrations (SPEC 3.5): `@every` (BG107), a `CRON_TZ=` prefix
//! (BG108, evaluated in its zone) and PM2's croner (`pm2` dialect), end to end.

mod common;

use common::{NOW, bg};
use std::fs;
use std::path::Path;

fn lint(dir: &Path) -> serde_json::Value {
    let out = bg()
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(dir)
        .output()
        .expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn codes(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["code"].as_str().map(str::to_owned))
                .filter(|c| c.starts_with("BG1"))
                .collect()
        })
        .unwrap_or_default()
}

fn message(v: &serde_json::Value, code: &str) -> String {
    v["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["code"] == code))
        .and_then(|f| f["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn cronjob(schedule: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: rates\nspec:\n  schedule: \"{schedule}\"\n  concurrencyPolicy: Forbid\n  startingDeadlineSeconds: 300\n  jobTemplate:\n    spec:\n      backoffLimit: 2\n      template:\n        spec:\n          containers:\n            - name: rates\n              image: rates:1\n              command: [\"flock\", \"-n\", \"/tmp/l\", \"node\", \"rates.js\"]\n"
    )
}

#[test]
fn cronjob_with_every_is_bg107_not_bg101() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(dir.path().join("cronjob.yaml"), cronjob("@every 1h")).expect("write");
    let v = lint(dir.path());
    assert_eq!(codes(&v), ["BG107"], "{v}");
    assert!(message(&v, "BG107").contains("not from the clock"), "{v}");
}

#[test]
fn cronjob_with_cron_tz_is_bg108_not_bg106() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join("cronjob.yaml"),
        cronjob("CRON_TZ=Asia/Seoul 0 2 * * *"),
    )
    .expect("write");
    let v = lint(dir.path());
    assert_eq!(codes(&v), ["BG108"], "{v}");
    assert!(message(&v, "BG108").contains("Asia/Seoul"), "{v}");
}

#[test]
fn cron_tz_slots_are_in_the_prefix_zone() {
    let out = bg()
        .args([
            "slots",
            "--schedule",
            "CRON_TZ=Asia/Seoul 0 2 * * *",
            "--dialect",
            "kubernetes",
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-03T00:00:00Z",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2026-03-02T02:00:00+09:00\n2026-03-03T02:00:00+09:00\n"
    );
}

#[test]
fn every_has_no_slots_to_print() {
    let out = bg()
        .args([
            "slots",
            "--schedule",
            "@every 1h",
            "--dialect",
            "kubernetes",
        ])
        .args([
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-02T00:00:00Z",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not from the clock"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pm2_daily_never_fires_so_it_is_bg101() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join("ecosystem.config.json"),
        r#"{"apps": [{"name": "report", "script": "flock", "args": "-n /tmp/r node report.js", "cron_restart": "@daily", "autorestart": false}]}"#,
    )
    .expect("write");
    let v = lint(dir.path());
    assert_eq!(codes(&v), ["BG101"], "{v}");
    let m = message(&v, "BG101");
    assert!(
        m.contains("refuses `@daily`") && m.contains("`0 0 * * *`"),
        "{m}"
    );
}

#[test]
fn slots_accepts_the_pm2_dialect() {
    let out = bg()
        .args(["slots", "--schedule", "0 0 5/10 * *", "--dialect", "pm2"])
        .args([
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-31T00:00:00Z",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // croner 4 starts `5/10` at array index 5: the 6th, 16th and 26th.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2026-03-06T00:00:00+00:00\n2026-03-16T00:00:00+00:00\n2026-03-26T00:00:00+00:00\n"
    );
}
