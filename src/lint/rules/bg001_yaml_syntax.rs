use crate::declare_rule;
use crate::lint::rule::Rule;

declare_rule! {
    /// ## What it does
    /// Reports a manifest that is not valid YAML: bad indentation, tabs used for indentation,
    /// an unclosed quote or bracket, binary content, text that is not UTF-8.
    ///
    /// ## Why it matters
    /// A manifest that cannot be read declares nothing: its jobs escape every other check,
    /// including the duplicate-registration check that exists because of the incident behind
    /// this tool (a job that ran twice after a deploy and billed customers twice). It is a
    /// finding, not a crash: the position is shown and every other file is still linted.
    ///
    /// ## Example
    /// ```yaml
    /// jobs:
    ///   - name: settle-payments
    ///     schedule: "0 * * * *
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// jobs:
    ///   - name: settle-payments
    ///     schedule: "0 * * * *"
    /// ```
    pub struct YamlSyntax {
        code: "BG001",
        name: "yaml-syntax",
        severity: Error,
        scope: File,
        summary: "the file is not valid YAML (binary and invalid UTF-8 included)",
        help: "fix the YAML syntax at the marked position",
    }
}

impl Rule for YamlSyntax {}
