use crate::audit::view::SlotView;
use crate::audit::{AuditFinding, AuditJob};
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports each slot whose `scheduled_at` is not an instant the job's schedule fires in `[from, to)`, unless every execution of it was triggered `manual` or `replay`.
    ///
    /// ## Why it matters
    /// A run at an unexpected instant means the scheduler reads the expression differently from the manifest (dialect, zone), or an unknown trigger exists.
    ///
    /// ## Example
    /// `schedule: "0 * * * *"` and a `start` with `scheduled_at: 2026-03-01T02:30:00Z`, `trigger: schedule` -> AU108 (with `trigger: manual` or `replay` it is not reported).
    AU108 {
        code: "AU108",
        name: "off-schedule-run",
        severity: Warning,
        summary: "`scheduled_at` is not a slot of the job's schedule (and the trigger is not manual or replay)",
        help: "check the scheduler's time zone and dialect against the manifest",
    }
}

/// A slot off the schedule with an execution not triggered `manual` or `replay`.
pub(super) fn check(v: &SlotView, j: &AuditJob, out: &mut Vec<AuditFinding>) {
    if v.on_schedule || v.job.expected.is_none() {
        return;
    }
    let scheduled = v.execs.iter().any(|&x| !v.exec(x).flags.manual_trigger());
    if scheduled {
        out.push(v.finding(
            &AU108,
            format!(
                "`{}` ran for {} ({}), which is not a slot of its schedule `{}` in {}",
                v.job.display,
                v.slot_text(),
                v.t,
                j.schedule.as_ref().map(|s| s.expr()).unwrap_or(""),
                j.tz_name
            ),
            v.run_ids(v.execs),
        ));
    }
}
