use crate::audit::AuditFinding;
use crate::audit::view::{JobView, ts};
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// For every job of the manifests, enumerates the slots of its schedule in `[from, to)` in the job's dialect and time zone (DST included) and reports each **due** slot (`scheduled_at + grace <= to`, grace = `alerts.max_latency`, else `lock.ttl`) that has no `start` event. Skip events do not count as a start.
    ///
    /// ## Why it matters
    /// A missed settlement is money not collected; nobody notices a run that never happened unless something counts the slots.
    ///
    /// ## Example
    /// `0 * * * *` with no `start` for `2026-03-01T05:00:00Z` -> AU101 for that slot.
    AU101 {
        code: "AU101",
        name: "missed-run",
        severity: Error,
        summary: "an expected, due slot of the schedule has no `start` at all",
        help: "replay the slot (`batchguard drill` first), then find why the scheduler did not fire",
    }
}

/// Each due expected slot of the job without a `start`.
pub(super) fn check(job: &JobView, out: &mut Vec<AuditFinding>) {
    for &at in &job.missed {
        let t = ts(at);
        out.push(super::finding(
            &AU101,
            format!(
                "slot {} of `{}` has no `start`: the run never happened",
                job.slot_text(t),
                job.display
            ),
            job.display,
            Some(t),
            vec![],
        ));
    }
}
