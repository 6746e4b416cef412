use crate::declare_rule;
use crate::lint::ScheduleCx;
use crate::lint::rule::{Emitter, Rule};
use crate::lint::rules::bg101_invalid_cron::error_span;
use crate::schedule::CronErrorKind;

declare_rule! {
    /// ## What it does
    /// Reports a `schedule` that uses a seconds (or year) field, or `L`, `W` or `#`, in a
    /// dialect that does not accept it, and names the dialects that would. Reported instead
    /// of BG101 (invalid-cron) whenever another dialect accepts the expression.
    ///
    /// Which dialects take what (SPEC 4): seconds as a sixth field in `node-cron`,
    /// `cron-npm`, `pm2` and `croner` (and a seventh, year, field in `croner`); `L`, `W`
    /// and `#` in `node-cron` and `croner`; `pm2` (croner 4.1.97) takes `L` only as the
    /// whole day-of-month field, and no `W` or `#`. `crontab` and `kubernetes` take five
    /// fields.
    ///
    /// ## Why it matters
    /// Such an expression is usually copied from another scheduler's documentation, and it
    /// is not a typo but a mismatch between the manifest and the scheduler: Kubernetes
    /// rejects `0 0 L * *` and the job never runs; Debian cron has no seconds field at all.
    /// Either the expression or `deployment.scheduler` is wrong, and the fix depends on
    /// which one, so the message names the dialects that would run it. Running a slot not
    /// at all is as much a failure as running it twice.
    ///
    /// ## Example
    /// ```yaml
    /// deployment:
    ///   platform: kubernetes
    /// jobs:
    ///   - name: month-end-close
    ///     schedule: "0 2 L * *"       # last day of the month: not in robfig/cron
    /// ```
    ///
    /// Use instead (the 28th-31st, and the job checks whether tomorrow is the 1st):
    /// ```yaml
    ///     schedule: "0 2 28-31 * *"
    /// ```
    pub struct SecondsUnsupported {
        code: "BG106",
        name: "seconds-unsupported",
        severity: Error,
        scope: Schedule,
        summary: "a seconds field or a feature (L, W, #) the job's dialect does not accept (reported instead of BG101 when another dialect would accept it)",
        help: "rewrite the expression for the job's dialect, or set deployment.scheduler to the scheduler that really runs it",
    }
}

impl Rule for SecondsUnsupported {
    fn check_schedule(&self, cx: &ScheduleCx, out: &mut Emitter) {
        let (Some(Err(err)), Some(expr)) = (&cx.schedule, cx.expr) else {
            return;
        };
        let CronErrorKind::Unsupported { accepted_by } = &err.kind else {
            return;
        };
        let names: Vec<&str> = accepted_by.iter().map(|d| d.as_str()).collect();
        let list = |and: &str| match names.as_slice() {
            [] => "no other dialect".to_owned(),
            [one] => one.to_string(),
            [init @ .., last] => format!("{} {and} {last}", init.join(", ")),
        };
        let (by, either) = (list("and"), list("or"));
        out.emit_with_help(
            error_span(cx.text, expr, err),
            format!(
                "job `{}`: `{}` does not run under {}: {}; only {by} accept it",
                cx.name,
                expr.value,
                cx.dialect,
                err.message
            ),
            format!(
                "rewrite it for {}, or, if the job really runs under {either}, set deployment.scheduler to that dialect",
                cx.dialect
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::rules::testing::findings;

    #[test]
    fn names_the_dialects_that_accept_it() {
        let yaml = "version: 1\ndeployment:\n  platform: crontab\njobs:\n  - name: a\n    schedule: \"*/5 * * * * *\"\n";
        let f = findings(yaml, "BG106");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("node-cron, cron-npm, pm2 and croner"),
            "{}",
            f[0].message
        );
        assert!(findings(yaml, "BG101").is_empty());
        let s = f[0].at.span;
        assert_eq!(&yaml[s.start..s.end()], "*/5");
    }

    #[test]
    fn pm2_takes_a_whole_field_l_only() {
        let m = |platform: &str, sched: &str| {
            format!(
                "version: 1\ndeployment:\n  platform: {platform}\n  scheduler: {platform}\njobs:\n  - name: a\n    schedule: \"{sched}\"\n"
            )
        };
        let f = findings(&m("kubernetes", "0 2 L * *"), "BG106");
        assert!(
            f[0].message.contains("node-cron, pm2 and croner"),
            "{}",
            f[0].message
        );
        let f = findings(&m("pm2", "0 2 15W * *"), "BG106");
        assert!(
            f[0].message.contains("only node-cron and croner"),
            "{}",
            f[0].message
        );
        assert!(findings(&m("pm2", "0 2 L * *"), "BG106").is_empty());
        assert!(findings(&m("pm2", "0 2 L * *"), "BG101").is_empty());
    }
}
