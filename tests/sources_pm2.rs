//! PM2 ecosystem files as PM2 reads them, and what `lint` reads: explicit files by kind,
//! non-sources listed as not read, `[sources]` globs, `--hidden`, `--list-files`, and the
//! summary counts (SPEC 3.6, 8).

mod common;

use batchguard::{SourceKind, SourceReadOptions};
use common::{NOW, bg, node_major};
use std::fs;
use std::path::Path;

/// `lint --format json` over `paths` (run in `cwd`), exit 0 or 1.
fn json_in(cwd: &Path, args: &[&str]) -> serde_json::Value {
    let out = bg()
        .current_dir(cwd)
        .args(["lint", "--format", "json", "--now", NOW])
        .args(args)
        .output()
        .expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn json(dir: &Path) -> serde_json::Value {
    json_in(dir, &["."])
}

fn codes(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn findings<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["code"] == code).collect())
        .unwrap_or_default()
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(p, text).expect("write");
}

/// A cron batch app in cluster mode without a lock: BG606 wherever PM2 reads it.
const CLUSTER_BATCH_JSON: &str = r#"{"apps": [{"name": "settle", "script": "jobs/settle.js",
  "cron_restart": "0 * * * *", "autorestart": false, "exec_mode": "cluster", "instances": 2}]}
"#;

#[test]
fn ecosystem_json_process_yml_and_pm2_json_are_read() {
    let dir = tempfile::tempdir().expect("tmp");
    write(dir.path(), "ecosystem.json", CLUSTER_BATCH_JSON);
    write(
        dir.path(),
        "process.yml",
        "apps:\n  - name: settle-again\n    script: jobs/settle.js\n    cron_restart: \"0 * * * *\"\n    autorestart: false\n",
    );
    write(
        dir.path(),
        "billing.pm2.json",
        r#"{"apps": [{"name": "report", "script": "jobs/report.js", "cron_restart": "0 6 * * *", "autorestart": false}]}"#,
    );
    let v = json(dir.path());
    assert_eq!(findings(&v, "BG606").len(), 1, "{v}");
    // ecosystem.json and process.yml register the same command: a duplicate.
    assert_eq!(findings(&v, "BG601").len(), 1, "{v}");
    assert_eq!(v["summary"]["sources"]["pm2"], 3, "{v}");
    assert_eq!(v["summary"]["registrations"], 3, "{v}");
}

#[test]
fn an_mjs_ecosystem_file_is_evaluated() {
    if node_major() < 20 {
        eprintln!("node 20+ not on PATH: skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.mjs",
        "export default {\n  apps: [{ name: \"settle\", script: \"jobs/settle.js\", cron_restart: \"0 * * * *\",\n    autorestart: false, exec_mode: \"cluster\", instances: 2 }],\n};\n",
    );
    let v = json(dir.path());
    assert!(findings(&v, "BG609").is_empty(), "{v}");
    assert_eq!(findings(&v, "BG606").len(), 1, "{v}");
}

#[test]
fn cron_and_exec_aliases_are_read() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": [{"name": "settle", "exec": "jobs/settle.js", "cron": "0 * * * *",
  "autorestart": false, "execMode": "cluster", "instances": 2}]}"#,
    );
    let v = json(dir.path());
    let f = findings(&v, "BG606");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`0 * * * *`")),
        "{v}"
    );
}

#[test]
fn apps_as_a_single_mapping_is_one_app() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": {"name": "settle", "script": "jobs/settle.js", "cron_restart": "0 * * * *",
  "autorestart": false, "exec_mode": "cluster", "instances": 2}}"#,
    );
    let v = json(dir.path());
    assert!(findings(&v, "BG609").is_empty(), "{v}");
    assert_eq!(findings(&v, "BG606").len(), 1, "{v}");
}

#[test]
fn instances_without_exec_mode_on_a_node_script_is_cluster_mode() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.yaml",
        "apps:\n  - name: settle\n    script: jobs/settle.js\n    instances: 4\n    cron_restart: \"0 * * * *\"\n    autorestart: false\n",
    );
    let v = json(dir.path());
    assert_eq!(findings(&v, "BG606").len(), 1, "{v}");
    assert!(findings(&v, "BG602").is_empty(), "{v}");
}

