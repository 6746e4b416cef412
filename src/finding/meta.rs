//! What `batchguard rules`, `explain`, SARIF and the README say about a rule or a check.

use super::Severity;

/// A rule's or a check's identity and documentation, declared once with its logic
/// (`declare_rule!`, `declare_check!`).
#[derive(Debug)]
pub struct RuleMeta {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// One line: when the rule fires.
    pub summary: &'static str,
    /// How to fix it, when the finding's own help line has nothing more specific.
    pub help: &'static str,
    /// Markdown: what it does, why it matters, a bad and a fixed example.
    pub docs: &'static str,
}

impl RuleMeta {
    /// The documentation as Markdown: doc-comment lines arrive with the space after `///`.
    pub fn doc_text(&self) -> String {
        let mut out = String::with_capacity(self.docs.len());
        for line in self.docs.lines() {
            out.push_str(line.strip_prefix(' ').unwrap_or(line));
            out.push('\n');
        }
        out
    }

    /// True for this rule's code (any case) or name.
    pub fn is(&self, code_or_name: &str) -> bool {
        self.code.eq_ignore_ascii_case(code_or_name) || self.name == code_or_name
    }
}

/// Something declared with its metadata: a lint rule's struct (`declare_rule!` implements
/// it), so that a rule file holds no glue beyond its logic.
pub trait Declared {
    fn meta(&self) -> &'static RuleMeta;
}
