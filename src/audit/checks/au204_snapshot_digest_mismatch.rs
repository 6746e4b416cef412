use crate::audit::AuditFinding;
use crate::audit::snapshot::Outcome;
use crate::audit::view::SlotView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Computes the sha256 of the slot's snapshot file and compares it with the `snapshot_digest` recorded on its `start`.
    ///
    /// ## Why it matters
    /// A drill or replay must use the input the run really saw.
    ///
    /// ## Example
    /// The slot's `start` recorded `snapshot_digest: sha256:9f…` and the file under `--snapshots` now hashes to `sha256:4c…` -> AU204: the input was rewritten after the run.
    AU204 {
        code: "AU204",
        name: "snapshot-digest-mismatch",
        severity: Error,
        summary: "the snapshot on disk differs from the digest recorded at `start`",
        help: "find who rewrote the snapshot; a replay of a changed input proves nothing",
    }
}

/// The snapshot file's digest against the one recorded at `start`.
pub(super) fn check(v: &SlotView, out: &mut Vec<AuditFinding>) {
    let Some(s) = v.snapshot else {
        return;
    };
    if let Outcome::Found {
        path,
        digest_ok: false,
        actual,
        ..
    } = &s.outcome
    {
        out.push(v.finding(
            &AU204,
            format!(
                "snapshot `{path}` of slot {} of `{}` is {actual}, but the `start` recorded {}",
                v.slot_text(),
                v.job.display,
                s.digest.as_deref().unwrap_or("?")
            ),
            v.run_ids(v.started),
        ));
    }
}
