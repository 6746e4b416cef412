//! `TODO(batchguard init)`: the value `batchguard init` writes where only a person knows
//! the answer. The loader reads it as absent ([`INIT_PLACEHOLDER`]), so the rule about
//! that missing value fires as usual (BG201, BG301, BG401, BG501 …); this pass then
//! points each such finding at the placeholder itself and says that it is still the
//! placeholder. A placeholder that no rule speaks of (a field whose absence is allowed,
//! a list entry) is reported as BG003, so a starter manifest never passes lint until
//! every placeholder is filled in or deleted.

use crate::finding::{Finding, Location};
use crate::manifest::load::{Loaded, map_get};
use crate::manifest::model::INIT_PLACEHOLDER;
use crate::manifest::yaml::{Node, Value};
use crate::text::SourceFile;
use crate::text::Span;

/// What each "missing value" rule is about: the path of the field, in a job, whose
/// absence it reports. Several paths for one code are told apart by the message, which
/// names the field.
const RULE_FIELDS: &[(&str, &[&str], &str)] = &[
    ("BG003", &["expected_duration"], "`expected_duration`"),
    ("BG003", &["schedule"], "`schedule`"),
    ("BG003", &["name"], "`name`"),
    ("BG003", &["lock", "ttl"], "`ttl`"),
    ("BG201", &["lock"], ""),
    ("BG301", &["idempotency", "strategy"], ""),
    ("BG302", &["idempotency", "key"], ""),
    ("BG401", &["retry", "max_attempts"], ""),
    ("BG405", &["dead_letter", "target"], ""),
    ("BG501", &["runbook", "owner"], "runbook.owner"),
    ("BG501", &["runbook", "on_call"], "runbook.on_call"),
    (
        "BG501",
        &["runbook", "emergency_stop"],
        "runbook.emergency_stop",
    ),
    ("BG501", &["runbook", "resume"], "runbook.resume"),
    (
        "BG501",
        &["runbook", "communication"],
        "runbook.communication",
    ),
    ("BG502", &["alerts", "max_latency"], ""),
    ("BG503", &["snapshot", "path"], ""),
    ("BG504", &["snapshot", "retention"], ""),
    ("BG505", &["alerts", "channel"], ""),
];

const STILL: &str = "still the `TODO(batchguard init)` placeholder";

fn is_marker(n: &Node) -> bool {
    matches!(&n.value, Value::Str(s) if s == INIT_PLACEHOLDER)
}

/// The placeholder that stands for `path` in a job (defaults merged as the loader merges
/// them: mappings merge, the job's value wins), if one does.
fn placeholder_at(job: &Node, defaults: Option<&Node>, path: &[&str]) -> Option<Span> {
    let (mut j, mut d) = (Some(job), defaults);
    for key in path {
        let jv = j.and_then(|n| map_get(n, key));
        let dv = d.and_then(|n| map_get(n, key));
        let value = jv.or(dv)?;
        if is_marker(value) {
            return Some(value.span);
        }
        let is_map = |n: Option<&Node>| n.is_some_and(|n| matches!(n.value, Value::Map(_)));
        (j, d) = match (jv, dv) {
            (Some(a), Some(b)) if is_map(Some(a)) && is_map(Some(b)) => (Some(a), Some(b)),
            (Some(a), _) => (Some(a), None),
            (None, b) => (None, b),
        };
    }
    None
}

/// Every placeholder in the tree, with its path (`jobs[1].lock.ttl`).
fn all_placeholders(root: &Node) -> Vec<(Span, String)> {
    let mut out = Vec::new();
    let mut stack = vec![(root, String::new())];
    while let Some((n, path)) = stack.pop() {
        match &n.value {
            Value::Map(entries) => {
                for (k, v) in entries {
                    if let Value::Str(k) = &k.value {
                        let p = if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        };
                        stack.push((v, p));
                    }
                }
            }
            Value::Seq(items) => {
                for (i, v) in items.iter().enumerate() {
                    stack.push((v, format!("{path}[{i}]")));
                }
            }
            _ if is_marker(n) => out.push((n.span, path)),
            _ => {}
        }
    }
    out.sort_by_key(|(s, _)| s.start);
    out
}

