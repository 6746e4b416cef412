//! `batchguard graph`: the deploy tree in `fixtures/graph/` (two manifests, multi-document
//! Kubernetes YAML, a crontab, a PM2 file) drawn as DOT and Mermaid, kept as snapshots.

mod common;

use assert_cmd::Command;
use batchguard::Settings;
use batchguard::{GraphFormat, render_graph};
use batchguard::{LintOptions, WalkOptions, lint, read_project};
use common::NOW;
use std::path::PathBuf;

fn draw(format: GraphFormat) -> String {
    let now = NOW.parse().expect("fixed now");
    let run = lint(&LintOptions {
        paths: vec![PathBuf::from("fixtures/graph")],
        settings: Settings::default(),
        now,
    });
    assert!(run.unreadable.is_empty());
    render_graph(&run, now, format)
}

#[test]
fn dot_snapshot() {
    let out = draw(GraphFormat::Dot);
    assert!(out.contains("depends on (cycle)"), "{out}");
    assert!(out.contains("color=red"), "{out}");
    insta::assert_snapshot!("graph_dot", out);
}

#[test]
fn mermaid_snapshot() {
    let out = draw(GraphFormat::Mermaid);
    assert!(out.starts_with("flowchart LR\n"));
    insta::assert_snapshot!("graph_mermaid", out);
}

#[test]
fn graph_exits_0_and_2() {
    Command::cargo_bin("batchguard")
        .expect("binary")
        .args([
            "graph",
            "fixtures/graph",
            "--format",
            "mermaid",
            "--now",
            NOW,
        ])
        .assert()
        .code(0);
    Command::cargo_bin("batchguard")
        .expect("binary")
        .args(["graph", "no/such/dir"])
        .assert()
        .code(2);
}

/// `graph` draws from the model alone: of the rules only those that mask values run, and
/// the picture is the one lint's full run would draw, secrets redacted alike.
#[test]
fn graph_reads_the_model_without_judging_it() {
    let now = NOW.parse().expect("fixed now");
    let opts = LintOptions {
        paths: vec![
            PathBuf::from("fixtures/graph"),
            PathBuf::from("fixtures/rules/BG801/bad"),
            PathBuf::from("fixtures/corpus"),
        ],
        settings: Settings::default(),
        now,
    };
    let linted = lint(&opts);
    let read = read_project(&opts, WalkOptions::default());
    assert!(
        linted.findings.iter().any(|f| !f.rule.masks),
        "the tree has findings of rules that do not mask"
    );
    assert!(
        read.findings.iter().any(|f| f.rule.masks),
        "the masking rule still runs"
    );
    let judged: Vec<_> = read.findings.iter().filter(|f| !f.rule.masks).collect();
    assert!(judged.is_empty(), "graph judged: {judged:?}");
    for format in [GraphFormat::Dot, GraphFormat::Mermaid] {
        assert_eq!(
            render_graph(&read, now, format),
            render_graph(&linted, now, format)
        );
    }
}
