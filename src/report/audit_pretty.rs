//! `audit --format pretty`: a metrics table that fits an 80-100 column terminal, then the
//! findings grouped by job. May change between versions; scripts use `--format json`.

use crate::audit::{AuditFinding, AuditResult};
use crate::finding::Severity;

/// `97.5%`, or `-` when there is no denominator.
pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.1}%", x * 100.0))
}

/// `2m05s`, `0.4s`, or `-`.
pub(crate) fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), crate::audit::human_secs)
}

/// A plain text table: first column left-aligned, the others right-aligned.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>], max_first: usize) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    let clip = |s: &str| -> String {
        if s.chars().count() > max_first {
            let mut t: String = s.chars().take(max_first.saturating_sub(1)).collect();
            t.push('…');
            t
        } else {
            s.to_owned()
        }
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, c)| if i == 0 { clip(c) } else { c.clone() })
                .collect()
        })
        .collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            let pad = " ".repeat(w.saturating_sub(c.chars().count()));
            if i > 0 {
                s.push_str("  ");
            }
            if i == 0 {
                s.push_str(c);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(c);
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

const HEADERS: &[&str] = &[
    "job", "expected", "ok", "missed", "failed", "dup", "lost", "skip", "1st try", "retry ok",
    "lat p95", "dur p95", "dup out",
];

/// Whether the metrics tables show a `superseded` column: only when an attempt was
/// superseded, so the common table stays as narrow as it was.
pub(crate) fn shows_superseded(r: &AuditResult) -> bool {
    r.totals.superseded > 0
}

/// The metrics table's headers (`superseded` after `lost` when [`shows_superseded`]).
pub(crate) fn headers(r: &AuditResult) -> Vec<&'static str> {
    let mut h = HEADERS.to_vec();
    if shows_superseded(r) {
        h.insert(7, "superseded");
    }
    h
}

pub(crate) fn metric_rows(r: &AuditResult) -> Vec<Vec<String>> {
    let sup = shows_superseded(r);
    let mut rows: Vec<Vec<String>> = r
        .jobs
        .iter()
        .map(|j| cells(&j.job, &j.metrics, sup))
        .collect();
    rows.push(cells("total", &r.totals, sup));
    rows
}

fn cells(name: &str, m: &crate::audit::Metrics, superseded: bool) -> Vec<String> {
    let mut c = vec![
        name.to_owned(),
        m.expected.to_string(),
        m.succeeded.to_string(),
        m.missed.to_string(),
        m.failed.to_string(),
        m.duplicated.to_string(),
        m.lost.to_string(),
    ];
    if superseded {
        c.push(m.superseded.to_string());
    }
    c.extend([
        m.skipped.to_string(),
        pct(m.first_attempt_success_rate),
        pct(m.success_after_retry_rate),
        secs(m.latency_p95_s),
        secs(m.duration_p95_s),
        m.duplicate_outputs.to_string(),
    ]);
    c
}

/// One row of the drills table: job, last drill (when), its result, its scenarios, the
/// last passing drill (when), and whether AU301 judges the job overdue.
pub(crate) struct DrillRow {
    pub(crate) job: String,
    pub(crate) last: Option<String>,
    pub(crate) passed: Option<bool>,
    /// The failed scenarios of the last drill, and how many ran.
    pub(crate) failed: Vec<String>,
    pub(crate) ran: usize,
    /// The record's `scenarios` value.
    pub(crate) scenarios: String,
    pub(crate) last_passed: Option<String>,
    pub(crate) status: &'static str,
}

