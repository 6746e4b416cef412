//! `--format pretty`: miette's graphical report, the value underlined, help and code shown.
//!
//! miette's own `SourceCode` for a string walks the text from its first byte to find a
//! span's lines, so a file with many findings cost time proportional to findings x file
//! size (15 s for 900 findings in 2 MB). [`Indexed`] answers each span from a line index
//! and hands miette only the lines around it, which keeps rendering linear in the findings.

use crate::finding::{Finding, Severity};
use crate::lint::{FileKind, LintRun};
use crate::sources::SourceKind;
use crate::text::plural;
use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError,
    MietteSpanContents, SourceCode, SourceSpan, SpanContents,
};
use std::fmt;

/// A file's shown text with the byte offset of every line start.
struct Indexed<'a> {
    name: &'a str,
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Indexed<'a> {
    fn new(name: &'a str, text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Indexed { name, text, starts }
    }

    /// 0-based line holding byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }
}

impl SourceCode for Indexed<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let start = span.offset();
        let last = start + span.len().saturating_sub(1);
        if start > self.text.len() {
            return Err(MietteError::OutOfBounds);
        }
        // The window: one line more than miette looks at on each side (an empty span at a
        // line start ends on the line above), so its scan of the window stops exactly where
        // its scan of the whole text would.
        let first_line = self.line_of(start).saturating_sub(before + 1);
        let end_line = self.line_of(last.min(self.text.len())) + after + 2;
        let from = self.starts[first_line];
        let to = self
            .starts
            .get(end_line)
            .copied()
            .unwrap_or(self.text.len());
        let window = &self.text.as_bytes()[from..to];
        let inner =
            window.read_span(&SourceSpan::from((start - from, span.len())), before, after)?;
        let contents = MietteSpanContents::new_named(
            self.name.to_owned(),
            inner.data(),
            SourceSpan::from((inner.span().offset() + from, inner.span().len())),
            inner.line() + first_line,
            inner.column(),
            inner.line_count() + first_line,
        )
        .with_language("yaml");
        Ok(Box::new(contents))
    }
}

