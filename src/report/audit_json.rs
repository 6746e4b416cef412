//! `audit --format json`: SPEC 8, stable.

use crate::audit::AuditResult;
use rayon::iter::{IntoParallelRefIterator, ParallelIterator};
use serde_json::{Value, json};

pub fn value(r: &AuditResult) -> Value {
    let jobs: Vec<Value> = r
        .jobs
        .iter()
        .map(|j| serde_json::to_value(j).unwrap_or(Value::Null))
        .collect();
    let errors: Vec<Value> = r.row_errors.iter().map(row_error).collect();
    // A ledger can have hundreds of thousands of findings: built in parallel.
    let findings = Value::Array(
        r.findings
            .par_iter()
            .map(|f| serde_json::to_value(f).unwrap_or(Value::Null))
            .collect(),
    );
    let mut v = json!({
        "version": 1,
        "tool": "batchguard",
        "window": {"from": r.from.to_string(), "to": r.to.to_string()},
        "input": {
            "rows_read": r.input.rows_read,
            "rows_rejected": r.input.rows_rejected,
            "rows_accepted": r.input.rows_accepted,
            "events": r.input.events,
            "outputs": r.input.outputs,
            "rows_outside_window": r.input.rows_outside_window,
            "rejected": errors,
        },
        "findings": findings,
        "jobs": jobs,
        "totals": serde_json::to_value(&r.totals).unwrap_or(Value::Null),
        "skipped_checks": serde_json::to_value(&r.skipped).unwrap_or(Value::Null),
        "summary": {
            "errors": r.count(crate::finding::Severity::Error),
            "warnings": r.count(crate::finding::Severity::Warning),
        },
    });
    // Only when a job's slots were not all counted, so a report is what it was before.
    if !r.notes.is_empty() {
        v["notes"] = serde_json::to_value(&r.notes).unwrap_or(Value::Null);
    }
    // Only with drill records, so a report without them is what it was before them.
    if let Some(d) = &r.drills {
        let mut dv = serde_json::to_value(d).unwrap_or(Value::Null);
        dv["rejected"] = Value::Array(d.errors.iter().map(row_error).collect());
        v["drills"] = dv;
    }
    v
}

fn row_error(e: &crate::audit::RowError) -> Value {
    json!({
        "source": e.at.source,
        "row": e.at.row,
        "column": e.column,
        "message": e.message,
    })
}

pub fn render(r: &AuditResult) -> String {
    let mut s = serde_json::to_string_pretty(&value(r)).unwrap_or_default();
    s.push('\n');
    s
}