/// Points the findings about missing values at the placeholders that stand for them, and
/// reports every other placeholder (BG003). `findings` are the manifest's (file 0).
pub fn mark(loaded: &Loaded, file: &SourceFile, service: &str, findings: &mut Vec<Finding>) {
    let Some(root) = &loaded.root else {
        return;
    };
    let placeholders = all_placeholders(root);
    if placeholders.is_empty() {
        return;
    }
    let items: &[Node] = match map_get(root, "jobs").map(|n| &n.value) {
        Some(Value::Seq(items)) => items,
        _ => &[],
    };
    let defaults = map_get(root, "defaults");
    let mut claimed: Vec<Span> = Vec::new();
    for f in findings.iter_mut() {
        let Some(job) = f.job_line.and_then(|line| {
            items
                .iter()
                .find(|it| file.line_col(it.span.start).0 == line)
        }) else {
            continue;
        };
        let span = RULE_FIELDS
            .iter()
            .filter(|(code, _, names)| *code == f.code && f.message.contains(names))
            .find_map(|(_, path, _)| placeholder_at(job, defaults, path));
        if let Some(span) = span {
            f.at.span = span;
            f.message = format!("{}; it is {STILL}", f.message);
            f.help = format!(
                "replace `{INIT_PLACEHOLDER}` with the real value: {}",
                f.help
            );
            claimed.push(span);
        }
    }
    merge_shared(findings, &claimed);
    let Some(meta) = crate::REGISTRY.find("BG003") else {
        return;
    };
    for (span, path) in placeholders {
        if claimed.contains(&span) {
            continue;
        }
        let job = path
            .strip_prefix("jobs[")
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(i, _)| i.parse::<usize>().ok())
            .and_then(|i| items.get(i).map(|it| (i, it)));
        let (job_name, job_line, field) = match job {
            Some((i, it)) => {
                let name = map_get(it, "name")
                    .and_then(|n| match &n.value {
                        Value::Str(s) => Some(s.clone()),
                        _ => None,
                    })
                    .unwrap_or_else(|| format!("jobs[{i}]"));
                let prefix = format!("jobs[{i}].");
                let field = path.strip_prefix(&prefix).unwrap_or(&path).to_owned();
                (Some(name), Some(file.line_col(it.span.start).0), field)
            }
            None => (None, None, path),
        };
        let whose = job_name
            .as_ref()
            .map_or(String::new(), |n| format!("job `{n}`: "));
        findings.push(
            Finding::new(
                meta,
                Location { file: 0, span },
                format!("{whose}`{field}` is {STILL}"),
            )
            .help(format!(
                "replace `{INIT_PLACEHOLDER}` with the real value, or delete `{field}` if it does not apply"
            ))
            .subject(Some(service.to_owned()), job_name, job_line),
        );
    }
}

