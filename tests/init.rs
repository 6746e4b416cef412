//! `batchguard init`: a starter manifest from the registrations of a tree (a CronJob, a PM2
//! ecosystem file, a crontab). What it fills in comes from the registrations; what only a
//! person knows is `TODO(batchguard init)`, and lint reports each of those, and nothing else.

use assert_cmd::Command;
use batchguard::Settings;
use batchguard::{LintOptions, LintRun};
use std::fs;
use std::path::{Path, PathBuf};

const CRONJOB: &str = r#"apiVersion: batch/v1
kind: CronJob
metadata:
  name: settle
spec:
  schedule: "0 * * * *"
  timeZone: Asia/Seoul
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  jobTemplate:
    spec:
      backoffLimit: 2
      template:
        spec:
          containers:
            - name: settle
              image: shop:1
              command: ["node", "jobs/settle.js"]
"#;

const ECOSYSTEM: &str = r#"{
  "apps": [
    {
      "name": "report",
      "script": "jobs/report.js",
      "cron_restart": "0 6 * * *",
      "autorestart": false,
      "instances": 2
    }
  ]
}
"#;

const CRONTAB: &str = "MAILTO=ops@example.com\nCRON_TZ=Europe/Berlin\n15 4 * * * /usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1\n";

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("shop");
    fs::create_dir_all(root.join("k8s")).expect("mkdir");
    fs::create_dir_all(root.join("hosts")).expect("mkdir");
    fs::write(root.join("k8s/settle.yaml"), CRONJOB).expect("write");
    fs::write(root.join("ecosystem.json"), ECOSYSTEM).expect("write");
    fs::write(root.join("hosts/crontab"), CRONTAB).expect("write");
    dir
}

fn bg() -> Command {
    let mut c = Command::cargo_bin("batchguard").expect("binary builds");
    c.env("NO_COLOR", "1");
    c
}

fn lint(paths: &[PathBuf]) -> LintRun {
    batchguard::lint(&LintOptions {
        paths: paths.to_vec(),
        settings: Settings::default(),
        now: "2026-03-01T00:00:00Z".parse().expect("fixed now"),
    })
}

fn text_at(run: &LintRun, f: &batchguard::Finding) -> String {
    let file = &run.files[f.at.file];
    file.text
        .get(f.at.span.start..f.at.span.end())
        .unwrap_or_default()
        .to_owned()
}

fn init_to(root: &Path, out: &Path) -> std::process::Output {
    bg().arg("init")
        .arg(root)
        .arg("--out")
        .arg(out)
        .output()
        .expect("runs")
}

#[test]
fn a_mixed_tree_gives_a_manifest_whose_only_findings_are_the_placeholders() {
    let dir = tree();
    let root = dir.path().join("shop");
    let out = dir.path().join("shop.batchguard.yaml");
    let res = init_to(&root, &out);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let yaml = fs::read_to_string(&out).expect("manifest written");
    let run = lint(std::slice::from_ref(&out));
    assert_eq!(run.jobs, 3, "{yaml}");
    assert!(!run.findings.is_empty(), "the placeholders are reported");
    let not_placeholder: Vec<String> = run
        .findings
        .iter()
        .filter(|f| {
            text_at(&run, f) != "TODO(batchguard init)"
                || !f
                    .message
                    .contains("still the `TODO(batchguard init)` placeholder")
        })
        .map(|f| format!("{} {}: {}", f.code, text_at(&run, f), f.message))
        .collect();
    assert!(not_placeholder.is_empty(), "{not_placeholder:#?}\n{yaml}");
    // Every placeholder in the file is reported at least once.
    let placeholders = yaml.matches(": TODO(batchguard init)\n").count();
    let mut spans: Vec<usize> = run.findings.iter().map(|f| f.at.span.start).collect();
    spans.sort_unstable();
    spans.dedup();
    assert_eq!(spans.len(), placeholders, "{yaml}");
}