struct Shown<'a> {
    finding: &'a Finding,
    src: &'a Indexed<'a>,
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
        Some(self.src)
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
    let sources: Vec<Indexed> = run
        .files
        .iter()
        .map(|f| Indexed::new(&f.display, f.shown_text()))
        .collect();
    let mut out = String::new();
    for f in &super::masked_findings(&run.files, &run.findings, false) {
        let (Some(src), Some(file)) = (sources.get(f.at.file), run.files.get(f.at.file)) else {
            continue;
        };
        // Spans into the shown text, where each secret is a mask of one width.
        let mut at_shown = f.clone();
        at_shown.at.span = file.shown_span(f.at.span);
        for r in at_shown
            .related
            .iter_mut()
            .filter(|r| r.at.file == f.at.file)
        {
            r.at.span = file.shown_span(r.at.span);
        }
        let shown = Shown {
            finding: &at_shown,
            src,
        };
        if handler.render_report(&mut out, &shown).is_err() {
            out.push_str(&format!("{}: {} {}\n", f.code, f.message, f.help));
        }
        // Related places in other files, one line each.
        for r in f.related.iter().filter(|r| r.at.file != f.at.file) {
            if let Some(other) = run.files.get(r.at.file) {
                let (l, c) = other.line_col(other.public_span(r.at.span).start);
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

/// The summary line. Runs that read only manifests keep the short form; with registration
/// sources it names the files by kind and counts the registrations, as the JSON summary does.
pub fn summary(run: &LintRun) -> String {
    let sources = [
        FileKind::Source(SourceKind::Kubernetes),
        FileKind::Source(SourceKind::Pm2),
        FileKind::Source(SourceKind::Crontab),
        FileKind::Source(SourceKind::Code),
    ];
    let mut files = plural(run.files.len(), "file");
    if sources.iter().any(|k| run.files_of(*k) > 0) {
        let by_kind: Vec<String> = std::iter::once(FileKind::Manifest)
            .chain(sources)
            .filter(|k| run.files_of(*k) > 0)
            .map(|k| format!("{} {}", run.files_of(k), k.as_str()))
            .collect();
        files.push_str(&format!(" ({})", by_kind.join(", ")));
    }
    let mut s = format!("{files}, {}", plural(run.jobs, "job"));
    if run.registrations > 0 {
        s.push_str(&format!(", {}", plural(run.registrations, "registration")));
    }
    s.push_str(&format!(
        ": {}, {}",
        plural(run.count(Severity::Error), "error"),
        plural(run.count(Severity::Warning), "warning"),
    ));
    if run.suppressed() > 0 {
        s.push_str(&format!(" ({} suppressed)", run.suppressed()));
    }
    if run.hidden_skipped > 0 {
        let n = run.hidden_skipped;
        let entries = if n == 1 { "entry" } else { "entries" };
        s.push_str(&format!(
            "; {n} hidden {entries} skipped (--hidden walks them)"
        ));
    }
    s.push('\n');
    s
}

/// `lint --list-files`: one line per file read (path, kind, what it gave, then its notes
/// indented), one per file seen but not read (path, `not read`, why), then the summary.
pub fn list_files(run: &LintRun) -> String {
    let width = run
        .files
        .iter()
        .map(|f| f.display.chars().count())
        .chain(run.not_read.iter().map(|n| n.display.chars().count()))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (f, r) in run.files.iter().zip(&run.read) {
        let what = match r.kind {
            FileKind::Manifest => plural(r.jobs, "job"),
            FileKind::Source(_) => plural(r.registrations, "registration"),
        };
        out.push_str(&format!(
            "{:<width$}  {:<10}  {what}\n",
            f.display,
            r.kind.as_str()
        ));
        for note in &r.notes {
            out.push_str(&format!("{:<width$}    note: {note}\n", ""));
        }
    }
    for n in &run.not_read {
        out.push_str(&format!(
            "{:<width$}  {:<10}  {}\n",
            n.display, "not read", n.reason
        ));
    }
    let units = run.units();
    if !units.is_empty() {
        out.push_str(&format!(
            "\n{} deploy units (BG601 compares places within a unit, or across units tied together):\n",
            units.len()
        ));
        // A test folder's files are a unit each: one line per folder, not per case.
        let mut fixture_files: Vec<(&str, usize)> = Vec::new();
        for u in units.iter().filter(|u| u.fixture_file) {
            let Some(f) = u.fixture.as_deref() else {
                continue;
            };
            match fixture_files.iter_mut().find(|(g, _)| *g == f) {
                Some((_, n)) => *n += 1,
                None => fixture_files.push((f, 1)),
            }
        }
        for (folder, n) in &fixture_files {
            out.push_str(&format!(
                "  {folder}/…  (test fixtures: each file its own unit): {}\n",
                plural(*n, "file")
            ));
        }
        for u in units.iter().filter(|u| !u.fixture_file) {
            let fixture = u
                .fixture
                .as_ref()
                .map(|f| format!(", test fixture under {f}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {}  ({}{fixture}): {}\n",
                u.display,
                u.kind,
                plural(u.files.len(), "file")
            ));
            for (tie, others) in &u.ties {
                out.push_str(&format!(
                    "      deployed with {} (tied by {tie})\n",
                    others.join(", ")
                ));
            }
        }
        out.push('\n');
    }
    out.push_str(&summary(run));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window answers every span exactly as miette's whole-text scan does.
    #[test]
    fn indexed_source_matches_the_whole_text() {
        let text = "a: 1\nb:\n  - x\n  - y\r\n\nc: \"é ü\"\nd: 4\ne: 5\nf: 6\n";
        let src = Indexed::new("f.yaml", text);
        for start in 0..=text.len() {
            for len in [0, 1, 3, 9] {
                if start + len > text.len() {
                    continue;
                }
                for ctx in [0, 1, 2, 3] {
                    let span = SourceSpan::from((start, len));
                    let want = text.read_span(&span, ctx, ctx).ok();
                    let got = src.read_span(&span, ctx, ctx).ok();
                    let view = |c: Option<Box<dyn SpanContents + '_>>| {
                        c.map(|c| {
                            (
                                c.data().to_vec(),
                                *c.span(),
                                c.line(),
                                c.column(),
                                c.line_count(),
                            )
                        })
                    };
                    assert_eq!(view(got), view(want), "span {start}+{len} context {ctx}");
                }
            }
        }
    }
}
