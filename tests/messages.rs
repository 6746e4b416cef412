//! Every message a command prints when it cannot run (exit 2), as a user sees it: no
//! internal module paths, no doubled text, no operating-system error numbers. Each case
//! runs the binary in a temporary directory of its own, so paths print short and stable.

use assert_cmd::Command;
use std::path::Path;

const GOOD: &str = r##"version: 1
service: reports
jobs:
  - name: nightly-report
    schedule: "0 2 * * *"
    timezone: Asia/Seoul
    expected_duration: 10m
  - name: seoul-abbrev
    schedule: "0 2 * * *"
    timezone: KST
    expected_duration: 10m
"##;

/// Turns off the rules a bare job breaks, so a case shows only the finding it is about.
const QUIET: &str = "[rules]\nBG201 = \"off\"\nBG301 = \"off\"\nBG401 = \"off\"\nBG405 = \"off\"\nBG501 = \"off\"\nBG502 = \"off\"\nBG503 = \"off\"\nBG505 = \"off\"\n";

/// Runs `batchguard ARGS` in a fresh directory holding `files`; returns what it printed.
fn run(args: &[&str], files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    std::fs::create_dir(dir.path().join("a-folder")).expect("mkdir");
    shown(args, dir.path())
}

fn shown(args: &[&str], cwd: &Path) -> String {
    let out = Command::cargo_bin("batchguard")
        .expect("binary builds")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    check_plain(&stderr);
    let quoted: Vec<String> = args
        .iter()
        .map(|a| {
            if a.contains(' ') {
                format!("'{a}'")
            } else {
                (*a).to_owned()
            }
        })
        .collect();
    let mut s = format!(
        "$ batchguard {}\nexit {}\n",
        quoted.join(" "),
        out.status.code().unwrap_or(-1)
    );
    if !stdout.is_empty() {
        s.push_str(&format!("--- stdout\n{stdout}"));
    }
    s.push_str(&format!("--- stderr\n{stderr}"));
    s
}

/// What no message may show: a module path, an OS error number, the same text twice.
fn check_plain(stderr: &str) {
    assert!(
        !stderr.contains("batchguard::"),
        "module path in:\n{stderr}"
    );
    assert!(
        !stderr.contains("os error"),
        "OS error number in:\n{stderr}"
    );
    for line in stderr.lines() {
        let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
        for w in parts.windows(2) {
            assert!(
                w[0].len() < 4 || !w[1].starts_with(w[0].trim_start_matches(['×', ' '])),
                "doubled text in: {line}"
            );
        }
    }
}

macro_rules! message {
    ($name:ident, $args:expr) => {
        message!($name, $args, &[]);
    };
    ($name:ident, $args:expr, $files:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(stringify!($name), run(&$args, $files));
        }
    };
}

const W: [&str; 4] = [
    "--from",
    "2026-03-01T00:00:00Z",
    "--to",
    "2026-03-02T00:00:00Z",
];

fn slots(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["slots"];
    v.extend_from_slice(extra);
    v.extend_from_slice(&W);
    v
}

// lint
message!(lint_missing_path, ["lint", "nope.batchguard.yaml"]);
message!(
    lint_config_missing,
    ["lint", "--config", "missing.toml", "m.batchguard.yaml"],
    &[("m.batchguard.yaml", GOOD)]
);
message!(
    lint_config_is_a_folder,
    ["lint", "--config", "a-folder", "m.batchguard.yaml"],
    &[("m.batchguard.yaml", GOOD)]
);
message!(
    lint_config_bad_toml,
    ["lint", "m.batchguard.yaml"],
    &[("m.batchguard.yaml", GOOD), ("batchguard.toml", "[rules\n")]
);
message!(
    lint_config_unknown_rule,
    ["lint", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        ("batchguard.toml", "[rules]\nBG999 = \"off\"\n")
    ]
);
message!(
    lint_config_unknown_field,
    ["lint", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        ("batchguard.toml", "[rulez]\nBG201 = \"off\"\n")
    ]
);
message!(
    lint_config_abbreviated_zone,
    ["lint", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        ("batchguard.toml", "[sources]\ncrontab_timezone = \"KST\"\n")
    ]
);
message!(
    lint_config_duration_unit,
    ["lint", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        (
            "batchguard.toml",
            "[thresholds]\ndrill_cadence = \"92days\"\n"
        )
    ]
);
message!(
    lint_config_unknown_crontab_runner,
    ["lint", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        ("batchguard.toml", "[sources]\ncrontab_runner = \"fcron\"\n")
    ]
);
message!(
    lint_config_bad_glob,
    ["lint", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        ("batchguard.toml", "[files]\nexclude = [\"a[\"]\n")
    ]
);
message!(
    lint_now_does_not_exist,
    ["lint", "--now", "2026-02-29T00:00:00Z"]
);
message!(lint_now_date_only, ["lint", "--now", "2026-02-29"]);
message!(
    lint_now_without_offset,
    ["lint", "--now", "2026-03-01T02:00:00"]
);
message!(
    lint_now_out_of_range,
    ["lint", "--now", "9999-12-31T23:59:59Z"]
);
message!(lint_now_not_a_time, ["lint", "--now", "yesterday"]);

