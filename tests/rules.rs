//! Every rule has a failing fixture and its fixed twin (`fixtures/rules/<CODE>/`): the
//! failing one must report the rule, the fixed one must not, and the pretty output of the
//! failing one is kept as a snapshot so a reviewer sees what users see.

use batchguard::Settings;
use batchguard::{LintOptions, LintRun};
use std::path::{Path, PathBuf};

fn lint(path: &Path) -> LintRun {
    batchguard::lint(&LintOptions {
        paths: vec![path.to_path_buf()],
        settings: Settings::default(),
        now: "2026-03-01T00:00:00Z".parse().expect("fixed now"),
    })
}

/// `<CODE>/<which>.batchguard.yaml`, or for cross-file rules a deploy tree `<CODE>/<which>/`.
fn fixture(code: &str, which: &str) -> PathBuf {
    let dir = Path::new("fixtures").join("rules").join(code);
    let tree = dir.join(which);
    if tree.is_dir() {
        return tree;
    }
    dir.join(format!("{which}.batchguard.yaml"))
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() { count_files(&p) } else { 1 }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn codes(run: &LintRun) -> Vec<&'static str> {
    run.findings
        .iter()
        .filter(|f| f.suppressed.is_none())
        .map(|f| f.code)
        .collect()
}

/// Lint rules only: audit checks (AU…) share the registry but are tested on ledgers
/// (`tests/audit_checks.rs`).
fn lint_rules() -> impl Iterator<Item = &'static batchguard::RuleMeta> {
    batchguard::REGISTRY
        .all()
        .filter(|m| m.code.starts_with("BG"))
}

#[test]
fn every_rule_has_fixtures() {
    let missing: Vec<String> = lint_rules()
        .flat_map(|m| ["bad", "good"].map(|w| fixture(m.code, w)))
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "fixtures missing: {missing:?}");
}

#[test]
fn no_fixtures_without_a_rule() {
    let stray: Vec<String> = std::fs::read_dir("fixtures/rules")
        .expect("fixtures/rules exists")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            batchguard::REGISTRY
                .find(name)
                .is_none_or(|m| m.code != name)
        })
        .collect();
    assert!(stray.is_empty(), "fixture folders of no rule: {stray:?}");
}

#[test]
fn bad_fixtures_fire_and_good_twins_do_not() {
    let mut failures = Vec::new();
    for meta in lint_rules() {
        let code = meta.code;
        let (bad, good) = (fixture(code, "bad"), fixture(code, "good"));
        if !bad.exists() || !good.exists() {
            failures.push(format!("{code}: fixtures missing"));
            continue;
        }
        let bad_run = lint(&bad);
        if !codes(&bad_run).contains(&code) {
            failures.push(format!(
                "{code}: {} does not report it (got {:?})",
                bad.display(),
                codes(&bad_run)
            ));
        }
        let good_run = lint(&good);
        if codes(&good_run).contains(&code) {
            failures.push(format!("{code}: {} still reports it", good.display()));
        }
        let expected_files = if good.is_dir() { count_files(&good) } else { 1 };
        if !good_run.unreadable.is_empty() || good_run.files.len() != expected_files {
            failures.push(format!("{code}: {} was not read", good.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bad_fixture_output_snapshots() {
    for meta in lint_rules() {
        let code = meta.code;
        let bad = fixture(code, "bad");
        if !bad.exists() {
            continue; // reported by every_rule_has_fixtures
        }
        let output = batchguard::render_pretty(&lint(&bad), false);
        insta::assert_snapshot!(format!("{code}_bad"), output);
    }
}
