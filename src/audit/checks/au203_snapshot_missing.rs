use crate::audit::AuditFinding;
use crate::audit::snapshot::Outcome;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports a slot that ran, lies within `snapshot.retention` of `to`, and has no file at its `snapshot.path` under `--snapshots DIR` (or whose path would leave that directory).
    ///
    /// ## Why it matters
    /// Without the input, an incident cannot be reproduced once the source data changed.
    ///
    /// ## Example
    /// With `--snapshots DIR`, `snapshot.path: "snapshots/{scheduled_at}.jsonl"` and `retention: 120d`: slot 02:00:00 of last week has no `snapshots/2026-03-01T02:00:00Z.jsonl` -> AU203.
    AU203 {
        code: "AU203",
        name: "snapshot-missing",
        severity: Warning,
        summary: "a slot inside the retention period has no snapshot file",
        help: "write the snapshot before the work starts, and keep it for snapshot.retention",
    }
}

/// A slot that ran without a snapshot file: missing within the retention, or refused.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    let Some(s) = v.snapshot else {
        return;
    };
    let message = match &s.outcome {
        Outcome::Missing(path) if s.retained => format!(
            "slot {} of `{}` is inside snapshot.retention but has no snapshot file `{path}`",
            v.slot_text(),
            v.job.display
        ),
        Outcome::Refused(why) => format!(
            "slot {} of `{}`: snapshot path refused: {why}",
            v.slot_text(),
            v.job.display
        ),
        _ => return,
    };
    out.push(v.finding(&AU203, message, v.run_ids(v.started)));
}
