//! `audit --format html`: one self-contained file (inline CSS and SVG, no scripts, no
//! network), with the latency distribution per job and missed/duplicated runs per day.

use super::audit_pretty::{by_job, headers, metric_rows};
use crate::audit::{AuditResult, JobReport};
use crate::finding::Severity;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Message text escaped, its `code spans` as `<code>`; an unpaired backtick stays as is.
fn rich(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return esc(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for (i, p) in parts.iter().enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(&esc(p));
            out.push_str("</code>");
        } else {
            out.push_str(&esc(p));
        }
    }
    out
}

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1100px;color:#1f2328;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}
.sub{color:#59636e}.cards{display:flex;gap:.8rem;flex-wrap:wrap;margin:1rem 0}
.card{border:1px solid #d0d7de;border-radius:8px;padding:.6rem 1rem;min-width:7rem}
.card b{display:block;font-size:1.5rem}.bad b{color:#cf222e}.warn b{color:#9a6700}.good b{color:#1a7f37}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{padding:.3rem .5rem;border-bottom:1px solid #eaeef2;text-align:right}
th:first-child,td:first-child{text-align:left}table.m tr:last-child td{font-weight:600}.f td.t{white-space:nowrap}
.f td{text-align:left;vertical-align:top}.error{color:#cf222e;font-weight:600}.warning{color:#9a6700;font-weight:600}
code{background:#f6f8fa;padding:0 .25rem;border-radius:4px}svg text{font:11px system-ui,sans-serif;fill:#59636e}
.legend span{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 1rem;vertical-align:middle}";

pub fn render(r: &AuditResult) -> String {
    let t = &r.totals;
    let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
    let mut h = String::with_capacity(32 * 1024);
    h.push_str(&format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>batchguard audit {} to {}</title><style>{CSS}</style></head><body>",
        esc(&r.when(r.from)),
        esc(&r.when(r.to))
    ));
    h.push_str(&format!(
        "<h1>Batch audit</h1><div class=\"sub\">{} to {} (times and days in {}) &middot; {} rows read, {} rejected</div>",
        esc(&r.when(r.from)),
        esc(&r.when(r.to)),
        esc(&r.zone_name()),
        r.input.rows_read,
        r.input.rows_rejected
    ));
    let card = |label: &str, v: String, class: &str| {
        format!("<div class=\"card {class}\"><b>{v}</b>{label}</div>")
    };
    let flag = |n: u64| if n > 0 { "bad" } else { "good" };
    h.push_str("<div class=\"cards\">");
    h.push_str(&card("expected slots", t.expected.to_string(), ""));
    h.push_str(&card("succeeded", t.succeeded.to_string(), ""));
    h.push_str(&card("missed", t.missed.to_string(), flag(t.missed)));
    h.push_str(&card(
        "duplicated",
        t.duplicated.to_string(),
        flag(t.duplicated),
    ));
    h.push_str(&card("failed", t.failed.to_string(), flag(t.failed)));
    if super::audit_pretty::shows_superseded(r) {
        h.push_str(&card("superseded attempts", t.superseded.to_string(), ""));
    }
    h.push_str(&card(
        "duplicate outputs",
        t.duplicate_outputs.to_string(),
        flag(t.duplicate_outputs),
    ));
    h.push_str(&card(
        "success after retry",
        super::audit_pretty::pct(t.success_after_retry_rate),
        "",
    ));
    h.push_str(&card(
        "findings",
        format!("{e} / {w}"),
        if e > 0 {
            "bad"
        } else if w > 0 {
            "warn"
        } else {
            "good"
        },
    ));
    h.push_str("</div>");

    h.push_str("<h2>Missed and duplicated runs per day</h2>");
    h.push_str(&per_day_chart(r));
    h.push_str("<h2>Latency distribution per job</h2><p class=\"sub\">Scheduled time to first successful end, log scale; the dashed line is the job's p95.</p>");
    h.push_str(&latency_chart(&r.jobs));

    h.push_str("<h2>Jobs</h2><table class=\"m\"><thead><tr>");
    for c in headers(r) {
        h.push_str(&format!("<th>{}</th>", esc(c)));
    }
    h.push_str("</tr></thead><tbody>");
    for row in metric_rows(r) {
        h.push_str("<tr>");
        for c in row {
            h.push_str(&format!("<td>{}</td>", esc(&c)));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");

    if let Some((rule, read)) = super::audit_pretty::drill_intro(r) {
        let intro = format!("Every{}. {}.", rule.trim_start_matches("every"), read);
        h.push_str(&format!(
            "<h2>Drills</h2><p class=\"sub\">{}</p><table class=\"f\"><thead><tr><th>job</th><th>last drill</th><th>result</th><th>scenarios</th><th>last passed</th><th>drill</th></tr></thead><tbody>",
            rich(&intro)
        ));
        for d in super::audit_pretty::drill_rows(r) {
            let (class, result) = match d.passed {
                None => ("", "-".to_owned()),
                Some(true) => ("", "passed".to_owned()),
                Some(false) => ("error", "failed".to_owned()),
            };
            h.push_str(&format!(
                "<tr><td><code>{}</code></td><td class=\"t\">{}</td><td class=\"{class}\">{}</td><td>{}</td><td class=\"t\">{}</td><td class=\"{}\">{}</td></tr>",
                esc(&d.job),
                esc(d.last.as_deref().unwrap_or("-")),
                esc(&result),
                esc(if d.scenarios.is_empty() { "-" } else { &d.scenarios }),
                esc(d.last_passed.as_deref().unwrap_or("-")),
                if d.status == "overdue" { "warning" } else { "" },
                esc(d.status)
            ));
        }
        h.push_str("</tbody></table>");
    }

    if !r.findings.is_empty() {
        h.push_str("<h2>Findings</h2>");
        for (job, fs) in by_job(r) {
            h.push_str(&format!(
                "<h3><code>{}</code> ({})</h3><table class=\"f\"><tbody>",
                esc(job),
                fs.len()
            ));
            for f in fs {
                let sev = f.severity.to_string();
                h.push_str(&format!(
                    "<tr><td class=\"{sev}\">{sev}</td><td class=\"t\">{}&nbsp;<code>{}</code></td><td class=\"t\">{}</td><td>{}</td></tr>",
                    f.code,
                    f.name,
                    f.scheduled_at.map(|t| esc(&r.when(t))).unwrap_or_default(),
                    rich(&f.message)
                ));
            }
            h.push_str("</tbody></table>");
        }
    }
    if !r.skipped.is_empty() {
        h.push_str("<h2>Checks not run</h2><ul>");
        for s in &r.skipped {
            h.push_str(&format!(
                "<li>{}: {}</li>",
                esc(&s.codes.join(", ")),
                rich(&s.reason)
            ));
        }
        h.push_str("</ul>");
    }
    let drill_errors = r.drills.as_ref().map_or(&[][..], |d| &d.errors[..]);
    if !r.row_errors.is_empty() || !drill_errors.is_empty() {
        h.push_str("<h2>Rejected rows</h2><ul>");
        for e in r
            .row_errors
            .iter()
            .take(50)
            .chain(drill_errors.iter().take(50))
        {
            let what = match &e.column {
                Some(c) => format!("column `{c}`: {}", e.message),
                None => e.message.clone(),
            };
            h.push_str(&format!(
                "<li><code>{}</code>: {}</li>",
                esc(&e.at.to_string()),
                rich(&what)
            ));
        }
        h.push_str("</ul>");
    }
    h.push_str("<p class=\"sub\">Generated by batchguard. Percentiles are within 0.4% of the exact value.</p></body></html>\n");
    h
}

fn per_day_chart(r: &AuditResult) -> String {
    if r.per_day.is_empty() {
        return "<p>No missed or duplicated runs.</p>".into();
    }
    let (w, hgt, left, bottom, top) = (1000.0, 220.0, 40.0, 40.0, 10.0);
    let n = r.per_day.len() as f64;
    let peak = r
        .per_day
        .iter()
        .map(|(_, a, b)| (*a).max(*b))
        .max()
        .unwrap_or(1)
        .max(1);
    // Whole-number gridlines: a step of ceil(peak / 4), the axis up to 4 steps.
    let step = peak.div_ceil(4);
    let max = (step * 4) as f64;
    let plot_h = hgt - bottom - top;
    let slot = (w - left - 10.0) / n;
    let bar = (slot * 0.4).min(24.0);
    let mut s = format!(
        "<div class=\"legend\"><span style=\"background:#cf222e\"></span>missed<span style=\"background:#bf8700\"></span>duplicated</div><svg viewBox=\"0 0 {w} {hgt}\" width=\"100%\" role=\"img\" aria-label=\"missed and duplicated runs per day\">"
    );
    for i in 0..=4u32 {
        let v = step * u64::from(i);
        let y = top + plot_h - plot_h * f64::from(i) / 4.0;
        s.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eaeef2\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - 10.0,
            left - 4.0,
            y + 4.0,
            v
        ));
    }
    let label_every = (n / 15.0).ceil().max(1.0) as usize;
    for (i, (day, missed, dup)) in r.per_day.iter().enumerate() {
        let x0 = left + slot * i as f64 + slot / 2.0;
        for (k, (v, color)) in [(*missed, "#cf222e"), (*dup, "#bf8700")].iter().enumerate() {
            let bh = plot_h * (*v as f64) / max;
            let x = x0 - bar + bar * k as f64;
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{color}\"><title>{day}: {v}</title></rect>",
                top + plot_h - bh,
                bar * 0.95
            ));
        }
        if i % label_every == 0 {
            s.push_str(&format!(
                "<text x=\"{x0:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                hgt - bottom + 16.0,
                esc(day.get(5..).unwrap_or(day))
            ));
        }
    }
    s.push_str("</svg>");
    s
}

fn latency_chart(jobs: &[JobReport]) -> String {
    let with: Vec<&JobReport> = jobs.iter().filter(|j| !j.latency_hist.is_empty()).collect();
    if with.is_empty() {
        return "<p>No successful runs in the window.</p>".into();
    }
    // Shared log axis from 1 s to the largest latency.
    let max_ms = with
        .iter()
        .filter_map(|j| j.latency_hist.max())
        .max()
        .unwrap_or(1000)
        .max(2000) as f64;
    let (lo, hi) = (1000f64.ln(), (max_ms * 1.1).ln());
    let bins = 40usize;
    let (w, row_h, left) = (1000.0, 56.0, 190.0);
    let plot_w = w - left - 20.0;
    let hgt = row_h * with.len() as f64 + 30.0;
    let x_of = |ms: f64| left + plot_w * ((ms.max(1000.0).ln() - lo) / (hi - lo)).clamp(0.0, 1.0);
    let mut s = format!(
        "<svg viewBox=\"0 0 {w} {hgt}\" width=\"100%\" role=\"img\" aria-label=\"latency distribution per job\">"
    );
    for (row, j) in with.iter().enumerate() {
        let y0 = row_h * row as f64 + 4.0;
        let mut counts = vec![0u64; bins];
        for (blo, bhi, c) in j.latency_hist.buckets() {
            let mid = ((blo + bhi) as f64 / 2.0).max(1000.0);
            let b = (((mid.ln() - lo) / (hi - lo)) * bins as f64).floor();
            let b = (b.max(0.0) as usize).min(bins - 1);
            counts[b] += u64::from(c);
        }
        let cmax = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
        let name = if j.job.chars().count() > 26 {
            j.job.chars().take(25).collect::<String>() + "…"
        } else {
            j.job.clone()
        };
        s.push_str(&format!(
            "<text x=\"0\" y=\"{:.1}\" style=\"fill:#1f2328\">{}</text><line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#d0d7de\"/>",
            y0 + row_h / 2.0,
            esc(&name),
            left + plot_w,
            y0 + row_h - 10.0,
            y0 + row_h - 10.0
        ));
        let bw = plot_w / bins as f64;
        for (b, c) in counts.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            let bh = (row_h - 16.0) * (*c as f64) / cmax;
            s.push_str(&format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#0969da\"><title>{c} slot(s)</title></rect>",
                left + bw * b as f64,
                y0 + row_h - 10.0 - bh,
                bw * 0.9
            ));
        }
        if let Some(p95) = j.metrics.latency_p95_s {
            let x = x_of(p95 * 1000.0);
            let label = format!("p95 {}", crate::audit::human_secs(p95));
            // Right of the line, or left of it when the label would run past the edge
            // (about 6.5 px per character at 11 px).
            let (lx, anchor) = if x + 3.0 + label.chars().count() as f64 * 6.5 > w {
                (x - 3.0, "end")
            } else {
                (x + 3.0, "start")
            };
            s.push_str(&format!(
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#cf222e\" stroke-dasharray=\"3 2\"/><text x=\"{lx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
                y0 + 2.0,
                y0 + row_h - 10.0,
                y0 + 10.0,
                esc(&label)
            ));
        }
    }
    // Axis ticks at round durations.
    let ticks = [
        (1.0, "1s"),
        (10.0, "10s"),
        (60.0, "1m"),
        (300.0, "5m"),
        (900.0, "15m"),
        (3600.0, "1h"),
        (21600.0, "6h"),
        (86400.0, "1d"),
    ];
    let base = hgt - 12.0;
    for (sec, label) in ticks {
        let ms = sec * 1000.0;
        if ms > max_ms * 1.1 {
            break;
        }
        let x = x_of(ms);
        s.push_str(&format!(
            "<text x=\"{x:.1}\" y=\"{base:.1}\" text-anchor=\"middle\">{label}</text>"
        ));
    }
    s.push_str("</svg>");
    s
}
