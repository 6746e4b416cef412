//! The real-world regression corpus (`fixtures/corpus/`): deploy trees written in the shapes
//! real repositories use (a Laravel host crontab, a Docker `cron.d` file, a busybox crontab,
//! a Helm chart, a GitOps tree with per-environment namespaces, PM2 ecosystems with aliases
//! and a web cluster restart, CronJobs with secret references and with literal secrets, and
//! the payments incident spelled four ways, the deploy-unit shapes of docs/deploy-units.md:
//! linter test fixtures, alternative examples, a kustomize overlay with its base and
//! patches, units tied by a manifest, CronJobs without a schedule; and crontabs run by
//! supercronic from a Dockerfile, from a compose file with `-overlapping` or declared in
//! `batchguard.toml`, a file copied into `/etc/cron.d` with a 6-field line and `@reboot`, a
//! busybox crond image, a PM2 file started by `pm2-runtime` in a `package.json` script).
//! Each tree's pretty lint output is a snapshot, and every false alarm or miss lint once had
//! on such trees is asserted by name here.

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

fn findings_of<'v>(v: &'v Value, code: &str) -> Vec<&'v Value> {
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["code"] == code)
        .collect()
}

fn list_files_snapshot(name: &str) -> String {
    let dir = tree(name);
    let out = output(&["lint", "--list-files", "--now", NOW, &dir]);
    insta::assert_snapshot!(format!("corpus_{name}_files"), out);
    out
}

#[test]
fn supercronic_named_by_the_dockerfile_reads_seconds_and_years() {
    let v = lint_json("supercronic");
    // `*/30 * * * * * *` is seconds..year, `0 3 * * * 2019` five fields and a year (over),
    // `0 4 * * *` five fields: three jobs, not a command starting with `*`.
    assert_eq!(v["summary"]["registrations"], 3, "{v:#}");
    assert_eq!(count(&v, "BG101"), 0, "{v:#}");
    let never = findings_of(&v, "BG102");
    assert_eq!(never.len(), 1, "{v:#}");
    assert!(
        never[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("0 3 * * * 2019") && m.contains("supercronic")),
        "{v:#}"
    );
    // supercronic waits for a run before the next one, and reads a last line without
    // newline: no BG607, no BG610.
    assert_eq!(count(&v, "BG607"), 0, "{v:#}");
    assert_eq!(count(&v, "BG610"), 0, "{v:#}");
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    let files = list_files_snapshot("supercronic");
    assert!(files.contains("run by supercronic: "), "{files}");
    let graph = output(&[
        "graph",
        "--format",
        "mermaid",
        "--now",
        NOW,
        &tree("supercronic"),
    ]);
    assert!(graph.contains("(supercronic, Europe/Berlin)"), "{graph}");
    snapshot("supercronic");
}

#[test]
fn supercronic_overlapping_in_compose_keeps_bg607() {
    let v = lint_json("supercronic-compose");
    // `./ops/schedule` is mounted where `supercronic -overlapping` reads it.
    assert_eq!(v["summary"]["sources"]["crontab"], 1, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 2, "{v:#}");
    let unguarded = findings_of(&v, "BG607");
    assert_eq!(unguarded.len(), 2, "{v:#}");
    assert!(
        unguarded[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("supercronic -overlapping")),
        "{v:#}"
    );
    list_files_snapshot("supercronic-compose");
    snapshot("supercronic-compose");
}

#[test]
fn a_file_copied_into_cron_d_has_a_user_column_and_six_fields_are_bg101() {
    let v = lint_json("debian-cron-d");
    // `docker/scheduler` is no crontab by its name: the Dockerfile copies it into cron.d.
    assert_eq!(v["summary"]["sources"]["crontab"], 1, "{v:#}");
    // The `* * * * *` line only: `@reboot` runs at boot, the 6-field line never runs.
    assert_eq!(v["summary"]["registrations"], 1, "{v:#}");
    let bad = findings_of(&v, "BG101");
    assert_eq!(bad.len(), 1, "{v:#}");
    let m = bad[0]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("6 schedule fields") && m.contains("Debian cron") && m.contains("supercronic"),
        "{m}"
    );
    assert_eq!(bad[0]["line"], 6, "{v:#}");
    // The user is not the command: the one BG607 names php, not www-data.
    let unguarded = findings_of(&v, "BG607");
    assert_eq!(unguarded.len(), 1, "{v:#}");
    assert!(
        unguarded[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`php /var/www/artisan schedule:run`")),
        "{v:#}"
    );
    let files = list_files_snapshot("debian-cron-d");
    assert!(files.contains("copied to /etc/cron.d/scheduler"), "{files}");
    assert!(files.contains("`@reboot`"), "{files}");
    let graph = output(&["graph", "--now", NOW, &tree("debian-cron-d")]);
    assert!(graph.contains("crontab line 3 (@reboot)"), "{graph}");
    snapshot("debian-cron-d");
}

