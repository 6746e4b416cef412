use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule};
use crate::text::Spanned;

declare_rule! {
    /// ## What it does
    /// Reports an error code listed both in `retry.retryable` and in `retry.fatal`, once
    /// per code, pointing at its `retryable` entry with the `fatal` one as related.
    /// Codes are compared exactly, as the runner classifies them.
    ///
    /// ## Why it matters
    /// The article's third criterion is classified failures: a transient failure (an
    /// external API timeout) is retried, a failure that must be quarantined at once (bad
    /// input data) goes to the dead letter, because retrying it makes the incident bigger:
    /// the bad record is applied partially again and again, and every attempt can have
    /// side effects. A code in both lists has no class: which one wins depends on the
    /// runner's implementation, and the audit cannot tell a correct retry (AU109) from a
    /// fatal error that was retried (AU110).
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   retryable: [ETIMEDOUT, HTTP_409]
    ///   fatal: [VALIDATION_ERROR, HTTP_409]
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   retryable: [ETIMEDOUT]
    ///   fatal: [VALIDATION_ERROR, HTTP_409]
    /// ```
    pub struct ConflictingErrorClass {
        code: "BG404",
        name: "conflicting-error-class",
        severity: Error,
        scope: Job,
        summary: "an error code is both retryable and fatal",
        help: "keep the code in one list: `retryable` if a later attempt can succeed, `fatal` if the input is bad",
    }
}

/// Codes of `retryable` that are also in `fatal`, each once, in `retryable` order.
/// Each code listed in both lists, once, with its first place in each (in `retryable` order).
pub fn conflicts<'a>(
    retryable: &'a [Spanned<String>],
    fatal: &'a [Spanned<String>],
) -> Vec<(&'a Spanned<String>, &'a Spanned<String>)> {
    let mut out: Vec<(&Spanned<String>, &Spanned<String>)> = Vec::new();
    for code in retryable {
        if out.iter().any(|(r, _)| r.value == code.value) {
            continue;
        }
        if let Some(f) = fatal.iter().find(|f| f.value == code.value) {
            out.push((code, f));
        }
    }
    out
}

impl Rule for ConflictingErrorClass {
    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let (Some(retryable), Some(fatal)) = (retry.retryable.get(), retry.fatal.get()) else {
            return;
        };
        for (r, f) in conflicts(&retryable.value, &fatal.value) {
            let code = &r.value;
            out.emit_full(
                r.span,
                format!(
                    "job `{}`: error code `{code}` is both retryable and fatal",
                    cx.job_name()
                ),
                format!(
                    "keep `{code}` in one list: `retryable` if a later attempt can succeed, `fatal` if the input itself is bad"
                ),
                vec![(f.span, "also listed as fatal here".to_owned())],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::conflicts;
    use crate::lint::rules::testing::findings;
    use crate::text::Span;
    use crate::text::Spanned;

    fn s(v: &[&str]) -> Vec<Spanned<String>> {
        v.iter()
            .enumerate()
            .map(|(i, x)| Spanned {
                value: (*x).to_owned(),
                span: Span::new(i, 1),
            })
            .collect()
    }

    #[test]
    fn finds_each_conflict_once() {
        let r = s(&["ETIMEDOUT", "HTTP_409", "HTTP_409", "HTTP_503"]);
        let f = s(&["HTTP_503", "VALIDATION_ERROR", "HTTP_409"]);
        let found: Vec<_> = conflicts(&r, &f)
            .iter()
            .map(|(r, f)| (r.value.as_str(), r.span.start, f.span.start))
            .collect();
        assert_eq!(found, [("HTTP_409", 1, 2), ("HTTP_503", 3, 0)]);
        assert!(conflicts(&r, &s(&["etimedout"])).is_empty());
        assert!(conflicts(&[], &f).is_empty());
    }

    #[test]
    fn points_at_the_entry_even_when_a_longer_code_comes_first() {
        let yaml = "version: 1\nservice: s\njobs:\n  - name: a\n    retry:\n      max_attempts: 3\n      retryable: [HTTP_5030, \"HTTP_503\"]\n      fatal: [HTTP_503]\n";
        let f = findings(yaml, "BG404");
        assert_eq!(f.len(), 1);
        let start = f[0].at.span.start;
        assert_eq!(&yaml[start..start + 10], "\"HTTP_503\"");
    }

    #[test]
    fn reports_with_related_fatal_entry() {
        let yaml = "version: 1\nservice: s\njobs:\n  - name: a\n    retry:\n      max_attempts: 3\n      retryable: [ETIMEDOUT, HTTP_409]\n      fatal:\n        - VALIDATION_ERROR\n        - HTTP_409\n";
        let f = findings(yaml, "BG404");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("`HTTP_409`"));
        let start = f[0].at.span.start;
        assert_eq!(&yaml[start..start + 8], "HTTP_409");
        assert!(start < yaml.find("fatal").unwrap());
        let rel = f[0].related[0].at.span.start;
        assert!(rel > yaml.find("VALIDATION_ERROR").unwrap());
        assert_eq!(&yaml[rel..rel + 8], "HTTP_409");
    }
}
