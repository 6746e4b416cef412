//! `audit --format csv`: the per-job metrics table (SPEC 6), one row per job and a
//! `TOTAL` row; column names are the JSON metric names.

use crate::audit::{AuditResult, Metrics};

pub const COLUMNS: &[&str] = &[
    "expected",
    "started",
    "succeeded",
    "missed",
    "failed",
    "duplicated",
    "lost",
    "superseded",
    "skipped",
    "lock_contention_ratio",
    "first_attempt_success_rate",
    "success_after_retry_rate",
    "dead_lettered",
    "manual_recoveries",
    "duration_p50_s",
    "duration_p95_s",
    "duration_p99_s",
    "duration_max_s",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "latency_max_s",
    "outputs",
    "duplicate_outputs",
    "missing_outputs",
];

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn row(out: &mut String, name: &str, m: &Metrics) {
    out.push_str(&field(name));
    let v = serde_json::to_value(m).unwrap_or_default();
    for c in COLUMNS {
        out.push(',');
        match v.get(*c) {
            Some(serde_json::Value::Null) | None => {}
            Some(x) => out.push_str(&x.to_string()),
        }
    }
    out.push('\n');
}

pub fn render(r: &AuditResult) -> String {
    let mut out = String::from("job");
    for c in COLUMNS {
        out.push(',');
        out.push_str(c);
    }
    out.push('\n');
    for j in &r.jobs {
        row(&mut out, &j.job, &j.metrics);
    }
    row(&mut out, "TOTAL", &r.totals);
    out
}
