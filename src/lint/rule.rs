//! What a rule is: metadata and documentation in one place, and the logic next to it.

use super::{FileCx, JobCx};
use crate::finding::{Finding, Location, Related, Severity};
use crate::text::Span;

/// Everything `batchguard rules`, `explain`, SARIF and the README say about a rule.
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
}

pub trait Rule: Sync {
    fn meta(&self) -> &'static RuleMeta;
    /// Looks at one job (defaults merged in).
    fn check_job(&self, _cx: &JobCx, _out: &mut Emitter) {}
    /// Looks at the whole file as written (every YAML value).
    fn check_file(&self, _cx: &FileCx, _out: &mut Emitter) {}
    /// Looks at one registration (Kubernetes CronJob, PM2 app, crontab line) in its file.
    fn check_registration(&self, _cx: &super::cross::RegCx, _out: &mut Emitter) {}
    /// Looks at every manifest job and registration of the run together (SPEC 3.5).
    fn check_project(&self, _cx: &super::cross::Analysis, _out: &mut super::cross::CrossEmitter) {}
}

/// Declares a rule's struct and metadata; the doc comment is the rule's documentation.
#[macro_export]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident {
            code: $code:literal,
            name: $kebab:literal,
            severity: $sev:ident,
            summary: $summary:literal,
            help: $help:literal $(,)?
        }
    ) => {
        pub struct $name;
        impl $name {
            pub const META: $crate::lint::rule::RuleMeta = $crate::lint::rule::RuleMeta {
                code: $code,
                name: $kebab,
                severity: $crate::finding::Severity::$sev,
                summary: $summary,
                help: $help,
                docs: concat!($($doc, "\n"),*),
            };
        }
    };
}

/// Collects one rule's findings for one job, filling in what every finding shares.
pub struct Emitter<'a> {
    pub(crate) meta: &'static RuleMeta,
    pub(crate) file: usize,
    pub(crate) service: &'a str,
    pub(crate) job: Option<&'a str>,
    pub(crate) job_line: Option<usize>,
    pub(crate) out: &'a mut Vec<Finding>,
}

impl Emitter<'_> {
    pub fn emit(&mut self, span: Span, message: impl Into<String>) {
        let help = self.meta.help.to_owned();
        self.emit_with_help(span, message, help);
    }

    pub fn emit_with_help(
        &mut self,
        span: Span,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.emit_full(span, message.into(), help.into(), Vec::new());
    }

    pub fn emit_full(
        &mut self,
        span: Span,
        message: String,
        help: String,
        related: Vec<(Span, String)>,
    ) {
        let file = self.file;
        self.out.push(Finding {
            code: self.meta.code,
            name: self.meta.name,
            severity: self.meta.severity,
            message,
            help,
            at: Location { file, span },
            service: Some(self.service.to_owned()),
            job: self.job.map(str::to_owned),
            related: related
                .into_iter()
                .map(|(span, message)| Related {
                    at: Location { file, span },
                    message,
                })
                .collect(),
            job_line: self.job_line,
            suppressed: None,
        });
    }
}
