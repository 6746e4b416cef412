//! The one finding type that lint rules (and later audit checks) produce and reports print.

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