#[test]
fn what_the_registrations_say_is_filled_in() {
    let dir = tree();
    let root = dir.path().join("shop");
    let res = bg().arg("init").arg(&root).output().expect("runs");
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let yaml = String::from_utf8(res.stdout).expect("UTF-8");
    // The service is named after the folder.
    assert!(yaml.contains("\nservice: shop\n"), "{yaml}");
    // The CronJob: its schedule, zone and argv.
    assert!(yaml.contains("  - name: settle\n"), "{yaml}");
    assert!(
        yaml.contains("    schedule: \"0 * * * *\"\n    timezone: Asia/Seoul\n"),
        "{yaml}"
    );
    assert!(
        yaml.contains("    command: [\"node\", \"jobs/settle.js\"]\n"),
        "{yaml}"
    );
    // The PM2 app: its own platform and scheduler, two instances.
    assert!(yaml.contains("  - name: report\n"), "{yaml}");
    assert!(
        yaml.contains(
            "    deployment:\n      platform: pm2\n      scheduler: pm2\n      instances: 2\n"
        ),
        "{yaml}"
    );
    // The crontab line: CRON_TZ, and the shell line kept as the shell reads it.
    assert!(yaml.contains("  - name: backup\n"), "{yaml}");
    assert!(yaml.contains("    timezone: Europe/Berlin\n"), "{yaml}");
    assert!(
        yaml.contains(
            "    command: [\"/bin/sh\", \"-c\", \"/usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1\"]\n"
        ),
        "{yaml}"
    );
    // The manifest reads back as the jobs of the tree, each in its own dialect.
    let (_, loaded) = batchguard::load_manifest(yaml.as_bytes());
    let dialects: Vec<String> = loaded
        .jobs
        .iter()
        .map(|j| {
            loaded
                .manifest
                .deployment_of(j)
                .scheduler
                .as_str()
                .to_owned()
        })
        .collect();
    let mut dialects = dialects;
    dialects.sort();
    assert_eq!(dialects, ["crontab", "kubernetes", "pm2"]);
}

#[test]
fn stderr_says_how_to_tie_each_registration() {
    let dir = tree();
    let root = dir.path().join("shop");
    let out = dir.path().join("shop.batchguard.yaml");
    let res = init_to(&root, &out);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("batchguard.dev/job: shop/settle"), "{err}");
    assert!(err.contains("--job report"), "{err}");
    assert!(
        err.contains("15 4 * * * batchguard run --manifest"),
        "{err}"
    );
    assert!(err.contains("--job backup -- "), "{err}");
    // Untied, the registrations and the new jobs are the same jobs twice (BG601).
    let run = lint(&[root.clone(), out.clone()]);
    let dups = run.findings.iter().filter(|f| f.code == "BG601").count();
    assert_eq!(dups, 3, "{:#?}", run.findings);
    // Tying the CronJob by its annotation makes it that job's registration.
    let tied = CRONJOB.replace(
        "  name: settle\n",
        "  name: settle\n  annotations:\n    batchguard.dev/job: shop/settle\n",
    );
    fs::write(root.join("k8s/settle.yaml"), tied).expect("write");
    let run = lint(&[root, out]);
    let dups: Vec<_> = run
        .findings
        .iter()
        .filter(|f| f.code == "BG601")
        .filter_map(|f| f.job.clone())
        .collect();
    assert_eq!(dups.len(), 2, "{dups:?}");
    assert!(!dups.iter().any(|j| j.contains("settle")), "{dups:?}");
}

#[test]
fn out_refuses_to_overwrite_without_force() {
    let dir = tree();
    let root = dir.path().join("shop");
    let out = dir.path().join("shop.batchguard.yaml");
    fs::write(&out, "keep me\n").expect("write");
    let res = init_to(&root, &out);
    assert_eq!(res.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&res.stderr).contains("--force"),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert_eq!(fs::read_to_string(&out).expect("read"), "keep me\n");
    let res = bg()
        .arg("init")
        .arg(&root)
        .arg("--out")
        .arg(&out)
        .arg("--force")
        .output()
        .expect("runs");
    assert!(res.status.success());
    assert!(fs::read_to_string(&out).expect("read").starts_with("# "));
}

#[test]
fn service_flag_names_the_service_and_registrations_already_declared_are_left_out() {
    let dir = tree();
    let root = dir.path().join("shop");
    // A manifest that already declares the CronJob's job, tied by annotation.
    fs::write(
        root.join("k8s/settle.yaml"),
        CRONJOB.replace(
            "  name: settle\n",
            "  name: settle\n  annotations:\n    batchguard.dev/job: billing/settle\n",
        ),
    )
    .expect("write");
    fs::write(
        root.join("billing.batchguard.yaml"),
        "version: 1\nservice: billing\njobs:\n  - name: settle\n    schedule: \"0 * * * *\"\n    timezone: Asia/Seoul\n",
    )
    .expect("write");
    let res = bg()
        .arg("init")
        .arg(&root)
        .args(["--service", "payments"])
        .output()
        .expect("runs");
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let yaml = String::from_utf8(res.stdout).expect("UTF-8");
    assert!(yaml.contains("\nservice: payments\n"), "{yaml}");
    assert!(!yaml.contains("name: settle"), "{yaml}");
    assert!(
        yaml.contains("name: report") && yaml.contains("name: backup"),
        "{yaml}"
    );
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("billing/settle"), "{err}");
}

#[test]
fn a_tree_without_registrations_is_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::write(dir.path().join("README.md"), "nothing here\n").expect("write");
    let res = bg().arg("init").arg(dir.path()).output().expect("runs");
    assert_eq!(res.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&res.stderr)
            .contains("no scheduled CronJob, PM2 app, crontab line or in-process schedule"),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
}
