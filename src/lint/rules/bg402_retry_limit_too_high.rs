use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::MaxAttempts;

declare_rule! {
    /// ## What it does
    /// Reports `retry.max_attempts` above 10 (`thresholds.max_attempts` in
    /// `batchguard.toml`). Unbounded attempts are BG401's, not this rule's.
    ///
    /// ## Why it matters
    /// A failure that survives ten attempts is not a blip: the dependency is down or the
    /// input is bad. More attempts only keep the slot's input out of the dead letter for
    /// longer, keep hammering a failing dependency, and delay the moment a person learns
    /// about it. The source article's monthly review looks at "succeeded after retries"
    /// next to "needed manual recovery": a high limit makes the first number look good by
    /// hiding the second.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempts: 50
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 5
    ///   backoff: exponential
    ///   initial_delay: 30s
    ///   max_delay: 10m
    /// ```
    pub struct RetryLimitTooHigh {
        code: "BG402",
        name: "retry-limit-too-high",
        severity: Warning,
        scope: Job,
        summary: "retry.max_attempts is more than 10 (configurable)",
        help: "lower retry.max_attempts and let the dead letter take what still fails",
    }
}

impl Rule for RetryLimitTooHigh {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let Some(m) = retry.max_attempts.get() else {
            return;
        };
        let MaxAttempts::Count(n) = m.value else {
            return;
        };
        let limit = cx.settings.config.thresholds.max_attempts;
        if n > limit {
            out.emit_with_help(
                m.span,
                format!(
                    "job `{}`: retry.max_attempts {n} is more than the limit of {limit}",
                    cx.job_name()
                ),
                format!(
                    "set max_attempts to {limit} or fewer; what still fails belongs in the dead letter, where a person sees it"
                ),
            );
        }
    }
}
