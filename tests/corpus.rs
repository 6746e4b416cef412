//! The real-world regression corpus (`fixtures/corpus/`): deploy trees written in the shapes
//! real repositories use (a Laravel host crontab, a Docker `cron.d` file, a busybox crontab,
//! a Helm chart, a GitOps tree with per-environment namespaces, PM2 ecosystems with aliases
//! and a web cluster restart, CronJobs with secret references and with literal secrets, and
//! the payments incident spelled four ways). Each tree's pretty lint output is a snapshot,
//! and every false alarm or miss lint once had on such trees is asserted by name here.

mod common;

use common::{NOW, bg, need_node};
use serde_json::Value;
use std::path::Path;

fn tree(name: &str) -> String {
    Path::new("fixtures/corpus")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn output(args: &[&str]) -> String {
    let out = bg().args(args).output().expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lint_json(name: &str) -> Value {
    let dir = tree(name);
    serde_json::from_str(&output(&["lint", "--format", "json", "--now", NOW, &dir])).expect("json")
}

fn codes(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn count(v: &Value, code: &str) -> usize {
    codes(v).iter().filter(|c| *c == code).count()
}

fn snapshot(name: &str) {
    let dir = tree(name);
    let pretty = output(&["lint", "--now", NOW, &dir]);
    insta::assert_snapshot!(format!("corpus_{name}"), pretty);
}

#[test]
fn laravel_sites_on_one_host_are_not_duplicates() {
    let v = lint_json("laravel-host");
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 2, "{v:#}");
    snapshot("laravel-host");
}

#[test]
fn a_docker_cron_d_file_has_a_user_column() {
    let v = lint_json("docker-crond");
    // `root flock -n …` is guarded: the user is not the command.
    assert_eq!(count(&v, "BG607"), 0, "{v:#}");
    assert_eq!(count(&v, "BG609"), 0, "{v:#}");
    assert_eq!(count(&v, "BG001"), 0, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 3, "{v:#}");
    assert_eq!(v["summary"]["sources"]["crontab"], 2, "{v:#}");
    snapshot("docker-crond");
}

#[test]
fn a_busybox_crontab_with_a_latin1_comment_is_read() {
    let v = lint_json("busybox");
    assert_eq!(v["summary"]["registrations"], 1, "{v:#}");
    assert_eq!(count(&v, "BG609"), 0, "{v:#}");
    assert_eq!(count(&v, "BG001"), 0, "{v:#}");
    snapshot("busybox");
}

#[test]
fn a_helm_template_is_one_bg609_and_chart_files_are_not_manifests() {
    let v = lint_json("helm-chart");
    assert_eq!(count(&v, "BG609"), 1, "{v:#}");
    for code in ["BG001", "BG002", "BG003"] {
        assert_eq!(count(&v, code), 0, "{code}: {v:#}");
    }
    snapshot("helm-chart");
}

#[test]
fn gitops_environments_are_separate_and_interval_and_prefix_schedules_are_warnings() {
    let v = lint_json("gitops");
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    assert_eq!(count(&v, "BG107"), 1, "{v:#}");
    assert_eq!(count(&v, "BG108"), 1, "{v:#}");
    for code in ["BG101", "BG106", "BG002", "BG003"] {
        assert_eq!(count(&v, code), 0, "{code}: {v:#}");
    }
    assert_eq!(v["summary"]["sources"]["kubernetes"], 3, "{v:#}");
    snapshot("gitops");
}

#[test]
fn pm2_aliases_cwd_and_a_web_restart() {
    if !need_node(1) {
        return;
    }
    let v = lint_json("pm2-app");
    // The web cluster's nightly cron_restart is a restart, not batch work.
    let bg606: Vec<&Value> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["code"] == "BG606")
        .collect();
    assert!(
        bg606
            .iter()
            .all(|f| !f["message"].as_str().unwrap_or("").contains("`web`")),
        "{v:#}"
    );
    // `cwd` + `exec` is the crontab's `cd /srv/payments && node jobs/settle.js >> …`.
    assert_eq!(count(&v, "BG601"), 1, "{v:#}");
    assert_eq!(count(&v, "BG801"), 1, "{v:#}");
    snapshot("pm2-app");
}

#[test]
fn pm2_json_apps_as_a_mapping_and_a_disabled_restart() {
    let v = lint_json("pm2-json");
    assert_eq!(v["summary"]["sources"]["pm2"], 2, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 1, "{v:#}");
    assert_eq!(count(&v, "BG101"), 0, "{v:#}");
    snapshot("pm2-json");
}

/// PM2 one-shots under `cron_restart` with autorestart on loop (BG613): found by their
/// script (an exit call, no listen/timer/worker call) or a job's name; a server, a queue
/// worker, `autorestart: false` and `stop_exit_codes: [0]` are not reported, and a script
/// that is not in the tree is a note, never a guess.
#[test]
fn pm2_one_shots_under_cron_restart_loop() {
    let v = lint_json("pm2-loop");
    let looping: Vec<&str> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["code"] == "BG613")
        .filter_map(|f| f["job"].as_str())
        .collect();
    assert_eq!(
        looping,
        [
            "PM2 app `nightly-report`",
            "PM2 app `cleanup`",
            "PM2 app `digest`"
        ],
        "{v:#}"
    );
    let messages: Vec<&str> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("`scripts/cleanup.py` ends the process: `sys.exit(…)` at line 10")),
        "{messages:#?}"
    );
    // The one-shots, `sync-accounts` (autorestart off) and `backup` (stop_exit_codes).
    assert_eq!(v["summary"]["registrations"], 5, "{v:#}");
    let listed = output(&["lint", "--list-files", "--now", NOW, &tree("pm2-loop")]);
    assert!(
        listed.contains("`http.createServer(…)` at line 2"),
        "{listed}"
    );
    assert!(listed.contains("`new Worker(…)` at line 3"), "{listed}");
    assert!(
        listed.contains("`dist/archive.js` was not found beside the file"),
        "{listed}"
    );
    snapshot("pm2-loop");
}

