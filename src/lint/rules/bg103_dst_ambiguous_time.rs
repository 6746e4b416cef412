use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use crate::schedule::DstEffect;
use crate::schedule::describe::{describe, same_clause};

declare_rule! {
    /// ## What it does
    /// Looks at the DST changes of the 12 months from `lint --now` in the job's time zone
    /// (the zone of a `CRON_TZ=` prefix when there is one) and reports those that change
    /// what the job runs compared with an ordinary day: a slot skipped, run late or run
    /// twice, a periodic job that runs only once in the repeated hour, npm `cron`'s extra
    /// run an hour early. The message gives the dates and what the job's dialect does
    /// (SPEC 4's table, checked against the real libraries).
    ///
    /// Not reported: a job that keeps its cadence through the change, that is one that
    /// fires every `shift` (the size of the change, usually an hour) all that day and whose
    /// dialect follows real time there (the gap's slots are skipped, the repeated hour runs
    /// in both passes): every minute, every 15 minutes or every hour under `kubernetes`,
    /// wildcard hours under `crontab`. Nor is a fixed-time job that runs once in a
    /// repeated hour (`30 1 * * *` under `crontab`): that is its ordinary day. Jobs with
    /// `enabled: false` are skipped.
    ///
    /// ## Why it matters
    /// The same `30 2 * * *` in `America/New_York` does not run on the spring-forward day
    /// under Kubernetes, runs at 03:00 under Debian cron, and `30 1 * * *` runs twice on the
    /// fall-back day under Kubernetes. A nightly settlement that runs twice bills twice
    /// unless its idempotency holds; one that is skipped leaves a day unsettled. The source
    /// article's question, "did we do the same work twice, or not at all?", has its most
    /// predictable answer here: it happens on known dates, twice a year.
    ///
    /// ## Example
    /// ```yaml
    ///     schedule: "30 2 * * *"
    ///     timezone: America/New_York   # 02:30 does not exist on 2026-03-08
    /// ```
    ///
    /// Use instead (a time no transition touches, or UTC):
    /// ```yaml
    ///     schedule: "30 4 * * *"
    ///     timezone: America/New_York
    /// ```
    pub struct DstAmbiguousTime {
        code: "BG103",
        name: "dst-ambiguous-time",
        severity: Warning,
        scope: Schedule,
        summary: "in the job's timezone, a DST change in the next 12 months makes the job run a different number of times, or at a different real interval, than on an ordinary day (a slot skipped, run late or run twice); the message says what this dialect then does and on which dates. A job that keeps its ordinary cadence through the change (every minute or hour under `kubernetes`, wildcard hours under `crontab`) is not reported",
        help: "schedule the job outside the hour the clocks change, or use timezone: UTC",
    }
}

impl Rule for DstAmbiguousTime {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        if !cx.enabled {
            return;
        }
        let (Some((sched, tz)), Some(expr)) = (cx.schedule_in_zone(), cx.expr) else {
            return;
        };
        let tz = sched.zone(tz);
        let effects: Vec<DstEffect> = sched
            .dst_effects(tz, cx.now, crate::schedule::year_after(cx.now))
            .into_iter()
            .filter(|e| !e.ordinary)
            .collect();
        if effects.is_empty() {
            return;
        }
        let parts: Vec<String> = effects
            .chunk_by(same_clause)
            .map(|g| describe(g, tz, cx.dialect))
            .collect();
        out.emit(
            expr.span,
            format!(
                "job `{}`: `{}` in {}: {}",
                cx.name,
                expr.value,
                tz.iana_name().unwrap_or("its time zone"),
                parts.join("; ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str, zone: &str, platform: &str) -> String {
        // `pm2-croner`: platform pm2 with the scheduler that reads `cron_restart`.
        let deployment = match platform {
            "pm2-croner" => "platform: pm2\n  scheduler: pm2".to_owned(),
            p => format!("platform: {p}"),
        };
        format!(
            "version: 1\ndeployment:\n  {deployment}\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n    timezone: {zone}\n"
        )
    }

    fn message(schedule: &str, zone: &str, platform: &str) -> Option<String> {
        let f = findings(&manifest(schedule, zone, platform), "BG103");
        f.first().map(|f| f.message.clone())
    }

    #[test]
    fn says_what_each_dialect_does() {
        let m = message("30 2 * * *", "America/New_York", "kubernetes").expect("fires");
        assert!(
            m.contains(
                "02:30 does not exist on 2026-03-08 (clocks spring forward): kubernetes skips it"
            ),
            "{m}"
        );
        let m = message("30 2 * * *", "America/New_York", "crontab").expect("fires");
        assert!(
            m.contains("crontab runs it late, at 2026-03-08T03:00:00-04:00"),
            "{m}"
        );
        let m = message("30 1 * * *", "America/New_York", "kubernetes").expect("fires");
        assert!(
            m.contains("01:30 happens twice on 2026-11-01 (clocks fall back): kubernetes runs it twice, at 2026-11-01T01:30:00-04:00 and 2026-11-01T01:30:00-05:00"),
            "{m}"
        );
        // A fixed-time job that runs once in the repeated hour has an ordinary day.
        assert!(message("30 1 * * *", "America/New_York", "crontab").is_none());
    }

    #[test]
    fn jobs_that_keep_their_cadence_are_not_reported() {
        for sched in ["0 * * * *", "* * * * *", "*/15 * * * *", "30 * * * *"] {
            assert_eq!(
                message(sched, "America/New_York", "kubernetes"),
                None,
                "{sched}"
            );
            assert_eq!(
                message(sched, "America/New_York", "crontab"),
                None,
                "{sched}"
            );
        }
        assert_eq!(message("*/15 * * * *", "Europe/Berlin", "kubernetes"), None);
        assert!(message("30 2 * * *", "America/New_York", "kubernetes").is_some());
    }

    #[test]
    fn a_periodic_job_that_runs_once_in_the_repeated_hour_is_reported() {
        // PM2's croner chains from the last run's wall clock: the second pass never comes.
        let m = message("0 * * * *", "America/New_York", "pm2-croner").expect("fires");
        assert!(
            m.contains("01:00 happens twice on 2026-11-01 (clocks fall back): pm2 runs it once, at 2026-11-01T01:00:00-04:00 (the first pass), and not in the second"),
            "{m}"
        );
        // Every two hours skips 02:00: three hours between runs.
        assert!(message("0 */2 * * *", "America/New_York", "kubernetes").is_some());
        // A window of activity loses an hour: not the ordinary cadence either.
        assert!(message("*/15 1-3 * * *", "America/New_York", "kubernetes").is_some());
    }

    #[test]
    fn quiet_outside_transitions_and_in_utc() {
        assert!(message("30 4 * * *", "America/New_York", "kubernetes").is_none());
        assert!(message("30 2 * * *", "UTC", "kubernetes").is_none());
    }

    #[test]
    fn many_slots_are_summarised() {
        let m = message("*/15 1-3 * * *", "Europe/Berlin", "kubernetes").expect("fires");
        assert!(m.contains("the 4 slots from 02:00 to 02:45"), "{m}");
    }
}
