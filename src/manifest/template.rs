//! Templates such as `{job}:{scheduled_at}`: only the placeholders of SPEC 2 exist.

pub const PLACEHOLDERS: &[&str] = &[
    "job",
    "service",
    "scheduled_at",
    "scheduled_at_compact",
    "snapshot",
    "run_id",
    "attempt",
    // A drill's sandbox directory (`replay.setup`, `replay.teardown`, SPEC 7.3).
    "sandbox",
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

/// Fills a template from `(name, value)` pairs. Values are inserted as text, so one
/// template stays one argument; a placeholder with no value is an error naming it.
pub fn render(text: &str, values: &[(&str, &str)]) -> Result<String, String> {
    let mut out = String::with_capacity(text.len() + 32);
    let mut at = 0;
    for p in placeholders(text) {
        out.push_str(&text[at..p.start]);
        if p.end == text.len() && !text.ends_with('}') {
            return Err(format!("`{text}` has an unclosed `{{`"));
        }
        match values.iter().find(|(k, _)| *k == p.name) {
            Some((_, v)) => out.push_str(v),
            None => {
                return Err(format!(
                    "`{text}` uses `{{{}}}`, which has no value here",
                    p.name
                ));
            }
        }
        at = p.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_per_argument() {
        let v = [("job", "a b"), ("attempt", "2")];
        assert_eq!(render("--job={job}/{attempt}", &v).unwrap(), "--job=a b/2");
        assert!(render("{snapshot}", &v).is_err());
        assert!(render("{job", &v).is_err());
    }

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