/// The drills table of the manifest jobs (empty without drill records).
pub(crate) fn drill_rows(r: &AuditResult) -> Vec<DrillRow> {
    r.jobs
        .iter()
        .filter_map(|j| {
            let d = j.drills.as_ref()?;
            let last = d.last_drill.as_ref();
            Some(DrillRow {
                job: j.job.clone(),
                last: last.map(|l| r.when(l.at)),
                passed: last.map(|l| l.passed),
                failed: last
                    .map(|l| {
                        l.scenarios
                            .iter()
                            .filter(|s| !s.passed)
                            .map(|s| s.name.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
                ran: last.map_or(0, |l| l.scenarios.len()),
                scenarios: last.map(|l| l.scenarios_text()).unwrap_or_default(),
                last_passed: d.last_passing_drill_at.map(|t| r.when(t)),
                status: match (d.needed, d.overdue) {
                    (false, _) => "no snapshot",
                    (true, true) => "overdue",
                    (true, false) => "ok",
                },
            })
        })
        .collect()
}

/// The two sentences above the drills table: what AU301 asks, and what was read.
pub(crate) fn drill_intro(r: &AuditResult) -> Option<(String, String)> {
    let d = r.drills.as_ref()?;
    let rule = format!(
        "every job with a snapshot needs a passing drill within drill_cadence {} before {} (AU301)",
        crate::text::duration::secs(d.cadence_s),
        r.when(r.to)
    );
    let mut read = format!(
        "{} from {}, {} rejected",
        crate::text::plural(d.rows_read as usize, "drill record"),
        d.source,
        d.rows_rejected
    );
    if d.ignored > 0 {
        read.push_str(&format!(
            ", {} of jobs no manifest declares ignored",
            d.ignored
        ));
    }
    if d.after_to > 0 {
        read.push_str(&format!(
            ", {} at or after the window's end not counted",
            d.after_to
        ));
    }
    Some((rule, read))
}

/// A drill's result in a few words: `passed (6 scenarios)`, `failed: rerun, crash`.
pub(crate) fn drill_result(row: &DrillRow) -> String {
    match row.passed {
        None => "-".into(),
        Some(true) => format!("passed ({})", crate::text::plural(row.ran, "scenario")),
        Some(false) if row.failed.is_empty() => "failed".into(),
        Some(false) => format!("failed: {}", row.failed.join(", ")),
    }
}

/// A left-aligned text table (the drills: words and times, not numbers).
fn left_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(c);
            s.push_str(&" ".repeat(w.saturating_sub(c.chars().count())));
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    out.push_str(&line(
        &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
    ));
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn drills_section(r: &AuditResult) -> String {
    let Some((rule, read)) = drill_intro(r) else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = drill_rows(r)
        .iter()
        .map(|d| {
            vec![
                d.job.clone(),
                d.last.clone().unwrap_or_else(|| "-".into()),
                drill_result(d),
                d.last_passed.clone().unwrap_or_else(|| "-".into()),
                d.status.to_owned(),
            ]
        })
        .collect();
    let mut out = format!("\ndrills: {rule}\n{read}\n");
    out.push_str(&left_table(
        &["job", "last drill", "result", "last passed", "drill"],
        &rows,
    ));
    out
}

/// Findings by job, in job order (the order of `r.findings`).
pub(crate) fn by_job(r: &AuditResult) -> Vec<(&str, Vec<&AuditFinding>)> {
    let mut out: Vec<(&str, Vec<&AuditFinding>)> = Vec::new();
    for f in &r.findings {
        match out.last_mut() {
            Some((j, v)) if *j == f.job => v.push(f),
            _ => out.push((f.job.as_str(), vec![f])),
        }
    }
    out
}

pub fn render(r: &AuditResult, color: bool) -> String {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    let mut out = format!(
        "{} {} .. {} (times in {})\n{} rows read, {} rejected, {} outside the window\n\n",
        paint("1", "batchguard audit"),
        r.when(r.from),
        r.when(r.to),
        r.zone_name(),
        r.input.rows_read,
        r.input.rows_rejected,
        r.input.rows_outside_window
    );
    out.push_str(&table(&headers(r), &metric_rows(r), 28));
    out.push_str(&drills_section(r));
    for (job, fs) in by_job(r) {
        out.push('\n');
        out.push_str(&paint("1", job));
        out.push_str(&format!(
            " ({})\n",
            crate::text::plural(fs.len(), "finding")
        ));
        for f in fs {
            let sev = match f.severity {
                Severity::Error => paint("31", "error"),
                Severity::Warning => paint("33", "warning"),
            };
            out.push_str(&format!("  {sev} {} {}: {}\n", f.code, f.name, f.message));
        }
    }
    if !r.row_errors.is_empty() {
        out.push_str(&format!(
            "\nrejected rows ({} in all, first {} shown):\n",
            r.input.rows_rejected,
            r.row_errors.len().min(10)
        ));
        for e in r.row_errors.iter().take(10) {
            out.push_str(&format!("  {e}\n"));
        }
    }
    if let Some(d) = r.drills.as_ref().filter(|d| !d.errors.is_empty()) {
        out.push_str(&format!(
            "\nrejected drill rows ({} in all, first {} shown):\n",
            d.rows_rejected,
            d.errors.len().min(10)
        ));
        for e in d.errors.iter().take(10) {
            out.push_str(&format!("  {e}\n"));
        }
    }
    for s in &r.skipped {
        out.push_str(&format!(
            "\n{} {}: {}",
            paint("2", "skipped"),
            s.codes.join(", "),
            s.reason
        ));
    }
    if !r.skipped.is_empty() {
        out.push('\n');
    }
    let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
    out.push_str(&format!(
        "\n{}: {}, {} in {}\n",
        if e + w == 0 {
            paint("32", "clean")
        } else {
            paint("1", "found")
        },
        crate::text::plural(e, "error"),
        crate::text::plural(w, "warning"),
        crate::text::plural(r.jobs.len(), "job")
    ));
    out
}

/// Manifest jobs the audit cannot evaluate, each shown as lint shows its finding (the same
/// rule, place and help), then one line saying why the audit stopped.
pub fn render_not_evaluable(e: &crate::audit::manifests::NotEvaluable, color: bool) -> String {
    use miette::{GraphicalReportHandler, GraphicalTheme};
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_links(false)
        .with_width(100);
    let mut out = String::new();
    for p in &e.problems {
        if handler.render_report(&mut out, p).is_err() {
            out.push_str(&format!("{p}\n"));
        }
        out.push('\n');
    }
    out.push_str(&format!("error: {}\n", e.message));
    out
}
