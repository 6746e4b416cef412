//! `batchguard metrics`: a [`Snapshot`] as Prometheus metrics, in the OpenMetrics 1.0
//! text format (what Prometheus asks for first) or the classic text format 0.0.4 (what
//! node_exporter's textfile collector and older scrapers read). One model, two spellings:
//! they differ in how a counter's `TYPE` line is named, the `UNIT` lines and `# EOF`.
//!
//! Naming follows the Prometheus conventions: the `batchguard_` prefix, base units
//! (seconds), `_total` on counters, `_timestamp_seconds` on instants; labels `job_name`,
//! `outcome`, `reason`, `alert`. The batch job is `job_name`, not `job`: Prometheus gives
//! every scraped series the scrape's own `job` label, which would push an exporter's `job`
//! aside as `exported_job` (kube-state-metrics names its Jobs `job_name` for the same
//! reason). Counters and histograms count every ledger row read since
//! the exporter started (the whole ledger, read once); gauges are over the `--since`
//! window or now.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `batchguard_runs_total` | counter | job_name, outcome (`succeeded`, `failed`, `superseded`) | runs that ended (`end` events; `superseded`: a newer holder took the slot over, no verdict) |
//! | `batchguard_runs_started_total` | counter | job_name | `start` events |
//! | `batchguard_skips_total` | counter | job_name, reason (`held`, `already_succeeded`, `dead_lettered`, `other`, `unknown`) | slots not run because the lock was not taken |
//! | `batchguard_dead_letters_total` | counter | job_name | `dead_letter` events |
//! | `batchguard_run_duration_seconds` | histogram | job_name | `start` to `end` of each run; buckets on a ladder around the job's `expected_duration` ([`crate::live::counters::ladder`]) |
//! | `batchguard_run_latency_seconds` | histogram | job_name | `scheduled_at` to the first successful `end` of each slot |
//! | `batchguard_last_success_timestamp_seconds` | gauge | job_name | the latest successful `end` |
//! | `batchguard_expected_slots`, `batchguard_missed_slots`, `batchguard_failed_slots` | gauge | job_name | the audit's figures over the window |
//! | `batchguard_uncounted_slots` | gauge | job_name | due slots of the window before the job's first event (no `since:`), not counted (the audit's AU112) |
//! | `batchguard_host_clock_skew_seconds` | gauge | job_name, instance | host clock minus the store's at the instance's latest `start` or `skip`, from its `host clock ±N s` detail (0 when that event had none); only instances that ever reported one |
//! | `batchguard_lock_contention_ratio` | gauge | job_name | skips / (starts + skips) over the window |
//! | `batchguard_running_runs` | gauge | job_name | runs going on now |
//! | `batchguard_live_leases`, `batchguard_expired_leases` | gauge | job_name | leases held, within and past their TTL |
//! | `batchguard_alerts_firing` | gauge | job_name, alert (`latency`, `missed`, `stale_lease`, `overrun`) | alerts firing now |
//! | `batchguard_last_passed_drill_timestamp_seconds` | gauge | job_name | the latest passing drill record (`batchguard_drills`, when the ledger has it) |
//! | `batchguard_window_seconds` | gauge | | the gauges' window |
//! | `batchguard_ledger_rows_read_total`, `batchguard_ledger_rows_rejected_total` | counter | | ledger rows read, and of them rows that could not be read |
//! | `batchguard_refresh_seconds` | gauge | | what the last refresh took |

use crate::live::alerts::AlertKind;
use crate::live::counters::{Hist, SKIP_REASONS};
use crate::live::figures::Snapshot;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The two text formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
    /// `text/plain; version=0.0.4`
    Text,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// A label value, escaped (`\`, `"`, newline), onto `out`.
fn esc(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample value onto `out`: integers as integers, `NaN`/`+Inf` spelled as the formats
/// want.
fn num(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

struct Out {
    s: String,
    format: Format,
}

impl Out {
    /// `HELP`, `TYPE` (and `UNIT`) of a family. `name` is the family's name: without
    /// `_total` for a counter.
    fn family(&mut self, name: &str, kind: &str, unit: Option<&str>, help: &str) {
        let total = if self.format == Format::Text && kind == "counter" {
            "_total"
        } else {
            ""
        };
        let _ = writeln!(self.s, "# HELP {name}{total} {help}");
        let _ = writeln!(self.s, "# TYPE {name}{total} {kind}");
        if let (Format::OpenMetrics, Some(u)) = (self.format, unit) {
            let _ = writeln!(self.s, "# UNIT {name} {u}");
        }
    }

    /// One sample of `name` + `suffix` (`_total`, `_bucket`…).
    fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], v: f64) {
        self.s.push_str(name);
        self.s.push_str(suffix);
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                self.s.push_str(k);
                self.s.push_str("=\"");
                esc(&mut self.s, val);
                self.s.push('"');
            }
            self.s.push('}');
        }
        self.s.push(' ');
        num(&mut self.s, v);
        self.s.push('\n');
    }

    fn hist(&mut self, name: &str, job: &str, h: &Hist) {
        let mut le = String::new();
        for (bound, c) in h.cumulative() {
            le.clear();
            match bound {
                Some(b) if self.format == Format::OpenMetrics && b.fract() == 0.0 => {
                    let _ = write!(le, "{b:.1}");
                }
                Some(b) => num(&mut le, b),
                None => le.push_str("+Inf"),
            }
            self.sample(name, "_bucket", &[("job_name", job), ("le", &le)], c as f64);
        }
        self.sample(name, "_sum", &[("job_name", job)], h.sum);
        self.sample(name, "_count", &[("job_name", job)], h.count as f64);
    }
}

