//! `batchguard audit` (SPEC 6): did every scheduled slot run exactly once, with every output
//! applied exactly once?
//!
//! Data flows one way: ledger rows (from `crate::ledger::read`) and manifests ->
//! [`Auditor`] (a streaming fold: [`Auditor::event`], [`Auditor::output`],
//! [`Auditor::row_error`]) -> [`Auditor::finish`] -> [`AuditResult`] (findings, per-job and
//! total metrics, input counts, skipped checks) -> `crate::report::audit_*`.
//!
//! Memory grows with distinct slots, executions and output keys, never with rows: job names
//! are interned, each slot and each execution is a small fixed-size record, run ids live
//! once in a byte arena (only findings turn them back into strings), output keys are kept
//! as 64-bit hashes with a count. See `docs/audit.md` for the definitions and the error
//! bound of the percentiles.

pub mod checks;
pub mod drills;
mod fold;
pub mod hist;
pub mod manifests;
mod metrics;
pub mod run;
pub mod snapshot;
mod view;

pub use crate::ledger::RowError;
pub use drills::DrillInput;
pub use fold::Auditor;
pub use metrics::Metrics;

use crate::finding::Severity;
use crate::manifest::load::Loaded;
use crate::schedule::Schedule;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;
use std::path::PathBuf;

/// One manifest job as the audit needs it: schedule in its dialect and zone, the
/// durations that decide grace and activity, and the retry classification.
#[derive(Clone, Debug)]
pub struct AuditJob {
    pub service: String,
    pub name: String,
    /// `None` when the expression does not parse (`schedule_error` says why): slot checks
    /// for this job are skipped, the others still run.
    pub schedule: Option<Schedule>,
    pub schedule_error: Option<String>,
    pub tz: TimeZone,
    pub tz_name: String,
    pub enabled: bool,
    /// `lock.ttl` in seconds.
    pub ttl_s: Option<u64>,
    /// `alerts.max_latency` in seconds.
    pub max_latency_s: Option<u64>,
    /// `retry.max_attempts` when bounded.
    pub max_attempts: Option<u64>,
    /// `retry.fatal` error codes.
    pub fatal: Vec<String>,
    /// `snapshot.path` template, `snapshot.key`, format and retention.
    pub snapshot: Option<SnapshotSpec>,
    /// `since`: when the job was first deployed; its slots count from here.
    pub since: Option<Timestamp>,
}

#[derive(Clone, Debug)]
pub struct SnapshotSpec {
    pub path: String,
    pub key: Option<String>,
    pub csv: bool,
    pub retention_s: Option<u64>,
}

impl AuditJob {
    /// SPEC 6: the grace at `to` is `alerts.max_latency`, else `lock.ttl`, else none.
    pub fn grace_s(&self) -> u64 {
        self.max_latency_s.or(self.ttl_s).unwrap_or(0)
    }
}

/// The jobs of one loaded manifest (defaults merged), each in the dialect of its
/// deployment (`jobs[].deployment` over `deployment`: the scheduler, else the platform's
/// default, else `crontab`, as lint does).
pub fn jobs_from_manifest(loaded: &Loaded, service: &str) -> Vec<AuditJob> {
    let mut out = Vec::new();
    for job in &loaded.jobs {
        // Each job's own deployment over the manifest's (SPEC 2), as lint reads it.
        let dialect = loaded.manifest.deployment_of(job).scheduler;
        let Some(name) = job.name.value() else {
            continue;
        };
        let tz_name = job
            .timezone
            .value()
            .cloned()
            .unwrap_or_else(|| "UTC".into());
        let (tz, tz_err) = match TimeZone::get(&tz_name) {
            Ok(tz) => (tz, None),
            Err(e) => (
                TimeZone::UTC,
                Some(format!("time zone `{tz_name}` is unknown: {e}")),
            ),
        };
        let (schedule, schedule_error) = match job.schedule.value() {
            None => (None, Some("the job has no valid `schedule`".to_owned())),
            Some(expr) => match Schedule::parse(expr, dialect) {
                Ok(s) if tz_err.is_none() => (Some(s), None),
                Ok(_) => (None, tz_err),
                Err(e) => (
                    None,
                    Some(format!(
                        "schedule `{expr}` does not parse as {dialect}: {e}"
                    )),
                ),
            },
        };
        let lock = job.lock.value();
        let retry = job.retry.value();
        let snapshot = job.snapshot.value().and_then(|s| {
            Some(SnapshotSpec {
                path: s.path.value()?.0.clone(),
                key: s.key.value().cloned(),
                csv: matches!(
                    s.format.value(),
                    Some(crate::manifest::model::SnapshotFormat::Csv)
                ),
                retention_s: s.retention.value().map(|d| d.secs()),
            })
        });
        out.push(AuditJob {
            service: service.to_owned(),
            name: name.clone(),
            schedule,
            schedule_error,
            tz,
            tz_name,
            enabled: job.enabled.value() != Some(&false),
            ttl_s: lock.and_then(|l| l.ttl.value()).map(|d| d.secs()),
            max_latency_s: job
                .alerts
                .value()
                .and_then(|a| a.max_latency.value())
                .map(|d| d.secs()),
            max_attempts: retry.and_then(|r| r.bounded_attempts()),
            fatal: retry
                .and_then(|r| r.fatal.value())
                .map(|codes| codes.iter().map(|c| c.value.clone()).collect())
                .unwrap_or_default(),
            snapshot,
            since: job.since.value().map(|s| s.0),
        });
    }
    out
}

