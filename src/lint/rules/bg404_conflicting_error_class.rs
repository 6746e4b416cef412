use crate::declare_rule;
use crate::lint::JobCx;
use crate::lint::rule::{Emitter, Rule, RuleMeta};
use crate::manifest::yaml::Span;

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
        summary: "an error code is both retryable and fatal",
        help: "keep the code in one list: `retryable` if a later attempt can succeed, `fatal` if the input is bad",
    }
}

/// Codes of `retryable` that are also in `fatal`, each once, in `retryable` order.
pub fn conflicts<'a>(retryable: &'a [String], fatal: &[String]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for code in retryable {
        if fatal.contains(code) && !out.contains(&code.as_str()) {
            out.push(code);
        }
    }
    out
}

/// Where `item` is written in a list that starts at `list_start`: the first occurrence
/// after the start that is a whole token (list items carry no span of their own).
pub fn item_span(text: &str, list_start: usize, item: &str) -> Option<Span> {
    let part = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/');
    let rest = text.get(list_start..)?;
    let mut from = 0;
    while let Some(i) = rest[from..].find(item) {
        let at = from + i;
        let end = at + item.len();
        let before = rest[..at].chars().next_back();
        let after = rest[end..].chars().next();
        if !before.is_some_and(part) && !after.is_some_and(part) {
            return Some(Span::new(list_start + at, item.len()));
        }
        from = end;
    }
    None
}

impl Rule for ConflictingErrorClass {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_job(&self, cx: &JobCx, out: &mut Emitter) {
        let Some(retry) = cx.job.retry.value() else {
            return;
        };
        let (Some(retryable), Some(fatal)) = (retry.retryable.get(), retry.fatal.get()) else {
            return;
        };
        for code in conflicts(&retryable.value, &fatal.value) {
            let primary = item_span(cx.text, retryable.span.start, code).unwrap_or(retryable.span);
            let other = item_span(cx.text, fatal.span.start, code).unwrap_or(fatal.span);
            out.emit_full(
                primary,
                format!(
                    "job `{}`: error code `{code}` is both retryable and fatal",
                    cx.job_name()
                ),
                format!(
                    "keep `{code}` in one list: `retryable` if a later attempt can succeed, `fatal` if the input itself is bad"
                ),
                vec![(other, "also listed as fatal here".to_owned())],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{conflicts, item_span};
    use crate::lint::rules::testing::findings;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn finds_each_conflict_once() {
        let r = s(&["ETIMEDOUT", "HTTP_409", "HTTP_409", "HTTP_503"]);
        let f = s(&["HTTP_503", "VALIDATION_ERROR", "HTTP_409"]);
        assert_eq!(conflicts(&r, &f), ["HTTP_409", "HTTP_503"]);
        assert!(conflicts(&r, &s(&["etimedout"])).is_empty());
        assert!(conflicts(&[], &f).is_empty());
    }

    #[test]
    fn locates_whole_tokens() {
        let text = "retryable: [HTTP_5030, \"HTTP_503\"]\n";
        let sp = item_span(text, 11, "HTTP_503").unwrap();
        assert_eq!(&text[sp.start..sp.end()], "HTTP_503");
        assert_eq!(sp.start, 24);
        assert!(item_span(text, 11, "HTTP_50").is_none());
        assert!(item_span(text, 999, "HTTP_503").is_none());
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
