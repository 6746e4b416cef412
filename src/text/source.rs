//! A file's text with what reports need to talk about positions in it.

use crate::text::Span;
use std::path::PathBuf;

/// What a masked secret is shown as: the same width whatever the secret's length, so no
/// output tells how long a credential is (SPEC 9).
pub const MASK: &str = "********";

/// One input file. `shown` is the text with each secret replaced by [`MASK`]; spans stay in
/// the coordinates of `text`, and [`SourceFile::shown_span`] maps one into `shown`. The
/// masked literals are kept too, so that text built from the file's values (a message
/// quoting a command, a graph label) can be masked the same way ([`SourceFile::redact`],
/// [`Secrets`]).
#[derive(Debug)]
pub struct SourceFile {
    /// As shown to the user: relative to the current directory when under it.
    pub display: String,
    pub path: PathBuf,
    pub text: String,
    /// The masked spans of `text`: sorted, disjoint.
    masks: Vec<Span>,
    shown: std::sync::OnceLock<String>,
    secrets: Vec<String>,
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
            masks: Vec::new(),
            shown: std::sync::OnceLock::new(),
            secrets: Vec::new(),
            line_starts,
        }
    }

    /// The text safe to print: each masked span replaced by [`MASK`].
    pub fn shown_text(&self) -> &str {
        self.shown.get_or_init(|| {
            if self.masks.is_empty() {
                return self.text.clone();
            }
            let mut out = String::with_capacity(self.text.len());
            let mut at = 0;
            for m in &self.masks {
                out.push_str(&self.text[at..m.start]);
                out.push_str(MASK);
                at = m.end();
            }
            out.push_str(&self.text[at..]);
            out
        })
    }

    /// Masks `span` in every snippet printed from this file.
    pub fn mask(&mut self, span: Span) {
        let end = span.end().min(self.text.len());
        if span.start >= end
            || !self.text.is_char_boundary(span.start)
            || !self.text.is_char_boundary(end)
        {
            return;
        }
        if let Some(secret) = self.text.get(span.start..end)
            && !self.secrets.iter().any(|s| s == secret)
        {
            self.secrets.push(secret.to_owned());
        }
        // Merge with the masks it touches, keeping the list sorted and disjoint.
        let (mut start, mut end) = (span.start, end);
        self.masks.retain(|m| {
            let touches = m.start <= end && start <= m.end();
            if touches {
                start = start.min(m.start);
                end = end.max(m.end());
            }
            !touches
        });
        let at = self.masks.partition_point(|m| m.start < start);
        self.masks.insert(at, Span::new(start, end - start));
        self.shown = std::sync::OnceLock::new();
    }

    /// Where `span` of the text lies in [`SourceFile::shown_text`]: a span touching a
    /// mask covers the whole [`MASK`] there.
    pub fn shown_span(&self, span: Span) -> Span {
        let start = self.shown_offset(span.start, false);
        let end = self.shown_offset(span.end(), true).max(start);
        Span::new(start, end - start)
    }

    fn shown_offset(&self, offset: usize, is_end: bool) -> usize {
        let mut shown = offset;
        for m in &self.masks {
            if offset >= m.end() {
                shown = shown - m.len + MASK.len();
                continue;
            }
            if offset > m.start {
                let before = shown - (offset - m.start);
                return if is_end { before + MASK.len() } else { before };
            }
            break;
        }
        shown
    }

    /// `span` as machine-readable outputs (json, sarif, github) give it, which must not
    /// tell a secret's length: an offset inside a masked span, or after one on the line
    /// where it ends, is moved to the mask's start. A masked literal's own span is then
    /// its first character; a span running over a secret ends where the secret begins.
    pub fn public_span(&self, span: Span) -> Span {
        let start = self.public_offset(span.start);
        let end = self.public_offset(span.end()).max(start);
        Span::new(start, end - start)
    }

    fn public_offset(&self, offset: usize) -> usize {
        for m in &self.masks {
            if m.start >= offset {
                break;
            }
            let same_line = offset <= m.end()
                || self
                    .text
                    .get(m.end()..offset)
                    .is_some_and(|between| !between.contains('\n'));
            if same_line {
                return m.start;
            }
        }
        offset
    }

    /// The literals masked in this file.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// `s` with every literal masked in this file replaced by [`MASK`].
    pub fn redact(&self, s: &str) -> String {
        Secrets::new(std::slice::from_ref(self)).redact(s)
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

/// Why a file could not be read, in words: the kind of failure without the operating
/// system's error number ("no such file or directory", not "... (os error 2)").
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "no such file or directory".to_owned(),
        K::PermissionDenied => "permission denied".to_owned(),
        K::IsADirectory => "it is a directory".to_owned(),
        K::InvalidData => "it is not UTF-8 text".to_owned(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_owned(),
                None => s,
            }
        }
    }
}

