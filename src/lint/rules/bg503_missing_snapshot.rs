use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports a job that keeps no input snapshot: no `snapshot` section, or one without
    /// a `path`.
    ///
    /// ## Why it matters
    /// The source article keeps snapshots of batch input for a defined retention period,
    /// "so an incident can be reproduced even after the source data changed". A batch
    /// reads tables that keep moving: by the time a double charge is noticed, the rows
    /// the slot read have been updated. Without the snapshot, nobody can replay the slot
    /// to see what it did, check which records of the input have an output (AU202), or
    /// run a recovery drill (`batchguard drill`) against real input.
    ///
    /// ## Example
    /// ```yaml
    /// - name: settle-payments
    ///   outputs:
    ///     key: payment_id
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// - name: settle-payments
    ///   outputs:
    ///     key: payment_id
    ///   snapshot:
    ///     path: "snapshots/settle-payments/{scheduled_at_compact}.jsonl"
    ///     format: jsonl
    ///     key: payment_id
    ///     retention: 120d
    /// ```
    pub struct MissingSnapshot {
        code: "BG503",
        name: "missing-snapshot",
        severity: Warning,
        scope: Job,
        summary: "no input snapshot: the slot cannot be replayed",
        help: "add `snapshot:` with a `path` template such as \"snapshots/{job}/{scheduled_at_compact}.jsonl\" and a `retention`",
    }
}

impl Rule for MissingSnapshot {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let name = cx.job_name();
        match cx.job.snapshot.value() {
            None if cx.job.snapshot.is_absent() => out.emit(
                cx.job.span,
                format!(
                    "job `{name}` keeps no input snapshot: once the source data changes, no slot can be replayed or audited record by record"
                ),
            ),
            Some(snapshot) if snapshot.path.is_absent() => out.emit_with_help(
                snapshot.span,
                format!("job `{name}`: snapshot has no `path`, so no input is kept"),
                "add `path:` such as \"snapshots/{job}/{scheduled_at_compact}.jsonl\"",
            ),
            _ => {}
        }
    }
}
