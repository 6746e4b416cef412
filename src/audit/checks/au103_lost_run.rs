use crate::audit::AuditFinding;
use crate::audit::view::{SlotView, ts};
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports each execution with a `start` and no `end` in a due slot (one finding per `run_id`). A slot that only has lost executions is also a failed run (AU111).
    ///
    /// ## Why it matters
    /// A run that vanished may have applied half of its input.
    ///
    /// ## Example
    /// `start` of r1 at 02:00:01 and no `end` of r1 anywhere in the ledger -> AU103 for r1 (and AU111 for the slot, when it has no other success).
    AU103 {
        code: "AU103",
        name: "lost-run",
        severity: Error,
        summary: "a `start` with no `end`: the process died or never reported",
        help: "look at the instance's logs at the start time; replay the slot if its work is incomplete",
    }
}

/// Each execution of a due slot with a `start` and no `end`.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    if !v.due {
        return;
    }
    for &x in v.execs {
        let e = v.exec(x);
        if e.has_start() && !e.has_end() {
            out.push(v.finding(
                &AU103,
                format!(
                    "run `{}` of `{}` (slot {}) started at {} and never reported an `end`",
                    v.run_id(x),
                    v.job.display,
                    v.slot_text(),
                    v.job.slot_text(ts(e.start))
                ),
                vec![v.run_id(x)],
            ));
        }
    }
}
