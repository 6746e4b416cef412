//! Registration sources end to end: node absent, hostile ecosystem files and Kubernetes
//! YAML bounded, duplicates reported with every place in JSON `related`.

mod common;

use common::{NOW, bg, has_node, node_major};
use std::fs;
use std::path::Path;

fn json(dir: &Path, extra_env: Option<(&str, &str)>) -> serde_json::Value {
    let mut c = bg();
    c.args(["lint", "--format", "json", "--now", NOW]).arg(dir);
    if let Some((k, v)) = extra_env {
        c.env(k, v);
    }
    let out = c.output().expect("runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn findings<'a>(v: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["code"] == code).collect())
        .unwrap_or_default()
}

#[test]
fn node_absent_is_bg609_not_a_silent_skip() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join("ecosystem.config.js"),
        "module.exports = { apps: [{ name: 'settle', script: 'jobs/settle.js', cron_restart: '0 * * * *' }] };\n",
    )
    .expect("write");
    let empty = tempfile::tempdir().expect("tmp");
    let v = json(dir.path(), Some(("PATH", &empty.path().to_string_lossy())));
    let f = findings(&v, "BG609");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("node is not on PATH")),
        "{v}"
    );
    assert_eq!(f[0]["severity"], "warning");
    assert!(
        f[0]["file"]
            .as_str()
            .is_some_and(|p| p.ends_with("ecosystem.config.js"))
    );
}

#[test]
fn ecosystem_js_is_evaluated_when_node_is_there() {
    if !has_node() {
        eprintln!("node not on PATH: skipped");
        return;
    }
    let v = json(Path::new("fixtures/rules/BG606/bad"), None);
    let f = findings(&v, "BG606");
    assert_eq!(f.len(), 1, "{v}");
    // Located on `instances: "max"` in the .js file, found by its text.
    assert_eq!(f[0]["line"], 17);
}

#[test]
fn an_ecosystem_file_that_never_ends_is_killed() {
    if !has_node() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(dir.path().join("ecosystem.config.js"), "for (;;) {}\n").expect("write");
    let v = json(dir.path(), None);
    let f = findings(&v, "BG609");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("timed out")),
        "{v}"
    );
}

#[test]
fn an_ecosystem_file_that_prints_megabytes_is_cut_off() {
    if !has_node() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join("ecosystem.config.cjs"),
        "module.exports = { apps: [{ name: 'x'.repeat(8 * 1024 * 1024), cron_restart: '* * * * *' }] };\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    let f = findings(&v, "BG609");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than 4 MiB")),
        "{v}"
    );
}

