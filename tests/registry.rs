//! The registry keeps its promises: every code is unique and has a kebab-case name, every
//! lint rule and audit check is documented with what it does, why it matters and an
//! example, and each lint rule's documented bad example really fires the rule while its
//! "Use instead" fix does not.
//!
//! The registry is read through the CLI (`rules`, `explain`), as users and docs/rules.md see it.
//!
//! Examples in the docs are often fragments. Each one is made into a file lint reads:
//! - a whole manifest (a top-level `jobs:`) is linted as written;
//! - a job list (`- name: …`) becomes the `jobs:` of a manifest, each job as written;
//! - job fields (`retry:`, `lock:`, or indented lines such as `    schedule: …`) complete
//!   [`BASE_JOB`], replacing its fields of the same names; the jobs its fix `depends_on`
//!   are added to both files as base jobs, so the bad example's misspelt name is the
//!   only unknown one;
//! - a CronJob fragment (`kind: CronJob`, `spec:`) gets the `apiVersion`, `metadata` and
//!   `jobTemplate` a CronJob needs around its `spec` lines.
//!
//! A fix is applied to its bad example when it is smaller than a file: fields replace the
//! bad example's fields of the same name (in every job of a whole manifest), jobs replace
//! the bad example's jobs of the same name. Only the rule's own code is looked at: the
//! other rules may fire on a fragment made whole.

mod common;

use common::{NOW, bg};
use std::collections::{BTreeMap, HashSet};

/// Rules whose examples cannot be linted, and why. A rule listed here is still checked
/// for its documentation sections.
const NOT_RUNNABLE: &[(&str, &str)] = &[
    (
        "BG006",
        "the bad example elides its nine further levels of anchors (`# … nine more levels`)",
    ),
    (
        "BG601",
        "cross-file: the bad example is a `text` listing of three files",
    ),
    (
        "BG605",
        "the CronJob fragment elides its pod template (`template: ...`)",
    ),
    (
        "BG606",
        "a `js` fragment of a PM2 app; lint reads whole ecosystem files",
    ),
    (
        "BG607",
        "a crontab line (`text`) whose fix names a manifest outside the example",
    ),
    (
        "BG608",
        "cross-file: the one block shows a manifest and a CronJob side by side",
    ),
    (
        "BG609",
        "the example is a shell session without node on PATH",
    ),
    (
        "BG610",
        "a `text` description of line endings a doc block cannot carry",
    ),
    (
        "BG613",
        "a `js` fragment of a PM2 app; the rule reads the app's script (fixtures/rules/BG613)",
    ),
    (
        "BG614",
        "cross-file: a manifest and crontab lines of two hosts in a `text` listing",
    ),
    (
        "BG611",
        "cross-file: a `js` module whose runner is another file (fixtures/rules/BG611 has both)",
    ),
    (
        "BG612",
        "a `js` fragment; the rule needs a module that imports node-cron (fixtures/rules/BG612)",
    ),
];

/// Rules whose fix is not linted, and why; their bad example is.
const FIX_NOT_LINTED: &[(&str, &str)] = &[
    ("BG702", "the fix is prose: remove one edge"),
    ("BG902", "the fix is prose: delete the comment"),
    (
        "BG003",
        "the fix adds the one field the example is about; a whole job needs every required field",
    ),
];

/// The fields that make a job's fragment a job: name, schedule, run time, command and
/// lock. Nothing optional, so that a rule about a missing field sees it missing.
const BASE_JOB: &str = r##"name: settle-payments
schedule: "0 * * * *"
timezone: UTC
expected_duration: 10m
command: ["node", "jobs/settle.js"]
lock:
  key: "{job}:{scheduled_at}"
  ttl: 25m
  store: postgres
"##;

const MANIFEST_HEAD: &str =
    "version: 1\nservice: billing\ndeployment:\n  platform: kubernetes\n  instances: 2\njobs:\n";

