//! `audit --format markdown`: the monthly report, readable in a pull request.

use super::audit_pretty::{by_job, pct, secs};
use crate::audit::AuditResult;
use crate::finding::Severity;

pub(crate) fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// `s` as one code span, fenced with one backtick more than the longest run inside it
/// (and padded when it starts or ends with one), so no text can break out of it.
pub(crate) fn code(s: &str) -> String {
    let s = s.replace('\n', " ");
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

/// Message text: its code spans kept, a stray backtick (from a value) escaped so it cannot
/// open a span that swallows the rest of the line.
pub(crate) fn text(s: &str) -> String {
    let s = esc(s);
    if s.matches('`').count().is_multiple_of(2) {
        s
    } else {
        s.replace('`', "\\`")
    }
}

/// A rejected row as a list item: the location as code, the message as text (it has code
/// spans of its own).
fn row_error(e: &crate::audit::RowError) -> String {
    let what = match &e.column {
        Some(c) => format!("column {}: {}", code(c), e.message),
        None => e.message.clone(),
    };
    format!("- {}: {}\n", code(&e.at.to_string()), text(&what))
}

pub fn render(r: &AuditResult) -> String {
    let t = &r.totals;
    let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
    let mut out = format!(
        "# Batch audit: {} to {}\n\nTimes in {}.\n\n{}\n\n",
        r.when(r.from),
        r.when(r.to),
        r.zone_name(),
        if e + w == 0 {
            "**Clean**: every due slot ran exactly once and every output was applied once."
                .to_owned()
        } else {
            format!(
                "**{}, {}.**",
                crate::text::plural(e, "error"),
                crate::text::plural(w, "warning")
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
    // `superseded` only when an attempt was: the common table stays as it was.
    let sup = super::audit_pretty::shows_superseded(r);
    let (sup_head, sup_rule) = if sup {
        (" superseded |", "---:|")
    } else {
        ("", "")
    };
    out.push_str(&format!("## Jobs\n\n| job | expected | succeeded | missed | failed | duplicated | lost |{sup_head} skipped | lock contention | first try | after retry | dead-lettered | manual | duration p50 / p95 / max | latency p50 / p95 / max | outputs | dup. outputs | missing outputs |\n|---|---:|---:|---:|---:|---:|---:|{sup_rule}---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"));
    for j in &r.jobs {
        let m = &j.metrics;
        let sup_cell = if sup {
            format!(" {} |", m.superseded)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |{sup_cell} {} | {} | {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} |\n",
            esc(&code(&j.job)),
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
    if let Some((rule, read)) = super::audit_pretty::drill_intro(r) {
        let intro = text(&format!(
            "Every{}. {}.",
            rule.trim_start_matches("every"),
            read
        ));
        out.push_str(&format!(
            "\n## Drills\n\n{}\n\n| job | last drill | result | scenarios | last passed | drill |\n|---|---|---|---|---|---|\n",
            text(&intro)
        ));
        for d in super::audit_pretty::drill_rows(r) {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                esc(&code(&d.job)),
                d.last.as_deref().unwrap_or("-"),
                match d.passed {
                    None => "-",
                    Some(true) => "passed",
                    Some(false) => "failed",
                },
                if d.scenarios.is_empty() {
                    "-".to_owned()
                } else {
                    esc(&code(&d.scenarios))
                },
                d.last_passed.as_deref().unwrap_or("-"),
                d.status
            ));
        }
    }
    if !r.findings.is_empty() {
        out.push_str("\n## Findings\n");
        for (job, fs) in by_job(r) {
            out.push_str(&format!(
                "\n### {} ({})\n\n| | code | slot | message |\n|---|---|---|---|\n",
                code(job),
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
                    f.scheduled_at.map(|t| r.when(t)).unwrap_or_default(),
                    text(&f.message)
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
        out.push_str(&row_error(e));
    }
    if let Some(d) = &r.drills {
        out.push_str(&format!(
            "\nDrill records: {} read from {}, {} rejected.\n",
            d.rows_read,
            code(&d.source),
            d.rows_rejected
        ));
        for e in d.errors.iter().take(20) {
            out.push_str(&row_error(e));
        }
    }
    if !r.skipped.is_empty() {
        out.push_str("\n## Checks not run\n\n");
        for s in &r.skipped {
            out.push_str(&format!("- {}: {}\n", s.codes.join(", "), text(&s.reason)));
        }
    }
    out
}