#[test]
fn cron_restart_zero_disables_the_schedule() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": [
  {"name": "a", "script": "jobs/a.js", "cron_restart": 0, "autorestart": false},
  {"name": "b", "script": "jobs/b.js", "cron_restart": "0", "autorestart": false}]}"#,
    );
    let v = json(dir.path());
    assert!(codes(&v).is_empty(), "{v}");
    assert_eq!(v["summary"]["registrations"], 0, "{v}");
}

#[test]
fn a_nightly_restart_of_a_web_cluster_registers_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": [{"name": "web", "script": "server.js", "exec_mode": "cluster",
  "instances": "max", "cron_restart": "0 3 * * *"}]}"#,
    );
    let v = json(dir.path());
    assert!(codes(&v).is_empty(), "{v}");
    assert_eq!(v["summary"]["registrations"], 0, "{v}");
    // The listing says why nothing was registered.
    let out = bg()
        .current_dir(dir.path())
        .args(["lint", ".", "--list-files", "--now", NOW])
        .output()
        .expect("runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("ecosystem.config.json") && shown.contains("restarts a long-running app"),
        "{shown}"
    );
}

#[test]
fn a_tied_script_registers_even_when_the_app_keeps_running() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": [{"name": "settle", "script": "batchguard",
  "args": "run --job settle-payments -- node jobs/settle.js", "cron_restart": "0 * * * *"}]}"#,
    );
    let v = json(dir.path());
    assert_eq!(v["summary"]["registrations"], 1, "{v}");
}

/// A one-shot under `cron_restart` with autorestart on loops (BG613); `stop_exit_codes: [0]`
/// spares the one-shot (it registers, no BG613) but not a server (still a restart
/// schedule); a tied app is never BG613's.
#[test]
fn one_shots_under_cron_restart_and_stop_exit_codes() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "jobs/settle.js",
        "require('./db').settle().then(() => process.exit(0));\n",
    );
    write(
        dir.path(),
        "server.js",
        "require('http').createServer(() => {}).listen(80);\n",
    );
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": [
  {"name": "settle", "script": "jobs/settle.js", "cron_restart": "0 0 * * *", "autorestart": "true"},
  {"name": "settle-once", "script": "jobs/settle.js", "cron_restart": "0 1 * * *", "stop_exit_codes": [0]},
  {"name": "web", "script": "server.js", "cron_restart": "0 3 * * *", "stop_exit_codes": 0},
  {"name": "tied", "script": "batchguard", "args": "run --job settle-payments -- node jobs/settle.js",
   "cron_restart": "0 2 * * *"}
]}"#,
    );
    let v = json(dir.path());
    let bg613 = findings(&v, "BG613");
    assert_eq!(bg613.len(), 1, "{v:#}");
    assert_eq!(bg613[0]["job"], "PM2 app `settle`", "{v:#}");
    assert_eq!(bg613[0]["line"], 2, "on the cron_restart's line: {v:#}");
    assert!(
        bg613[0]["message"].as_str().is_some_and(
            |m| m.contains("`jobs/settle.js` ends the process: `process.exit(…)` at line 1")
        ),
        "{v:#}"
    );
    // settle, settle-once and tied; not web.
    assert_eq!(v["summary"]["registrations"], 3, "{v:#}");
}