/// Every literal masked in a run's files: reports pass each message through it, so no
/// output can print a secret, whichever rule wrote the message and whichever file it
/// quotes (SPEC 9).
pub struct Secrets<'a>(Vec<&'a str>);

impl<'a> Secrets<'a> {
    pub fn new(files: &'a [SourceFile]) -> Self {
        let mut all: Vec<&str> = files
            .iter()
            .flat_map(|f| f.secrets.iter().map(String::as_str))
            .filter(|s| !s.trim().is_empty())
            .collect();
        // Longest first, so a secret that contains another is masked whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
        all.dedup();
        Secrets(all)
    }

    /// `s` with every secret replaced by [`MASK`]. A secret of fewer than 4 characters is
    /// replaced only where it stands alone (not inside a word), so that a one-letter
    /// password does not blank out every message.
    pub fn redact(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for secret in &self.0 {
            if !out.contains(secret) {
                continue;
            }
            let stars = MASK;
            if secret.chars().count() >= 4 {
                out = out.replace(secret, stars);
                continue;
            }
            let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
            let mut masked = String::with_capacity(out.len());
            let mut rest = out.as_str();
            let mut before: Option<char> = None;
            while let Some(i) = rest.find(secret) {
                let after = rest[i + secret.len()..].chars().next();
                let prev = rest[..i].chars().next_back().or(before);
                masked.push_str(&rest[..i]);
                masked.push_str(if word(prev) || word(after) {
                    secret
                } else {
                    stars
                });
                before = secret.chars().next_back();
                rest = &rest[i + secret.len()..];
            }
            masked.push_str(rest);
            out = masked;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Span;

    #[test]
    fn masked_literals_are_redacted_from_any_text() {
        let text = "a: --db-password=hunter2\nb: x\n";
        let mut f = SourceFile::new("f".into(), "f".into(), text.into());
        f.mask(Span::new(17, 7));
        f.mask(Span::new(28, 1));
        assert_eq!(f.shown_text(), "a: --db-password=********\nb: ********\n");
        assert_eq!(
            f.redact("runs `node --db-password=hunter2 x`"),
            "runs `node --db-password=******** ********`"
        );
        // A short secret only where it stands alone.
        assert_eq!(f.redact("max x, xen"), "max ********, xen");
    }

    /// Neither the shown text nor the spans outputs give tell a secret's length.
    #[test]
    fn masks_and_public_spans_have_one_width() {
        for secret in ["ab", "hunter2", "a-very-long-password-of-forty-characters"] {
            let text = format!("url: postgres://u:{secret}@db/x # note\nnext: 1\n");
            let at = text.find(secret).expect("secret in text");
            let mut f = SourceFile::new("f".into(), "f".into(), text.clone());
            f.mask(Span::new(at, secret.len()));
            assert_eq!(
                f.shown_text(),
                "url: postgres://u:********@db/x # note\nnext: 1\n"
            );
            // The secret's span: the mask in shown text, its first character in outputs.
            assert_eq!(f.shown_span(Span::new(at, secret.len())), Span::new(18, 8));
            assert_eq!(f.public_span(Span::new(at, secret.len())), Span::new(at, 0));
            // A span over the whole value ends where the secret begins.
            let value = Span::new(5, text.find(" #").expect("comment") - 5);
            assert_eq!(f.public_span(value), Span::new(5, at - 5));
            assert_eq!(f.shown_span(value), Span::new(5, 26));
            // After the secret on its line: at the secret's start; next line: as is.
            let note = text.find("note").expect("note");
            assert_eq!(f.public_span(Span::new(note, 4)), Span::new(at, 0));
            let next = text.find("next").expect("next");
            assert_eq!(f.public_span(Span::new(next, 4)), Span::new(next, 4));
            assert_eq!(
                f.shown_span(Span::new(next, 4)),
                Span::new(next + 8 - secret.len(), 4)
            );
        }
    }
}
