use crate::audit::AuditFinding;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports each execution (`run_id`) that has an `end` but no `start` (an `end` with status `superseded` excepted: it is no verdict).
    ///
    /// ## Why it matters
    /// Without the start, the run's duration, lock holding time and overlap with other runs are unknown.
    ///
    /// ## Example
    /// An `end` of r7 with `status: success` and no `start` of r7 -> AU104 for r7.
    AU104 {
        code: "AU104",
        name: "orphan-end",
        severity: Error,
        summary: "an `end` with no `start`",
        help: "make the runner write `start` before the work begins",
    }
}

/// Each execution with an `end` and no `start`.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    for &x in v.execs {
        let e = v.exec(x);
        // A superseded end is no verdict, whatever rows of its attempt are missing.
        if !e.has_start() && e.has_end() && !e.superseded() {
            out.push(v.finding(
                &AU104,
                format!(
                    "run `{}` of `{}` (slot {}) has an `end` but no `start`",
                    v.run_id(x),
                    v.job.display,
                    v.slot_text()
                ),
                vec![v.run_id(x)],
            ));
        }
    }
}
