use crate::audit::AuditFinding;
use crate::audit::view::JobView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports each job with a `snapshot` that has no passing drill record (`batchguard drill --record`) within `drill_cadence` (`[thresholds]` in `batchguard.toml`, 92 days by default) before `to`: never drilled, only failed drills, or the last passing one too long ago. One finding per job. A failed drill does not count; a drill at or after `to` is not looked at; a job with `enabled: false` is not reported. Drill records come from `--drills SOURCE` or the ledger database's `batchguard_drills` table; without any, the check is listed as skipped with the reason.
    ///
    /// ## Why it matters
    /// Recovery code runs on the worst day only. A rerun, a crash or two instances at once that apply a record twice are found by rehearsing them, not by reading the code: a quarterly drill that passed is the proof that recovery still works after a quarter of changes.
    ///
    /// ## Example
    /// `settle-payments` has a `snapshot`, its last drill passed on 2025-11-02 and the one on 2026-03-10 failed `rerun`; `audit --to 2026-04-01T00:00:00Z` reports AU301 (the pass is more than 92 days before `to`) until `batchguard drill --job settle-payments … --record sqlite:.batchguard/store.db` passes again.
    AU301 {
        code: "AU301",
        name: "drill-overdue",
        severity: Warning,
        summary: "a job with a `snapshot` has no passing drill record within `drill_cadence` (92 days, configurable) before `to`; skipped, and said so, without drill records",
        help: "rehearse the job's recovery with `batchguard drill --manifest M --job NAME --snapshot FILE --record SOURCE`, and audit with those records (--drills SOURCE, or the ledger database)",
    }
}

/// A job with a snapshot and no passing drill within the cadence (with drill records only).
pub(super) fn check(job: &JobView, out: &mut Vec<AuditFinding>) {
    let (Some(d), Some(status)) = (job.drills, job.drill_status()) else {
        return;
    };
    if !status.needed || !status.overdue {
        return;
    }
    let cadence = crate::text::duration::secs(d.cadence_s);
    let to = job.slot_text(job.to());
    let mut message = match status.last_passing_drill_at {
        None if status.last_drill.is_none() => format!(
            "job `{}` has a snapshot but no drill record before {to}: its recovery was never rehearsed (drill_cadence {cadence})",
            job.display
        ),
        None => format!(
            "job `{}` has never passed a drill before {to} (drill_cadence {cadence})",
            job.display
        ),
        Some(p) => format!(
            "job `{}` last passed a drill on {}, more than drill_cadence {cadence} before {to}",
            job.display,
            job.slot_text(p)
        ),
    };
    if let Some(last) = status.last_drill.as_ref().filter(|l| !l.passed) {
        let failed: Vec<&str> = last
            .scenarios
            .iter()
            .filter(|s| !s.passed)
            .map(|s| s.name.as_str())
            .collect();
        message.push_str(&format!(
            "; the last drill, {}, failed",
            job.slot_text(last.at)
        ));
        if !failed.is_empty() {
            message.push_str(&format!(" ({})", failed.join(", ")));
        }
    }
    out.push(job.finding(&AU301, message, vec![]));
}
