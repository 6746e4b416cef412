//! What `batchguard rules`, `explain`, SARIF and docs/rules.md say about a rule or a check.

use super::Severity;

/// What a rule looks at. It decides where the rule runs (a schedule rule on manifest jobs
/// and on registrations alike) and when its findings are known (a project rule's only
/// after every file is read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One file as written: its YAML values, or what its reader reports.
    File,
    /// One manifest job, with its defaults merged in.
    Job,
    /// A schedule and its zone: a manifest job's, or a registration's.
    Schedule,
    /// One registration (Kubernetes CronJob, PM2 app, crontab line) in its file.
    Registration,
    /// Every manifest job and registration of the run together (SPEC 3.5).
    Project,
    /// The ledger's rows: an audit check.
    Ledger,
}

/// A rule's or a check's identity and documentation, declared once with its logic
/// (`declare_rule!`, `declare_check!`).
#[derive(Debug)]
pub struct RuleMeta {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    /// What the rule looks at, and so when its findings exist.
    pub scope: Scope,
    /// Its findings point at values no report may print (BG801): their spans are masked in
    /// every snippet.
    pub masks: bool,
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
