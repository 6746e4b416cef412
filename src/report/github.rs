//! `--format github`: workflow commands that GitHub Actions turns into annotations.

use super::position;
use crate::finding::Severity;
use crate::lint::LintRun;
use std::fmt::Write;

/// GitHub's escaping for workflow command data and properties.
fn escape(s: &str, property: bool) -> String {
    let mut out = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

pub fn render(run: &LintRun) -> String {
    let mut out = String::new();
    for f in &super::masked_findings(&run.files, &run.findings, false) {
        let p = position(&run.files, f);
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let file = run.files.get(f.at.file).map_or("", |s| s.display.as_str());
        let _ = writeln!(
            out,
            "::{level} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            escape(file, true),
            p.line,
            p.column,
            p.end_line,
            p.end_column,
            escape(&format!("{} {}", f.code, f.name), true),
            escape(&format!("{} ({})", f.message, f.help), false),
        );
    }
    out
}
