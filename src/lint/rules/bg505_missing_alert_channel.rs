use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::Field;

declare_rule! {
    /// ## What it does
    /// Reports a job without `alerts.channel` (absent or empty): where its alerts go.
    /// Set it once under `defaults.alerts` to cover every job of the service.
    ///
    /// ## Why it matters
    /// An alert that goes nowhere is not an alert. The source article's team rules are
    /// about people acting on signals: latency over 15 minutes pages the on-call engineer,
    /// a non-zero missing count means a same-day decision on manual correction. Both need
    /// a channel that the right people watch; without one, the latency threshold and the
    /// audit's findings end up in a log nobody reads until a customer calls.
    ///
    /// ## Example
    /// ```yaml
    /// alerts:
    ///   max_latency: 15m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// alerts:
    ///   max_latency: 15m
    ///   channel: "#billing-oncall"
    /// ```
    pub struct MissingAlertChannel {
        code: "BG505",
        name: "missing-alert-channel",
        severity: Warning,
        scope: Job,
        summary: "no `alerts.channel`",
        help: "add `alerts.channel:` (a pager service or a channel the on-call engineer watches)",
    }
}

impl Rule for MissingAlertChannel {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let span = match &cx.job.alerts {
            Field::Absent => cx.job.span,
            Field::Invalid => return,
            Field::Ok(alerts) => match &alerts.value.channel {
                Field::Absent => alerts.span,
                Field::Ok(c) if c.value.trim().is_empty() => c.span,
                _ => return,
            },
        };
        let help = match cx.job.runbook.value().and_then(|r| r.on_call.value()) {
            Some(on_call) if !on_call.trim().is_empty() && on_call.starts_with('#') => {
                format!("add `alerts.channel: \"{on_call}\"` (the runbook's on_call)")
            }
            _ => Self::META.help.to_owned(),
        };
        out.emit_with_help(
            span,
            format!(
                "job `{}` has no alerts.channel: its latency and missed-run alerts reach nobody",
                cx.job_name()
            ),
            help,
        );
    }
}
