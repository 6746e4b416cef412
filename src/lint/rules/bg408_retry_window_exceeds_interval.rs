use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::duration::Duration;

declare_rule! {
    /// ## What it does
    /// Compares one slot's worst-case *retry window* with the shortest real-time gap
    /// between two consecutive slots over the 12 months from `lint --now` (DST included),
    /// and warns when the window is strictly longer.
    ///
    /// The retry window (SPEC 3.1) is `max_attempts x expected_duration` plus the delays
    /// between attempts: `delay(i) = min(initial_delay x 2^(i-1), max_delay)` for
    /// `backoff: exponential` (no cap without `max_delay`), `initial_delay` for `fixed`, and
    /// none without a backoff, for i = 1 .. max_attempts-1. It is compared with the
    /// schedule, not with `lock.ttl`, because each attempt takes the slot's lock on its own.
    /// Unbounded retries are BG401's, and a single run already longer than the gap is
    /// BG104's (schedule-overlap), so this rule stays silent then; jobs with
    /// `enabled: false` are skipped.
    ///
    /// ## Why it matters
    /// While a slot is still retrying, the next slot starts. Both now work on overlapping
    /// input: the retry of 10:00 and the first attempt of 10:15 can apply the same record
    /// twice unless idempotency holds, and under an outage the retries of several slots
    /// pile up on the service that is already failing. The source article separates
    /// retryable failures from fatal ones and bounds retries; this rule checks that the
    /// bound also fits the schedule.
    ///
    /// ## Example
    /// ```yaml
    ///     schedule: "*/15 * * * *"
    ///     expected_duration: 5m
    ///     retry:
    ///       max_attempts: 3            # 3 x 5m + 1m + 2m = 18m > 15m
    ///       backoff: exponential
    ///       initial_delay: 1m
    ///       max_delay: 5m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    ///     retry:
    ///       max_attempts: 2            # 2 x 5m + 1m = 11m
    ///       backoff: exponential
    ///       initial_delay: 1m
    ///       max_delay: 5m
    /// ```
    pub struct RetryWindowExceedsInterval {
        code: "BG408",
        name: "retry-window-exceeds-interval",
        severity: Warning,
        scope: Job,
        summary: "the retry window exceeds the shortest gap between slots: the next slot starts while this one may still be retrying",
        help: "lower max_attempts or the backoff delays, or space the slots further apart",
    }
}

impl Rule for RetryWindowExceedsInterval {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        if cx.job.enabled.value() == Some(&false) {
            return;
        }
        let (Some(retry), Some(expected)) =
            (cx.job.retry.value(), cx.job.expected_duration.value())
        else {
            return;
        };
        let (Some(attempts), Some(at)) = (retry.bounded_attempts(), retry.max_attempts.get())
        else {
            return;
        };
        let (window, delays) = crate::manifest::retry::retry_window(retry, attempts, *expected);
        let Some(gap) = cx.shortest_gap_12m() else {
            return;
        };
        let gap = u64::try_from(gap.as_secs()).unwrap_or(0);
        // A single run longer than the gap is BG104's finding; one problem, one finding.
        if expected.secs() > gap || window <= u128::from(gap) {
            return;
        }
        let show = |s: u128| Duration(u64::try_from(s).unwrap_or(u64::MAX));
        let delays_text = if delays == 0 {
            String::new()
        } else {
            format!(" + {} of delays", show(delays))
        };
        out.emit_with_help(
            at.span,
            format!(
                "job `{}`: the retry window, {attempts} attempts x {expected}{delays_text} = {}, is longer than the shortest gap between slots, {} (over the 12 months from {})",
                cx.job_name(),
                show(window),
                Duration(gap),
                cx.sched.now.strftime("%Y-%m-%d"),
            ),
            format!(
                "fit the attempts and their delays in {}: lower max_attempts or the delays, or space the slots further apart",
                Duration(gap)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str, retry: &str) -> String {
        format!(
            "version: 1\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n    expected_duration: 5m\n    retry:\n{retry}"
        )
    }

    #[test]
    fn exponential_window_over_the_gap() {
        let r = "      max_attempts: 3\n      backoff: exponential\n      initial_delay: 1m\n      max_delay: 5m\n";
        let f = findings(&manifest("*/15 * * * *", r), "BG408");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message
                .contains("3 attempts x 5m + 3m of delays = 18m")
                && f[0].message.contains("15m"),
            "{}",
            f[0].message
        );
        assert!(findings(&manifest("*/30 * * * *", r), "BG408").is_empty());
    }

    #[test]
    fn capped_and_fixed_delays() {
        // 4 x 5m + (1m + 2m + 2m capped) = 25m.
        let r = "      max_attempts: 4\n      backoff: exponential\n      initial_delay: 1m\n      max_delay: 2m\n";
        assert!(
            findings(&manifest("0,25 * * * *", r), "BG408").is_empty(),
            "equal is not over"
        );
        assert_eq!(findings(&manifest("*/20 * * * *", r), "BG408").len(), 1);
        // 3 x 5m + 2 x 2m = 19m.
        let r = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 2m\n";
        assert_eq!(findings(&manifest("*/15 * * * *", r), "BG408").len(), 1);
        assert!(findings(&manifest("*/20 * * * *", r), "BG408").is_empty());
    }

    #[test]
    fn huge_attempts_do_not_overflow() {
        let r = "      max_attempts: 18446744073709551615\n      backoff: exponential\n      initial_delay: 1s\n";
        assert_eq!(findings(&manifest("0 * * * *", r), "BG408").len(), 1);
    }

    #[test]
    fn silent_when_one_run_already_overlaps() {
        // expected_duration 5m > the 1m gap: BG104 reports it, BG408 does not repeat it.
        let r = "      max_attempts: 3\n      backoff: fixed\n      initial_delay: 1m\n";
        let yaml = manifest("* * * * *", r);
        assert!(findings(&yaml, "BG408").is_empty());
        assert_eq!(findings(&yaml, "BG104").len(), 1);
    }
}
