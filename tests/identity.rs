//! Command identity for duplicates (SPEC 3.6, BG601) and BG801 as SPEC 3.1 defines it,
//! end to end through `batchguard lint` / `batchguard graph` on deploy trees written the way
//! real ones are, plus the cross-file analysis on registrations built directly (for the
//! fields the readers fill: working directory, namespace, env).

mod common;

use assert_cmd::Command;
use batchguard::Analysis;
use batchguard::Project;
use batchguard::SourceFile;
use batchguard::Span;
use batchguard::Spanned;
use batchguard::{Registration, SourceKind, Tie};
use common::NOW;
use serde_json::Value;
use std::path::Path;

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(p, text).expect("write fixture");
}

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rel, text) in files {
        write(dir.path(), rel, text);
    }
    dir
}

fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::cargo_bin("batchguard")
        .expect("binary")
        .current_dir(dir)
        .args(args)
        .args(["--now", NOW])
        .output()
        .expect("runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lint_json(dir: &Path) -> Value {
    let out = run(dir, &["lint", ".", "--format", "json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn findings<'a>(json: &'a Value, code: &str) -> Vec<&'a Value> {
    json["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["code"] == code).collect())
        .unwrap_or_default()
}

/// A manifest with one job running `command`, every other declaration in order.
fn manifest(command: &str) -> String {
    format!(
        r#"version: 1
service: billing
deployment:
  platform: kubernetes
  instances: 1
jobs:
  - name: settle-payments
    schedule: "0 * * * *"
    timezone: UTC
    expected_duration: 10m
    command: {command}
    lock:
      key: "{{job}}:{{scheduled_at}}"
      ttl: 25m
      store: postgres
"#
    )
}

fn cronjob(name: &str, extra_meta: &str, container: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: CronJob
metadata:
  name: {name}
{extra_meta}spec:
  schedule: "0 * * * *"
  timeZone: UTC
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  jobTemplate:
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: c
              image: registry.example.com/billing:1.4.2
{container}"#
    )
}

// ---------------------------------------------------------------- command identity (e2e)

#[test]
fn two_laravel_sites_are_not_duplicates() {
    let dir = tree(&[(
        "hosts/web-01.crontab",
        "* * * * * cd /var/www/shop && php artisan schedule:run >> /dev/null 2>&1\n\
         * * * * * cd /var/www/blog && php artisan schedule:run >> /dev/null 2>&1\n",
    )]);
    let json = lint_json(dir.path());
    assert!(findings(&json, "BG601").is_empty(), "{json:#}");
}

#[test]
fn the_spellings_of_the_settle_command_are_one_command() {
    let dir = tree(&[
        (
            "billing.batchguard.yaml",
            &manifest("[node, jobs/settle.js]"),
        ),
        (
            "hosts/batch-01.crontab",
            "0 * * * * cd /srv/payments && node jobs/settle.js >> log 2>&1\n\
             0 * * * * /usr/bin/node /srv/payments/jobs/settle.js | logger -t settle\n",
        ),
        (
            "k8s/settle.yaml",
            &cronjob(
                "settle",
                "",
                "              command: [\"/bin/sh\", \"-c\", \"cd /srv/payments && exec node jobs/settle.js 2>&1\"]\n",
            ),
        ),
    ]);
    let json = lint_json(dir.path());
    let dup = findings(&json, "BG601");
    assert_eq!(dup.len(), 1, "{json:#}");
    assert_eq!(
        dup[0]["related"].as_array().map(Vec::len),
        Some(3),
        "{json:#}"
    );
    let msg = dup[0]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("in 4 places"), "{msg}");
}

#[test]
fn relative_matches_absolute_only_without_a_known_working_directory() {
    // Relative, no working directory (the manifest) vs absolute: the same file.
    let dir = tree(&[
        (
            "billing.batchguard.yaml",
            &manifest("[node, jobs/settle.js]"),
        ),
        (
            "hosts/a.crontab",
            "0 * * * * flock -n /l node /srv/payments/jobs/settle.js\n",
        ),
    ]);
    assert_eq!(findings(&lint_json(dir.path()), "BG601").len(), 1);
    // The other way round: absolute in the manifest, relative in the crontab.
    let dir = tree(&[
        (
            "billing.batchguard.yaml",
            &manifest("[node, /srv/payments/jobs/settle.js]"),
        ),
        (
            "hosts/a.crontab",
            "0 * * * * flock -n /l node jobs/settle.js\n",
        ),
    ]);
    assert_eq!(findings(&lint_json(dir.path()), "BG601").len(), 1);
    // Relative with a known working directory elsewhere: another file.
    let dir = tree(&[(
        "hosts/a.crontab",
        "0 * * * * flock -n /l node /srv/payments/jobs/settle.js\n\
         0 * * * * cd /srv/other && flock -n /l node jobs/settle.js\n",
    )]);
    let json = lint_json(dir.path());
    assert!(findings(&json, "BG601").is_empty(), "{json:#}");
}

#[test]
fn commands_are_shown_as_written_in_messages_and_graph() {
    let first = r#"cd "/srv/my app" && node 'jobs/settle.js' --mode="full run""#;
    let second = "node \"/srv/my app/jobs/settle.js\" --mode='full run'";
    let dir = tree(&[(
        "hosts/a.crontab",
        &format!("0 * * * * {first}\n0 * * * * {second}\n"),
    )]);
    let json = lint_json(dir.path());
    let dup = findings(&json, "BG601");
    assert_eq!(dup.len(), 1, "{json:#}");
    let msg = dup[0]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(first) && msg.contains(second), "{msg}");
    let graph = run(dir.path(), &["graph", ".", "--format", "mermaid"]);
    assert!(
        graph.contains("node #quot;/srv/my app/jobs/settle.js#quot; --mode='full run'"),
        "{graph}"
    );
    let dot = run(dir.path(), &["graph", "."]);
    assert!(
        dot.contains(r#"cd \"/srv/my app\" && node 'jobs/settle.js'"#),
        "{dot}"
    );
}

#[test]

fn pm2_cwd_and_script_match_a_crontab_cd() {
    let dir = tree(&[
        (
            "ecosystem.config.json",
            r#"{"apps": [{"name": "settle", "script": "jobs/settle.js", "cwd": "/srv/payments",
              "cron_restart": "0 * * * *", "autorestart": false}]}"#,
        ),
        (
            "hosts/a.crontab",
            "0 * * * * cd /srv/payments && flock -n /l node jobs/settle.js\n",
        ),
    ]);
    assert_eq!(findings(&lint_json(dir.path()), "BG601").len(), 1);
}

