//! `batchguard audit` never passes silently, reads ledgers as teams export them, applies
//! `batchguard.toml`, and shows one clock per report.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const FROM: &str = "2026-03-01T00:00:00Z";
const TO: &str = "2026-03-01T03:00:00Z";

/// An hourly UTC job, `extra` appended to its item.
fn manifest(extra: &str) -> String {
    format!(
        "version: 1\nservice: svc\njobs:\n  - name: hourly\n    schedule: \"0 * * * *\"\n    timezone: UTC\n    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: 15m\n    alerts:\n      max_latency: 10m\n{extra}"
    )
}

const HEADER: &str =
    "run_id,job,scheduled_at,event,at,instance,attempt,status,error_code,snapshot_digest,trigger\n";

/// Every slot of [FROM, TO) started and ended successfully, `end_after` minutes late.
fn clean_events(end_after: u32) -> String {
    let mut s = HEADER.to_owned();
    for h in 0..3 {
        s.push_str(&format!(
            "r{h},hourly,2026-03-01T0{h}:00:00Z,start,2026-03-01T0{h}:00:01Z,pod-a,1,,,,schedule\n"
        ));
        s.push_str(&format!(
            "r{h},hourly,2026-03-01T0{h}:00:00Z,end,2026-03-01T0{h}:{end_after:02}:00Z,pod-a,1,success,,,schedule\n"
        ));
    }
    s
}

struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Self {
        Dir {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, text).expect("write");
        p
    }
}

fn audit(ledger: &Path, manifest: &Path) -> Command {
    let mut c = Command::cargo_bin("batchguard").expect("binary");
    c.args(["audit", "--ledger"])
        .arg(ledger)
        .arg("--manifest")
        .arg(manifest)
        .args(["--from", FROM, "--to", TO]);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_clean_ledger_is_clean() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn a_typo_in_a_zone_is_exit_2_with_lints_diagnostic() {
    let d = Dir::new();
    let m = d.write(
        "svc.batchguard.yaml",
        &manifest("").replace("timezone: UTC", "timezone: Asia/Soeul"),
    );
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("BG105 unknown-timezone"), "{err}");
    assert!(err.contains("did you mean `Asia/Seoul`?"), "{err}");
    assert!(err.contains("svc.batchguard.yaml:6:15"), "{err}");
    assert!(err.contains("cannot evaluate 1 manifest job"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_invalid_cron_is_exit_2_with_the_field_underlined() {
    let d = Dir::new();
    let m = d.write(
        "svc.batchguard.yaml",
        &manifest("").replace("0 * * * *", "0 * * * SUN7"),
    );
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("BG101 invalid-cron"), "{err}");
    assert!(
        err.contains("`0 * * * SUN7` is not a valid crontab schedule"),
        "{err}"
    );
    assert!(err.contains("────"), "{err}");
}

#[test]
fn an_unknown_dialect_is_exit_2_with_a_suggestion() {
    let d = Dir::new();
    let m = d.write(
        "svc.batchguard.yaml",
        &manifest("").replace(
            "service: svc\n",
            "service: svc\ndeployment:\n  scheduler: kubernets\n",
        ),
    );
    let l = d.write("events.csv", &clean_events(5));
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("BG004 invalid-value"), "{err}");
    assert!(err.contains("did you mean `kubernetes`?"), "{err}");
}

#[test]
fn one_rejected_row_is_au001_and_fails_the_audit() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let mut ev = clean_events(5);
    ev.push_str("r9,hourly,2026-03-01 02:00:00,start,2026-03-01T02:00:01Z,pod-a,1,,,,schedule\n");
    let l = d.write("events.csv", &ev);
    let out = audit(&l, &m)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let f = &v["findings"][0];
    assert_eq!(f["code"], "AU001", "{v}");
    assert_eq!(f["name"], "rows-rejected");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["count"], 1);
    let keys = f["keys"].as_array().expect("keys");
    assert!(
        keys[0]
            .as_str()
            .is_some_and(|k| k.ends_with("events.csv:8")),
        "{f}"
    );
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn every_row_rejected_is_exit_2_with_reasons_and_no_slot_findings() {
    let d = Dir::new();
    let m = d.write("svc.batchguard.yaml", &manifest(""));
    let ev = clean_events(5).replace(":00:00Z,", ":00:00,");
    let l = d.write("events.csv", &ev);
    let out = audit(&l, &m).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("no event row"), "{err}");
    assert!(err.contains("events.csv:2"), "{err}");
    assert!(err.contains("6 rejected"), "{err}");
    assert!(!text(&out.stdout).contains("AU101"));
}

#[test]
fn au001_is_in_the_rules_table() {
    let out = Command::cargo_bin("batchguard")
        .expect("binary")
        .args(["explain", "AU001"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("rows-rejected"));
}