#[test]
fn secrets_are_found_as_literals_only_and_never_printed() {
    let v = lint_json("k8s-secrets");
    assert_eq!(count(&v, "BG801"), 3, "{v:#}");
    let dir = tree("k8s-secrets");
    let literals = [
        "corpus-pg-literal",
        "corpusAwsSecretLiteral0123456789abcdefgh",
        "corpus-flag-literal",
    ];
    for format in ["pretty", "json", "sarif", "github"] {
        let out = output(&["lint", "--format", format, "--now", NOW, &dir]);
        for secret in literals {
            assert!(!out.contains(secret), "{format} prints {secret}:\n{out}");
        }
    }
    for format in ["dot", "mermaid"] {
        let out = output(&["graph", "--format", format, "--now", NOW, &dir]);
        for secret in literals {
            assert!(
                !out.contains(secret),
                "graph {format} prints {secret}:\n{out}"
            );
        }
    }
    snapshot("k8s-secrets");
}

#[test]
fn the_payments_incident_in_four_spellings_is_one_duplicate() {
    let v = lint_json("payments");
    let dup: Vec<&Value> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["code"] == "BG601")
        .collect();
    assert_eq!(dup.len(), 1, "{v:#}");
    assert_eq!(dup[0]["related"].as_array().map(Vec::len), Some(3), "{v:#}");
    snapshot("payments");
}

#[test]
fn list_files_says_what_was_read_and_what_was_not() {
    let dir = tree("gitops");
    let out = output(&["lint", "--list-files", "--now", NOW, &dir]);
    assert!(out.contains("kustomization.yaml"), "{out}");
    assert!(out.contains("not read"), "{out}");
    assert!(out.contains("kubernetes"), "{out}");
}
