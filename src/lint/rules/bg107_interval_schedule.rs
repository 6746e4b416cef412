use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use crate::lint::rules::bg101_invalid_cron::error_span;
use crate::schedule::CronErrorKind;
use jiff::SignedDuration;

declare_rule! {
    /// ## What it does
    /// Reports a `schedule` of the form `@every D` (`@every 1h`, `@every 90s`). robfig/cron,
    /// which the Kubernetes CronJob controller uses, accepts it, so it is not an error
    /// (BG101) under `kubernetes`; no other dialect has it.
    ///
    /// ## Why it matters
    /// `@every 1h` does not mean "on the hour": it means "an hour after the last time",
    /// counted from when the controller started or last scheduled the CronJob. A restart
    /// of the controller or a failover moves every later run. No slot can be named in
    /// advance, so nothing can say whether a run is missing, late or doubled: the audit
    /// cannot check it, overlaps and DST cannot be reasoned about, and the lock key's
    /// `{scheduled_at}` is a different instant after every restart. The source article's
    /// question, "did we do the same work twice, or not at all?", has no answer for it.
    /// batchguard therefore expects no slots for it (`slots` and `audit` say so).
    ///
    /// ## Example
    /// ```yaml
    /// deployment:
    ///   platform: kubernetes
    /// jobs:
    ///   - name: refresh-rates
    ///     schedule: "@every 1h"
    /// ```
    ///
    /// Use instead (the same rate, on the clock):
    /// ```yaml
    ///     schedule: "0 * * * *"
    /// ```
    pub struct IntervalSchedule {
        code: "BG107",
        name: "interval-schedule",
        severity: Warning,
        scope: Schedule,
        summary: "`@every D` (accepted by Kubernetes): it counts from the controller's start, not the clock, so no slot can be expected or audited",
        help: "write a cron expression with the same rate, so every run has a slot",
    }
}

impl Rule for IntervalSchedule {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        let (Some(Err(err)), Some(expr)) = (&cx.schedule, cx.expr) else {
            return;
        };
        let CronErrorKind::Interval { every } = &err.kind else {
            return;
        };
        let help = match on_the_clock(*every) {
            Some(cron) => format!(
                "write `{cron}`: the same rate on the clock, so every run has a slot to expect"
            ),
            None => "write a cron expression on the clock (e.g. `0 * * * *` for hourly), so every run has a slot to expect".to_owned(),
        };
        out.emit_with_help(
            error_span(cx.text, expr, err),
            format!(
                "job `{}`: `{}` runs every {} counted from when the {} controller started or last scheduled it, not from the clock: no slot can be expected, so missed, late and doubled runs cannot be told apart",
                cx.name,
                expr.value,
                human(*every),
                cx.dialect
            ),
            help,
        );
    }
}

/// A cron expression firing at the same rate on the clock, when the interval divides an
/// hour or a day evenly.
fn on_the_clock(every: SignedDuration) -> Option<String> {
    let s = every.as_secs();
    match s {
        60 => Some("* * * * *".into()),
        s if s % 60 == 0 && s < 3600 && 3600 % s == 0 => Some(format!("*/{} * * * *", s / 60)),
        3600 => Some("0 * * * *".into()),
        s if s % 3600 == 0 && s < 86_400 && 86_400 % s == 0 => {
            Some(format!("0 */{} * * *", s / 3600))
        }
        86_400 => Some("0 0 * * *".into()),
        _ => None,
    }
}

fn human(every: SignedDuration) -> String {
    crate::text::duration::secs(every.as_secs().max(1).unsigned_abs())
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(platform: &str, schedule: &str) -> String {
        format!(
            "version: 1\ndeployment:\n  platform: {platform}\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n"
        )
    }

    #[test]
    fn every_is_a_warning_under_kubernetes_not_an_error() {
        let yaml = manifest("kubernetes", "@every 1h");
        let f = findings(&yaml, "BG107");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("runs every 1h"), "{}", f[0].message);
        assert!(f[0].help.contains("`0 * * * *`"), "{}", f[0].help);
        let s = f[0].at.span;
        assert_eq!(&yaml[s.start..s.end()], "@every 1h");
        assert!(findings(&yaml, "BG101").is_empty());
    }

    #[test]
    fn suggests_the_same_rate() {
        for (every, cron) in [
            ("15m", "*/15 * * * *"),
            ("6h", "0 */6 * * *"),
            ("24h", "0 0 * * *"),
        ] {
            let f = findings(&manifest("kubernetes", &format!("@every {every}")), "BG107");
            assert!(f[0].help.contains(cron), "{every}: {}", f[0].help);
        }
    }

    #[test]
    fn other_dialects_have_no_every() {
        for platform in ["crontab", "pm2"] {
            let yaml = manifest(platform, "@every 1h");
            assert!(findings(&yaml, "BG107").is_empty(), "{platform}");
            assert_eq!(findings(&yaml, "BG101").len(), 1, "{platform}");
        }
        let bad = manifest("kubernetes", "@every 1 hour");
        assert!(findings(&bad, "BG107").is_empty());
        assert_eq!(findings(&bad, "BG101").len(), 1);
    }
}