#[test]
fn an_ecosystem_file_cannot_write_files() {
    if node_major() < 20 {
        eprintln!("node 20+ not on PATH: skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join("ecosystem.config.js"),
        "require('fs').writeFileSync(__dirname + '/pwned', 'x'); module.exports = { apps: [] };\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    assert!(!dir.path().join("pwned").exists());
    assert_eq!(findings(&v, "BG609").len(), 1, "{v}");
}

#[test]
fn kubernetes_alias_bomb_and_syntax_errors_are_located() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\n---\nkind: CronJob\na: &a [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for (i, prev) in ["a", "b", "c", "d", "e", "f", "g"].iter().enumerate() {
        let name = ["b", "c", "d", "e", "f", "g", "h"][i];
        bomb.push_str(&format!("{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
    }
    fs::write(dir.path().join("bomb.yaml"), bomb).expect("write");
    fs::write(
        dir.path().join("broken.yaml"),
        "kind: Deployment\n---\napiVersion: batch/v1\nkind: CronJob\nspec: [\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    assert_eq!(findings(&v, "BG006").len(), 1, "{v}");
    let syntax = findings(&v, "BG001");
    assert_eq!(syntax.len(), 1, "{v}");
    assert!(syntax[0]["line"].as_u64().is_some_and(|l| l >= 3), "{v}");
}

#[test]
fn duplicate_lists_every_place_in_json_and_sarif() {
    let v = json(Path::new("fixtures/rules/BG601/bad"), None);
    let f = findings(&v, "BG601");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["file"]
            .as_str()
            .is_some_and(|p| p.ends_with("billing.batchguard.yaml"))
    );
    let related: Vec<&str> = f[0]["related"]
        .as_array()
        .expect("related")
        .iter()
        .filter_map(|r| r["file"].as_str())
        .collect();
    assert_eq!(related.len(), 2, "{v}");
    assert!(related.iter().any(|p| p.ends_with("batch-01.crontab")));
    assert!(related.iter().any(|p| p.ends_with("cronjobs.yaml")));
    let out = bg()
        .args([
            "lint",
            "fixtures/rules/BG601/bad",
            "--format",
            "sarif",
            "--now",
            NOW,
        ])
        .output()
        .expect("runs");
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    let dup = results
        .iter()
        .find(|r| r["ruleId"] == "BG601")
        .expect("BG601");
    assert_eq!(dup["relatedLocations"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_crontab_line_and_a_manifest_in_another_zone_are_the_same_slots() {
    // 02:00 in Seoul is 17:00 UTC: compared by slots, not strings.
    let dir = tempfile::tempdir().expect("tmp");
    let manifest =
        fs::read_to_string("fixtures/rules/BG608/good/billing.batchguard.yaml").expect("read");
    fs::write(dir.path().join("billing.batchguard.yaml"), manifest).expect("write");
    fs::write(
        dir.path().join("crontab"),
        "CRON_TZ=UTC\n0 17 * * * flock -n /l node jobs/settle.js\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    assert_eq!(findings(&v, "BG601").len(), 1, "{v}");
    fs::write(
        dir.path().join("crontab"),
        "CRON_TZ=UTC\n0 2 * * * flock -n /l node jobs/settle.js\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    assert_eq!(findings(&v, "BG601").len(), 0, "{v}");
}

#[test]
fn ambiguous_dependency_lists_candidates() {
    let dir = tempfile::tempdir().expect("tmp");
    let base =
        fs::read_to_string("fixtures/rules/BG701/good/ledger.batchguard.yaml").expect("read");
    fs::write(dir.path().join("ledger.batchguard.yaml"), &base).expect("write");
    fs::write(
        dir.path().join("treasury.batchguard.yaml"),
        base.replace("service: ledger", "service: treasury"),
    )
    .expect("write");
    let billing = fs::read_to_string("fixtures/rules/BG701/good/billing.batchguard.yaml")
        .expect("read")
        .replace("ledger/close-books", "close-books");
    fs::write(dir.path().join("billing.batchguard.yaml"), billing).expect("write");
    let v = json(dir.path(), None);
    let f = findings(&v, "BG701");
    assert_eq!(f.len(), 1, "{v}");
    let m = f[0]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("ledger/close-books") && m.contains("treasury/close-books"),
        "{m}"
    );
}

fn copy_tree(from: &Path, to: &Path) {
    for e in fs::read_dir(from).expect("read dir").filter_map(Result::ok) {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            fs::create_dir_all(&target).expect("mkdir");
            copy_tree(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).expect("copy");
        }
    }
}

#[test]
fn a_cross_file_finding_can_be_allowed_with_a_reason() {
    let dir = tempfile::tempdir().expect("tmp");
    copy_tree(Path::new("fixtures/rules/BG601/bad"), dir.path());
    let m = dir.path().join("billing.batchguard.yaml");
    let text = fs::read_to_string(&m).expect("read").replace(
        "  - name: settle-payments",
        "  # batchguard: allow BG601 -- crontab removed in the next deploy (OPS-123)\n  - name: settle-payments",
    );
    fs::write(&m, text).expect("write");
    let v = json(dir.path(), None);
    assert!(findings(&v, "BG601").is_empty(), "{v}");
    assert!(findings(&v, "BG902").is_empty(), "{v}");
    assert_eq!(v["summary"]["suppressed"], 1, "{v}");
}

#[test]
fn a_huge_crontab_of_one_command_is_bounded() {
    // 20,000 lines of one command on 1,440 distinct schedules: one duplicated job, found
    // without comparing every pair of lines.
    let dir = tempfile::tempdir().expect("tmp");
    let mut text = String::from("CRON_TZ=UTC\n");
    for i in 0..20_000 {
        text.push_str(&format!(
            "{} {} * * * flock -n /l node x.js\n",
            i % 60,
            (i / 60) % 24
        ));
    }
    fs::write(dir.path().join("crontab"), text).expect("write");
    let v = json(dir.path(), None);
    assert!(!findings(&v, "BG601").is_empty(), "{}", v["summary"]);
}

#[test]
fn a_secret_in_a_cronjob_is_bg801_and_masked() {
    let dir = tempfile::tempdir().expect("tmp");
    let text = fs::read_to_string("fixtures/rules/BG603/good/k8s/cronjobs.yaml")
        .expect("read")
        .replace(
            "              command: [\"batchguard\"",
            "              env:\n                - name: DATABASE_URL\n                  value: \"postgres://billing:hunter2@db.internal:5432/billing\"\n              command: [\"batchguard\"",
        );
    fs::write(dir.path().join("cronjobs.yaml"), text).expect("write");
    let out = bg()
        .args(["lint", "--now", NOW])
        .arg(dir.path())
        .output()
        .expect("runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("BG801"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[test]
fn two_manifests_declaring_one_job_and_two_tied_registrations_are_duplicates() {
    let dir = tempfile::tempdir().expect("tmp");
    let manifest =
        fs::read_to_string("fixtures/rules/BG603/good/billing.batchguard.yaml").expect("read");
    fs::write(dir.path().join("billing.batchguard.yaml"), &manifest).expect("write");
    fs::create_dir_all(dir.path().join("old")).expect("mkdir");
    // The same service/name declared again, on another schedule and command.
    fs::write(
        dir.path().join("old/billing.batchguard.yaml"),
        manifest
            .replace("0 * * * *", "30 4 * * *")
            .replace("jobs/settle.js", "jobs/settle-v1.js"),
    )
    .expect("write");
    let v = json(dir.path(), None);
    let f = findings(&v, "BG601");
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["related"].as_array().map(Vec::len), Some(1), "{v}");

    // One manifest, two CronJobs tied to it by annotation, one of them not under
    // `batchguard run`: registered twice.
    fs::remove_dir_all(dir.path().join("old")).expect("rm");
    let k8s = fs::read_to_string("fixtures/rules/BG603/good/k8s/cronjobs.yaml").expect("read");
    fs::write(dir.path().join("a.yaml"), &k8s).expect("write");
    fs::write(
        dir.path().join("b.yaml"),
        k8s.replace("name: settle\n", "name: settle-v2\n").replace(
            r#""batchguard", "run", "--job", "settle-payments", "--", "#,
            "",
        ),
    )
    .expect("write");
    let v = json(dir.path(), None);
    let f = findings(&v, "BG601");
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["related"].as_array().map(Vec::len), Some(2), "{v}");
}

#[test]
fn a_tied_cronjob_that_drifted_is_bg608_and_an_untied_different_schedule_is_no_duplicate() {
    let dir = tempfile::tempdir().expect("tmp");
    copy_tree(Path::new("fixtures/rules/BG603/good"), dir.path());
    let k8s = dir.path().join("k8s/cronjobs.yaml");
    let text = fs::read_to_string(&k8s).expect("read");
    fs::write(&k8s, text.replace("\"0 * * * *\"", "\"*/30 * * * *\"")).expect("write");
    let v = json(dir.path(), None);
    let f = findings(&v, "BG608");
    assert_eq!(f.len(), 1, "{v}");
    assert!(
        f[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("*/30 * * * *")),
        "{v}"
    );
    // A crontab line running the same command at 00:30 only: no shared slot with hourly :00.
    fs::write(
        dir.path().join("crontab"),
        "30 0 * * * flock -n /l node jobs/settle.js\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    assert!(findings(&v, "BG601").is_empty(), "{v}");
}

#[test]
fn schedule_rules_apply_to_registrations() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join("crontab"),
        "CRON_TZ=America/New_York\n30 2 * * * flock -n /l node a.js\n61 * * * * flock -n /l node c.js\nCRON_TZ=Mars/Base\n0 1 * * * flock -n /l node d.js\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    for code in ["BG101", "BG103", "BG105"] {
        assert_eq!(findings(&v, code).len(), 1, "{code}: {v}");
    }
    let bad = findings(&v, "BG101");
    assert_eq!(
        (bad[0]["line"].as_u64(), bad[0]["column"].as_u64()),
        (Some(3), Some(1))
    );
}

#[test]
fn an_es_module_ecosystem_file_is_read() {
    if node_major() < 20 {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(dir.path().join("package.json"), "{\"type\": \"module\"}\n").expect("write");
    fs::write(
        dir.path().join("ecosystem.config.js"),
        "export default {\n  apps: [{ name: \"settle\", script: \"jobs/settle.js\", cron_restart: \"0 * * * *\",\n    exec_mode: \"cluster\", instances: 2, autorestart: false }],\n};\n",
    )
    .expect("write");
    let v = json(dir.path(), None);
    assert!(findings(&v, "BG609").is_empty(), "{v}");
    assert_eq!(findings(&v, "BG606").len(), 1, "{v}");
}

#[test]
fn docs_multi_source_example_is_what_lint_prints() {
    let out = bg()
        .args(["lint", "fixtures/rules/BG601/bad", "--now", NOW])
        .output()
        .expect("runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    let first = shown.split("\n\n").next().unwrap_or("");
    let page = fs::read_to_string("docs/duplicates.md").expect("docs/duplicates.md");
    assert!(
        page.contains(first),
        "the BG601 example of docs/duplicates.md is stale; paste:\n{first}"
    );
}

/// A manifest saved with a UTF-8 byte-order mark (as Windows editors save it) and not named
/// `*.batchguard.yaml` is still found and linted, like the same file without the mark.
#[test]
fn a_manifest_with_a_byte_order_mark_is_found_by_its_keys() {
    let d = tempfile::tempdir().expect("tempdir");
    let body = "version: 1\nservice: s\njobs:\n  - name: j\n    schedule: \"99 * * * *\"\n";
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(body.as_bytes());
    std::fs::write(d.path().join("deploy.yaml"), with_bom).expect("write");
    let v = common::lint_json(d.path());
    assert_eq!(v["summary"]["sources"]["manifest"], 1, "{v}");
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(
        codes.contains(&"BG101"),
        "the bad schedule is reported: {codes:?}"
    );
}
