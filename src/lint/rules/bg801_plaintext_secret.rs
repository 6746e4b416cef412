use crate::declare_rule;
use crate::lint::FileCx;
use crate::lint::rule::{Emitter, Rule, RuleMeta};
use crate::manifest::yaml::{Node, Span, Value, scalar_offset};
use regex::Regex;
use std::sync::LazyLock;

declare_rule! {
    /// ## What it does
    /// Reports a value that looks like a credential: a password inside a URL
    /// (`postgres://app:hunter2@db/billing`), a well-known key pattern (AWS access keys,
    /// GitHub and Slack tokens, private key blocks), or a `password`/`token`/`secret` field
    /// or command-line flag with a literal value. The secret is masked in every report.
    ///
    /// ## Why it matters
    /// Manifests live in the repository, are printed in CI logs and pasted into incident
    /// channels. A credential in one is a credential given to everyone who can read any of
    /// those. Batch jobs are a favourite place for this, because the command line that
    /// starts them "just needs the DSN".
    ///
    /// ## Example
    /// ```yaml
    /// command: ["node", "jobs/settle.js", "--db", "postgres://app:hunter2@db/billing"]
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// command: ["node", "jobs/settle.js", "--db-env", "BILLING_DATABASE_URL"]
    /// ```
    pub struct PlaintextSecret {
        code: "BG801",
        name: "plaintext-secret",
        severity: Error,
        summary: "a value looks like a credential (password in a URL, a key pattern, a secret field with a literal)",
        help: "move the secret to the environment or a secret store and refer to it by name",
    }
}

static URL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^@\s/]+)@").expect("static regex")
});
static KEY_PATTERNS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}",
        r"|sk_live_[0-9A-Za-z]{16,}|glpat-[0-9A-Za-z_-]{20,}|AIza[0-9A-Za-z_-]{35}",
        r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    ))
    .expect("static regex")
});
static SECRET_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(passw(or)?d|pwd|token|secret|api[_-]?key|private[_-]?key|credential)")
        .expect("static regex")
});

/// A value that refers to a secret instead of holding one.
fn is_reference(v: &str) -> bool {
    let v = v.trim();
    v.is_empty()
        || v.starts_with('$')
        || v.starts_with("{{")
        || (v.starts_with('{') && v.ends_with('}'))
        || v.starts_with('<')
        || v.chars().all(|c| c == '*' || c == 'x' || c == 'X')
        || ["env:", "vault:", "secret:", "secretref:", "ref+"]
            .iter()
            .any(|p| v.to_ascii_lowercase().starts_with(p))
}

struct Hit {
    /// Byte range of the secret inside the scalar's value.
    start: usize,
    end: usize,
    what: &'static str,
}

fn scan_value(key: Option<&str>, value: &str) -> Option<Hit> {
    if let Some(c) = URL_PASSWORD.captures(value) {
        let m = c.get(1)?;
        if !is_reference(m.as_str()) {
            return Some(Hit {
                start: m.start(),
                end: m.end(),
                what: "a password in a URL",
            });
        }
    }
    if let Some(m) = KEY_PATTERNS.find(value) {
        return Some(Hit {
            start: m.start(),
            end: m.end(),
            what: "a credential pattern",
        });
    }
    // `--password=hunter2` in an argv entry, or a `token: …` key.
    if let Some((flag, v)) = value.split_once('=')
        && flag.starts_with('-')
        && SECRET_NAME.is_match(flag)
        && !is_reference(v)
    {
        return Some(Hit {
            start: flag.len() + 1,
            end: value.len(),
            what: "a secret passed as a flag",
        });
    }
    if key.is_some_and(|k| SECRET_NAME.is_match(k)) && !is_reference(value) {
        return Some(Hit {
            start: 0,
            end: value.len(),
            what: "a literal secret",
        });
    }
    None
}

impl Rule for PlaintextSecret {
    fn meta(&self) -> &'static RuleMeta {
        &Self::META
    }

    fn check_file(&self, cx: &FileCx, out: &mut Emitter) {
        // (node, key it is the value of, previous argv entry)
        let mut stack: Vec<(&Node, Option<&str>)> = vec![(cx.root, None)];
        while let Some((node, key)) = stack.pop() {
            match &node.value {
                Value::Map(entries) => {
                    for (k, v) in entries {
                        let k = match &k.value {
                            Value::Str(s) => Some(s.as_str()),
                            _ => None,
                        };
                        stack.push((v, k));
                    }
                }
                Value::Seq(items) => {
                    let mut prev_flag: Option<&str> = None;
                    for item in items {
                        // `["--token", "abc"]`: the flag names the next entry.
                        stack.push((item, prev_flag.or(key)));
                        prev_flag = match &item.value {
                            Value::Str(s) if s.starts_with('-') && SECRET_NAME.is_match(s) => {
                                Some(s.as_str())
                            }
                            _ => None,
                        };
                    }
                }
                Value::Str(s) => {
                    if let Some(hit) = scan_value(key, s) {
                        let span = match (
                            scalar_offset(cx.text, node, hit.start),
                            scalar_offset(cx.text, node, hit.end),
                        ) {
                            (Some(a), Some(b)) if b > a => Span::new(a, b - a),
                            _ => node.span,
                        };
                        let field = key.map(|k| format!(" in `{k}`")).unwrap_or_default();
                        out.emit(
                            span,
                            format!("{}{field} looks like a plaintext credential", hit.what),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan_value;

    #[test]
    fn finds_and_spares() {
        let h = scan_value(None, "postgres://app:hunter2@db/billing").unwrap();
        assert_eq!(
            &"postgres://app:hunter2@db/billing"[h.start..h.end],
            "hunter2"
        );
        assert!(scan_value(None, "postgres://app:${DB_PASSWORD}@db/billing").is_none());
        assert!(scan_value(None, "AKIAABCDEFGHIJKLMNOP").is_some());
        assert!(scan_value(Some("token"), "abc123").is_some());
        assert!(scan_value(Some("token"), "$TOKEN").is_none());
        assert!(scan_value(None, "--password=hunter2").is_some());
        assert!(scan_value(None, "https://example.com/path").is_none());
        assert!(scan_value(Some("owner"), "billing-team").is_none());
    }
}
