use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a `# batchguard: allow CODE -- reason` comment that suppresses nothing: the
    /// rule does not fire there (any more), or the code is not a rule at all.
    ///
    /// ## Why it matters
    /// Stale suppressions accumulate and, worse, wait: when someone later introduces the
    /// very problem the comment was written for, it is silenced without anyone deciding so.
    ///
    /// ## Example
    /// ```yaml
    /// lock:
    ///   ttl: 25m # batchguard: allow BG202 -- slow on month end
    /// ```
    /// (with `expected_duration: 10m`, BG202 does not fire here)
    ///
    /// Use instead: delete the comment.
    pub struct UnusedSuppression {
        code: "BG902",
        name: "unused-suppression",
        severity: Warning,
        scope: File,
        summary: "a `batchguard: allow` comment with a reason suppresses nothing",
        help: "remove the suppression",
    }
}

impl Rule for UnusedSuppression {}