#[test]

fn cronjobs_of_two_namespaces_are_not_duplicates() {
    let container = "              command: [node, jobs/settle.js]\n";
    let dir = tree(&[
        (
            "staging/settle.yaml",
            &cronjob("settle", "  namespace: staging\n", container),
        ),
        (
            "prod/settle.yaml",
            &cronjob("settle", "  namespace: prod\n", container),
        ),
    ]);
    assert!(findings(&lint_json(dir.path()), "BG601").is_empty());
    // Tied to the same manifest job: still one runner per namespace.
    let tie = "  annotations:\n    batchguard.dev/job: billing/settle-payments\n";
    let dir = tree(&[
        (
            "billing.batchguard.yaml",
            &manifest("[node, jobs/settle.js]"),
        ),
        (
            "staging/settle.yaml",
            &cronjob("settle", &format!("  namespace: staging\n{tie}"), container),
        ),
        (
            "prod/settle.yaml",
            &cronjob("settle", &format!("  namespace: prod\n{tie}"), container),
        ),
    ]);
    assert!(findings(&lint_json(dir.path()), "BG601").is_empty());
}

// ------------------------------------------- command identity (registrations built directly)

fn reg(kind: SourceKind, file: usize, command: &str) -> Registration {
    Registration {
        kind,
        file,
        span: Span::new(0, 1),
        label: format!("{} registration", kind.as_str()),
        schedule: Some(Spanned {
            value: "0 * * * *".into(),
            span: Span::new(0, 1),
        }),
        dialect: kind.dialect(),
        command: batchguard::split_words(command),
        instances: 1,
        ..Registration::default()
    }
}

fn at(s: &str) -> Option<Spanned<String>> {
    Some(Spanned {
        value: s.into(),
        span: Span::new(0, 1),
    })
}

fn files(n: usize) -> Vec<SourceFile> {
    (0..n)
        .map(|i| SourceFile::new(format!("f{i}").into(), format!("f{i}"), "x\n".into()))
        .collect()
}

/// Whether the project's places end up in one duplicated group.
fn duplicated(project: &Project) -> bool {
    let files = files(project.regs.len().max(1));
    let a = Analysis::new(project, &files, NOW.parse().expect("now"));
    a.groups.iter().any(|g| g.duplicate)
}

