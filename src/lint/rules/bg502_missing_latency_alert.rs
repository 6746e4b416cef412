use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports a job without `alerts.max_latency`: the time from a slot's `scheduled_at`
    /// to its successful end after which the on-call engineer is paged.
    ///
    /// ## Why it matters
    /// The source article's fourth criterion is outcome metrics: judge a batch by
    /// processing latency and missing count, not by how many runs "succeeded". Its team
    /// rule is concrete: latency over 15 minutes pages the on-call engineer. A job that
    /// is skipped, stuck behind a lock or retrying for an hour logs no failure at all;
    /// only a latency threshold notices it. The audit also uses `max_latency` as the
    /// grace before a slot counts as missed (AU101) and to report latency breaches (AU106).
    ///
    /// ## Example
    /// ```yaml
    /// alerts:
    ///   channel: "#billing-oncall"
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// alerts:
    ///   max_latency: 15m
    ///   channel: "#billing-oncall"
    /// ```
    pub struct MissingLatencyAlert {
        code: "BG502",
        name: "missing-latency-alert",
        severity: Warning,
        scope: Job,
        summary: "no `alerts.max_latency`",
        help: "add `alerts.max_latency:` (the article's team pages at 15m)",
    }
}

impl Rule for MissingLatencyAlert {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let span = match cx.job.alerts.value() {
            None if cx.job.alerts.is_absent() => cx.job.span,
            Some(alerts) if alerts.max_latency.is_absent() => alerts.span,
            _ => return,
        };
        let help = match cx.job.expected_duration.value().filter(|d| d.secs() > 0) {
            Some(expected) => format!(
                "add `alerts.max_latency:` above the expected {expected} run time plus its retries (the article's team pages at 15m)"
            ),
            None => Self::META.help.to_owned(),
        };
        out.emit_with_help(
            span,
            format!(
                "job `{}` has no alerts.max_latency: a slot that is late, stuck or silently skipped pages nobody",
                cx.job_name()
            ),
            help,
        );
    }
}
