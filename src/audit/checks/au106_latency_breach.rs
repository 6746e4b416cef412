use crate::audit::view::SlotView;
use crate::audit::{AuditFinding, AuditJob};
use crate::declare_check;
use crate::text::duration::millis;

declare_check! {
    /// ## What it does
    /// For each slot, compares the first successful `end` with `scheduled_at + alerts.max_latency` (the on-call threshold) and reports a breach.
    ///
    /// ## Why it matters
    /// The team rule of the source article: latency over 15 minutes pages the on-call engineer.
    ///
    /// ## Example
    /// `alerts.max_latency: 15m`; slot 02:00:00 first succeeds at 02:22:00 -> AU106 with latency 22m.
    AU106 {
        code: "AU106",
        name: "latency-breach",
        severity: Warning,
        summary: "the slot's first successful `end` came later than `scheduled_at + alerts.max_latency`",
        help: "shorten the work (chunk size) or change the schedule interval",
    }
}

/// The slot's first successful `end` against `scheduled_at + alerts.max_latency`.
pub(super) fn check(v: &SlotView, j: &AuditJob, out: &mut Vec<AuditFinding>) {
    let (Some(end), Some(max)) = (v.success_end, j.max_latency_s) else {
        return;
    };
    let latency = (end - v.at).max(0);
    if latency > max as i64 * 1000 {
        out.push(v.finding(
            &AU106,
            format!(
                "slot {} of `{}` first succeeded {} after its scheduled time, over alerts.max_latency {}",
                v.slot_text(),
                v.job.display,
                millis(latency),
                millis(max as i64 * 1000)
            ),
            v.execs
                .iter()
                .filter(|&&x| v.exec(x).end == end)
                .map(|&x| v.run_id(x))
                .collect(),
        ));
    }
}
