//! `--format sarif`: SARIF 2.1.0 as GitHub code scanning accepts it.

use super::{position, position_of};
use crate::finding::Severity;
use crate::lint::LintRun;
use serde_json::{Value, json};

fn uri(path: &str) -> String {
    path.replace('\\', "/")
}

pub fn render(run: &LintRun) -> String {
    let rules: Vec<Value> = crate::REGISTRY
        .all()
        .map(|m| {
            json!({
                "id": m.code,
                "name": m.name,
                "shortDescription": { "text": m.summary },
                "fullDescription": { "text": m.summary },
                "help": { "text": m.help, "markdown": m.doc_text() },
                "defaultConfiguration": { "level": level(m.severity) },
                "properties": { "tags": ["batchguard"] },
            })
        })
        .collect();
    let index: std::collections::HashMap<&str, usize> = crate::REGISTRY
        .all()
        .enumerate()
        .map(|(i, m)| (m.code, i))
        .collect();
    let results: Vec<Value> = super::masked_findings(&run.files, &run.findings, true)
        .iter()
        .map(|f| {
            let p = position(&run.files, f);
            let file = run.files.get(f.at.file).map_or("", |s| s.display.as_str());
            let related: Vec<Value> = f
                .related
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let rp = position_of(&run.files, r.at.file, r.at.span);
                    json!({
                        "id": i,
                        "message": { "text": r.message },
                        "physicalLocation": {
                            "artifactLocation": { "uri": uri(run.files.get(r.at.file).map_or("", |s| s.display.as_str())) },
                            "region": { "startLine": rp.line, "startColumn": rp.column, "endLine": rp.end_line, "endColumn": rp.end_column }
                        }
                    })
                })
                .collect();
            let mut result = json!({
                "ruleId": f.code,
                "ruleIndex": index.get(f.code).copied().unwrap_or(0),
                "level": level(f.severity),
                "message": { "text": format!("{} ({})", f.message, f.help) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(file) },
                        "region": { "startLine": p.line, "startColumn": p.column, "endLine": p.end_line, "endColumn": p.end_column }
                    }
                }],
            });
            if !related.is_empty() {
                result["relatedLocations"] = Value::Array(related);
            }
            if let Some(reason) = &f.suppressed {
                result["suppressions"] = json!([{ "kind": "inSource", "justification": reason }]);
            }
            result
        })
        .collect();
    let out = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "batchguard",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    let mut s = serde_json::to_string_pretty(&out).unwrap_or_default();
    s.push('\n');
    s
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
