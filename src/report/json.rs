//! `--format json` for lint: SPEC 8, stable.

use super::{position, position_of};
use crate::finding::Severity;
use crate::lint::LintRun;
use serde_json::{Value, json};

pub fn render(run: &LintRun) -> String {
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
    let out = json!({
        "version": 1,
        "tool": "batchguard",
        "findings": findings,
        "summary": {
            "files": run.files.len(),
            "jobs": run.jobs,
            "errors": run.count(Severity::Error),
            "warnings": run.count(Severity::Warning),
            "suppressed": run.suppressed(),
        }
    });
    let mut s = serde_json::to_string_pretty(&out).unwrap_or_default();
    s.push('\n');
    s
}