/// (code, name, severity, summary) of every rule and check, from `batchguard rules`.
fn registry() -> Vec<(String, String)> {
    let out = bg().arg("rules").output().expect("rules runs");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            (
                w.next().unwrap_or_default().to_owned(),
                w.next().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn explain(code: &str) -> String {
    let out = bg().args(["explain", code]).output().expect("explain runs");
    assert!(out.status.success(), "explain {code}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn codes_are_unique_and_names_kebab_case() {
    let rules = registry();
    assert!(rules.len() > 60, "the registry lists every rule and check");
    let mut codes = HashSet::new();
    let mut names = HashSet::new();
    for (code, name) in &rules {
        assert!(codes.insert(code), "code {code} is listed twice");
        assert!(names.insert(name), "name {name} is listed twice");
        let shaped = (code.starts_with("BG") || code.starts_with("AU"))
            && code.len() == 5
            && code[2..].bytes().all(|b| b.is_ascii_digit());
        assert!(shaped, "`{code}` is not BGnnn or AUnnn");
        let kebab = !name.is_empty()
            && !name.starts_with('-')
            && !name.ends_with('-')
            && !name.contains("--")
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        assert!(kebab, "{code}: `{name}` is not kebab-case");
    }
}

/// Audit checks documented without an `## Example` section yet. The list must be exact:
/// a check that gains its example fails the test until it is taken off.
const AUDIT_WITHOUT_EXAMPLE: &[&str] = &[];

#[test]
fn every_rule_and_check_is_documented() {
    let mut missing = Vec::new();
    let mut without_example = Vec::new();
    for (code, _) in registry() {
        let doc = explain(&code);
        for section in ["## What it does", "## Why it matters", "## Example"] {
            if doc.lines().any(|l| l.trim_end() == section) {
                continue;
            }
            if section == "## Example" && code.starts_with("AU") {
                without_example.push(code.clone());
            } else {
                missing.push(format!("{code}: {section}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "sections missing:\n{}",
        missing.join("\n")
    );
    assert_eq!(
        without_example, AUDIT_WITHOUT_EXAMPLE,
        "audit checks without an `## Example` section"
    );
}

/// The ```yaml blocks of a rule's docs from `## Example` on: the first (bad), and the
/// first after "Use instead" (fix).
fn examples(doc: &str) -> (Option<String>, Option<String>) {
    let (mut bad, mut fix) = (None, None);
    let (mut started, mut instead) = (false, false);
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        started |= l.trim_end() == "## Example";
        instead |= started && l.starts_with("Use instead");
        if started && l.trim_end() == "```yaml" {
            let body: String = lines
                .by_ref()
                .take_while(|l| l.trim_end() != "```")
                .map(|l| format!("{l}\n"))
                .collect();
            match instead {
                false if bad.is_none() => bad = Some(body),
                true if fix.is_none() => fix = Some(body),
                _ => {}
            }
        }
    }
    (bad, fix)
}

fn indent_of(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// The block without its common indentation.
fn dedent(block: &str) -> String {
    let n = block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(indent_of)
        .min()
        .unwrap_or(0);
    block
        .lines()
        .map(|l| l.get(n..).unwrap_or(""))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Top-level fields in order, each with its lines (comments above a key go with it).
fn fields(block: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut pending = String::new();
    for l in block.lines() {
        let top = indent_of(l) == 0 && !l.trim().is_empty();
        if top && l.starts_with('#') {
            pending.push_str(l);
            pending.push('\n');
        } else if top {
            let key = l.split(':').next().unwrap_or(l).trim().to_owned();
            out.push((key, std::mem::take(&mut pending) + l + "\n"));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(l);
            last.1.push('\n');
        }
    }
    out
}

/// `base`'s fields with `over`'s replacing those of the same name, new ones after.
fn merge(base: &str, over: &str) -> String {
    let over = fields(over);
    let mut out: Vec<(String, String)> = fields(base)
        .into_iter()
        .map(|(k, v)| match over.iter().find(|(o, _)| *o == k) {
            Some(o) => o.clone(),
            None => (k, v),
        })
        .collect();
    for o in &over {
        if !out.iter().any(|(k, _)| *k == o.0) {
            out.push(o.clone());
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// Job list items: (name, body without the `- `), comments above an item kept with it.
fn items(block: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut pending = String::new();
    for l in block.lines() {
        if l.starts_with('#') {
            pending.push_str(l);
            pending.push('\n');
        } else if let Some(rest) = l.strip_prefix("- ") {
            let name = rest
                .strip_prefix("name:")
                .map(|n| n.trim().trim_matches('"').to_owned())
                .unwrap_or_default();
            out.push((name, std::mem::take(&mut pending) + rest + "\n"));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(l.get(2..).unwrap_or(""));
            last.1.push('\n');
        }
    }
    out
}

fn indent(block: &str, by: &str) -> String {
    block
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_owned()
            } else {
                format!("{by}{l}\n")
            }
        })
        .collect()
}

/// A manifest of the given jobs (`complete`: with the fields of [`BASE_JOB`] they lack),
/// and base jobs named `also`.
fn manifest_of(jobs: &[(String, String)], complete: bool, also: &[String]) -> String {
    let mut s = MANIFEST_HEAD.to_owned();
    for (_, body) in jobs {
        // A comment above the item (a suppression) stays above it.
        let (comments, body): (Vec<&str>, Vec<&str>) =
            body.lines().partition(|l| l.starts_with('#'));
        for c in comments {
            s.push_str(&format!("  {c}\n"));
        }
        let body = body.join("\n") + "\n";
        let job = if complete {
            merge(BASE_JOB, &body)
        } else {
            body
        };
        let job = indent(&job, "    ");
        s.push_str("  - ");
        s.push_str(&job[4..]);
    }
    for name in also {
        let job = merge(BASE_JOB, &format!("name: {name}\n"));
        s.push_str("  - ");
        s.push_str(&indent(&job, "    ")[4..]);
    }
    s
}

/// The names in a fragment's `depends_on: [a, b]`.
fn depends_on(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("depends_on:"))
        .flat_map(|l| {
            let l = l.split('#').next().unwrap_or("");
            l.trim()
                .trim_matches(['[', ']'])
                .split(',')
                .map(|n| n.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Manifest,
    Jobs,
    Fields,
    CronJob,
}

fn shape(block: &str) -> Shape {
    let d = dedent(block);
    let first = d
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    if d.lines().any(|l| l.starts_with("jobs:")) {
        Shape::Manifest
    } else if first.starts_with("- ") {
        Shape::Jobs
    } else if d
        .lines()
        .any(|l| l.starts_with("kind: CronJob") || l.starts_with("spec:"))
    {
        Shape::CronJob
    } else {
        Shape::Fields
    }
}

/// The file (name, text) lint reads for a bad example.
fn file_for(block: &str, also: &[String]) -> (&'static str, String) {
    match shape(block) {
        Shape::Manifest => ("billing.batchguard.yaml", block.to_owned()),
        Shape::Jobs => (
            "billing.batchguard.yaml",
            manifest_of(&items(&dedent(block)), false, &[]),
        ),
        Shape::Fields => (
            "billing.batchguard.yaml",
            manifest_of(&[(String::new(), dedent(block))], true, also),
        ),
        Shape::CronJob => ("cronjob.yaml", cronjob(&dedent(block))),
    }
}

/// A CronJob around a fragment's `spec` lines.
fn cronjob(block: &str) -> String {
    let spec: String = fields(block)
        .into_iter()
        .filter(|(k, _)| k == "spec")
        .flat_map(|(_, v)| {
            v.lines()
                .skip(1)
                .map(|l| format!("{l}\n"))
                .collect::<Vec<_>>()
        })
        .collect();
    format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: settle\n  namespace: billing\nspec:\n{spec}  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n            - name: settle\n              image: billing:1\n              command: [\"node\", \"jobs/settle.js\"]\n"
    )
}

/// The file for a fix: whole when it is a file, else applied to the bad example.
fn fix_file(bad: &str, fix: &str, also: &[String]) -> (&'static str, String) {
    match (shape(bad), shape(fix)) {
        (_, Shape::Manifest) | (_, Shape::CronJob) => file_for(fix, also),
        (Shape::Manifest, Shape::Fields) => {
            // Lines of the fix replace the bad example's lines with the same key.
            let fix_lines: BTreeMap<String, &str> = fix
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| (l.trim().split(':').next().unwrap_or("").to_owned(), l))
                .collect();
            let text = bad
                .lines()
                .map(|l| {
                    let key = l.trim().split(':').next().unwrap_or("");
                    match fix_lines.get(key) {
                        Some(f) if indent_of(f) == indent_of(l) => format!("{f}\n"),
                        _ => format!("{l}\n"),
                    }
                })
                .collect();
            ("billing.batchguard.yaml", text)
        }
        (Shape::Jobs, Shape::Jobs) => {
            let fixed = items(&dedent(fix));
            let jobs: Vec<(String, String)> = items(&dedent(bad))
                .into_iter()
                .map(|(n, b)| match fixed.iter().find(|(f, _)| *f == n) {
                    Some(f) => f.clone(),
                    None => (n, b),
                })
                .collect();
            ("billing.batchguard.yaml", manifest_of(&jobs, false, &[]))
        }
        // A job list or fields in their own right.
        _ => file_for(fix, also),
    }
}

/// The codes lint reports (not suppressed) for one file.
fn codes(name: &str, text: &str) -> HashSet<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(name), text).expect("write");
    let out = bg()
        .args(["lint", "--format", "json", "--now", NOW])
        .arg(dir.path())
        .output()
        .expect("lint runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "lint json for\n{text}\n{e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    json["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn documented_examples_fire_and_their_fixes_do_not() {
    let skip: HashSet<&str> = NOT_RUNNABLE.iter().map(|(c, _)| *c).collect();
    let fix_skip: HashSet<&str> = FIX_NOT_LINTED.iter().map(|(c, _)| *c).collect();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (code, _) in registry().into_iter().filter(|(c, _)| c.starts_with("BG")) {
        if skip.contains(code.as_str()) {
            continue;
        }
        let (bad, fix) = examples(&explain(&code));
        let Some(bad) = bad else {
            failures.push(format!(
                "{code}: no ```yaml bad example (add it to NOT_RUNNABLE with the reason?)"
            ));
            continue;
        };
        let also = fix.as_deref().map(depends_on).unwrap_or_default();
        let (name, text) = file_for(&bad, &also);
        if !codes(name, &text).contains(&code) {
            failures.push(format!(
                "{code}: the bad example does not fire; linted as {name}:\n{text}"
            ));
        }
        match fix {
            _ if fix_skip.contains(code.as_str()) => {}
            Some(fix) => {
                let (name, text) = fix_file(&bad, &fix, &also);
                if codes(name, &text).contains(&code) {
                    failures.push(format!(
                        "{code}: the fix still fires; linted as {name}:\n{text}"
                    ));
                }
            }
            None => failures.push(format!("{code}: no ```yaml fix after \"Use instead\"")),
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(checked > 40, "most rules' examples are linted ({checked})");
}
