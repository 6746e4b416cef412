use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule, RuleMeta};
use crate::schedule::{Dialect, DstAction, DstEffect, DstKind, format_slot};
use jiff::tz::TimeZone;

declare_rule! {
    /// ## What it does
    /// Looks at the 12 months from `lint --now` in the job's time zone and reports every
    /// slot that falls in a DST gap (a local time that does not exist that day) or a
    /// repeated hour (a local time that happens twice), with the dates and what the job's
    /// dialect does there: skips the slot, runs it late, runs it twice, runs it once (and
    /// at which instant), or, for npm `cron`, also runs a slot an hour early. What each
    /// dialect does is SPEC 4's table, checked against the real libraries.
    ///
    /// Jobs that run every few minutes in a zone with DST are reported too: their slots in
    /// the changed hour follow real time or not depending on the dialect, and the audit
    /// expects exactly what the message says. Jobs with `enabled: false` are skipped.
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
        summary: "in the job's timezone, a slot falls in a DST gap or repeated hour in the next 12 months; the message says what this dialect then does (skips, runs late, runs twice) and on which dates",
        help: "schedule the job outside the hour the clocks change, or use timezone: UTC",
    }
}

impl Rule for DstAmbiguousTime {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        if cx.job.enabled.value() == Some(&false) {
            return;
        }
        let (Some((sched, tz)), Some(expr)) = (cx.schedule_in_zone(), cx.job.schedule.get()) else {
            return;
        };
        let effects = sched.dst_effects(tz, cx.now, cx.now_plus_months(12));
        if effects.is_empty() {
            return;
        }
        let parts: Vec<String> = effects
            .chunk_by(|a, b| {
                a.local.date() == b.local.date()
                    && a.kind == b.kind
                    && std::mem::discriminant(&a.action) == std::mem::discriminant(&b.action)
            })
            .map(|g| describe(g, tz, cx.dialect()))
            .collect();
        out.emit(
            expr.span,
            format!(
                "job `{}`: `{}` in {}: {}",
                cx.job_name(),
                expr.value,
                tz.iana_name().unwrap_or("its time zone"),
                parts.join("; ")
            ),
        );
    }
}

/// One group of effects (same date, same kind, same action) as a clause.
fn describe(group: &[DstEffect], tz: &TimeZone, dialect: Dialect) -> String {
    let Some(first) = group.first() else {
        return String::new();
    };
    let many = group.len() > 1;
    let hm = |e: &DstEffect| {
        let fmt = if e.local.second() == 0 {
            "%H:%M"
        } else {
            "%H:%M:%S"
        };
        e.local.strftime(fmt).to_string()
    };
    let times = match group {
        [one] => hm(one),
        [a, b] => format!("{} and {}", hm(a), hm(b)),
        [a, b, c] => format!("{}, {} and {}", hm(a), hm(b), hm(c)),
        [a, .., z] => format!("the {} slots from {} to {}", group.len(), hm(a), hm(z)),
        [] => String::new(),
    };
    let date = first.local.strftime("%Y-%m-%d");
    let it = if many { "them" } else { "it" };
    let does = if many { "do" } else { "does" };
    let setting = match (first.kind, first.action) {
        (_, DstAction::AlsoRunsEarly { .. }) => {
            format!("{times} on {date} (the hour after the repeated one)")
        }
        (DstKind::Gap, _) => format!("{times} {does} not exist on {date} (clocks spring forward)"),
        (DstKind::Repeat, _) => {
            let happen = if many { "happen" } else { "happens" };
            format!("{times} {happen} twice on {date} (clocks fall back)")
        }
    };
    let when = |at| format_slot(at, tz);
    let action = match first.action {
        DstAction::Skipped => format!("{dialect} skips {it}"),
        DstAction::RunsLate { at } => {
            if group.iter().all(|e| e.action == DstAction::RunsLate { at }) {
                if many {
                    format!("{dialect} runs them once, late, at {}", when(at))
                } else {
                    format!("{dialect} runs it late, at {}", when(at))
                }
            } else {
                format!("{dialect} runs {it} late, just after the change")
            }
        }
        DstAction::RunsTwice { first, second } if !many => format!(
            "{dialect} runs it twice, at {} and {}",
            when(first),
            when(second)
        ),
        DstAction::RunsTwice { .. } => format!("{dialect} runs each twice, once per offset"),
        DstAction::RunsOnce { at } => {
            let pass = if at < first.transition {
                "first"
            } else {
                "second"
            };
            if many {
                format!("{dialect} runs each once, in the {pass} pass")
            } else {
                format!("{dialect} runs it once, at {} (the {pass} pass)", when(at))
            }
        }
        DstAction::AlsoRunsEarly { at } if !many => {
            format!("{dialect} also runs it an hour early, at {}", when(at))
        }
        DstAction::AlsoRunsEarly { .. } => {
            format!("{dialect} also runs each an hour early")
        }
    };
    format!("{setting}: {action}")
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str, zone: &str, platform: &str) -> String {
        format!(
            "version: 1\ndeployment:\n  platform: {platform}\njobs:\n  - name: a\n    schedule: \"{schedule}\"\n    timezone: {zone}\n"
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
        let m = message("30 1 * * *", "America/New_York", "crontab").expect("fires");
        assert!(
            m.contains("crontab runs it once, at 2026-11-01T01:30:00-04:00 (the first pass)"),
            "{m}"
        );
    }

    #[test]
    fn quiet_outside_transitions_and_in_utc() {
        assert!(message("30 4 * * *", "America/New_York", "kubernetes").is_none());
        assert!(message("30 2 * * *", "UTC", "kubernetes").is_none());
    }

    #[test]
    fn many_slots_are_summarised() {
        let m = message("*/15 * * * *", "Europe/Berlin", "kubernetes").expect("fires");
        assert!(m.contains("the 4 slots from 02:00 to 02:45"), "{m}");
    }
}
