use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::Field;

declare_rule! {
    /// ## What it does
    /// Reports a retry policy that retries (`max_attempts` > 1) with no delay between
    /// attempts: no `backoff`, or an `initial_delay` that is absent or `0s`.
    ///
    /// A policy with one attempt never retries and needs no backoff; an unbounded one is
    /// BG401's alone.
    ///
    /// ## Why it matters
    /// The failures worth retrying are the transient ones of the source article: an
    /// external API that times out or answers 503. Retried at once, they fail again at
    /// once: every attempt is spent within seconds, during the same outage, and adds load
    /// to the service that is struggling. A delay that grows (`exponential`) gives the
    /// dependency time to recover, so the retries have a chance of succeeding.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    ///   retryable: [ETIMEDOUT]
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    ///   backoff: exponential
    ///   initial_delay: 30s
    ///   max_delay: 5m
    ///   retryable: [ETIMEDOUT]
    /// ```
    pub struct MissingBackoff {
        code: "BG403",
        name: "missing-backoff",
        severity: Warning,
        scope: Job,
        summary: "retries without a backoff delay",
        help: "add `backoff: exponential` with `initial_delay: 30s` and a `max_delay`",
    }
}

impl Rule for MissingBackoff {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let Some(n) = retry.bounded_attempts().filter(|n| *n > 1) else {
            return;
        };
        let name = cx.job_name();
        let retries = n - 1;
        if retry.backoff.is_absent() {
            out.emit(
                retry.span,
                format!(
                    "job `{name}`: retry allows {n} attempts but has no `backoff`: the {retries} retries follow the failure at once"
                ),
            );
            return;
        }
        let Some(backoff) = retry.backoff.value() else {
            return;
        };
        match &retry.initial_delay {
            Field::Absent => out.emit_with_help(
                retry.span,
                format!(
                    "job `{name}`: backoff {} has no `initial_delay`: the {retries} retries follow the failure at once",
                    backoff.as_str()
                ),
                "add `initial_delay: 30s` (a delay worth waiting for the dependency to recover)",
            ),
            Field::Ok(d) if d.value.secs() == 0 => out.emit_with_help(
                d.span,
                format!(
                    "job `{name}`: retry.initial_delay is 0s: the {retries} retries follow the failure at once"
                ),
                "set `initial_delay` to a delay worth waiting for the dependency to recover, such as 30s",
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn retry(body: &str) -> String {
        format!(
            "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    expected_duration: 10m\n    retry:\n{body}"
        )
    }

    #[test]
    fn only_bounded_retries_need_a_backoff() {
        assert_eq!(
            findings(&retry("      max_attempts: 3\n"), "BG403").len(),
            1
        );
        assert_eq!(
            findings(
                &retry("      max_attempts: 3\n      backoff: fixed\n"),
                "BG403"
            )
            .len(),
            1
        );
        let zero = retry("      max_attempts: 3\n      backoff: fixed\n      initial_delay: 0s\n");
        let f = findings(&zero, "BG403");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("initial_delay is 0s"));
        // One attempt never retries; unbounded is BG401's alone.
        assert!(findings(&retry("      max_attempts: 1\n"), "BG403").is_empty());
        assert!(findings(&retry("      max_attempts: unlimited\n"), "BG403").is_empty());
        let ok = retry("      max_attempts: 3\n      backoff: fixed\n      initial_delay: 1m\n");
        assert!(findings(&ok, "BG403").is_empty());
    }
}