#[test]
fn a_file_copied_into_busybox_crontabs_is_a_user_crontab_run_by_crond() {
    let v = lint_json("alpine-crond");
    assert_eq!(v["summary"]["registrations"], 1, "{v:#}");
    assert_eq!(count(&v, "BG609"), 0, "{v:#}");
    // crond does not start a line whose last run is still going; it reads a last line
    // without newline.
    assert_eq!(count(&v, "BG607"), 0, "{v:#}");
    assert_eq!(count(&v, "BG610"), 0, "{v:#}");
    let files = list_files_snapshot("alpine-crond");
    assert!(files.contains("run by busybox crond"), "{files}");
    snapshot("alpine-crond");
}

#[test]
fn a_pm2_file_started_by_pm2_runtime_is_read_whatever_its_name() {
    let v = lint_json("pm2-runtime");
    assert_eq!(v["summary"]["sources"]["pm2"], 1, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 1, "{v:#}");
    let files = list_files_snapshot("pm2-runtime");
    assert!(
        files.contains("started by `pm2-runtime start deploy/pm2-prod.json"),
        "{files}"
    );
    snapshot("pm2-runtime");
}

#[test]
fn a_crontab_named_alone_keeps_the_runner_of_the_dockerfile_beside_it() {
    // As a pre-commit step names one changed file.
    let file = format!("{}/crontab", tree("supercronic"));
    let out = output(&["lint", "--format", "json", "--now", NOW, &file]);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["summary"]["registrations"], 3, "{v:#}");
    assert_eq!(count(&v, "BG610"), 0, "{v:#}");
    assert_eq!(count(&v, "BG102"), 1, "{v:#}");
}

#[test]
fn a_declared_runner_applies_where_no_deploy_file_names_one() {
    let v = lint_json("declared-runner");
    // `0 */5 * * * * *` is every 5 minutes (seconds..year); `@reboot` is no supercronic
    // schedule (cronexpr refuses it and supercronic then refuses the whole file).
    assert_eq!(v["summary"]["registrations"], 2, "{v:#}");
    let bad = findings_of(&v, "BG101");
    assert_eq!(bad.len(), 1, "{v:#}");
    assert!(
        bad[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("@reboot")),
        "{v:#}"
    );
    assert_eq!(count(&v, "BG607"), 0, "{v:#}");
    list_files_snapshot("declared-runner");
    snapshot("declared-runner");
}

#[test]
fn a_linters_test_cases_are_not_one_job_registered_eight_times() {
    // kube-score keeps eight copies of one CronJob in `testdata/`, checkov one per
    // PASSED/FAILED file: each file is a case, a deploy unit of its own.
    let v = lint_json("linter-fixtures");
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    assert_eq!(count(&v, "BG602"), 0, "{v:#}");
    // The case without a schedule is a test of the API server's refusal, not a deploy.
    assert_eq!(count(&v, "BG003"), 0, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 11, "{v:#}");
    assert_eq!(v["summary"]["jobs"], 11, "{v:#}");
    snapshot("linter-fixtures");
    // `--list-files` says so, one line per test folder.
    let dir = tree("linter-fixtures");
    let out = output(&["lint", "--list-files", "--now", NOW, &dir]);
    insta::assert_snapshot!("corpus_linter-fixtures_list_files", out);
}

#[test]
fn alternative_examples_side_by_side_are_not_duplicates() {
    let v = lint_json("examples-side-by-side");
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 3, "{v:#}");
    snapshot("examples-side-by-side");
}