/// What the audit is asked.
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// Window start (inclusive), by `scheduled_at`.
    pub from: Timestamp,
    /// Window end (exclusive).
    pub to: Timestamp,
    /// `--snapshots DIR`: enables AU202-AU204.
    pub snapshots: Option<PathBuf>,
    /// Whether any `--manifest` was given (without one, only AU102-AU104 and AU201 run).
    pub with_manifest: bool,
    /// Whether an outputs source was given (AU201, AU202 need it).
    pub with_outputs: bool,
}

/// One audit finding. Shares [`Severity`] with lint findings; where lint points at a file
/// span, an audit finding points at a job, a slot and the executions involved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditFinding {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    pub job: String,
    /// The slot, RFC 3339 UTC; `null` for AU107 and AU201.
    #[serde(serialize_with = "ser_ts_opt")]
    pub scheduled_at: Option<Timestamp>,
    pub run_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
}

pub(crate) fn ser_ts<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_string())
}

pub(crate) fn ser_ts_opt<S: serde::Serializer>(
    t: &Option<Timestamp>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&t.to_string()),
        None => s.serialize_none(),
    }
}

/// Slots of the window a job was not judged on (SPEC 7.1 items 21 and 26): its due slots
/// before its first event when it has no `since`. The audit reports them as one AU112;
/// the note carries the same for `watch`, `metrics` and the JSON report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditNote {
    pub job: String,
    /// `before_first_run`.
    pub reason: &'static str,
    /// Due slots of the window not counted.
    pub slots: u64,
    /// The slot counting starts from (the job's first event); `null` without one.
    #[serde(serialize_with = "ser_ts_opt")]
    pub counted_from: Option<Timestamp>,
    pub message: String,
}

/// Metrics of one job, with the data the charts need.
#[derive(Clone, Debug, Serialize)]
pub struct JobReport {
    pub job: String,
    /// False for a ledger job that no manifest declares (AU107) or when no manifest was given.
    #[serde(skip)]
    pub declared: bool,
    #[serde(flatten)]
    pub metrics: Metrics,
    /// Latency histogram (seconds, log buckets) for the HTML report.
    #[serde(skip)]
    pub latency_hist: hist::Histogram,
    #[serde(skip)]
    pub duration_hist: hist::Histogram,
    /// The job's drills, for a manifest job when drill records were read (AU301); absent
    /// otherwise, so a report without drill records is what it was before them.
    #[serde(flatten)]
    pub drills: Option<DrillStatus>,
}

/// A manifest job's drills before `to` (JSON: `last_drill`, `last_passing_drill_at`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrillStatus {
    /// The latest drill record of the job, passed or failed; `null` when none.
    pub last_drill: Option<LastDrill>,
    /// When the job last passed a drill; `null` when never.
    #[serde(serialize_with = "ser_ts_opt")]
    pub last_passing_drill_at: Option<Timestamp>,
    /// AU301 applies: the job has a snapshot and is enabled.
    #[serde(skip)]
    pub needed: bool,
    /// No passing drill within `drill_cadence` before `to`.
    #[serde(skip)]
    pub overdue: bool,
}

