use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::yaml::{Node, Value, scalar_offset};
use crate::schedule::{CronError, CronErrorKind};
use crate::text::Span;
use crate::text::Spanned;

declare_rule! {
    /// ## What it does
    /// Checks that the job's `schedule` parses in the job's cron dialect
    /// (`deployment.scheduler`, defaulting from `deployment.platform`; SPEC 4), and
    /// underlines the field or token that does not.
    ///
    /// An expression that another dialect would accept (a seconds field, `L`, `W`, `#`)
    /// is BG106 instead, which names the dialects that take it.
    ///
    /// **Crontab lines** are read in the dialect of the program that runs the file (the
    /// Dockerfile or compose file that starts it, `[sources] crontab_runner`, else Debian
    /// cron; docs/crontab-runners.md):
    /// - Under Debian cron or busybox crond, a line with 6 or 7 schedule-like fields
    ///   (`0 3 * * * 2019 /bin/backup`, `*/30 * * * * * /bin/poll`) is BG101 on its
    ///   schedule: cron reads five fields (`load_entry` in Debian cron's `entry.c`) and
    ///   would run the sixth word as the command, so the job as written never runs. The
    ///   message says the field count and how supercronic would read the line.
    /// - Under supercronic the line is split as supercronic splits it
    ///   (`crontab/crontab.go` `parseJobLine`: 7, then 6, then 5 fields, then a macro,
    ///   keeping the first that cronexpr parses) and read in dialect `supercronic`. A line
    ///   no count parses (`@reboot`, which cronexpr has no macro for, included) is BG101;
    ///   supercronic then refuses the whole crontab (`ParseCrontab` returns the error) and
    ///   runs none of its jobs.
    ///
    /// ## Why it matters
    /// The scheduler refuses an expression it cannot read, often only at deploy time and
    /// often quietly: a Kubernetes CronJob that fails to parse is never scheduled, a
    /// crontab line with a bad field is skipped with a log line nobody reads. The job then
    /// runs not at all, which is the other half of the source article's question: "did we
    /// do the same work twice, *or not at all*?". Each dialect has its own limits
    /// (Kubernetes takes weekdays 0-6 only, Debian cron has no `?`), so the check is made in
    /// the dialect that really runs the job.
    ///
    /// ## Example
    /// ```yaml
    /// deployment:
    ///   platform: kubernetes
    /// jobs:
    ///   - name: weekly-report
    ///     schedule: "0 6 * * 7"     # robfig/cron: day-of-week is 0-6
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    ///     schedule: "0 6 * * 0"     # Sunday
    /// ```
    pub struct InvalidCron {
        code: "BG101",
        name: "invalid-cron",
        severity: Error,
        scope: Schedule,
        summary: "the expression does not parse in the job's dialect (span on the bad field)",
        help: "fix the marked field; `batchguard slots --schedule EXPR --dialect D` shows what an expression fires",
    }
}

impl Rule for InvalidCron {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        let (Some(Err(err)), Some(expr)) = (&cx.schedule, cx.expr) else {
            return;
        };
        if matches!(
            err.kind,
            CronErrorKind::Unsupported { .. } | CronErrorKind::Interval { .. }
        ) {
            return; // BG106, BG107
        }
        out.emit_with_help(
            error_span(cx.text, expr, err),
            format!(
                "job `{}`: `{}` is not a valid {} schedule: {}",
                cx.name, expr.value, cx.dialect, err.message
            ),
            format!(
                "fix the marked part; the {} dialect takes {}",
                cx.dialect,
                fields_of(cx.dialect)
            ),
        );
    }
}

/// What a dialect's expression is made of (SPEC 4), for help lines.
pub(crate) fn fields_of(d: crate::schedule::Dialect) -> &'static str {
    use crate::schedule::Dialect;
    match d {
        Dialect::Crontab => {
            "5 fields (minute hour day-of-month month day-of-week 0-7) or an @macro"
        }
        Dialect::Kubernetes => {
            "5 fields (minute hour day-of-month month day-of-week 0-6) or an @macro"
        }
        Dialect::NodeCron | Dialect::CronNpm => "5 fields, or 6 with seconds first",
        Dialect::Pm2 => {
            "5 fields, or 6 with seconds first; no @macros (`0 0 * * *` for daily), L only as the whole day-of-month"
        }
        Dialect::Croner => "5, 6 (seconds first) or 7 (year last) fields",
        Dialect::Supercronic => {
            "5 fields, 6 (five and a year) or 7 (seconds first, year last), or an @macro"
        }
    }
}

/// The file span of the part of `expr` that `err` blames; the whole value when the
/// scalar's text does not line up with its value (escapes, block scalars).
pub(crate) fn error_span(text: &str, expr: &Spanned<String>, err: &CronError) -> Span {
    expr_span(text, expr, err.span.clone())
}

/// The file span of bytes `range` of the expression `expr`; the whole value when the
/// scalar's text does not line up with its value (escapes, block scalars).
pub(crate) fn expr_span(text: &str, expr: &Spanned<String>, range: std::ops::Range<usize>) -> Span {
    let node = Node {
        value: Value::Null,
        span: expr.span,
    };
    let (a, b) = (range.start, range.end);
    if let (Some(s), Some(e)) = (scalar_offset(text, &node, a), scalar_offset(text, &node, b))
        && e > s
        && text
            .get(s..e)
            .is_some_and(|t| Some(t) == expr.value.get(a..b))
    {
        return Span::new(s, e - s);
    }
    expr.span
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    fn manifest(schedule: &str) -> String {
        format!(
            "version: 1\ndeployment:\n  platform: kubernetes\njobs:\n  - name: a\n    schedule: {schedule}\n"
        )
    }

    #[test]
    fn underlines_the_bad_field() {
        for (sched, bad) in [
            ("\"0 6 * * 7\"", "7"),
            ("'61 * * * *'", "61"),
            ("0 25 * * *", "25"),
        ] {
            let yaml = manifest(sched);
            let f = findings(&yaml, "BG101");
            assert_eq!(f.len(), 1, "{sched}");
            let s = f[0].at.span;
            assert_eq!(&yaml[s.start..s.end()], bad, "{sched}");
            assert!(f[0].message.contains("kubernetes"), "{}", f[0].message);
        }
    }

    #[test]
    fn valid_and_unsupported_are_not_bg101() {
        assert!(findings(&manifest("\"0 6 * * 0\""), "BG101").is_empty());
        assert!(findings(&manifest("\"0 0 L * *\""), "BG101").is_empty());
    }
}