/// An evaluated `.js` ecosystem file finds the script beside it too.
#[test]
fn a_one_shot_of_an_evaluated_ecosystem_file_loops() {
    if !common::need_node(20) {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "app/sync.py",
        "import sys\nsync()\nsys.exit(0)\n",
    );
    write(
        dir.path(),
        "ecosystem.config.js",
        "const path = require('path');\nmodule.exports = { apps: [\n  { name: 'sync', script: 'sync.py', cwd: 'app',\n    interpreter: 'python3', cron_restart: '*/30 * * * *' },\n] };\n",
    );
    let v = json(dir.path());
    let bg613 = findings(&v, "BG613");
    assert_eq!(bg613.len(), 1, "{v:#}");
    assert!(
        bg613[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`sync.py` ends the process: `sys.exit(…)` at line 3")),
        "{v:#}"
    );
}

#[test]
fn bg606_shows_max_instances_as_counted_cores() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "ecosystem.config.json",
        r#"{"apps": [{"name": "settle", "script": "jobs/settle.js", "exec_mode": "cluster",
  "instances": "max", "cron_restart": "0 * * * *", "autorestart": false}]}"#,
    );
    let v = json(dir.path());
    let f = findings(&v, "BG606");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`instances: max` (counted as 4 cores)")),
        "{v}"
    );
}

/// The literal each span of `env` points at, as `(name, value)` texts.
fn env_texts(kind_path: &Path, text: &str) -> Vec<(String, String)> {
    let read = batchguard::read_source(
        SourceKind::Pm2,
        kind_path,
        text.as_bytes(),
        &SourceReadOptions::default(),
    );
    assert!(read.problems.is_empty(), "{:?}", read.problems);
    assert_eq!(read.registrations.len(), 1, "{:?}", read.registrations);
    read.registrations[0]
        .env
        .iter()
        .map(|(n, v)| {
            let at = |s: batchguard::Span| text[s.start..s.end()].to_owned();
            (at(n.span), at(v.span))
        })
        .collect()
}

#[test]
fn env_and_env_blocks_are_filled_with_located_spans() {
    let text = r#"{"apps": [{"name": "settle", "script": "jobs/settle.js",
  "cron_restart": "0 * * * *", "autorestart": false, "cwd": "/srv/payments",
  "env": {"NODE_ENV": "production", "PGPASSWORD": "s3cret-pg"},
  "env_production": {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI"}}]}"#;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("ecosystem.config.json");
    let got = env_texts(&path, text);
    assert_eq!(
        got,
        [
            ("\"NODE_ENV\"", "\"production\""),
            ("\"PGPASSWORD\"", "\"s3cret-pg\""),
            ("\"AWS_SECRET_ACCESS_KEY\"", "\"wJalrXUtnFEMI\""),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned())),
    );
    let read = batchguard::read_source(
        SourceKind::Pm2,
        &path,
        text.as_bytes(),
        &SourceReadOptions::default(),
    );
    let wd = read.registrations[0].workdir.as_ref().expect("cwd");
    assert_eq!(wd.value, "/srv/payments");
    assert_eq!(&text[wd.span.start..wd.span.end()], "\"/srv/payments\"");
}

