//! Leaf: what an analysis says. [`Severity`], [`RuleMeta`] and the `declare_rule!` /
//! `declare_check!` macros that make one, the [`Finding`] a lint rule produces, and the
//! one [`Registry`] of every rule and check (`rules`, `explain`, SARIF's rule table, the
//! docs/rules.md list and `[rules]` keys all read it). Imports nothing of the crate but
//! [`crate::text`].

mod declare;
mod meta;
mod registry;

pub use meta::{Declared, RuleMeta, Scope};
pub use registry::Registry;

use crate::text::Span;
use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// Where a finding points: an index into the run's files and a byte span in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    pub file: usize,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Related {
    pub at: Location,
    pub message: String,
}

#[derive(Clone, Debug)]
pub struct Finding {
    /// The rule that made it: its scope and whether it masks are read from here.
    pub rule: &'static RuleMeta,
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    pub help: String,
    pub at: Location,
    pub service: Option<String>,
    pub job: Option<String>,
    pub related: Vec<Related>,
    /// Line (1-based) of the job's `- name:` item, where a job-wide suppression sits above.
    pub job_line: Option<usize>,
    /// The reason of the `batchguard: allow` comment that suppressed it.
    pub suppressed: Option<String>,
}

impl Finding {
    /// A finding of `meta` at `at`, with the rule's own help line; the builder methods
    /// below add what a rule knows beyond that.
    pub fn new(meta: &'static RuleMeta, at: Location, message: impl Into<String>) -> Self {
        Finding {
            rule: meta,
            code: meta.code,
            name: meta.name,
            severity: meta.severity,
            message: message.into(),
            help: meta.help.to_owned(),
            at,
            service: None,
            job: None,
            related: Vec::new(),
            job_line: None,
            suppressed: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = help.into();
        self
    }

    /// The service and job it is reported under, and the line of the job's item.
    pub fn subject(
        mut self,
        service: Option<String>,
        job: Option<String>,
        job_line: Option<usize>,
    ) -> Self {
        self.service = service;
        self.job = job;
        self.job_line = job_line;
        self
    }

    pub fn related(mut self, related: impl IntoIterator<Item = (Location, String)>) -> Self {
        self.related = related
            .into_iter()
            .map(|(at, message)| Related { at, message })
            .collect();
        self
    }
}
