//! Reports print findings; they never decide what is a finding.

pub mod audit_csv;
pub mod audit_html;
pub mod audit_json;
pub mod audit_markdown;
pub mod audit_pretty;
pub mod drill;
pub mod github;
pub mod json;
pub mod openmetrics;
pub mod pretty;
pub mod rules;
pub mod sarif;
pub mod watch_json;
pub mod watch_table;

use crate::finding::Finding;
use crate::text::{Secrets, SourceFile};

/// A run's findings as reports may print them: unsuppressed only when `all` is false, and
/// every literal masked in any file (BG801) replaced in every text, whichever rule wrote
/// it (SPEC 9: secrets never appear in output).
pub fn masked_findings(files: &[SourceFile], findings: &[Finding], all: bool) -> Vec<Finding> {
    let secrets = Secrets::new(files);
    findings
        .iter()
        .filter(|f| all || f.suppressed.is_none())
        .map(|f| {
            let mut f = f.clone();
            f.message = secrets.redact(&f.message);
            f.help = secrets.redact(&f.help);
            f.job = f.job.map(|j| secrets.redact(&j));
            f.suppressed = f.suppressed.map(|s| secrets.redact(&s));
            for r in &mut f.related {
                r.message = secrets.redact(&r.message);
            }
            f
        })
        .collect()
}

/// Line and column (1-based, characters) of a finding's start and end.
pub struct Position {
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
}

pub fn position(files: &[SourceFile], f: &Finding) -> Position {
    position_of(files, f.at.file, f.at.span)
}

pub fn position_of(files: &[SourceFile], file: usize, span: crate::text::Span) -> Position {
    let Some(src) = files.get(file) else {
        return Position {
            line: 1,
            column: 1,
            end_line: 1,
            end_column: 1,
        };
    };
    // Never the secret's length: a masked literal's span is its start only.
    let span = src.public_span(span);
    let (line, column) = src.line_col(span.start);
    let (end_line, end_column) = src.line_col(span.end());
    Position {
        line,
        column,
        end_line,
        end_column: if (end_line, end_column) == (line, column) {
            column + 1
        } else {
            end_column
        },
    }
}
