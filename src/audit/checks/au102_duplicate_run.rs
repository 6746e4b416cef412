use crate::audit::AuditFinding;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Within one slot `(job, scheduled_at)`, reports a second execution (`run_id`) whose `start` falls while an earlier one is **active** (from its `start` to its `end`; without `end`, until `start + lock.ttl`) or after an earlier one had **succeeded**. A retry after a failure is not a duplicate, nor is an execution that ended `superseded` (its lease had run out and a newer holder, with a newer fence, took the slot over: one holder at a time). Under the `kubernetes` dialect a local time in a repeated DST hour is two slots (two instants), so running it twice is expected.
    ///
    /// ## Why it matters
    /// This is the incident behind batchguard: two instances ran the same tick and customers were billed twice.
    ///
    /// ## Example
    /// Two `start`s for `settle` slot `2026-03-01T02:00:00Z` (`run_id` r1 on web-1 at 02:00:01, r2 on web-2 at 02:00:02) while r1 has no `end` yet -> AU102 naming both runs. A retry that starts after r1 ended in `failure` is not a duplicate.
    AU102 {
        code: "AU102",
        name: "duplicate-run",
        severity: Error,
        summary: "a slot was executed more than once: a second execution started while another was active, or after one had succeeded",
        help: "check the lock (key, ttl, store) and make the job idempotent",
    }
}

/// The slot's duplicate executions, as the view found them.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    if v.duplicates.is_empty() {
        return;
    }
    let names = v.run_ids(v.duplicates);
    out.push(v.finding(
        &AU102,
        format!(
            "slot {} of `{}` was executed {} times ({}): a second execution started while another was active or after one had succeeded",
            v.slot_text(),
            v.job.display,
            v.duplicates.len(),
            names.join(", ")
        ),
        names,
    ));
}
