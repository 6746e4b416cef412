use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::MaxAttempts;

declare_rule! {
    /// ## What it does
    /// Reports a job whose attempts have no bound: no `retry` section, a `retry` without
    /// `max_attempts`, `max_attempts: 0` or `max_attempts: unlimited`.
    ///
    /// Such a job gets BG401 only: the rules that judge a bounded retry policy (BG402
    /// too many attempts, BG403 no backoff, BG407 exponential backoff without a cap, BG408
    /// retry window) stay silent until there is a bound to judge.
    ///
    /// ## Why it matters
    /// The source article: "retries need a limit; unlimited retries during an external
    /// outage make it worse". When the payment provider is down, every job that retries
    /// forever adds load to the thing that is already failing, keeps its lock and its
    /// worker busy, and never hands its input to the dead letter where a person would see
    /// it. A bound turns an outage into a known list of dead-lettered inputs.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempts: unlimited
    ///   backoff: fixed
    ///   initial_delay: 1m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 3        # the first attempt included
    ///   backoff: exponential
    ///   initial_delay: 30s
    ///   max_delay: 5m
    /// ```
    pub struct UnboundedRetry {
        code: "BG401",
        name: "unbounded-retry",
        severity: Error,
        scope: Job,
        summary: "no retry.max_attempts, or it is 0 or \"unlimited\"",
        help: "set `retry.max_attempts` to a small number such as 3 (the first attempt included)",
    }
}

impl Rule for UnboundedRetry {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let name = cx.job_name();
        if cx.job.retry.is_absent() {
            out.emit_with_help(
                cx.job.span,
                format!("job `{name}` has no `retry` policy, so nothing bounds its attempts"),
                "add `retry:` with `max_attempts: 3`, a `backoff` and the `retryable` and `fatal` error codes",
            );
            return;
        }
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let (span, what) = match &retry.max_attempts {
            crate::manifest::model::Field::Absent => {
                (retry.span, "retry has no `max_attempts`".to_owned())
            }
            crate::manifest::model::Field::Ok(m) => match m.value {
                MaxAttempts::Count(0) => (
                    m.span,
                    "retry.max_attempts is 0, which means unlimited".to_owned(),
                ),
                MaxAttempts::Unlimited => (m.span, "retry.max_attempts is unlimited".to_owned()),
                MaxAttempts::Count(_) => return,
            },
            crate::manifest::model::Field::Invalid => return,
        };
        out.emit(
            span,
            format!(
                "job `{name}`: {what}: during an outage it retries without end and never reaches the dead letter"
            ),
        );
    }
}
