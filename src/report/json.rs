//! `--format json` for lint: SPEC 8, stable.

use super::{position, position_of};
use crate::finding::Severity;
use crate::lint::{FileKind, LintRun};
use crate::sources::SourceKind;
use serde_json::{Value, json};

/// With `list_files` (`lint --list-files`), a top-level `files` array beside SPEC 8's
/// keys: every file read (`kind`, `jobs`, `registrations`, `notes`) and every file seen
/// but not read (`read: false`, `reason`).
pub fn render_with(run: &LintRun, list_files: bool) -> String {
    let findings: Vec<Value> = super::masked_findings(&run.files, &run.findings, false)
        .iter()
        .map(|f| {
            let p = position(&run.files, f);
            let related: Vec<Value> = f
                .related
                .iter()
                .map(|r| {
                    let rp = position_of(&run.files, r.at.file, r.at.span);
                    json!({
                        "file": run.files.get(r.at.file).map(|s| s.display.as_str()),
                        "line": rp.line,
                        "column": rp.column,
                        "message": r.message,
                    })
                })
                .collect();
            json!({
                "code": f.code,
                "name": f.name,
                "severity": f.severity,
                "message": f.message,
                "help": f.help,
                "file": run.files.get(f.at.file).map(|s| s.display.as_str()),
                "line": p.line,
                "column": p.column,
                "end_line": p.end_line,
                "end_column": p.end_column,
                "service": f.service,
                "job": f.job,
                "related": related,
            })
        })
        .collect();
    let sources: serde_json::Map<String, Value> = [
        FileKind::Manifest,
        FileKind::Source(SourceKind::Kubernetes),
        FileKind::Source(SourceKind::Pm2),
        FileKind::Source(SourceKind::Crontab),
        FileKind::Source(SourceKind::Code),
    ]
    .into_iter()
    .map(|k| (k.as_str().to_owned(), json!(run.files_of(k))))
    .collect();
    let mut out = json!({
        "version": 1,
        "tool": "batchguard",
        "findings": findings,
        "summary": {
            "files": run.files.len(),
            "jobs": run.jobs,
            "registrations": run.registrations,
            "errors": run.count(Severity::Error),
            "warnings": run.count(Severity::Warning),
            "suppressed": run.suppressed(),
            "sources": sources,
            "hidden_skipped": run.hidden_skipped,
        }
    });
    if list_files && let Some(obj) = out.as_object_mut() {
        let read = run.files.iter().zip(&run.read).map(|(f, r)| {
            json!({
                "file": f.display,
                "read": true,
                "kind": r.kind.as_str(),
                "jobs": r.jobs,
                "registrations": r.registrations,
                "notes": r.notes,
            })
        });
        let not_read = run.not_read.iter().map(|n| {
            json!({
                "file": n.display,
                "read": false,
                "reason": n.reason,
            })
        });
        obj.insert("files".into(), Value::Array(read.chain(not_read).collect()));
        // Deploy units, when there are several (docs/deploy-units.md).
        let units: Vec<Value> = run
            .units()
            .into_iter()
            .map(|u| {
                let ties: Vec<Value> = u
                    .ties
                    .iter()
                    .map(|(tie, others)| json!({ "tied_by": tie, "units": others }))
                    .collect();
                json!({
                    "unit": u.display,
                    "kind": u.kind,
                    "fixture": u.fixture,
                    "files": u.files,
                    "deployed_with": ties,
                })
            })
            .collect();
        if !units.is_empty() {
            obj.insert("units".into(), Value::Array(units));
        }
    }
    let mut s = serde_json::to_string_pretty(&out).unwrap_or_default();
    s.push('\n');
    s
}