/// The metrics of `snap` in `format`.
pub fn render(snap: &Snapshot, format: Format) -> String {
    let mut o = Out {
        s: String::with_capacity(256 + snap.jobs.len() * 4096),
        format,
    };
    // Every job shown or counted, so a series exists before its first event.
    let mut jobs: BTreeMap<&str, ()> = BTreeMap::new();
    for j in &snap.jobs {
        jobs.insert(&j.job, ());
    }
    for j in snap.counters.keys() {
        jobs.insert(j, ());
    }
    let empty = Default::default();
    let counters = |job: &str| snap.counters.get(job).unwrap_or(&empty);
    let by_job: BTreeMap<&str, &crate::live::figures::JobFigures> =
        snap.jobs.iter().map(|j| (j.job.as_str(), j)).collect();
    let fig = |job: &str| by_job.get(job).copied();

    o.family(
        "batchguard_runs",
        "counter",
        None,
        "Runs that ended (end events), by outcome.",
    );
    for &job in jobs.keys() {
        let c = counters(job);
        o.sample(
            "batchguard_runs",
            "_total",
            &[("job_name", job), ("outcome", "succeeded")],
            c.succeeded as f64,
        );
        o.sample(
            "batchguard_runs",
            "_total",
            &[("job_name", job), ("outcome", "failed")],
            c.failed as f64,
        );
        o.sample(
            "batchguard_runs",
            "_total",
            &[("job_name", job), ("outcome", "superseded")],
            c.superseded as f64,
        );
    }
    o.family(
        "batchguard_runs_started",
        "counter",
        None,
        "Runs that started (start events).",
    );
    for &job in jobs.keys() {
        o.sample(
            "batchguard_runs_started",
            "_total",
            &[("job_name", job)],
            counters(job).started as f64,
        );
    }
    o.family(
        "batchguard_skips",
        "counter",
        None,
        "Slots not run by an instance because the lock was not taken, by reason.",
    );
    for &job in jobs.keys() {
        let c = counters(job);
        for r in SKIP_REASONS {
            let n = c.skips.get(r).copied().unwrap_or(0);
            o.sample(
                "batchguard_skips",
                "_total",
                &[("job_name", job), ("reason", r)],
                n as f64,
            );
        }
    }
    o.family(
        "batchguard_dead_letters",
        "counter",
        None,
        "Slots dead-lettered (dead_letter events).",
    );
    for &job in jobs.keys() {
        o.sample(
            "batchguard_dead_letters",
            "_total",
            &[("job_name", job)],
            counters(job).dead_lettered as f64,
        );
    }
    o.family(
        "batchguard_run_duration_seconds",
        "histogram",
        Some("seconds"),
        "From a run's start to its end.",
    );
    for &job in jobs.keys() {
        o.hist(
            "batchguard_run_duration_seconds",
            job,
            &counters(job).duration,
        );
    }
    o.family(
        "batchguard_run_latency_seconds",
        "histogram",
        Some("seconds"),
        "From a slot's scheduled_at to its first successful end.",
    );
    for &job in jobs.keys() {
        o.hist(
            "batchguard_run_latency_seconds",
            job,
            &counters(job).latency,
        );
    }
    o.family(
        "batchguard_last_success_timestamp_seconds",
        "gauge",
        Some("seconds"),
        "When the job's latest successful run ended (Unix time).",
    );
    for &job in jobs.keys() {
        if let Some(t) = counters(job).last_success {
            o.sample(
                "batchguard_last_success_timestamp_seconds",
                "",
                &[("job_name", job)],
                t.as_millisecond() as f64 / 1000.0,
            );
        }
    }
    type Gauge = fn(&crate::live::figures::JobFigures) -> Option<f64>;
    let gauges: [(&str, &str, Gauge); 8] = [
        (
            "batchguard_expected_slots",
            "Slots of the schedule due in the window.",
            |j| Some(j.expected as f64),
        ),
        (
            "batchguard_missed_slots",
            "Due slots of the window with no start (AU101).",
            |j| Some(j.missed as f64),
        ),
        (
            "batchguard_uncounted_slots",
            "Due slots of the window before the job's first event, not counted as missed: the job has no since: (AU112).",
            |j| Some(j.not_counted as f64),
        ),
        (
            "batchguard_failed_slots",
            "Due slots of the window started but never succeeded (AU111).",
            |j| Some(j.failed as f64),
        ),
        (
            "batchguard_lock_contention_ratio",
            "Skips / (starts + skips) over the window.",
            |j| j.lock_contention_ratio,
        ),
        ("batchguard_running_runs", "Runs going on now.", |j| {
            Some(j.running.len() as f64)
        }),
        (
            "batchguard_live_leases",
            "Leases held within their TTL.",
            |j| Some(j.leases.iter().filter(|l| !l.expired).count() as f64),
        ),
        (
            "batchguard_expired_leases",
            "Leases still held past their TTL (never released).",
            |j| Some(j.leases.iter().filter(|l| l.expired).count() as f64),
        ),
    ];
    for (name, help, get) in gauges {
        o.family(name, "gauge", None, help);
        for &job in jobs.keys() {
            if let Some(v) = fig(job).and_then(get) {
                o.sample(name, "", &[("job_name", job)], v);
            }
        }
    }
    let skews: Vec<(&str, &str, f64)> = jobs
        .keys()
        .flat_map(|&job| {
            counters(job)
                .host_clock_skew
                .iter()
                .map(move |(inst, &(_, v))| (job, inst.as_str(), v))
        })
        .collect();
    if !skews.is_empty() {
        o.family(
            "batchguard_host_clock_skew_seconds",
            "gauge",
            Some("seconds"),
            "The instance's host clock minus the store's at its latest start or skip (0: within tick_tolerance).",
        );
        for (job, inst, v) in skews {
            o.sample(
                "batchguard_host_clock_skew_seconds",
                "",
                &[("job_name", job), ("instance", inst)],
                v,
            );
        }
    }
    o.family(
        "batchguard_alerts_firing",
        "gauge",
        None,
        "Alerts firing now, by kind (latency, missed, stale_lease, overrun).",
    );
    let mut firing: BTreeMap<(&str, AlertKind), u64> = BTreeMap::new();
    for a in &snap.alerts {
        *firing.entry((a.job.as_str(), a.kind)).or_default() += 1;
    }
    for &job in jobs.keys() {
        for k in AlertKind::ALL {
            let n = firing.get(&(job, k)).copied().unwrap_or(0);
            o.sample(
                "batchguard_alerts_firing",
                "",
                &[("job_name", job), ("alert", k.as_str())],
                n as f64,
            );
        }
    }
    let drills: Vec<(&str, jiff::Timestamp)> = snap
        .jobs
        .iter()
        .filter_map(|j| Some((j.job.as_str(), j.last_passed_drill?)))
        .collect();
    if !drills.is_empty() {
        o.family(
            "batchguard_last_passed_drill_timestamp_seconds",
            "gauge",
            Some("seconds"),
            "When the job's latest passing drill was recorded (Unix time); its age is time() minus this.",
        );
        for (job, t) in drills {
            o.sample(
                "batchguard_last_passed_drill_timestamp_seconds",
                "",
                &[("job_name", job)],
                t.as_millisecond() as f64 / 1000.0,
            );
        }
    }
    o.family(
        "batchguard_window_seconds",
        "gauge",
        Some("seconds"),
        "The window of the slot gauges.",
    );
    o.sample(
        "batchguard_window_seconds",
        "",
        &[],
        snap.window.since_s as f64,
    );
    o.family(
        "batchguard_ledger_rows_read",
        "counter",
        None,
        "Ledger rows read (events and outputs).",
    );
    o.sample(
        "batchguard_ledger_rows_read",
        "_total",
        &[],
        snap.input.rows_read as f64,
    );
    o.family(
        "batchguard_ledger_rows_rejected",
        "counter",
        None,
        "Ledger rows that could not be read.",
    );
    o.sample(
        "batchguard_ledger_rows_rejected",
        "_total",
        &[],
        snap.input.rows_rejected as f64,
    );
    o.family(
        "batchguard_refresh_seconds",
        "gauge",
        Some("seconds"),
        "What the last refresh took.",
    );
    o.sample(
        "batchguard_refresh_seconds",
        "",
        &[],
        snap.refresh_ms / 1000.0,
    );
    if format == Format::OpenMetrics {
        o.s.push_str("# EOF\n");
    }
    o.s
}
