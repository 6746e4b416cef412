use crate::audit::AuditFinding;
use crate::audit::snapshot::Outcome;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reads the snapshot of each slot that ran (`snapshot.path` under `--snapshots DIR`) and reports, once per slot, the records whose `snapshot.key` value has no output of the job, with their count and the first keys.
    ///
    /// ## Why it matters
    /// A run that "succeeded" but skipped records lost work silently.
    ///
    /// ## Example
    /// With `--snapshots DIR`: the slot's snapshot has 40 records, the outputs of the slot name 37 of them -> one AU202 for the slot with count 3 and the first missing keys.
    AU202 {
        code: "AU202",
        name: "missing-output",
        severity: Error,
        summary: "a record of the slot's input snapshot has no output (needs `--snapshots`)",
        help: "replay the slot: an idempotent job applies only the missing records",
    }
}

/// The snapshot's records without an output (with an outputs source).
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    let Some(s) = v.snapshot else {
        return;
    };
    let Outcome::Found {
        missing,
        missing_count,
        ..
    } = &s.outcome
    else {
        return;
    };
    if v.job.with_outputs && *missing_count > 0 {
        let mut f = v.finding(
            &AU202,
            format!(
                "{missing_count} record(s) of the snapshot of slot {} of `{}` have no output",
                v.slot_text(),
                v.job.display
            ),
            v.run_ids(v.started),
        );
        f.count = Some(*missing_count);
        f.keys = Some(missing.clone());
        out.push(f);
    }
}
