//! Suppressions are judged only in files that were read: a file that did not parse, or
//! that was refused for its size, reports no unused suppression (BG902).

use batchguard::config::Settings;
use batchguard::finding::Finding;
use batchguard::lint::{LintOptions, lint_bytes};
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
