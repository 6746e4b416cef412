use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::OnUnknown;

declare_rule! {
    /// ## What it does
    /// Reports `retry.on_unknown: retry`: an error code that is in neither `retryable`
    /// nor `fatal` is retried.
    ///
    /// ## Why it matters
    /// Classification exists because some failures must not be retried: the source
    /// article's example is bad input data, which has to be quarantined at once, since
    /// retrying it makes the incident bigger. An error nobody classified is exactly the
    /// one nobody has thought about; retrying it by default assumes it is harmless to
    /// repeat. Sending unknown errors to the dead letter is the safe default: a person
    /// looks, then adds the code to `retryable` if it really is transient.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    ///   retryable: [ETIMEDOUT]
    ///   on_unknown: retry
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    ///   retryable: [ETIMEDOUT, HTTP_503]
    ///   on_unknown: dead_letter
    /// ```
    pub struct RetryOnUnknown {
        code: "BG406",
        name: "retry-on-unknown",
        severity: Warning,
        scope: Job,
        summary: "`on_unknown: retry`: unclassified errors are retried",
        help: "set `on_unknown: dead_letter` and list the transient codes in `retryable`",
    }
}

impl Rule for RetryOnUnknown {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let Some(on_unknown) = retry.on_unknown.get() else {
            return;
        };
        if on_unknown.value != OnUnknown::Retry {
            return;
        }
        out.emit(
            on_unknown.span,
            format!(
                "job `{}`: retry.on_unknown is retry: an error code in neither `retryable` nor `fatal`, bad input included, is retried",
                cx.job_name()
            ),
        );
    }
}
