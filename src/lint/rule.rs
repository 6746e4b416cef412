//! What a rule is: metadata and documentation in one place, and the logic next to it.

use super::{FileCx, JobCx, ScheduleCx};
use crate::finding::{Declared, Finding, Location, RuleMeta};
use crate::text::Span;

/// A lint rule: its metadata comes from `declare_rule!` ([`Declared`]), its logic from
/// the hooks it implements.
pub trait Rule: Declared + Sync {
    /// Looks at one job (defaults merged in).
    fn check_job(&self, _cx: &JobCx, _out: &mut Emitter) {}
    /// Looks at one schedule, a manifest job's or a registration's
    /// ([`Scope::Schedule`](crate::finding::Scope) rules).
    fn check_schedule(&self, _cx: &ScheduleCx, _out: &mut Emitter) {}
    /// Looks at the whole file as written (every YAML value).
    fn check_file(&self, _cx: &FileCx, _out: &mut Emitter) {}
    /// Looks at one registration (Kubernetes CronJob, PM2 app, crontab line) in its file.
    fn check_registration(&self, _cx: &super::registrations::RegCx, _out: &mut Emitter) {}
    /// Looks at every manifest job and registration of the run together (SPEC 3.5).
    fn check_project(&self, _cx: &crate::project::Analysis, _out: &mut super::cross::CrossEmitter) {
    }
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
        let finding = Finding::new(self.meta, Location { file, span }, message)
            .help(help)
            .subject(
                Some(self.service.to_owned()),
                self.job.map(str::to_owned),
                self.job_line,
            )
            .related(
                related
                    .into_iter()
                    .map(|(span, message)| (Location { file, span }, message)),
            );
        self.out.push(finding);
    }
}
