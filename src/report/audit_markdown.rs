//! `audit --format markdown`: the monthly report, readable in a pull request.

use super::audit_pretty::{by_job, pct, secs};
use crate::audit::AuditResult;
use crate::finding::Severity;

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub fn render(r: &AuditResult) -> String {
    let t = &r.totals;
    let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
    let mut out = format!(
        "# Batch audit: {} to {}\n\n{}\n\n",
        r.from,
        r.to,
        if e + w == 0 {
            "**Clean**: every due slot ran exactly once and every output was applied once."
                .to_owned()
        } else {
            format!(
                "**{}, {}.**",
                super::plural(e, "error"),
                super::plural(w, "warning")
            )
        }
    );
    out.push_str(&format!(
        "| expected | succeeded | missed | failed | duplicated | lost | duplicate outputs | missing outputs | first-attempt success | success after retry | latency p95 |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n\n",
        t.expected,
        t.succeeded,
        t.missed,
        t.failed,
        t.duplicated,
        t.lost,
        t.duplicate_outputs,
        t.missing_outputs,
        pct(t.first_attempt_success_rate),
        pct(t.success_after_retry_rate),
        secs(t.latency_p95_s)
    ));
    out.push_str("## Jobs\n\n| job | expected | succeeded | missed | failed | duplicated | lost | skipped | lock contention | first try | after retry | dead-lettered | manual | duration p50 / p95 / max | latency p50 / p95 / max | outputs | dup. outputs | missing outputs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for j in &r.jobs {
        let m = &j.metrics;
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} |\n",
            esc(&j.job),
            m.expected,
            m.succeeded,
            m.missed,
            m.failed,
            m.duplicated,
            m.lost,
            m.skipped,
            pct(m.lock_contention_ratio),
            pct(m.first_attempt_success_rate),
            pct(m.success_after_retry_rate),
            m.dead_lettered,
            m.manual_recoveries,
            secs(m.duration_p50_s),
            secs(m.duration_p95_s),
            secs(m.duration_max_s),
            secs(m.latency_p50_s),
            secs(m.latency_p95_s),
            secs(m.latency_max_s),
            m.outputs,
            m.duplicate_outputs,
            m.missing_outputs
        ));
    }
    if !r.findings.is_empty() {
        out.push_str("\n## Findings\n");
        for (job, fs) in by_job(r) {
            out.push_str(&format!(
                "\n### `{}` ({})\n\n| | code | slot | message |\n|---|---|---|---|\n",
                esc(job),
                fs.len()
            ));
            for f in fs {
                let icon = match f.severity {
                    Severity::Error => "🔴 error",
                    Severity::Warning => "🟡 warning",
                };
                out.push_str(&format!(
                    "| {icon} | {} `{}` | {} | {} |\n",
                    f.code,
                    f.name,
                    f.scheduled_at.map(|t| t.to_string()).unwrap_or_default(),
                    esc(&f.message)
                ));
            }
        }
    }
    out.push_str(&format!(
        "\n## Input\n\n{} rows read ({} events, {} outputs), {} rejected, {} outside the window.\n",
        r.input.rows_read,
        r.input.events,
        r.input.outputs,
        r.input.rows_rejected,
        r.input.rows_outside_window
    ));
    for e in r.row_errors.iter().take(20) {
        out.push_str(&format!("- `{}`\n", esc(&e.to_string())));
    }
    if !r.skipped.is_empty() {
        out.push_str("\n## Checks not run\n\n");
        for s in &r.skipped {
            out.push_str(&format!("- {}: {}\n", s.codes.join(", "), esc(&s.reason)));
        }
    }
    out
}
