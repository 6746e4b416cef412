use crate::audit::AuditFinding;
use crate::audit::view::JobView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Reports each job name in the ledger (inside the window) that matches no job of the given manifests (`name`, or `service/name`). One finding per name.
    ///
    /// ## Why it matters
    /// A job running from a forgotten crontab line or an old CronJob is outside every lock and alert.
    ///
    /// ## Example
    /// Runs of `billing/settle-v1` in the ledger, and no manifest declares `settle-v1` -> one AU107 for that name.
    AU107 {
        code: "AU107",
        name: "unknown-job",
        severity: Error,
        summary: "the ledger has runs of a job that no manifest declares: an orphan registration",
        help: "declare the job in a manifest, or remove the registration that still runs it",
    }
}

/// A ledger job no manifest declares (only with manifests).
pub(super) fn check(job: &JobView, out: &mut Vec<AuditFinding>) {
    let rows = job.state.rows + job.state.outputs;
    if job.with_manifest && job.job.is_none() && rows > 0 {
        out.push(job.finding(
            &AU107,
            format!(
                "the ledger has {} of job `{}`, which no manifest declares: an orphan registration",
                crate::text::plural(rows as usize, "row"),
                job.display
            ),
            vec![],
        ));
    }
}
