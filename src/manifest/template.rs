//! Templates such as `{job}:{scheduled_at}`: only the placeholders of SPEC 2 exist.

pub const PLACEHOLDERS: &[&str] = &[
    "job",
    "service",
    "scheduled_at",
    "scheduled_at_compact",
    "snapshot",
    "run_id",
    "attempt",
];

/// A placeholder `{name}` found in a template, with its byte range in the template text.
#[derive(Debug, PartialEq, Eq)]
pub struct Placeholder<'a> {
    pub name: &'a str,
    pub start: usize,
    pub end: usize,
}

/// Every `{…}` in `text`. An unclosed `{` is returned with the rest of the text as its name.
pub fn placeholders(text: &str) -> Vec<Placeholder<'_>> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(open) = text[rest..].find('{') {
        let start = rest + open;
        match text[start..].find('}') {
            Some(close) => {
                let end = start + close + 1;
                out.push(Placeholder {
                    name: &text[start + 1..end - 1],
                    start,
                    end,
                });
                rest = end;
            }
            None => {
                out.push(Placeholder {
                    name: &text[start + 1..],
                    start,
                    end: text.len(),
                });
                break;
            }
        }
    }
    out
}

pub fn is_known(name: &str) -> bool {
    PLACEHOLDERS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_placeholders_with_offsets() {
        let p = placeholders("{job}:{scheduled_at}-{nope");
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].name, p[0].start, p[0].end), ("job", 0, 5));
        assert_eq!(p[1].name, "scheduled_at");
        assert_eq!(p[2].name, "nope");
        assert!(is_known("scheduled_at_compact"));
        assert!(!is_known("date"));
    }
}