#[test]
fn env_of_an_evaluated_js_file_points_at_its_literals_only() {
    if node_major() < 20 {
        eprintln!("node 20+ not on PATH: skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("ecosystem.config.js");
    let text = "module.exports = { apps: [{ name: 'settle', script: 'jobs/settle.js',\n  cron_restart: '0 * * * *', autorestart: false,\n  env: { PGPASSWORD: 'pg-literal', FROM_CI: process.env.HOME } }] };\n";
    fs::write(&path, text).expect("write");
    let got = env_texts(&path, text);
    // HOME's value is read from the environment while evaluating: it is not in the file.
    assert_eq!(got, [("PGPASSWORD".to_owned(), "'pg-literal'".to_owned())]);
}

fn write_non_sources(dir: &Path) {
    write(
        dir,
        "k8s/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cronjob.yaml\n",
    );
    write(
        dir,
        "k8s/workflow.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata:\n  name: settle\nspec:\n  schedule: \"0 * * * *\"\n",
    );
    write(
        dir,
        "k8s/web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n",
    );
}

const NON_SOURCES: [&str; 3] = [
    "k8s/kustomization.yaml",
    "k8s/workflow.yaml",
    "k8s/web.yaml",
];

#[test]
fn explicit_non_sources_are_not_linted_as_manifests() {
    let dir = tempfile::tempdir().expect("tmp");
    write_non_sources(dir.path());
    let v = json_in(dir.path(), &NON_SOURCES);
    assert!(codes(&v).is_empty(), "{v}");
    assert_eq!(v["summary"]["files"], 0, "{v}");
}

#[test]
fn explicit_non_sources_are_listed_as_not_read() {
    let dir = tempfile::tempdir().expect("tmp");
    write_non_sources(dir.path());
    let mut args = vec!["--list-files"];
    args.extend(NON_SOURCES);
    let v = json_in(dir.path(), &args);
    let files = v["files"].as_array().expect("files array");
    assert_eq!(files.len(), 3, "{v}");
    for (f, want) in files.iter().zip([
        "a kustomization is no batchguard source",
        "an Argo CronWorkflow is no batchguard source",
        "a Kubernetes Deployment is no batchguard source",
    ]) {
        assert_eq!(f["read"], false, "{v}");
        assert!(
            f["reason"].as_str().is_some_and(|r| r.starts_with(want)),
            "{f}"
        );
    }
}

#[test]
fn an_explicit_crontab_is_read_as_a_crontab() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "docker/crontab",
        "0 * * * * node /srv/jobs/settle.js\n",
    );
    let v = json_in(dir.path(), &["--list-files", "docker/crontab"]);
    assert_eq!(v["files"][0]["kind"], "crontab", "{v}");
    assert_eq!(v["files"][0]["registrations"], 1, "{v}");
    assert_eq!(findings(&v, "BG607").len(), 1, "{v}");
}

#[test]
fn an_explicit_dot_cron_file_is_a_crontab_not_a_manifest() {
    // `*.cron` names are the crontab reader's to recognise (`crontab::is_crontab_path`).
    if !batchguard::is_crontab_path(Path::new("deploy/billing.cron")) {
        eprintln!("*.cron not yet recognised by the crontab reader: skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "deploy/billing.cron",
        "0 * * * * root node /srv/jobs/settle.js\n",
    );
    let v = json_in(dir.path(), &["deploy/billing.cron"]);
    assert!(findings(&v, "BG001").is_empty(), "{v}");
    assert_eq!(v["summary"]["sources"]["crontab"], 1, "{v}");
}

#[test]
fn sources_globs_map_files_to_a_kind() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "batchguard.toml",
        "[sources]\ncrontab = [\"deploy/cron/*\"]\n",
    );
    write(
        dir.path(),
        "deploy/cron/billing",
        "0 * * * * node /srv/jobs/settle.js\n",
    );
    let v = json(dir.path());
    assert_eq!(v["summary"]["sources"]["crontab"], 1, "{v}");
    assert_eq!(findings(&v, "BG607").len(), 1, "{v}");
    // Named on the command line, too.
    let v = json_in(dir.path(), &["deploy/cron/billing"]);
    assert_eq!(findings(&v, "BG607").len(), 1, "{v}");
}

#[test]
fn hidden_folders_are_walked_with_hidden_and_counted_without() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        ".deploy/crontab",
        "0 * * * * node /srv/jobs/settle.js\n",
    );
    write(dir.path(), ".gitignore", "target/\n");
    let v = json(dir.path());
    assert!(findings(&v, "BG607").is_empty(), "{v}");
    // The hidden folder counts; `.gitignore` would not be read either way.
    assert_eq!(v["summary"]["hidden_skipped"], 1, "{v}");
    let v = json_in(dir.path(), &[".", "--hidden"]);
    assert_eq!(findings(&v, "BG607").len(), 1, "{v}");
    assert_eq!(v["summary"]["hidden_skipped"], 0, "{v}");
}

