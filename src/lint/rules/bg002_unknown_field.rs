use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a key that is not part of the manifest format, with the closest known key
    /// as a "did you mean".
    ///
    /// ## Why it matters
    /// A misspelt key is silently ignored by most YAML readers: `lock: {tll: 25m}` looks like
    /// a lock with a TTL, but the TTL is not there, and the guard that was meant to stop a
    /// second instance from running the same slot is weaker than everyone believes.
    ///
    /// ## Example
    /// ```yaml
    /// retry:
    ///   max_attempt: 3
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// retry:
    ///   max_attempts: 3
    /// ```
    pub struct UnknownField {
        code: "BG002",
        name: "unknown-field",
        severity: Error,
        scope: File,
        summary: "a key is not part of the format (suggest the closest)",
        help: "use one of the fields of the manifest format (`batchguard schema manifest`)",
    }
}

impl Rule for UnknownField {}
