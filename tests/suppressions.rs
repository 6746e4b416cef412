//! Suppressions are judged only in files that were read: a file that did not parse, or
//! that was refused for its size, reports no unused suppression (BG902).

use batchguard::Finding;
use batchguard::Settings;
use batchguard::{LintOptions, lint_bytes};
use std::path::Path;

fn lint(bytes: &[u8]) -> Vec<Finding> {
    let opts = LintOptions {
        paths: vec![],
        settings: Settings::default(),
        now: "2026-03-01T00:00:00Z".parse().unwrap(),
    };
    lint_bytes(Path::new("s.batchguard.yaml"), bytes, &opts).1
}

fn codes(f: &[Finding]) -> Vec<&str> {
    f.iter().map(|f| f.code).collect()
}

#[test]
fn a_file_with_a_yaml_error_reports_no_unused_suppression() {
    let text =
        "version: 1\njobs:\n  - name: a # batchguard: allow BG201 -- legacy\n    schedule: [\n";
    let f = lint(text.as_bytes());
    assert_eq!(codes(&f), ["BG001"], "{f:?}");
}

#[test]
fn an_oversized_file_is_one_bg006_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.batchguard.yaml");
    let line = "# batchguard: allow BG201 -- a suppression on every line\n";
    let mut text = String::from("version: 1\njobs: []\n");
    while text.len() <= 9 * 1024 * 1024 {
        text.push_str(line);
    }
    std::fs::write(&path, &text).unwrap();
    let out = assert_cmd::Command::cargo_bin("batchguard")
        .unwrap()
        .args(["lint", "--format", "json", "--now", "2026-03-01T00:00:00Z"])
        .arg(&path)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap_or(""))
        .collect();
    let others = found.iter().filter(|c| **c != "BG006").count();
    assert_eq!(
        (found.len() - others, others),
        (1, 0),
        "one BG006, no other finding"
    );
}

/// Lints a folder holding `files` (name, text), as `batchguard lint DIR` does.
fn lint_tree(files: &[(&str, &str)]) -> Vec<Finding> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let opts = LintOptions {
        paths: vec![dir.path().to_path_buf()],
        settings: Settings::default(),
        now: "2026-03-01T00:00:00Z".parse().unwrap(),
    };
    batchguard::lint(&opts).findings
}

const SETTLE: &str = "version: 1\nservice: billing\njobs:\n  # batchguard: allow BG601 -- the old host is drained this week\n  - name: settle\n    schedule: \"0 * * * *\"\n    command: [node, settle.js]\n";

#[test]
fn an_unused_allow_of_a_project_rule_is_bg902() {
    // One manifest: nothing is registered twice, so the allow of BG601 suppresses nothing.
    let f = lint_tree(&[("billing.batchguard.yaml", SETTLE)]);
    let unused: Vec<&Finding> = f.iter().filter(|f| f.code == "BG902").collect();
    assert_eq!(unused.len(), 1, "{f:#?}");
    assert_eq!(unused[0].message, "`allow BG601` suppresses nothing here");
}

#[test]
fn a_used_allow_of_a_project_rule_suppresses_and_is_not_bg902() {
    // The same service/name declared twice: BG601 fires on the first place, where the
    // allow (alone on the line above the job) suppresses it.
    let f = lint_tree(&[
        ("a.batchguard.yaml", SETTLE),
        (
            "b.batchguard.yaml",
            "version: 1\nservice: billing\njobs:\n  - name: settle\n    schedule: \"0 * * * *\"\n    command: [node, settle.js]\n",
        ),
    ]);
    let dup: Vec<&Finding> = f.iter().filter(|f| f.code == "BG601").collect();
    assert_eq!(dup.len(), 1, "{f:#?}");
    assert!(dup[0].suppressed.is_some(), "{:?}", dup[0]);
    assert!(!f.iter().any(|f| f.code == "BG902"), "{f:#?}");
}
