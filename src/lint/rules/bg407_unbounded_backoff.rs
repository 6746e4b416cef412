use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::duration::Duration;
use crate::manifest::model::Backoff;

declare_rule! {
    /// ## What it does
    /// Reports `backoff: exponential` without `max_delay`, when the delay really grows:
    /// at least 3 attempts (so at least two delays) and a positive `initial_delay`.
    /// With fewer attempts the one delay is `initial_delay`; with a zero delay BG403
    /// reports the policy; with unbounded attempts BG401 alone reports it.
    ///
    /// ## Why it matters
    /// An exponential delay doubles with every attempt: 30s, 1m, 2m, 4m … 2h8m by the
    /// tenth attempt. Without a cap, the last retries of a slot run hours after the slot,
    /// long after the on-call threshold (the article pages at 15 minutes of latency) and
    /// often after the next slots, which then race with or skip behind a slot that is
    /// still retrying. A `max_delay` keeps the retry window, and so the worst latency,
    /// predictable.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempts: 8
    ///   backoff: exponential
    ///   initial_delay: 1m       # the 7th delay is 1h4m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 8
    ///   backoff: exponential
    ///   initial_delay: 1m
    ///   max_delay: 10m
    /// ```
    pub struct UnboundedBackoff {
        code: "BG407",
        name: "unbounded-backoff",
        severity: Warning,
        scope: Job,
        summary: "`backoff: exponential` without `max_delay`",
        help: "add `max_delay:` to cap the exponential delay",
    }
}

/// The last delay of `attempts` attempts with an uncapped exponential backoff:
/// `initial x 2^(attempts-2)`, `None` when it does not fit in a duration.
pub fn last_delay(initial: Duration, attempts: u64) -> Option<Duration> {
    let exp = u32::try_from(attempts.checked_sub(2)?).ok()?;
    let factor = 1u64.checked_shl(exp)?;
    initial.secs().checked_mul(factor).map(Duration)
}

impl Rule for UnboundedBackoff {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let Some(backoff) = retry.backoff.get() else {
            return;
        };
        if backoff.value != Backoff::Exponential || !retry.max_delay.is_absent() {
            return;
        }
        let Some(n) = retry.bounded_attempts().filter(|n| *n >= 3) else {
            return;
        };
        let Some(initial) = retry.initial_delay.value().filter(|d| d.secs() > 0) else {
            return;
        };
        let last = match last_delay(*initial, n) {
            Some(d) => format!(
                "the last of its {} delays is {initial} x 2^{} = {d}",
                n - 1,
                n - 2
            ),
            None => format!("the last of its {} delays is too long to represent", n - 1),
        };
        let cap = Duration((initial.secs().saturating_mul(8)).min(3600));
        out.emit_with_help(
            backoff.span,
            format!(
                "job `{}`: exponential backoff has no max_delay: {last}",
                cx.job_name()
            ),
            format!("add `max_delay:` (for example {cap}) to cap the delay between attempts"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{Duration, last_delay};

    #[test]
    fn last_delay_doubles_and_saturates() {
        assert_eq!(last_delay(Duration(30), 3), Some(Duration(60)));
        assert_eq!(last_delay(Duration(30), 10), Some(Duration(30 * 256)));
        assert_eq!(last_delay(Duration(60), 2), Some(Duration(60)));
        assert_eq!(last_delay(Duration(60), 1), None);
        assert_eq!(last_delay(Duration(60), 70), None);
        assert_eq!(last_delay(Duration(u64::MAX), 4), None);
    }
}

#[cfg(test)]
mod rule_tests {
    use crate::lint::rules::testing::findings;

    fn retry(attempts: &str, extra: &str) -> String {
        format!(
            "version: 1\nservice: s\njobs:\n  - name: a\n    schedule: \"0 2 * * *\"\n    expected_duration: 10m\n    retry:\n      max_attempts: {attempts}\n      backoff: exponential\n      initial_delay: 30s\n{extra}"
        )
    }

    #[test]
    fn fires_only_when_the_delay_grows() {
        let f = findings(&retry("5", ""), "BG407");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("30s x 2^3 = 4m"), "{}", f[0].message);
        assert!(findings(&retry("5", "      max_delay: 5m\n"), "BG407").is_empty());
        assert!(findings(&retry("2", ""), "BG407").is_empty());
        assert!(findings(&retry("unlimited", ""), "BG407").is_empty());
    }
}
