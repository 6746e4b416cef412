//! `# batchguard: allow BG203 -- reason` comments (SPEC 3.3), and in JavaScript and
//! TypeScript `// batchguard: allow BG611 -- reason`.
//!
//! YAML parsers drop comments, so they are found in the text: a `#` that starts a comment
//! (at the line start or after white space, outside quotes) followed by `batchguard:`.

use crate::text::Span;

#[derive(Debug)]
pub struct Suppression {
    /// 1-based line of the comment.
    pub line: usize,
    /// The whole comment.
    pub span: Span,
    /// Codes or names it allows, each with its span, and whether it suppressed something.
    pub codes: Vec<(String, Span, bool)>,
    pub reason: Option<String>,
    /// True when the comment is alone on its line (then it applies to the job below).
    pub own_line: bool,
}

/// Byte offset of the `#` that starts a comment on `line`, if any.
fn comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '#' && prev_space => return Some(i),
            None if (c == '"' || c == '\'') && prev_space => quote = Some(c),
            None => {}
        }
        prev_space = c.is_whitespace() || matches!(c, '[' | '{' | ',' | ':');
        if quote.is_none() && c == '#' {
            prev_space = false;
        }
    }
    None
}

/// Byte offset of the `//` that starts a line comment in JavaScript, outside quotes.
fn js_comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q && prev != '\\' => quote = None,
            Some(_) => {}
            None if c == '/' && prev == '/' => return Some(i - 1),
            None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
            None => {}
        }
        prev = c;
    }
    None
}

/// The `batchguard: allow` comments of a YAML text, or (`js`) of a JavaScript one.
pub fn scan_code(text: &str, js: bool) -> Vec<Suppression> {
    if js {
        scan_with(text, js_comment_start, 2)
    } else {
        scan(text)
    }
}

pub fn scan(text: &str) -> Vec<Suppression> {
    scan_with(text, comment_start, 1)
}

fn scan_with(text: &str, start: fn(&str) -> Option<usize>, marker: usize) -> Vec<Suppression> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += line.len();
        let Some(hash) = start(line) else {
            continue;
        };
        let body = line[hash + marker..].trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        let Some(rest) = trimmed.strip_prefix("batchguard:") else {
            continue;
        };
        let rest_start =
            line_start + hash + marker + (body.len() - trimmed.len()) + "batchguard:".len();
        let rest_trim = rest.trim_start();
        let Some(after_allow) = rest_trim.strip_prefix("allow") else {
            continue;
        };
        let mut pos = rest_start + (rest.len() - rest_trim.len()) + "allow".len();
        let (codes_part, reason) = match after_allow.find("--") {
            Some(d) => {
                let r = after_allow[d + 2..].trim();
                (&after_allow[..d], (!r.is_empty()).then(|| r.to_owned()))
            }
            None => (after_allow, None),
        };
        let mut codes = Vec::new();
        for word in codes_part.split_inclusive([' ', ',', '\t']) {
            let w = word.trim_end_matches([' ', ',', '\t']);
            if !w.is_empty() {
                codes.push((w.to_owned(), Span::new(pos, w.len()), false));
            }
            pos += word.len();
        }
        let end = line_start + line.trim_end_matches(['\n', '\r']).len();
        out.push(Suppression {
            line: i + 1,
            span: Span::new(line_start + hash, end - (line_start + hash)),
            codes,
            reason,
            own_line: line[..hash].trim().is_empty(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_codes_and_reasons() {
        let text = "a: 1 # batchguard: allow BG203, BG202 -- warmup job\n# batchguard: allow BG201\nb: \"# not a comment\"\n";
        let s = scan(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].line, 1);
        let codes: Vec<_> = s[0].codes.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(codes, ["BG203", "BG202"]);
        assert_eq!(&text[s[0].codes[1].1.start..s[0].codes[1].1.end()], "BG202");
        assert_eq!(s[0].reason.as_deref(), Some("warmup job"));
        assert!(!s[0].own_line);
        assert_eq!(s[1].reason, None);
        assert!(s[1].own_line);
    }

    #[test]
    fn javascript_line_comments() {
        let text = "const u = \"http://x\"; // batchguard: allow BG611 -- idempotent\n// batchguard: allow BG612 -- one host\nconst s = '// batchguard: allow BG611 -- no';\n";
        let s = scan_code(text, true);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].codes[0].0, "BG611");
        assert_eq!(&text[s[0].codes[0].1.start..s[0].codes[0].1.end()], "BG611");
        assert_eq!(s[1].reason.as_deref(), Some("one host"));
        assert!(s[1].own_line);
    }
}