// slots
message!(
    slots_unknown_zone,
    slots(&["--schedule", "0 2 * * *", "--timezone", "KST"])
);
message!(
    slots_ambiguous_zone,
    slots(&["--schedule", "0 2 * * *", "--timezone", "IST"])
);
message!(
    slots_misspelt_zone,
    slots(&["--schedule", "0 2 * * *", "--timezone", "Asia/Soeul"])
);
message!(slots_bad_expression, slots(&["--schedule", "0 * * *"]));
message!(
    slots_out_of_range_field,
    slots(&["--schedule", "61 * * * *"])
);
message!(
    slots_seconds_in_crontab,
    slots(&["--schedule", "0 0 * * * *"])
);
message!(
    slots_unknown_job,
    slots(&["--manifest", "m.batchguard.yaml", "--job", "nightly-reprot"]),
    &[("m.batchguard.yaml", GOOD)]
);
message!(
    slots_job_with_abbreviated_zone,
    slots(&["--manifest", "m.batchguard.yaml", "--job", "seoul-abbrev"]),
    &[("m.batchguard.yaml", GOOD)]
);
message!(
    slots_missing_manifest,
    slots(&["--manifest", "nope.batchguard.yaml", "--job", "a"])
);
message!(
    slots_manifest_is_a_folder,
    slots(&["--manifest", "a-folder", "--job", "a"])
);
message!(
    slots_broken_manifest,
    slots(&["--manifest", "m.batchguard.yaml", "--job", "a"]),
    &[("m.batchguard.yaml", "version: 1\njobs:\n\t- name: a\n")]
);
message!(
    slots_empty_window,
    [
        "slots",
        "--schedule",
        "0 2 * * *",
        "--from",
        "2026-03-02T00:00:00Z",
        "--to",
        "2026-03-01T00:00:00Z"
    ]
);
message!(
    slots_from_does_not_exist,
    [
        "slots",
        "--schedule",
        "0 2 * * *",
        "--from",
        "2026-02-29T00:00:00Z",
        "--to",
        "2026-03-02T00:00:00Z"
    ]
);

// graph, explain
message!(graph_missing_path, ["graph", "nope"]);
message!(
    graph_config_unknown_rule,
    ["graph", "m.batchguard.yaml"],
    &[
        ("m.batchguard.yaml", GOOD),
        ("batchguard.toml", "[rules]\nlock-ttl-to-short = \"off\"\n")
    ]
);
message!(explain_unknown_rule, ["explain", "BG9999"]);
message!(explain_misspelt_rule, ["explain", "lock-ttl-to-short"]);

// Located findings a newcomer meets first (exit 1).
message!(
    lint_tab_indentation,
    ["lint", "m.batchguard.yaml"],
    &[(
        "m.batchguard.yaml",
        "version: 1\njobs:\n  - name: a\n\tschedule: \"0 * * * *\"\n"
    )]
);
message!(
    lint_duration_unit,
    ["lint", "--now", "2026-03-01T00:00:00Z", "m.batchguard.yaml"],
    &[
        (
            "m.batchguard.yaml",
            "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10min\n"
        ),
        ("batchguard.toml", QUIET)
    ]
);

#[test]
fn instants_that_cannot_be_are_said_so() {
    let leap = run(&["lint", "--now", "2026-02-29"], &[]);
    assert!(leap.contains("February 2026 has 28 days"), "{leap}");
    let far = run(&["lint", "--now", "9999-12-31T23:59:59Z"], &[]);
    assert!(far.contains("out of range"), "{far}");
    assert!(!far.contains("RFC 3339"), "{far}");
}