/// One placeholder under `defaults` stands for a value of every job: one finding per rule
/// and placeholder, naming the other jobs, instead of one per job.
fn merge_shared(findings: &mut Vec<Finding>, claimed: &[Span]) {
    let mut others: Vec<((&'static str, Span), Vec<String>)> = Vec::new();
    let mut keep = Vec::with_capacity(findings.len());
    for f in findings.drain(..) {
        let key = (f.code, f.at.span);
        if !claimed.contains(&f.at.span) {
            keep.push(f);
            continue;
        }
        match others.iter_mut().find(|(k, _)| *k == key) {
            Some((_, jobs)) => jobs.push(f.job.clone().unwrap_or_default()),
            None => {
                others.push((key, Vec::new()));
                keep.push(f);
            }
        }
    }
    for f in &mut keep {
        let Some((_, jobs)) = others.iter().find(|(k, _)| *k == (f.code, f.at.span)) else {
            continue;
        };
        let names: Vec<String> = jobs.iter().map(|j| format!("`{j}`")).collect();
        match names.as_slice() {
            [] => {}
            [one] => f
                .message
                .push_str(&format!(" (it stands for job {one} too)")),
            [rest @ .., last] => f.message.push_str(&format!(
                " (it stands for jobs {} and {last} too)",
                rest.join(", ")
            )),
        }
    }
    *findings = keep;
}

#[cfg(test)]
mod tests {
    use crate::config::Settings;
    use crate::lint::{LintOptions, lint_manifest};

    fn lint(yaml: &str) -> Vec<(String, String, String)> {
        let opts = LintOptions {
            paths: Vec::new(),
            settings: Settings::default(),
            now: "2026-03-01T00:00:00Z".parse().expect("fixed now"),
        };
        let out = lint_manifest(
            std::path::Path::new("s.batchguard.yaml"),
            yaml.as_bytes(),
            &opts,
        );
        out.findings
            .iter()
            .map(|f| {
                let at = &yaml[f.at.span.start..f.at.span.end()];
                (f.code.to_owned(), at.to_owned(), f.message.clone())
            })
            .collect()
    }

    const FILLED: &str = "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 4 * * *\"\n    expected_duration: 10m\n    lock:\n      key: \"{job}:{scheduled_at}\"\n      ttl: 25m\n    idempotency:\n      strategy: processed_at\n      key: id\n    retry:\n      max_attempts: 3\n      backoff: exponential\n      initial_delay: 30s\n      max_delay: 5m\n    dead_letter:\n      target: dlq\n    alerts:\n      max_latency: 15m\n      channel: \"#c\"\n    snapshot:\n      path: \"s/{job}/{scheduled_at_compact}.jsonl\"\n      retention: 120d\n    runbook:\n      owner: team\n      on_call: \"#oncall\"\n      emergency_stop: stop it\n      resume: resume it\n      communication: \"#incidents\"\n";

    #[test]
    fn a_filled_manifest_is_clean() {
        assert_eq!(lint(FILLED), Vec::new());
    }

    #[test]
    fn each_placeholder_is_reported_by_its_rule_at_the_placeholder() {
        for (field, code) in [
            ("ttl: 25m", "BG003"),
            ("expected_duration: 10m", "BG003"),
            ("strategy: processed_at", "BG301"),
            ("key: id", "BG302"),
            ("max_attempts: 3", "BG401"),
            ("target: dlq", "BG405"),
            ("owner: team", "BG501"),
            ("max_latency: 15m", "BG502"),
            ("retention: 120d", "BG504"),
            ("channel: \"#c\"", "BG505"),
        ] {
            let key = field.split(':').next().unwrap_or_default();
            let yaml = FILLED.replace(field, &format!("{key}: TODO(batchguard init)"));
            let found = lint(&yaml);
            let want: Vec<_> = found.iter().filter(|f| f.0 == code).collect();
            assert_eq!(want.len(), 1, "{field}: {found:?}");
            assert_eq!(want[0].1, "TODO(batchguard init)", "{field}: {found:?}");
            assert!(
                want[0]
                    .2
                    .contains("still the `TODO(batchguard init)` placeholder")
            );
            // Nothing else: no BG004 for a placeholder that is not a duration.
            assert_eq!(found.len(), 1, "{field}: {found:?}");
        }
    }

    #[test]
    fn a_placeholder_no_rule_speaks_of_is_bg003() {
        let yaml = format!("{FILLED}    outputs:\n      key: TODO(batchguard init)\n");
        let found = lint(&yaml);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "BG003");
        assert_eq!(found[0].1, "TODO(batchguard init)");
        assert_eq!(
            found[0].2,
            "job `a`: `outputs.key` is still the `TODO(batchguard init)` placeholder"
        );
    }

    #[test]
    fn a_placeholder_in_defaults_is_reported_where_it_is_written() {
        let yaml = FILLED.replace("      owner: team\n", "").replace(
            "jobs:\n",
            "defaults:\n  runbook:\n    owner: TODO(batchguard init)\njobs:\n",
        );
        let found = lint(&yaml);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "BG501");
        assert_eq!(found[0].1, "TODO(batchguard init)");
        // A job's own value wins over the placeholder in defaults.
        let yaml = FILLED.replace(
            "jobs:\n",
            "defaults:\n  runbook:\n    owner: TODO(batchguard init)\njobs:\n",
        );
        let found = lint(&yaml);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "BG003", "{found:?}");
    }

    #[test]
    fn a_placeholder_in_defaults_is_one_finding_for_every_job() {
        let job_b = FILLED[FILLED.find("  - name: a").unwrap_or(0)..].replace("name: a", "name: b");
        let yaml = format!("{FILLED}{job_b}")
            .replace("      owner: team\n", "")
            .replace(
                "jobs:\n",
                "defaults:\n  runbook:\n    owner: TODO(batchguard init)\njobs:\n",
            );
        let found = lint(&yaml);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .2
                .ends_with("placeholder (it stands for job `b` too)"),
            "{found:?}"
        );
    }

    #[test]
    fn a_whole_section_as_placeholder_is_its_rule() {
        let start = FILLED.find("    lock:\n").unwrap_or(0);
        let end = FILLED.find("    idempotency:").unwrap_or(0);
        let yaml = format!(
            "{}    lock: TODO(batchguard init)\n{}",
            &FILLED[..start],
            &FILLED[end..]
        );
        let found = lint(&yaml);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "BG201");
        assert_eq!(found[0].1, "TODO(batchguard init)");
    }
}
