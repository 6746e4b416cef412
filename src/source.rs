//! A file's text with what reports need to talk about positions in it.

use crate::manifest::yaml::Span;
use std::path::PathBuf;

/// One input file. `shown` is the text with secrets masked, byte for byte the same length,
/// so every span stays valid while no report can print a credential.
#[derive(Debug)]
pub struct SourceFile {
    /// As shown to the user: relative to the current directory when under it.
    pub display: String,
    pub path: PathBuf,
    pub text: String,
    shown: Option<String>,
    line_starts: Vec<usize>,
}

impl SourceFile {
    pub fn new(path: PathBuf, display: String, text: String) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            display,
            path,
            text,
            shown: None,
            line_starts,
        }
    }

    /// The text safe to print: secret spans replaced by `*`.
    pub fn shown_text(&self) -> &str {
        self.shown.as_deref().unwrap_or(&self.text)
    }

    /// Masks `span` in every snippet printed from this file.
    pub fn mask(&mut self, span: Span) {
        let text = self.shown.get_or_insert_with(|| self.text.clone());
        let end = span.end().min(text.len());
        if span.start >= end || !text.is_char_boundary(span.start) || !text.is_char_boundary(end) {
            return;
        }
        // One '*' per byte keeps every later offset where it was.
        let stars = "*".repeat(end - span.start);
        text.replace_range(span.start..end, &stars);
    }

    /// 1-based line and 1-based column counted in characters, as SPEC 8 requires.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset);
        let start = self.line_starts[line.saturating_sub(1)];
        let mut col_end = offset;
        while col_end > start && !self.text.is_char_boundary(col_end) {
            col_end -= 1;
        }
        let col = self.text[start..col_end].chars().count() + 1;
        (line.max(1), col)
    }

    /// The text of 1-based line `n`, without its line break.
    pub fn line_text(&self, n: usize) -> &str {
        let Some(&start) = self.line_starts.get(n.wrapping_sub(1)) else {
            return "";
        };
        let end = self.line_starts.get(n).copied().unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// Byte offset where 1-based line `n` starts.
    pub fn line_start(&self, n: usize) -> usize {
        self.line_starts
            .get(n.wrapping_sub(1))
            .copied()
            .unwrap_or(self.text.len())
    }
}