#[test]
fn pm2_working_directory_and_script_are_the_crontab_command() {
    let mut pm2 = reg(SourceKind::Pm2, 0, "node jobs/settle.js");
    pm2.workdir = at("/srv/payments");
    let cron = reg(
        SourceKind::Crontab,
        1,
        "cd /srv/payments && node jobs/settle.js >> /var/log/settle.log 2>&1",
    );
    let project = Project {
        jobs: Vec::new(),
        regs: vec![pm2.clone(), cron.clone()],
        ..Project::default()
    };
    assert!(duplicated(&project));
    pm2.workdir = at("/srv/other");
    let project = Project {
        jobs: Vec::new(),
        regs: vec![pm2, cron],
        ..Project::default()
    };
    assert!(!duplicated(&project));
}

#[test]
fn container_working_directory_counts() {
    let mut k = reg(SourceKind::Kubernetes, 0, "node jobs/settle.js");
    k.workdir = at("/srv/payments");
    let cron = reg(
        SourceKind::Crontab,
        1,
        "/usr/bin/node /srv/payments/jobs/settle.js | logger",
    );
    assert!(duplicated(&Project {
        jobs: Vec::new(),
        regs: vec![k, cron],
        ..Project::default()
    }));
}

#[test]
fn namespaces_separate_cronjobs_untied_and_tied() {
    let mut staging = reg(SourceKind::Kubernetes, 0, "node jobs/settle.js");
    staging.namespace = at("staging");
    let mut prod = staging.clone();
    prod.file = 1;
    prod.namespace = at("prod");
    assert!(!duplicated(&Project {
        jobs: Vec::new(),
        regs: vec![staging.clone(), prod.clone()],
        ..Project::default()
    }));
    // The same namespace twice is a duplicate.
    let mut prod2 = prod.clone();
    prod2.file = 0;
    assert!(duplicated(&Project {
        jobs: Vec::new(),
        regs: vec![prod.clone(), prod2.clone()],
        ..Project::default()
    }));
    // Tied to one manifest job by annotation: still separate runners.
    let tie = Some(Tie {
        service: Some("billing".into()),
        job: "settle".into(),
        manifest: None,
        span: Span::new(0, 1),
    });
    let job = batchguard::ManifestJob {
        file: 0,
        service: "billing".into(),
        name: "settle".into(),
        span: Span::new(0, 1),
        job_line: 1,
        schedule: at("0 * * * *"),
        timezone: None,
        dialect: batchguard::Dialect::Kubernetes,
        command: vec!["node".into(), "jobs/settle.js".into()],
        command_text: "node jobs/settle.js".into(),
        instances: 1,
        instances_span: None,
        locked: true,
        one_host_lock: false,
        lock_store: None,
        kubernetes: false,
        lock_span: None,
        depends_on: Vec::new(),
        expected_secs: Some(600),
        enabled: true,
    };
    let (mut s, mut p) = (staging, prod);
    s.tie = tie.clone();
    p.tie = tie.clone();
    let files = files(2);
    let project = Project {
        jobs: vec![job.clone()],
        regs: vec![s.clone(), p],
        ..Project::default()
    };
    let a = Analysis::new(&project, &files, NOW.parse().expect("now"));
    assert!(!a.groups.iter().any(|g| g.duplicate));
    assert!(a.groups.iter().all(|g| g.instances <= 1));
    // Two tied in one namespace are two runners of one job.
    let mut p2 = prod2;
    p2.tie = tie;
    let mut p3 = p2.clone();
    p3.file = 1;
    let project = Project {
        jobs: vec![job],
        regs: vec![p2, p3],
        ..Project::default()
    };
    assert!(duplicated(&project));
}

// ---------------------------------------------------------------------------------- BG801

#[test]
fn bg801_is_silent_on_references_paths_and_switches() {
    let container = r#"              command: ["node", "jobs/settle.js"]
              args:
                - --db-password=$(PGPASSWORD)
                - --api-token=${API_TOKEN}
                - --token-file=/var/run/secrets/kubernetes.io/serviceaccount/token
                - /var/run/secrets/kubernetes.io/serviceaccount/token
                - --disableSecrets
              env:
                - name: PGPASSWORD
                  valueFrom:
                    secretKeyRef:
                      name: billing-db
                      key: password
                - name: TOKEN_PATH
                  value: /var/run/secrets/kubernetes.io/serviceaccount/token
          volumes:
            - name: tls
              secret:
                secretName: billing-db-tls
"#;
    let dir = tree(&[("k8s/settle.yaml", &cronjob("settle", "", container))]);
    let json = lint_json(dir.path());
    assert!(findings(&json, "BG801").is_empty(), "{json:#}");
}

