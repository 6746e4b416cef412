//! Hostile input: nothing panics, every problem has a located finding.
//! Large inputs are generated here rather than checked in.

use batchguard::Finding;
use batchguard::Settings;
use batchguard::{LintOptions, lint_bytes};

use std::path::Path;

fn opts() -> LintOptions {
    LintOptions {
        paths: vec![],
        settings: Settings::default(),
        now: "2026-03-01T00:00:00Z".parse().unwrap(),
    }
}

/// Lints bytes; returns the findings and checks every one is located inside the file.
fn lint(bytes: &[u8]) -> Vec<Finding> {
    let (file, findings, _) = lint_bytes(Path::new("hostile.batchguard.yaml"), bytes, &opts());
    for f in &findings {
        assert!(
            f.at.span.start <= file.text.len(),
            "{} points past the end",
            f.code
        );
        let (line, col) = file.line_col(f.at.span.start);
        assert!(line >= 1 && col >= 1);
        assert!(!f.message.is_empty());
    }
    findings
}

fn has(findings: &[Finding], code: &str) -> bool {
    findings.iter().any(|f| f.code == code)
}

#[test]
fn alias_bomb_is_refused_with_bg006() {
    let mut text = String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
    for i in 0..9u8 {
        let (me, prev) = ((b'b' + i) as char, (b'a' + i) as char);
        let refs = vec![format!("*{prev}"); 9].join(",");
        text.push_str(&format!("{me}: &{me} [{refs}]\n"));
    }
    let f = lint(text.as_bytes());
    assert!(has(&f, "BG006"), "{f:?}");
}

#[test]
fn five_thousand_deep_nesting_is_refused() {
    let flow = format!(
        "version: 1\njobs: {}{}\n",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    assert!(has(&lint(flow.as_bytes()), "BG006"));
    let block = format!("version: 1\njobs:\n{}x\n", "- ".repeat(5000));
    assert!(has(&lint(block.as_bytes()), "BG006"));
    let maps = format!(
        "version: 1\njobs: {}1{}\n",
        "{a: ".repeat(5000),
        "}".repeat(5000)
    );
    assert!(has(&lint(maps.as_bytes()), "BG006"));
}

#[test]
fn binary_garbage_and_invalid_utf8_are_bg001() {
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 256) as u8).collect();
    assert!(has(&lint(&garbage), "BG001"));
    let f = lint(b"version: 1\nservice: \xff\xfe\njobs: []\n");
    let bad = f.iter().find(|f| f.code == "BG001").expect("BG001");
    assert_eq!(bad.at.span.start, 20, "points at the first bad byte");
    assert!(has(&lint(b"\x00\x01\x02version: 1"), "BG001"));
}

#[test]
fn bom_and_crlf_are_read_like_any_manifest() {
    let text =
        "\u{feff}version: 1\r\nservice: x\r\njobs:\r\n  - name: a\r\n    expected_duration: 0m\r\n";
    let f = lint(text.as_bytes());
    assert!(!has(&f, "BG001"), "{f:?}");
    let zero = f
        .iter()
        .find(|f| f.code == "BG004")
        .expect("zero duration is BG004");
    assert_eq!(&text[zero.at.span.start..zero.at.span.end()], "0m");
}

#[test]
fn tabs_empty_comments_and_top_level_list() {
    let f = lint(b"version: 1\njobs:\n\t- name: a\n");
    assert!(has(&f, "BG001"));
    assert!(has(&lint(b""), "BG003"));
    assert!(has(&lint(b"# just\n# comments\n"), "BG003"));
    assert!(has(&lint(b"- a\n- b\n"), "BG004"));
    assert!(has(&lint(b"just a string\n"), "BG004"));
    assert!(has(&lint(b"---\nversion: 1\n---\nversion: 1\n"), "BG001"));
}

#[test]
fn twenty_megabytes_is_refused_without_parsing() {
    let mut text = b"version: 1\njobs: []\n".to_vec();
    text.resize(20 * 1024 * 1024, b'#');
    let f = lint(&text);
    assert!(has(&f, "BG006"));
    assert_eq!(f.len(), 1);
}

#[test]
fn overflowing_integers_and_bad_durations_are_bg004() {
    let text = "version: 1\ndeployment:\n  instances: 99999999999999999999999999999\njobs:\n  - name: a\n    retry:\n      max_attempts: 18446744073709551616\n    expected_duration: 99999999999999999999m\n    lock:\n      ttl: -5m\n      key: \"{job}:{slot}\"\n    alerts:\n      max_latency: 0s\n";
    let f = lint(text.as_bytes());
    let bg004: Vec<&str> = f
        .iter()
        .filter(|f| f.code == "BG004")
        .map(|f| &text[f.at.span.start..f.at.span.end()])
        .collect();
    for want in [
        "99999999999999999999999999999",
        "18446744073709551616",
        "99999999999999999999m",
        "-5m",
        "{slot}",
        "0s",
    ] {
        assert!(bg004.contains(&want), "{want} not reported: {bg004:?}");
    }
}

#[test]
fn a_hundred_kilobyte_value_is_fine() {
    let text = format!(
        "version: 1\nservice: billing\njobs:\n  - name: a\n    dead_letter:\n      target: {}\n",
        "x".repeat(100_000)
    );
    let f = lint(text.as_bytes());
    assert!(!has(&f, "BG001") && !has(&f, "BG006"));
    // And the report renders it.
    let (file, findings, jobs) =
        lint_bytes(Path::new("v.batchguard.yaml"), text.as_bytes(), &opts());
    let run = batchguard::LintRun {
        files: vec![file],
        findings,
        jobs,
        unreadable: vec![],
        ..Default::default()
    };
    assert!(!batchguard::render_pretty(&run, false).is_empty());
}

#[test]
fn unknown_keys_suggest_and_duplicates_point_at_both() {
    let text = "version: 1\nservice: s\njobs:\n  - name: a\n    lock:\n      tll: 25m\n      ttl: 20m\n      ttl: 30m\n";
    let f = lint(text.as_bytes());
    let unknown = f.iter().find(|f| f.code == "BG002").expect("BG002");
    assert!(unknown.help.contains("`ttl`"), "{}", unknown.help);
    let dup = f.iter().find(|f| f.code == "BG005").expect("BG005");
    assert_eq!(dup.related.len(), 1);
    assert!(dup.related[0].at.span.start < dup.at.span.start);
}

#[test]
fn a_tab_in_the_indentation_is_said_so_on_the_tab() {
    for text in [
        "version: 1\njobs:\n\t- name: a\n",
        "version: 1\njobs:\n  - name: a\n\tschedule: \"0 * * * *\"\n",
        "version: 1\njobs:\n  - name: a\n    lock:\n    \tttl: 5m\n",
    ] {
        let f = lint(text.as_bytes());
        let bad = f.iter().find(|f| f.code == "BG001").expect("BG001");
        assert!(
            bad.message
                .contains("indent with spaces, not tabs (YAML forbids tabs for indentation)"),
            "{}",
            bad.message
        );
        assert_eq!(
            &text[bad.at.span.start..bad.at.span.end()],
            "\t",
            "{text:?}"
        );
    }
}
