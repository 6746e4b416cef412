//! `--format pretty`: miette's graphical report, the value underlined, help and code shown.

use super::plural;
use crate::finding::{Finding, Severity};
use crate::lint::LintRun;
use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
};
use std::fmt;
use std::sync::Arc;

struct Shown<'a> {
    finding: &'a Finding,
    src: Arc<NamedSource<String>>,
}

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.finding.message)
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.finding.message)
    }
}

impl std::error::Error for Shown<'_> {}

impl Diagnostic for Shown<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(format!(
            "{} {}",
            self.finding.code, self.finding.name
        )))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.finding.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }
    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(&self.finding.help))
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&*self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let f = self.finding;
        let primary = LabeledSpan::new_primary_with_span(None, (f.at.span.start, f.at.span.len));
        let related = f
            .related
            .iter()
            .filter(|r| r.at.file == f.at.file)
            .map(|r| {
                LabeledSpan::new_with_span(
                    Some(r.message.clone()),
                    (r.at.span.start, r.at.span.len),
                )
            });
        Some(Box::new(std::iter::once(primary).chain(related)))
    }
}

pub fn render(run: &LintRun, color: bool) -> String {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_links(false)
        .with_width(100);
    let sources: Vec<Arc<NamedSource<String>>> = run
        .files
        .iter()
        .map(|f| {
            Arc::new(NamedSource::new(&f.display, f.shown_text().to_owned()).with_language("yaml"))
        })
        .collect();
    let mut out = String::new();
    for f in &super::masked_findings(&run.files, &run.findings, false) {
        let Some(src) = sources.get(f.at.file) else {
            continue;
        };
        let shown = Shown {
            finding: f,
            src: src.clone(),
        };
        if handler.render_report(&mut out, &shown).is_err() {
            out.push_str(&format!("{}: {} {}\n", f.code, f.message, f.help));
        }
        // Related places in other files, one line each.
        for r in f.related.iter().filter(|r| r.at.file != f.at.file) {
            if let Some(other) = run.files.get(r.at.file) {
                let (l, c) = other.line_col(r.at.span.start);
                out.push_str(&format!(
                    "  also: {}:{l}:{c}: {}\n",
                    other.display, r.message
                ));
            }
        }
        out.push('\n');
    }
    out.push_str(&summary(run));
    out
}

pub fn summary(run: &LintRun) -> String {
    let mut s = format!(
        "{}, {}: {}, {}",
        plural(run.files.len(), "file"),
        plural(run.jobs, "job"),
        plural(run.count(Severity::Error), "error"),
        plural(run.count(Severity::Warning), "warning"),
    );
    if run.suppressed() > 0 {
        s.push_str(&format!(" ({} suppressed)", run.suppressed()));
    }
    s.push('\n');
    s
}
