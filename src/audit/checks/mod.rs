//! The audit checks (SPEC 6): one file per code, each holding its metadata, its
//! documentation (the doc comment of its `declare_check!`) and its `check`.
//!
//! Checks are named by value ([`AU101`] is a `&'static RuleMeta`), never by a string a
//! typo could silently miss. `batchguard rules` and `explain` list them with the lint
//! rules (`crate::REGISTRY` chains [`register`] after the lint rules).
//!
//! Where each check looks:
//! - AU001 once per source, over the rejected rows;
//! - AU101, AU107, AU112, AU201 and AU301 once per job, over its [`JobView`];
//! - the others once per slot, over its [`SlotView`] (built once and handed to every
//!   check and to the metrics): AU102-AU105 for every job, AU106 and AU108-AU111 and the
//!   snapshot checks AU202-AU204 for a job a manifest declares.

mod au001_rows_rejected;
mod au101_missed_run;
mod au102_duplicate_run;
mod au103_lost_run;
mod au104_orphan_end;
mod au105_ttl_exceeded;
mod au106_latency_breach;
mod au107_unknown_job;
mod au108_off_schedule_run;
mod au109_retry_limit_exceeded;
mod au110_fatal_error_retried;
mod au111_failed_run;
mod au112_slots_before_first_run;
mod au201_duplicate_output;
mod au202_missing_output;
mod au203_snapshot_missing;
mod au204_snapshot_digest_mismatch;
mod au301_drill_overdue;

pub use au001_rows_rejected::AU001;
pub use au101_missed_run::AU101;
pub use au102_duplicate_run::AU102;
pub use au103_lost_run::AU103;
pub use au104_orphan_end::AU104;
pub use au105_ttl_exceeded::AU105;
pub use au106_latency_breach::AU106;
pub use au107_unknown_job::AU107;
pub use au108_off_schedule_run::AU108;
pub use au109_retry_limit_exceeded::AU109;
pub use au110_fatal_error_retried::AU110;
pub use au111_failed_run::AU111;
pub use au112_slots_before_first_run::AU112;
pub use au201_duplicate_output::AU201;
pub use au202_missing_output::AU202;
pub use au203_snapshot_missing::AU203;
pub use au204_snapshot_digest_mismatch::AU204;
pub use au301_drill_overdue::AU301;

pub(crate) use au001_rows_rejected::check as rows_rejected;
pub(crate) use au112_slots_before_first_run::before_first_run;

use super::view::{JobView, SlotView};
use super::{AuditFinding, AuditJob, AuditOptions, Skipped};
use crate::finding::RuleMeta;
use jiff::Timestamp;

static ALL: [&RuleMeta; 18] = [
    &AU001, &AU101, &AU102, &AU103, &AU104, &AU105, &AU106, &AU107, &AU108, &AU109, &AU110, &AU111,
    &AU112, &AU201, &AU202, &AU203, &AU204, &AU301,
];

/// Every audit check, in code order.
pub fn all() -> impl Iterator<Item = &'static RuleMeta> {
    ALL.iter().copied()
}

/// The checks' part of [`crate::REGISTRY`].
pub fn register(out: &mut Vec<&'static RuleMeta>) {
    out.extend(all());
}

/// A finding of `check` with its name and default severity.
pub(crate) fn finding(
    check: &'static RuleMeta,
    message: String,
    job: &str,
    scheduled_at: Option<Timestamp>,
    run_ids: Vec<String>,
) -> AuditFinding {
    AuditFinding {
        code: check.code,
        name: check.name,
        severity: check.severity,
        message,
        job: job.to_owned(),
        scheduled_at,
        run_ids,
        output_key: None,
        count: None,
        keys: None,
    }
}

/// The codes of `checks`.
fn codes(checks: &[&'static RuleMeta]) -> Vec<&'static str> {
    checks.iter().map(|m| m.code).collect()
}

/// The checks that cannot run with these options and jobs, and why; `drills_absent` says
/// why there are no drill records, when there are none.
pub(crate) fn skipped(
    opts: &AuditOptions,
    jobs: &[AuditJob],
    drills_absent: Option<&str>,
) -> Vec<Skipped> {
    let mut skipped = Vec::new();
    if !opts.with_manifest {
        skipped.push(Skipped {
            codes: codes(&[
                &AU101, &AU105, &AU106, &AU107, &AU108, &AU109, &AU110, &AU111, &AU112, &AU202,
                &AU203, &AU204, &AU301,
            ]),
            reason: "no --manifest: expected slots, lock.ttl, alerts.max_latency and the retry policy come from the manifest".into(),
        });
    } else if opts.snapshots.is_none() {
        skipped.push(Skipped {
            codes: codes(&[&AU202, &AU203, &AU204]),
            reason: "no --snapshots DIR: snapshot files cannot be checked".into(),
        });
    }
    if !opts.with_outputs {
        skipped.push(Skipped {
            codes: codes(&[&AU201, &AU202]),
            reason: "no --outputs source: applied outputs cannot be checked".into(),
        });
    }
    if opts.with_manifest
        && let Some(why) = drills_absent
    {
        skipped.push(Skipped {
            codes: codes(&[&AU301]),
            reason: why.to_owned(),
        });
    }
    for j in jobs {
        if let Some(why) = &j.schedule_error {
            skipped.push(Skipped {
                codes: codes(&[&AU101, &AU108, &AU112]),
                reason: format!("job `{}`: {why}", j.name),
            });
        }
    }
    skipped
}

/// The checks of a job as a whole, before its slots.
pub(crate) fn job_start(job: &JobView, out: &mut Vec<AuditFinding>) {
    au107_unknown_job::check(job, out);
    au101_missed_run::check(job, out);
    au112_slots_before_first_run::check(job, out);
}

/// Every check of one slot.
pub(crate) fn slot(v: &SlotView, out: &mut Vec<AuditFinding>) {
    au104_orphan_end::check(v, out);
    au103_lost_run::check(v, out);
    au105_ttl_exceeded::check(v, out);
    au102_duplicate_run::check(v, out);
    let Some(j) = v.job.checked() else {
        return;
    };
    au108_off_schedule_run::check(v, j, out);
    au109_retry_limit_exceeded::check(v, j, out);
    au110_fatal_error_retried::check(v, out);
    au111_failed_run::check(v, out);
    au106_latency_breach::check(v, j, out);
    au203_snapshot_missing::check(v, out);
    au204_snapshot_digest_mismatch::check(v, out);
    au202_missing_output::check(v, out);
}

/// The checks of a job as a whole, after its slots.
pub(crate) fn job_end(job: &JobView, out: &mut Vec<AuditFinding>) {
    au201_duplicate_output::check(job, out);
    au301_drill_overdue::check(job, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_lists_every_check_once_in_code_order() {
        let codes: Vec<&str> = all().map(|m| m.code).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted);
    }

    #[test]
    fn every_check_is_documented_from_its_doc_comment() {
        for m in all() {
            let doc = m.doc_text();
            assert!(doc.starts_with("## What it does\n"), "{}: {doc:?}", m.code);
            assert!(doc.contains("\n## Why it matters\n"), "{}", m.code);
            assert!(
                !doc.contains("\n "),
                "{}: a doc line kept its leading space",
                m.code
            );
        }
    }
}