#[test]
fn an_overlay_and_its_base_are_tied_by_the_kustomization_and_patches_are_no_errors() {
    let v = lint_json("kustomize-tied");
    let dup = findings_of(&v, "BG601");
    assert_eq!(dup.len(), 1, "{v:#}");
    let message = dup[0]["message"].as_str().unwrap_or_default();
    // The tie is named; the replay tool (a unit no overlay includes) is not part of it.
    assert!(
        message.contains("tied by kustomization `fixtures/corpus/kustomize-tied/overlays/production/kustomization.yaml`"),
        "{message}"
    );
    assert!(message.contains("settle-hourly"), "{message}");
    assert!(!message.contains("settle-replay"), "{message}");
    assert_eq!(dup[0]["related"].as_array().map(Vec::len), Some(1), "{v:#}");
    // A patch named by `patches` (with an image) and one named by
    // `patchesStrategicMerge` (no container at all) have no schedule of their own.
    assert_eq!(count(&v, "BG003"), 0, "{v:#}");
    // A kustomization naming `kind: CronJob` in a patch target is no CronJob source.
    assert_eq!(v["summary"]["sources"]["kubernetes"], 5, "{v:#}");
    snapshot("kustomize-tied");
}

#[test]
fn list_files_shows_the_units_and_what_ties_them() {
    let dir = tree("kustomize-tied");
    let out = output(&["lint", "--list-files", "--now", NOW, &dir]);
    insta::assert_snapshot!("corpus_kustomize-tied_list_files", out);
    let json: Value = serde_json::from_str(&output(&[
        "lint",
        "--list-files",
        "--format",
        "json",
        "--now",
        NOW,
        &dir,
    ]))
    .expect("json");
    let units = json["units"].as_array().expect("units listed");
    assert_eq!(units.len(), 4, "{json:#}");
    let base = units
        .iter()
        .find(|u| u["unit"] == "fixtures/corpus/kustomize-tied/base")
        .expect("base unit");
    assert_eq!(base["kind"], "kustomization");
    assert_eq!(
        base["deployed_with"].as_array().map(Vec::len),
        Some(2),
        "{base:#}"
    );
    let replay = units
        .iter()
        .find(|u| u["unit"] == "fixtures/corpus/kustomize-tied/tools/replay")
        .expect("replay unit");
    assert_eq!(replay["deployed_with"].as_array().map(Vec::len), Some(0));
    // The patches say why they register nothing.
    let out_notes = out
        .matches("has no spec.schedule: a patch named by")
        .count();
    assert_eq!(out_notes, 2, "{out}");
    // The graph says what ties the duplicate's units.
    let graph = output(&["graph", "--format", "mermaid", "--now", NOW, &dir]);
    assert!(
        graph.contains("DUPLICATE: registered in 2 places (deploy units tied by kustomization fixtures/corpus/kustomize-tied/overlays/production/kustomization.yaml)"),
        "{graph}"
    );
}

#[test]
fn units_tied_by_one_manifest_are_compared() {
    let v = lint_json("manifest-tied");
    let dup = findings_of(&v, "BG601");
    assert_eq!(dup.len(), 1, "{v:#}");
    let message = dup[0]["message"].as_str().unwrap_or_default();
    assert!(
        message
            .contains("tied by manifest `fixtures/corpus/manifest-tied/billing.batchguard.yaml`"),
        "{message}"
    );
    assert_eq!(dup[0]["related"].as_array().map(Vec::len), Some(2), "{v:#}");
    snapshot("manifest-tied");
}

#[test]
fn a_cronjob_without_a_schedule_is_an_error_where_deployed_only() {
    let v = lint_json("cronjob-no-schedule");
    let missing = findings_of(&v, "BG003");
    assert_eq!(missing.len(), 1, "{v:#}");
    assert_eq!(
        missing[0]["file"], "fixtures/corpus/cronjob-no-schedule/deploy/reports.yaml",
        "{v:#}"
    );
    assert!(
        missing[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("CronJob `weekly-reports` has no `spec.schedule`")),
        "{v:#}"
    );
    assert_eq!(missing[0]["line"], 5, "{v:#}");
    // The partial one (no container) and the test case say why they are no error.
    let dir = tree("cronjob-no-schedule");
    let listed = output(&["lint", "--list-files", "--now", NOW, &dir]);
    assert!(
        listed
            .contains("CronJob `daily-reports` has no spec.schedule: a patch (no container image"),
        "{listed}"
    );
    assert!(
        listed.contains("CronJob `weekly-reports` has no spec.schedule: a test fixture under"),
        "{listed}"
    );
    snapshot("cronjob-no-schedule");
}

/// Writes `files` (path, text) under a new temporary folder.
fn temp_tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    dir
}

const SETTLE_CRONJOB: &str = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: settle\nspec:\n  schedule: \"0 * * * *\"\n  concurrencyPolicy: Forbid\n  startingDeadlineSeconds: 300\n  jobTemplate:\n    spec:\n      backoffLimit: 2\n      template:\n        spec:\n          containers:\n            - name: settle\n              image: registry.example.com/app:1\n              workingDir: /app\n              command: [node, jobs/settle.js]\n";
const SETTLE_CRONTAB: &str = "0 * * * * cd /app && flock -n /tmp/settle.lock node jobs/settle.js\n";

