use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a `# batchguard: allow CODE` comment with no `-- reason`. Such a comment
    /// suppresses nothing.
    ///
    /// ## Why it matters
    /// A suppression is a decision to accept a risk, such as a job without a lock. Months
    /// later, during an incident, the reason is what tells the on-call engineer whether the
    /// decision still holds. A suppression without one is a silenced alarm.
    ///
    /// ## Example
    /// ```yaml
    /// # batchguard: allow BG201
    /// - name: warm-cache
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// # batchguard: allow BG201 -- read-only cache warm-up; running twice is harmless
    /// - name: warm-cache
    /// ```
    pub struct SuppressionWithoutReason {
        code: "BG901",
        name: "suppression-without-reason",
        severity: Warning,
        scope: File,
        summary: "a `batchguard: allow` comment has no reason; it suppresses nothing",
        help: "add ` -- <reason>` after the codes",
    }
}

impl Rule for SuppressionWithoutReason {}
