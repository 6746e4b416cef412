use crate::audit::AuditFinding;
use crate::audit::view::JobView;
use crate::declare_check;

declare_check! {
    /// ## What it does
    /// Counts applied outputs per `(job, output_key)` and reports every key applied more than once, with the count and the runs that applied it.
    ///
    /// ## Why it matters
    /// A duplicated output is the double charge or the second e-mail the customer sees.
    ///
    /// ## Example
    /// Output rows `(settle, pay-0042)` from run r1 and again from run r2 -> one AU201 for `pay-0042`, with the count 2.
    AU201 {
        code: "AU201",
        name: "duplicate-output",
        severity: Error,
        summary: "the same `(job, output_key)` was applied more than once",
        help: "guard the write with the idempotency key (processed_at, version or a unique key)",
    }
}

/// Each output key of the job applied more than once, by key.
pub(super) fn check(job: &JobView, out: &mut Vec<AuditFinding>) {
    for d in &job.dup_outputs {
        let mut runs = Vec::new();
        if let Some(x) = job.run_by_hash(d.first_run) {
            runs.push(job.run_id(x));
        }
        for r in &d.run_ids {
            if !runs.contains(r) {
                runs.push(r.clone());
            }
        }
        let mut f = job.finding(
            &AU201,
            format!(
                "output `{}` of `{}` was applied {} times",
                d.key, job.display, d.count
            ),
            runs,
        );
        f.output_key = Some(d.key.clone());
        f.count = Some(d.count);
        out.push(f);
    }
}
