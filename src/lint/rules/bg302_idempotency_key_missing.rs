use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};

declare_rule! {
    /// ## What it does
    /// Reports an idempotency `strategy` declared without the `key` it guards (absent or
    /// empty). When the strategy itself is missing, BG301 reports the section instead.
    ///
    /// ## Why it matters
    /// A strategy is a condition on a record: "apply this payment unless its
    /// `processed_at` is set", "insert unless this `invoice_id` exists". Without the key
    /// nobody can say which record the condition is on, so nobody can check it, and the
    /// audit cannot tell a duplicate output (the double billing of the source incident)
    /// from two different ones. The key is also what a replay uses to prove that every
    /// input record was applied exactly once.
    ///
    /// ## Example
    /// ```yaml
    /// idempotency:
    ///   strategy: unique_key
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// idempotency:
    ///   strategy: unique_key
    ///   key: invoice_id
    /// ```
    pub struct IdempotencyKeyMissing {
        code: "BG302",
        name: "idempotency-key-missing",
        severity: Error,
        scope: Job,
        summary: "an idempotency strategy without the `key` it guards",
        help: "add `key:` naming the field that identifies one input record",
    }
}

impl Rule for IdempotencyKeyMissing {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(section) = cx.job.idempotency.value() else {
            return;
        };
        if section.strategy.is_absent() {
            return;
        }
        let strategy = section
            .strategy
            .value()
            .map_or("the strategy", |s| s.as_str());
        let name = cx.job_name();
        let span = match &section.key {
            crate::manifest::model::Field::Absent => section.span,
            crate::manifest::model::Field::Ok(k) if k.value.trim().is_empty() => k.span,
            _ => return,
        };
        let help = match cx.job.outputs.value().and_then(|o| o.key.value()) {
            Some(k) if !k.trim().is_empty() => {
                format!(
                    "add `key: {k}` (the field outputs.key already names), or the field that identifies one input record"
                )
            }
            _ => Self::META.help.to_owned(),
        };
        out.emit_with_help(
            span,
            format!(
                "job `{name}`: idempotency strategy `{strategy}` has no `key`, so nothing says which record it guards"
            ),
            help,
        );
    }
}
