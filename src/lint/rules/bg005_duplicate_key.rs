use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a mapping that repeats a key; the first occurrence is labelled too.
    ///
    /// ## Why it matters
    /// YAML says keys are unique, but many readers quietly keep the last value and others
    /// the first. A manifest with two `ttl:` lines means different things to different
    /// tools, and the reviewer sees the one that does not apply.
    ///
    /// ## Example
    /// ```yaml
    /// lock:
    ///   ttl: 25m
    ///   key: "{job}:{scheduled_at}"
    ///   ttl: 5m
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// lock:
    ///   ttl: 25m
    ///   key: "{job}:{scheduled_at}"
    /// ```
    pub struct DuplicateKey {
        code: "BG005",
        name: "duplicate-key",
        severity: Error,
        scope: File,
        summary: "a mapping repeats a key",
        help: "keep one of the two",
    }
}

impl Rule for DuplicateKey {}