#[test]
fn list_files_prints_kinds_registrations_and_reasons() {
    let dir = tempfile::tempdir().expect("tmp");
    write(
        dir.path(),
        "deploy/crontab",
        "0 * * * * flock -n /tmp/a node /srv/a.js\n0 1 * * * flock -n /tmp/b node /srv/b.js\n",
    );
    write(dir.path(), "ecosystem.config.json", CLUSTER_BATCH_JSON);
    write_non_sources(dir.path());
    let out = bg()
        .current_dir(dir.path())
        .args(["lint", "--list-files", "--now", NOW])
        .output()
        .expect("runs");
    // Exit code as lint: BG606 is an error.
    assert_eq!(out.status.code(), Some(1));
    let shown = String::from_utf8_lossy(&out.stdout);
    let line = |path: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(path))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(
        line("deploy/crontab"),
        "deploy/crontab crontab 2 registrations"
    );
    assert_eq!(
        line("ecosystem.config.json"),
        "ecosystem.config.json pm2 1 registration"
    );
    assert_eq!(
        line("k8s/kustomization.yaml"),
        "k8s/kustomization.yaml not read a kustomization is no batchguard source"
    );
    // The listing replaces the findings.
    assert!(!shown.contains("BG606"), "{shown}");
}

#[test]
fn summary_counts_jobs_registrations_and_sources() {
    let dir = tempfile::tempdir().expect("tmp");
    // Two crontabs registering one command on one schedule: one job, two registrations.
    write(
        dir.path(),
        "hosts/a/crontab",
        "0 * * * * flock -n /tmp/s node /srv/settle.js\n15 2 * * * flock -n /tmp/r node /srv/report.js\n",
    );
    write(
        dir.path(),
        "hosts/b/crontab",
        "0 * * * * flock -n /tmp/s node /srv/settle.js\n",
    );
    write(dir.path(), "ecosystem.config.json", CLUSTER_BATCH_JSON);
    write(dir.path(), ".github/workflows/ci.yml", "on: push\n");
    let v = json(dir.path());
    let s = &v["summary"];
    assert_eq!(s["files"], 3, "{v}");
    assert_eq!(s["registrations"], 4, "{v}");
    assert_eq!(s["jobs"], 3, "{v}");
    assert_eq!(s["sources"]["crontab"], 2, "{v}");
    assert_eq!(s["sources"]["pm2"], 1, "{v}");
    assert_eq!(s["sources"]["manifest"], 0, "{v}");
    assert_eq!(s["sources"]["kubernetes"], 0, "{v}");
    assert_eq!(s["hidden_skipped"], 1, "{v}");
    // The pretty summary says the same counts.
    let out = bg()
        .current_dir(dir.path())
        .args(["lint", "--now", NOW])
        .output()
        .expect("runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(
            "3 files (1 pm2, 2 crontab), 3 jobs, 4 registrations: 2 errors, 0 warnings; \
             1 hidden entry skipped"
        ),
        "{shown}"
    );
}

#[test]
fn a_secret_in_the_env_of_any_app_of_an_evaluated_file_is_bg801() {
    if node_major() < 20 {
        eprintln!("node 20+ not on PATH: skipped");
        return;
    }
    // Neither app registers a job (no cron; a restart schedule): the leak is still a leak.
    let dir = tempfile::tempdir().expect("tmp");
    let text = "module.exports = { apps: [\n  { name: 'web', script: 'server.js', env: { DB_PASSWORD: 'web-literal-pw' } },\n  { name: 'api', script: 'api.js', cron_restart: '0 4 * * *',\n    env_production: { API_TOKEN: 'api-literal-token', HOME_DIR: process.env.HOME } },\n] };\n";
    write(dir.path(), "ecosystem.config.js", text);
    let v = json(dir.path());
    let f = findings(&v, "BG801");
    assert_eq!(f.len(), 2, "{v:#}");
    assert_eq!(
        (f[0]["line"].as_u64(), f[0]["column"].as_u64()),
        (Some(2), Some(60)),
        "{v:#}"
    );
    assert_eq!(f[1]["line"].as_u64(), Some(4), "{v:#}");
    let pretty = bg()
        .args(["lint", "--now", NOW])
        .arg(dir.path())
        .output()
        .expect("runs");
    let out = String::from_utf8_lossy(&pretty.stdout);
    assert!(out.contains("BG801"), "{out}");
    for secret in ["web-literal-pw", "api-literal-token"] {
        assert!(!out.contains(secret), "{out}");
    }
}
