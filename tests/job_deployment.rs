//! `jobs[].deployment`: a service with jobs on two platforms. Each field of a job's own
//! deployment overrides the manifest's for that job, in every place that reads a job's
//! dialect or instances: the lint rules, the cross-file rules, `slots --manifest`.

use assert_cmd::Command;
use batchguard::Settings;
use batchguard::{LintOptions, LintRun};
use std::path::Path;

const MIXED: &str = r#"version: 1
service: shop
deployment:
  platform: kubernetes
  instances: 1
jobs:
  # kubernetes: weekday 7 is an error (BG101); seconds are not accepted (BG106).
  - name: k8s-sunday
    schedule: "0 12 * * 7"
  - name: k8s-seconds
    schedule: "*/10 * * * * *"
  # pm2, so node-cron: both expressions are valid.
  - name: worker-sunday
    schedule: "0 12 * * 7"
    deployment:
      platform: pm2
  - name: worker-seconds
    schedule: "*/10 * * * * *"
    deployment:
      platform: pm2
      scheduler: node-cron
  # node-cron takes `L`; kubernetes does not (BG106).
  - name: worker-l
    schedule: "0 0 L * *"
    deployment:
      platform: pm2
  - name: k8s-l
    schedule: "0 0 L * *"
"#;

fn lint(dir: &Path) -> LintRun {
    batchguard::lint(&LintOptions {
        paths: vec![dir.to_path_buf()],
        settings: Settings::default(),
        now: "2026-03-01T00:00:00Z".parse().expect("fixed now"),
    })
}

fn write(yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("shop.batchguard.yaml"), yaml).expect("write manifest");
    dir
}

/// `(code, job)` of every finding with one of `codes`.
fn found(run: &LintRun, codes: &[&str]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = run
        .findings
        .iter()
        .filter(|f| codes.contains(&f.code))
        .map(|f| (f.code.to_owned(), f.job.clone().unwrap_or_default()))
        .collect();
    v.sort();
    v
}

#[test]
fn each_job_is_read_in_its_own_dialect() {
    let dir = write(MIXED);
    let run = lint(dir.path());
    let pair = |c: &str, j: &str| (c.to_owned(), j.to_owned());
    assert_eq!(
        found(&run, &["BG101", "BG106"]),
        vec![
            pair("BG101", "k8s-sunday"),
            pair("BG106", "k8s-l"),
            pair("BG106", "k8s-seconds"),
        ],
        "{:#?}",
        run.findings
    );
    let msg = run
        .findings
        .iter()
        .find(|f| f.code == "BG106" && f.job.as_deref() == Some("k8s-seconds"))
        .map(|f| f.message.clone())
        .unwrap_or_default();
    assert!(msg.contains("kubernetes"), "{msg}");
}

#[test]
fn slots_of_a_manifest_job_follow_its_deployment() {
    let dir = write(MIXED);
    let path = dir.path().join("shop.batchguard.yaml");
    let p = path.display().to_string();
    let slots = |job: &str| {
        Command::cargo_bin("batchguard")
            .expect("binary builds")
            .args(["slots", "--manifest", &p, "--job", job])
            .args([
                "--from",
                "2026-03-01T00:00:00Z",
                "--to",
                "2026-03-01T00:00:30Z",
            ])
            .output()
            .expect("runs")
    };
    let out = slots("worker-seconds");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2026-03-01T00:00:00+00:00\n2026-03-01T00:00:10+00:00\n2026-03-01T00:00:20+00:00\n"
    );
    // The same expression on the kubernetes job is refused, naming kubernetes.
    let out = slots("k8s-seconds");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("kubernetes"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn instances_of_a_job_override_the_manifests_for_bg602() {
    let yaml = "version: 1\nservice: shop\ndeployment:\n  platform: kubernetes\n  instances: 1\njobs:\n  - name: single\n    schedule: \"0 * * * *\"\n    command: [\"node\", \"a.js\"]\n  - name: clustered\n    schedule: \"0 * * * *\"\n    command: [\"node\", \"b.js\"]\n    deployment:\n      platform: pm2\n      instances: 4\n";
    let dir = write(yaml);
    let run = lint(dir.path());
    let bg602 = found(&run, &["BG602"]);
    assert_eq!(bg602, vec![("BG602".to_owned(), "clustered".to_owned())]);
    let f = run
        .findings
        .iter()
        .find(|f| f.code == "BG602")
        .expect("BG602");
    assert!(f.message.contains('4'), "{}", f.message);
}

#[test]
fn defaults_deployment_applies_to_every_job_and_a_job_still_wins() {
    let yaml = "version: 1\nservice: shop\ndeployment:\n  platform: kubernetes\ndefaults:\n  deployment:\n    platform: pm2\njobs:\n  - name: worker\n    schedule: \"*/10 * * * * *\"\n  - name: k8s\n    schedule: \"*/10 * * * * *\"\n    deployment:\n      platform: kubernetes\n";
    let dir = write(yaml);
    let run = lint(dir.path());
    assert_eq!(
        found(&run, &["BG101", "BG106"]),
        vec![("BG106".to_owned(), "k8s".to_owned())]
    );
}

#[test]
fn a_job_platform_without_scheduler_takes_that_platforms_dialect() {
    // The manifest's explicit scheduler is for the manifest's platform, not the job's.
    let yaml = "version: 1\nservice: shop\ndeployment:\n  platform: kubernetes\n  scheduler: kubernetes\njobs:\n  - name: worker\n    schedule: \"*/10 * * * * *\"\n    deployment:\n      platform: pm2\n  - name: other\n    schedule: \"*/10 * * * * *\"\n    deployment:\n      instances: 2\n";
    let dir = write(yaml);
    let run = lint(dir.path());
    assert_eq!(
        found(&run, &["BG101", "BG106"]),
        vec![("BG106".to_owned(), "other".to_owned())]
    );
}

#[test]
fn an_unknown_key_in_a_jobs_deployment_is_bg002_with_a_suggestion() {
    let yaml = "version: 1\nservice: shop\njobs:\n  - name: worker\n    schedule: \"0 * * * *\"\n    deployment:\n      platfrom: pm2\n";
    let dir = write(yaml);
    let run = lint(dir.path());
    let f = run
        .findings
        .iter()
        .find(|f| f.code == "BG002")
        .expect("BG002");
    assert!(f.message.contains("platfrom"), "{}", f.message);
    assert!(f.help.contains("did you mean `platform`"), "{}", f.help);
}

#[test]
fn the_audit_expects_each_jobs_slots_in_its_own_dialect() {
    let (_, loaded) = batchguard::load_manifest(MIXED.as_bytes());
    let jobs = batchguard::jobs_from_manifest(&loaded, "shop");
    let dialect = |name: &str| {
        jobs.iter()
            .find(|j| j.name == name)
            .and_then(|j| j.schedule.as_ref())
            .map(|s| s.dialect().as_str())
    };
    assert_eq!(dialect("worker-seconds"), Some("node-cron"));
    assert_eq!(dialect("worker-sunday"), Some("node-cron"));
    // The kubernetes jobs' expressions do not parse as kubernetes.
    assert_eq!(dialect("k8s-seconds"), None);
    assert_eq!(dialect("k8s-sunday"), None);
}
