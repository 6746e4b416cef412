use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::model::Field;

declare_rule! {
    /// ## What it does
    /// Reports a job without a dead letter: no `dead_letter` section, or one without a
    /// `target` (absent or empty).
    ///
    /// ## Why it matters
    /// The source article's run procedure ends every failure in one of two places: a
    /// retry queue or a dead-letter queue. An input that failed fatally (bad data) or ran
    /// out of attempts must be quarantined somewhere a person will look at it; otherwise
    /// it is simply dropped, and a dropped input is the "did not do the work at all" half
    /// of the problem this tool exists for, found weeks later by a customer. The dead
    /// letter is also what the audit counts as `dead_lettered`, the daily "missing count"
    /// that the article wants decided the same day.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    ///   fatal: [VALIDATION_ERROR]
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    ///   fatal: [VALIDATION_ERROR]
    /// dead_letter:
    ///   target: settle-payments-dlq
    /// ```
    pub struct MissingDeadLetter {
        code: "BG405",
        name: "missing-dead-letter",
        severity: Error,
        scope: Job,
        summary: "failures that are fatal or out of attempts have nowhere to go",
        help: "add `dead_letter:` with the `target` queue, table or topic where failed inputs are quarantined",
    }
}

impl Rule for MissingDeadLetter {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let name = cx.job_name();
        let attempts = cx
            .job
            .retry
            .value()
            .and_then(|r| r.bounded_attempts())
            .map_or("its attempts".to_owned(), |n| {
                if n == 1 {
                    "its one attempt".to_owned()
                } else {
                    format!("its {n} attempts")
                }
            });
        let consequence =
            format!("an input that fails fatally or runs out of {attempts} is dropped");
        let span = match &cx.job.dead_letter {
            Field::Absent => {
                out.emit(
                    cx.job.span,
                    format!("job `{name}` has no dead letter: {consequence}"),
                );
                return;
            }
            Field::Invalid => return,
            Field::Ok(section) => match &section.value.target {
                Field::Absent => section.span,
                Field::Ok(t) if t.value.trim().is_empty() => t.span,
                _ => return,
            },
        };
        out.emit_with_help(
            span,
            format!("job `{name}`: dead_letter has no `target`: {consequence}"),
            "add `target:` naming the queue, table or topic where failed inputs are quarantined",
        );
    }
}
