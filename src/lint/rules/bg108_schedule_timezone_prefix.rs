use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use crate::lint::rules::bg101_invalid_cron::expr_span;

declare_rule! {
    /// ## What it does
    /// Reports a `CRON_TZ=Zone` or `TZ=Zone` prefix inside a Kubernetes schedule
    /// (`CRON_TZ=Asia/Seoul 0 2 * * *`). robfig/cron reads the prefix, so the CronJob
    /// controller runs such a schedule in that zone, and so does batchguard: slots, DST
    /// (BG103) and duplicate detection all use the zone the prefix names, whatever
    /// `timeZone` says. The underline is the prefix.
    ///
    /// ## Why it matters
    /// Kubernetes does not support the prefix: the controller emits an
    /// `UnsupportedSchedule` warning event for it, and the API server's validation refuses
    /// it in new CronJobs ("use timeZone field instead"), so a manifest that applied once
    /// may not apply again on a rebuilt cluster, and a job that silently stops being
    /// created runs "not at all". The zone also hides from anyone reading `timeZone`, so
    /// two copies of one job can look like they run at different times, or the same.
    ///
    /// ## Example
    /// ```yaml
    /// spec:
    ///   schedule: "CRON_TZ=Asia/Seoul 0 2 * * *"
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// spec:
    ///   schedule: "0 2 * * *"
    ///   timeZone: Asia/Seoul
    /// ```
    pub struct ScheduleTimezonePrefix {
        code: "BG108",
        name: "schedule-timezone-prefix",
        severity: Warning,
        scope: Schedule,
        summary: "a `CRON_TZ=`/`TZ=` prefix inside a Kubernetes schedule: not supported by Kubernetes (use `spec.timeZone`); evaluated in the zone it names",
        help: "move the zone to the CronJob's `spec.timeZone` (or the job's `timezone`) and keep only the cron fields in the schedule",
    }
}

impl Rule for ScheduleTimezonePrefix {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        let (Some(Ok(sched)), Some(expr)) = (&cx.schedule, cx.expr) else {
            return;
        };
        let Some(prefix) = sched.zone_prefix() else {
            return;
        };
        let zone = if prefix.name.is_empty() {
            "UTC"
        } else {
            prefix.name.as_str()
        };
        let fields = expr.value.get(prefix.span.end..).unwrap_or("").trim();
        let written = expr.value.get(prefix.span.clone()).unwrap_or("");
        out.emit_with_help(
            expr_span(cx.text, expr, prefix.span.clone()),
            format!(
                "job `{}`: `{written}` inside the schedule is not supported by Kubernetes (the API server refuses it in new CronJobs, the controller warns UnsupportedSchedule); batchguard evaluates `{fields}` in {zone}, as the controller does",
                cx.name,
            ),
            format!("write `schedule: \"{fields}\"` with `timeZone: {zone}`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str, zone: &str) -> String {
        format!(
            "version: 1\ndeployment:\n  platform: kubernetes\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n    timezone: {zone}\n"
        )
    }

    #[test]
    fn the_prefix_is_a_warning_not_a_seconds_error() {
        let yaml = manifest("CRON_TZ=Asia/Seoul 0 2 * * *", "UTC");
        let f = findings(&yaml, "BG108");
        assert_eq!(f.len(), 1);
        let s = f[0].at.span;
        assert_eq!(&yaml[s.start..s.end()], "CRON_TZ=Asia/Seoul");
        assert!(
            f[0].message.contains("`0 2 * * *` in Asia/Seoul"),
            "{}",
            f[0].message
        );
        assert!(f[0].help.contains("timeZone: Asia/Seoul"), "{}", f[0].help);
        assert!(findings(&yaml, "BG106").is_empty());
        assert!(findings(&yaml, "BG101").is_empty());
    }

    #[test]
    fn tz_prefix_and_dst_in_the_prefix_zone() {
        // UTC job zone, but the prefix's New York has a gap at 02:30 on 2026-03-08.
        let yaml = manifest("TZ=America/New_York 30 2 * * *", "UTC");
        assert_eq!(findings(&yaml, "BG108").len(), 1);
        let dst = findings(&yaml, "BG103");
        assert_eq!(dst.len(), 1);
        assert!(
            dst[0].message.contains("America/New_York"),
            "{}",
            dst[0].message
        );
    }

    #[test]
    fn an_unknown_zone_is_bg101_on_the_name() {
        let yaml = manifest("CRON_TZ=Mars/Olympus 0 2 * * *", "UTC");
        assert!(findings(&yaml, "BG108").is_empty());
        let f = findings(&yaml, "BG101");
        assert_eq!(f.len(), 1);
        let s = f[0].at.span;
        assert_eq!(&yaml[s.start..s.end()], "Mars/Olympus");
    }

    #[test]
    fn other_dialects_say_the_prefix_is_not_theirs() {
        let yaml = "version: 1\ndeployment:\n  platform: crontab\njobs:\n  - name: a\n    schedule: \"CRON_TZ=Asia/Seoul 0 2 * * *\"\n";
        assert!(findings(yaml, "BG106").is_empty());
        let f = findings(yaml, "BG101");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("not part of a crontab schedule"),
            "{}",
            f[0].message
        );
    }
}
