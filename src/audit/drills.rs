//! Drill records in the audit (SPEC 5.3, AU301): which manifest job each record names, and
//! per job the last drill and the last passing drill before `to`.
//!
//! - A record names a job as ledger rows do: `service/name` is that service's job `name`, a
//!   bare `name` the first manifest job of that name. Records of jobs no manifest declares
//!   (or that `--job` leaves out) are ignored and counted ([`DrillSummary::ignored`]).
//! - Only drills that ran before `to` count (`at < to`, the window's end being exclusive):
//!   an audit of March says what was true at the end of March.
//! - "Within the cadence" is `to - drill_cadence <= at < to`.

use super::{AuditJob, DrillStatus, DrillSummary, LastDrill, ScenarioOutcome};
use crate::ledger::drills::{DrillRead, DrillRecord};
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;

/// What the audit is given about drills: [`super::Auditor::drills`].
#[derive(Clone, Debug)]
pub enum DrillInput {
    /// No drill records at all: AU301 is skipped with this reason.
    Absent(String),
    /// Records read (possibly none: then no job was ever drilled), and `drill_cadence` in
    /// seconds.
    Read { read: DrillRead, cadence_s: u64 },
}

impl Default for DrillInput {
    /// The same words whatever the ledger is, so a CSV ledger and its copy in a database
    /// give the same report.
    fn default() -> Self {
        DrillInput::Absent(
            "no drill records: no --drills SOURCE, and no `batchguard_drills` table in the ledger (`batchguard drill --record SOURCE` writes them)".into(),
        )
    }
}

/// The drills of the manifest jobs, resolved once at finish.
pub(crate) struct Drills {
    records: Vec<DrillRecord>,
    /// By manifest job index: the index in `records` of its last drill and of its last
    /// passing drill.
    last: Vec<(Option<usize>, Option<usize>)>,
    pub(crate) cadence_s: u64,
    /// `to - drill_cadence`: a passing drill at or after it is recent enough.
    pub(crate) since: Timestamp,
}

/// Orders records of one job: by `at`, then the rest, so equal times resolve the same way
/// whatever order a database returned the rows in.
fn later(a: &DrillRecord, b: &DrillRecord) -> bool {
    (
        a.at,
        a.scheduled_at,
        a.passed,
        &a.scenarios,
        &a.report_digest,
    ) > (
        b.at,
        b.scheduled_at,
        b.passed,
        &b.scenarios,
        &b.report_digest,
    )
}

impl Drills {
    /// Resolves `read`'s records to the manifest jobs of `declared` (name -> job index).
    pub(crate) fn resolve(
        read: &DrillRead,
        cadence_s: u64,
        declared: &HashMap<String, usize>,
        n_jobs: usize,
        to: Timestamp,
    ) -> (Drills, DrillSummary) {
        let mut last: Vec<(Option<usize>, Option<usize>)> = vec![(None, None); n_jobs];
        let mut ignored = 0u64;
        let mut after_to = 0u64;
        let records = read.records.clone();
        for (i, r) in records.iter().enumerate() {
            let Some(&job) = declared.get(&r.job) else {
                ignored += 1;
                continue;
            };
            if r.at >= to {
                after_to += 1;
                continue;
            }
            let (l, p) = &mut last[job];
            if l.is_none_or(|k| later(r, &records[k])) {
                *l = Some(i);
            }
            if r.passed && p.is_none_or(|k| later(r, &records[k])) {
                *p = Some(i);
            }
        }
        let cadence = SignedDuration::from_secs(i64::try_from(cadence_s).unwrap_or(i64::MAX));
        let since = to.checked_sub(cadence).unwrap_or(Timestamp::MIN);
        let summary = DrillSummary {
            source: read.source.clone(),
            cadence_s,
            rows_read: read.rows_read,
            rows_rejected: read.rows_rejected,
            errors: read.errors.clone(),
            ignored,
            after_to,
        };
        (
            Drills {
                records,
                last,
                cadence_s,
                since,
            },
            summary,
        )
    }

    /// The drills of manifest job `idx`.
    pub(crate) fn status(&self, idx: usize, job: &AuditJob) -> DrillStatus {
        let (l, p) = self.last.get(idx).copied().unwrap_or((None, None));
        let last_drill = l.map(|k| {
            let r = &self.records[k];
            LastDrill {
                at: r.at,
                scheduled_at: r.scheduled_at,
                passed: r.passed,
                scenarios: r
                    .scenario_outcomes()
                    .into_iter()
                    .map(|(name, passed)| ScenarioOutcome {
                        name: name.to_owned(),
                        passed,
                    })
                    .collect(),
                report_digest: r.report_digest.clone(),
            }
        });
        let last_passing_drill_at = p.map(|k| self.records[k].at);
        DrillStatus {
            last_drill,
            last_passing_drill_at,
            needed: job.snapshot.is_some() && job.enabled,
            overdue: last_passing_drill_at.is_none_or(|t| t < self.since),
        }
    }
}
