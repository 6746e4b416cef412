use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::duration::Duration;

declare_rule! {
    /// ## What it does
    /// Compares the shortest real-time gap between two consecutive slots of the job, over
    /// the 12 months from `lint --now`, DST transitions included, with `expected_duration`,
    /// and reports a gap below it. The gap is measured as the job's dialect fires the slots
    /// in its time zone, so a repeated hour that a dialect runs twice (or npm `cron`'s extra
    /// run an hour early) counts. Jobs with `enabled: false` are skipped.
    ///
    /// ## Why it matters
    /// When runs are longer than the time between slots, the next slot starts while the
    /// previous one still works. With a lock, the next slot is skipped (and a slot that
    /// never runs is a missed run); without one, two runs process the same input at once,
    /// which is how the source article's customers were billed twice. The weekly check the
    /// article recommends ("if a job keeps missing its deadline, change the schedule
    /// interval or the chunk size") is this rule, done before the deploy.
    ///
    /// ## Example
    /// ```yaml
    ///     schedule: "*/5 * * * *"
    ///     expected_duration: 10m     # every run overlaps the next
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    ///     schedule: "*/15 * * * *"
    ///     expected_duration: 10m
    /// ```
    pub struct ScheduleOverlap {
        code: "BG104",
        name: "schedule-overlap",
        severity: Error,
        scope: Job,
        summary: "the shortest gap between two slots is below `expected_duration`",
        help: "space the slots further apart, or make the run shorter (chunk the input) and lower expected_duration",
    }
}

impl Rule for ScheduleOverlap {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        if cx.job.enabled.value() == Some(&false) {
            return;
        }
        let Some(expected) = cx.job.expected_duration.get() else {
            return;
        };
        let Some(gap) = cx.shortest_gap_12m() else {
            return;
        };
        let gap = Duration(gap.as_secs().max(0).unsigned_abs());
        if gap >= expected.value {
            return;
        }
        out.emit_with_help(
            expected.span,
            format!(
                "job `{}`: slots of `{}` can be as little as {gap} apart (over the 12 months from {}), less than expected_duration {}",
                cx.job_name(),
                cx.job.schedule.value().map_or("", String::as_str),
                cx.sched.now.strftime("%Y-%m-%d"),
                expected.value
            ),
            format!(
                "space the slots at least {} apart, or shorten the run below {gap}",
                expected.value
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str, expected: &str, zone: &str, platform: &str) -> String {
        format!(
            "version: 1\ndeployment:\n  platform: {platform}\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n    timezone: {zone}\n    expected_duration: {expected}\n"
        )
    }

    #[test]
    fn gap_below_expected_duration() {
        let f = findings(&manifest("*/5 * * * *", "10m", "UTC", "crontab"), "BG104");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("5m apart"), "{}", f[0].message);
        assert!(findings(&manifest("*/15 * * * *", "10m", "UTC", "crontab"), "BG104").is_empty());
        // Equal is not below.
        assert!(findings(&manifest("*/10 * * * *", "10m", "UTC", "crontab"), "BG104").is_empty());
    }

    #[test]
    fn dst_repeat_shortens_the_gap() {
        // Kubernetes runs 01:30 twice in New York on 2026-11-01: one hour apart.
        let yaml = manifest("30 1 * * *", "2h", "America/New_York", "kubernetes");
        let f = findings(&yaml, "BG104");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("1h apart"), "{}", f[0].message);
        // Crontab runs a fixed-time job once in the repeated hour.
        let yaml = manifest("30 1 * * *", "2h", "America/New_York", "crontab");
        assert!(findings(&yaml, "BG104").is_empty());
    }
}