/// One drill record as the reports show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LastDrill {
    #[serde(serialize_with = "ser_ts")]
    pub at: Timestamp,
    /// The slot whose snapshot was replayed.
    #[serde(serialize_with = "ser_ts")]
    pub scheduled_at: Timestamp,
    pub passed: bool,
    pub scenarios: Vec<ScenarioOutcome>,
    pub report_digest: String,
}

impl LastDrill {
    /// The record's `scenarios` value: `clean:passed,rerun:failed`.
    pub fn scenarios_text(&self) -> String {
        crate::ledger::drills::format_scenarios(
            self.scenarios.iter().map(|s| (s.name.as_str(), s.passed)),
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioOutcome {
    pub name: String,
    pub passed: bool,
}

/// What was read of the drill records (JSON: `drills`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrillSummary {
    /// The source, its password masked.
    pub source: String,
    /// `drill_cadence` in seconds.
    pub cadence_s: u64,
    pub rows_read: u64,
    pub rows_rejected: u64,
    /// The first rejected rows, with their location.
    #[serde(skip)]
    pub errors: Vec<crate::ledger::RowError>,
    /// Records of jobs no manifest declares (or `--job` left out): ignored.
    pub ignored: u64,
    /// Records of drills at or after `to`: not counted.
    pub after_to: u64,
}

/// Counts of what was read.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputCounts {
    /// Event rows and output rows together, rejected ones included.
    pub rows_read: u64,
    pub rows_rejected: u64,
    pub rows_accepted: u64,
    pub events: u64,
    pub outputs: u64,
    /// Accepted rows whose `scheduled_at` is outside `[from, to)`.
    pub rows_outside_window: u64,
}

/// Checks that did not run, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skipped {
    pub codes: Vec<&'static str>,
    pub reason: String,
}

/// What an audit found.
#[derive(Clone, Debug)]
pub struct AuditResult {
    pub from: Timestamp,
    pub to: Timestamp,
    pub input: InputCounts,
    /// The first rejected rows, with their location (at most [`MAX_ROW_ERRORS`]).
    pub row_errors: Vec<crate::ledger::RowError>,
    pub findings: Vec<AuditFinding>,
    pub jobs: Vec<JobReport>,
    pub totals: Metrics,
    pub skipped: Vec<Skipped>,
    /// Missed and duplicated slots per day of [`AuditResult::tz`] (`YYYY-MM-DD`, missed,
    /// duplicated), for charts.
    pub per_day: Vec<(String, u64, u64)>,
    /// The zone every time of the pretty, markdown, HTML and CSV reports is shown in.
    pub tz: TimeZone,
    /// The drill records read (`None` without any: AU301 is then skipped).
    pub drills: Option<DrillSummary>,
    /// Jobs whose earlier slots were not counted (no `since`), by job.
    pub notes: Vec<AuditNote>,
}

impl AuditResult {
    /// `t` in the report's zone: `2026-03-01T02:00:00+09:00`.
    pub fn when(&self, t: Timestamp) -> String {
        crate::schedule::format_slot(t, &self.tz)
    }

    /// The report zone's name: `Asia/Seoul`, or its offset (`+09:00`) for a fixed zone.
    pub fn zone_name(&self) -> String {
        match self.tz.iana_name() {
            Some(n) => n.to_owned(),
            None => self
                .from
                .to_zoned_datetime(self.tz.clone())
                .strftime("%:z")
                .to_string(),
        }
    }
}

pub const MAX_ROW_ERRORS: usize = 100;

impl AuditResult {
    pub fn count(&self, sev: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == sev).count()
    }
    /// Findings at or above `min`.
    pub fn failing(&self, min: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity >= min).count()
    }
}

/// A length of time in seconds, for reports, in the one message style
/// ([`crate::text::duration::millis`]): rounded to the unit shown.
pub fn human_secs(s: f64) -> String {
    crate::text::duration::millis((s * 1000.0).round() as i64)
}
