use crate::audit::AuditFinding;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports each due slot with at least one `start` and no successful `end` (lost executions included). An execution that ended `superseded` (a newer holder took the slot over) gives no verdict: it does not make a slot failed on its own, and a slot whose executions are superseded ones and a success is clean.
    ///
    /// ## Why it matters
    /// The slot's work is not done, whatever the logs of individual attempts say.
    ///
    /// ## Example
    /// Slot 02:00:00 has attempts 1 and 2, both ending in `failure`, and no success -> AU111 for the slot.
    AU111 {
        code: "AU111",
        name: "failed-run",
        severity: Error,
        summary: "a due slot was started but never succeeded",
        help: "replay the slot after fixing the cause; the dead letter holds its quarantined input",
    }
}

/// A due slot with a start and no successful end.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    if v.failed() {
        out.push(v.finding(
            &AU111,
            format!(
                "slot {} of `{}` was started ({}) but never succeeded",
                v.slot_text(),
                v.job.display,
                crate::text::plural(v.started.len(), "execution")
            ),
            v.run_ids(v.started),
        ));
    }
}