fn lint_paths(paths: &[&std::path::Path]) -> Value {
    let mut args: Vec<String> = ["lint", "--format", "json", "--now", NOW]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.extend(paths.iter().map(|p| p.to_string_lossy().into_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serde_json::from_str(&output(&args)).expect("json")
}

#[test]
fn two_repositories_are_separate_units_and_one_repository_still_has_duplicates() {
    // One parent folder holding two git checkouts with the same job.
    let dir = temp_tree(&[
        ("repo-a/.git/HEAD", "ref: refs/heads/main\n"),
        ("repo-a/k8s/settle.yaml", SETTLE_CRONJOB),
        ("repo-b/.git/HEAD", "ref: refs/heads/main\n"),
        ("repo-b/hosts/crontab", SETTLE_CRONTAB),
    ]);
    let v = lint_paths(&[dir.path()]);
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    assert_eq!(v["summary"]["registrations"], 2, "{v:#}");
    // Two folders outside the current directory, named one by one: two units as well.
    let plain = temp_tree(&[
        ("a/k8s/settle.yaml", SETTLE_CRONJOB),
        ("b/hosts/crontab", SETTLE_CRONTAB),
    ]);
    let v = lint_paths(&[&plain.path().join("a"), &plain.path().join("b")]);
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    // Two folders of the project in the current directory (`lint k8s hosts`) are one.
    let out = bg()
        .current_dir(plain.path())
        .args(["lint", "--format", "json", "--now", NOW, "a/k8s", "b/hosts"])
        .output()
        .expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(count(&v, "BG601"), 1, "{v:#}");
    // The same two files in one repository are one job registered twice, as before.
    let one = temp_tree(&[
        ("repo/.git/HEAD", "ref: refs/heads/main\n"),
        ("repo/k8s/settle.yaml", SETTLE_CRONJOB),
        ("repo/hosts/crontab", SETTLE_CRONTAB),
    ]);
    let v = lint_paths(&[one.path()]);
    let dup = findings_of(&v, "BG601");
    assert_eq!(dup.len(), 1, "{v:#}");
    // One unit: the message names no tie.
    assert!(
        !dup[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("tied by"),
        "{v:#}"
    );
}

#[test]
fn two_overlays_of_one_base_are_not_tied_to_each_other() {
    let kustomization = |resources: &str| {
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}"
        )
    };
    let overlay = kustomization("  - ../../base\n  - settle.yaml\n");
    let base = kustomization("  - heartbeat.yaml\n");
    let heartbeat = SETTLE_CRONJOB
        .replace("name: settle", "name: heartbeat")
        .replace("jobs/settle.js", "jobs/heartbeat.js");
    let dir = temp_tree(&[
        ("base/kustomization.yaml", &base),
        ("base/heartbeat.yaml", &heartbeat),
        ("overlays/prod/kustomization.yaml", &overlay),
        ("overlays/prod/settle.yaml", SETTLE_CRONJOB),
        ("overlays/staging/kustomization.yaml", &overlay),
        ("overlays/staging/settle.yaml", SETTLE_CRONJOB),
    ]);
    // Each overlay is deployed with the base, not with the other overlay.
    let v = lint_paths(&[dir.path()]);
    assert_eq!(count(&v, "BG601"), 0, "{v:#}");
    assert_eq!(count(&v, "BG602"), 0, "{v:#}");
    // The base running the same job is a duplicate of each overlay's: reported once,
    // with the places of one deploy (the base and one overlay), not all three.
    std::fs::write(dir.path().join("base/settle.yaml"), SETTLE_CRONJOB).expect("write");
    std::fs::write(
        dir.path().join("base/kustomization.yaml"),
        kustomization("  - heartbeat.yaml\n  - settle.yaml\n"),
    )
    .expect("write");
    let v = lint_paths(&[dir.path()]);
    let dup = findings_of(&v, "BG601");
    assert_eq!(dup.len(), 1, "{v:#}");
    assert_eq!(dup[0]["related"].as_array().map(Vec::len), Some(1), "{v:#}");
    assert!(
        dup[0]["message"].as_str().is_some_and(
            |m| m.contains("registered in 2 places of deploy units tied by kustomization")
        ),
        "{v:#}"
    );
}
