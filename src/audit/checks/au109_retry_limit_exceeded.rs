use crate::audit::view::SlotView;
use crate::audit::{AuditFinding, AuditJob};
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Compares the highest `attempt` recorded for a slot with the job's `retry.max_attempts`.
    ///
    /// ## Why it matters
    /// Unbounded retries during an external outage make the outage worse.
    ///
    /// ## Example
    /// `retry.max_attempts: 3` and slot 02:00:00 has a `start` with `attempt: 4` -> AU109.
    AU109 {
        code: "AU109",
        name: "retry-limit-exceeded",
        severity: Error,
        summary: "the slot's highest `attempt` is above `retry.max_attempts`",
        help: "make the runner enforce retry.max_attempts",
    }
}

/// The slot's highest attempt against `retry.max_attempts`.
pub(super) fn check(v: &SlotView, j: &AuditJob, out: &mut Vec<AuditFinding>) {
    let Some(max) = j.max_attempts else {
        return;
    };
    let hi = v
        .execs
        .iter()
        .map(|&x| v.exec(x).attempt)
        .max()
        .unwrap_or(0);
    if u64::from(hi) > max {
        out.push(v.finding(
            &AU109,
            format!(
                "slot {} of `{}` reached attempt {hi}, above retry.max_attempts {max}",
                v.slot_text(),
                v.job.display
            ),
            v.run_ids(v.execs),
        ));
    }
}
