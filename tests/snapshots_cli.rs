//! What users read, kept as snapshots (insta): `explain` of every rule and check, and the
//! audit's pretty and markdown reports of the bundled demo ledger (a day with a missed
//! slot, a duplicate run, a doubly applied output, a lost and a late run, a malformed row
//! and an undeclared job). A reviewer sees a change to any of them as a snapshot diff.

mod common;

use common::bg;

fn stdout(args: &[&str]) -> String {
    let out = bg().args(args).output().expect("batchguard runs");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn explain_every_code() {
    for line in stdout(&["rules"]).lines() {
        let code = line.split_whitespace().next().unwrap_or_default();
        let out = bg().args(["explain", code]).output().expect("explain runs");
        assert!(out.status.success(), "explain {code}");
        insta::assert_snapshot!(
            format!("explain_{code}"),
            String::from_utf8(out.stdout).expect("utf-8")
        );
    }
}

/// The README's demo audit in one format; exit 1 (it has errors).
fn demo_audit(format: &str) -> String {
    let out = bg()
        .args([
            "audit",
            "--ledger",
            "fixtures/demo/events.csv",
            "--outputs",
            "fixtures/demo/outputs.csv",
            "--manifest",
            "fixtures/demo/billing.batchguard.yaml",
            "--from",
            "2026-03-01T00:00:00+09:00",
            "--to",
            "2026-03-02T00:00:00+09:00",
            "--format",
            format,
        ])
        .output()
        .expect("audit runs");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn audit_demo_pretty() {
    insta::assert_snapshot!(demo_audit("pretty"));
}

#[test]
fn audit_demo_markdown() {
    insta::assert_snapshot!(demo_audit("markdown"));
}
