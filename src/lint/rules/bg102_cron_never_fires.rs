use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use jiff::SignedDuration;

declare_rule! {
    /// ## What it does
    /// Reports a `schedule` that has no slot in the 5 years from `lint --now` (default: the
    /// current time), evaluated in the job's dialect and time zone: `0 0 30 2 *` (February
    /// 30th) under `kubernetes`, or croner's year field naming a year that has passed.
    ///
    /// Jobs with `enabled: false` are skipped: they are not scheduled, so "never fires" is
    /// what they are meant to do. (Their schedule is still parsed: BG101, BG105 and BG106
    /// apply, so the job can be re-enabled safely.) In dialect `crontab`, Debian cron itself
    /// rejects a day-of-month no chosen month has, so `0 0 30 2 *` is BG101 there.
    ///
    /// Under `supercronic` (a crontab that supercronic runs), a 6-field line is five
    /// fields and a **year**: its cronexpr (`cronexpr/cronexpr.go` `parse`) reads the
    /// seconds field only when there are 7 fields and sets `secondList = [0]` otherwise,
    /// and the sixth field goes to `yearFieldHandler`. So `0 3 * * * 2019 /bin/backup`
    /// (written as "seconds first" or by mistake) never fires again: BG102. Years after
    /// 2099 do not exist for cronexpr (`yearDescriptor` is 1970-2099), so nothing fires
    /// after 2099 either; `Next` returns the zero time, and supercronic's loop spins on
    /// it.
    ///
    /// ## Why it matters
    /// A schedule that never fires is a job that silently does nothing: nothing fails,
    /// nothing alerts, and the work is simply not done. The source article judges a batch by
    /// "did we do the same work twice, or not at all?"; this is "not at all", found before
    /// the deploy instead of by a customer.
    ///
    /// ## Example
    /// ```yaml
    ///     schedule: "0 0 30 2 *"     # February has no 30th
    /// ```
    ///
    /// Use instead (the last day of February, in a dialect with `L`, or the 28th):
    /// ```yaml
    ///     schedule: "0 0 28 2 *"
    /// ```
    pub struct CronNeverFires {
        code: "BG102",
        name: "cron-never-fires",
        severity: Error,
        scope: Schedule,
        summary: "the expression has no occurrence in the next 5 years (e.g. `0 0 30 2 *`)",
        help: "check the day-of-month and month combination; `batchguard slots` shows when a schedule fires",
    }
}

impl Rule for CronNeverFires {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        if !cx.enabled {
            return;
        }
        let (Some((sched, tz)), Some(expr)) = (cx.schedule_in_zone(), cx.expr) else {
            return;
        };
        let horizon = crate::schedule::months_after(cx.now, 60);
        // A slot exactly at `now` counts as an occurrence.
        let start = cx
            .now
            .checked_sub(SignedDuration::from_secs(1))
            .unwrap_or(cx.now);
        if sched.next_after(tz, start).is_some_and(|t| t < horizon) {
            return;
        }
        out.emit(
            expr.span,
            format!(
                "job `{}`: `{}` never fires: no slot in the 5 years from {} ({}, {})",
                cx.name,
                expr.value,
                cx.now.strftime("%Y-%m-%d"),
                cx.dialect,
                tz.iana_name().unwrap_or("UTC")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str, extra: &str) -> String {
        format!(
            "version: 1\ndeployment:\n  platform: kubernetes\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n{extra}"
        )
    }

    #[test]
    fn february_30th_never_fires() {
        assert_eq!(findings(&manifest("0 0 30 2 *", ""), "BG102").len(), 1);
        assert!(findings(&manifest("0 0 29 2 *", ""), "BG102").is_empty());
    }

    #[test]
    fn disabled_jobs_are_skipped() {
        let yaml = manifest("0 0 30 2 *", "    enabled: false\n");
        assert!(findings(&yaml, "BG102").is_empty());
    }
}