#[test]
fn a_cronjob_env_literal_is_found_on_the_literal() {
    let container = "              command: [node, jobs/settle.js]\n              env:\n                - name: PGPASSWORD\n                  value: \"pg-Literal-77\"\n                - name: AWS_SECRET_ACCESS_KEY\n                  value: wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n";
    let dir = tree(&[("k8s/settle.yaml", &cronjob("settle", "", container))]);
    let json = lint_json(dir.path());
    let hits = findings(&json, "BG801");
    assert_eq!(hits.len(), 2, "{json:#}");
    let text = std::fs::read_to_string(dir.path().join("k8s/settle.yaml")).expect("read");
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
    };
    assert_eq!(hits[0]["line"].as_u64(), line_of("pg-Literal-77"));
    assert_eq!(hits[0]["column"].as_u64(), Some(27));
    // The span is the literal's first character: no output tells its length.
    assert_eq!(hits[0]["end_column"].as_u64(), Some(27 + 1));
    assert!(
        hits[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`PGPASSWORD`"))
    );
    assert_eq!(hits[1]["line"].as_u64(), line_of("wJalr"));
    let out = json.to_string();
    assert!(
        !out.contains("pg-Literal-77") && !out.contains("wJalrXUtn"),
        "{out}"
    );
}

#[test]
fn a_pm2_env_literal_is_found() {
    let dir = tree(&[(
        "ecosystem.config.json",
        r#"{"apps": [{"name": "settle", "script": "jobs/settle.js", "cron_restart": "0 * * * *",
          "autorestart": false, "env": {"NODE_ENV": "production", "GITHUB_TOKEN": "pm2-Env-Token-1"}}]}"#,
    )]);
    let json = lint_json(dir.path());
    let hits = findings(&json, "BG801");
    assert_eq!(hits.len(), 1, "{json:#}");
    assert!(!json.to_string().contains("pm2-Env-Token-1"));
}

/// `--db-password=hunter2` in a CronJob and a crontab (unwrapped, so BG607 quotes the
/// command), with the two registrations duplicates of each other (BG601 quotes both).
fn leaky_tree() -> tempfile::TempDir {
    let container =
        "              command: [\"node\", \"jobs/settle.js\", \"--db-password=hunter2\"]\n";
    tree(&[
        ("k8s/settle.yaml", &cronjob("settle", "", container)),
        (
            "hosts/a.crontab",
            "0 * * * * node jobs/settle.js --db-password=hunter2\n",
        ),
    ])
}

#[test]
fn a_db_password_flag_is_reported_once_per_literal_on_the_literal() {
    let dir = leaky_tree();
    let json = lint_json(dir.path());
    let hits = findings(&json, "BG801");
    assert_eq!(hits.len(), 2, "one per literal: {json:#}");
    let k8s = hits
        .iter()
        .find(|f| f["file"] == "k8s/settle.yaml")
        .expect("the CronJob's literal");
    let text = std::fs::read_to_string(dir.path().join("k8s/settle.yaml")).expect("read");
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("hunter2"))
        .expect("line");
    let col = line[..line.find("hunter2").expect("col")].chars().count() as u64 + 1;
    assert_eq!(k8s["line"].as_u64(), Some(n as u64 + 1));
    assert_eq!(k8s["column"].as_u64(), Some(col));
    assert_eq!(k8s["end_column"].as_u64(), Some(col + 1), "the start only");
    assert!(
        !findings(&json, "BG601").is_empty(),
        "the duplicate quotes the command"
    );
}

#[test]
fn the_password_is_masked_in_every_output() {
    let dir = leaky_tree();
    for args in [
        &["lint", ".", "--format", "pretty"][..],
        &["lint", ".", "--format", "json"],
        &["lint", ".", "--format", "sarif"],
        &["lint", ".", "--format", "github"],
        &["graph", "."],
        &["graph", ".", "--format", "mermaid"],
    ] {
        let out = run(dir.path(), args);
        assert!(!out.is_empty(), "{args:?} printed nothing");
        assert!(
            !out.contains("hunter2"),
            "{args:?} leaks the password:\n{out}"
        );
    }
    let pretty = run(dir.path(), &["lint", ".", "--format", "pretty"]);
    assert!(pretty.contains("--db-password=********\""), "{pretty}");
}

#[test]
fn a_relative_command_meets_its_absolute_twin_among_many() {
    let mut regs: Vec<Registration> = (0..50)
        .map(|i| {
            reg(
                SourceKind::Crontab,
                0,
                &format!("node /srv/app-{i}/jobs/settle.js"),
            )
        })
        .collect();
    assert!(!duplicated(&Project {
        jobs: Vec::new(),
        regs: regs.clone(),
        ..Project::default()
    }));
    regs.push(reg(SourceKind::Pm2, 0, "node jobs/settle.js"));
    assert!(duplicated(&Project {
        jobs: Vec::new(),
        regs,
        ..Project::default()
    }));
}
