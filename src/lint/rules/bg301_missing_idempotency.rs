use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports a job without an idempotency strategy: no `idempotency` section, or one
    /// without `strategy` (`processed_at`, `version` or `unique_key`).
    ///
    /// ## Why it matters
    /// A lock decides who runs a slot; idempotency decides what happens when the same
    /// input is applied a second time anyway: after the lock's TTL ran out, after a retry
    /// of a run that had half finished, after an operator's manual re-run. The source
    /// article's rule is that the data layer itself must refuse to apply the same input
    /// twice (a `processed_at` or `version` condition on each record), and its warning is
    /// blunt: a lock without idempotency makes manual recovery practically impossible,
    /// because nobody can re-run a failed slot without double-applying the part that
    /// already succeeded.
    ///
    /// ## Example
    /// ```yaml
    /// - name: settle-payments
    ///   lock: {key: "{job}:{scheduled_at}", ttl: 25m}
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// - name: settle-payments
    ///   lock: {key: "{job}:{scheduled_at}", ttl: 25m}
    ///   idempotency:
    ///     strategy: processed_at   # UPDATE ... WHERE processed_at IS NULL
    ///     key: payment_id
    /// ```
    pub struct MissingIdempotency {
        code: "BG301",
        name: "missing-idempotency",
        severity: Error,
        scope: Job,
        summary: "no idempotency strategy: a lock alone cannot make recovery safe",
        help: "add `idempotency:` with `strategy: processed_at | version | unique_key` and the `key` it guards",
    }
}

impl Rule for MissingIdempotency {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let name = cx.job_name();
        let idempotency = &cx.job.idempotency;
        if idempotency.is_absent() {
            out.emit(
                cx.job.span,
                format!(
                    "job `{name}` declares no idempotency: a slot applied twice (lock expiry, retry, manual re-run) is applied twice"
                ),
            );
            return;
        }
        if let Some(section) = idempotency.value()
            && section.strategy.is_absent()
        {
            out.emit_with_help(
                section.span,
                format!(
                    "job `{name}`: idempotency has no `strategy`, so nothing refuses the same input twice"
                ),
                "add `strategy: processed_at`, `version` or `unique_key`",
            );
        }
    }
}
