//! Commands as registrations write them: shell-ish words, env and `cd` preludes, the
//! `batchguard run` and `flock` wrappers, and ties to manifest jobs (SPEC 3.5, 3.6).

use super::Tie;
use crate::manifest::yaml::Span;

/// Splits a shell-ish command line into words: whitespace separates, single and double
/// quotes group, a backslash escapes the next character. No expansion of any kind.
pub fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_env_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().enumerate().all(|(i, c)| {
                    c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
                })
        }
        None => false,
    }
}

/// Drops leading `VAR=value` words and an optional `cd DIR &&` (SPEC 3.5).
pub fn strip_prelude(argv: &[String]) -> &[String] {
    let mut rest = argv;
    while let Some(first) = rest.first()
        && is_env_assignment(first)
    {
        rest = &rest[1..];
    }
    if rest.first().map(String::as_str) == Some("cd")
        && let Some(i) = rest.iter().position(|w| w == "&&")
    {
        rest = &rest[i + 1..];
        while let Some(first) = rest.first()
            && is_env_assignment(first)
        {
            rest = &rest[1..];
        }
    }
    rest
}

/// True when the command runs under `batchguard run` or `flock` (by basename).
pub fn is_wrapped(argv: &[String]) -> bool {
    let rest = strip_prelude(argv);
    match rest.first().map(|w| basename(w)) {
        Some("flock") => true,
        Some("batchguard") => rest.get(1).map(String::as_str) == Some("run"),
        _ => false,
    }
}

/// The `--job NAME` (and `--manifest PATH`) of a `batchguard run` command.
pub fn batchguard_tie(argv: &[String], span: Span) -> Option<Tie> {
    let rest = strip_prelude(argv);
    if rest.first().map(|w| basename(w)) != Some("batchguard")
        || rest.get(1).map(String::as_str) != Some("run")
    {
        return None;
    }
    let mut job = None;
    let mut manifest = None;
    let mut i = 2;
    while i < rest.len() {
        let w = rest[i].as_str();
        if w == "--" {
            break;
        }
        if let Some(v) = w.strip_prefix("--job=") {
            job = Some(v.to_owned());
        } else if let Some(v) = w.strip_prefix("--manifest=") {
            manifest = Some(v.to_owned());
        } else if w == "--job" {
            job = rest.get(i + 1).cloned();
            i += 1;
        } else if w == "--manifest" {
            manifest = rest.get(i + 1).cloned();
            i += 1;
        }
        i += 1;
    }
    job.map(|job| Tie {
        service: None,
        job,
        manifest,
        span,
    })
}

/// What a (possibly wrapped) command finally runs; see [`Registration::effective_argv`].
pub fn effective_argv(argv: &[String]) -> Vec<String> {
    let rest = strip_prelude(argv);
    let inner: Vec<String> = match rest.first().map(|w| basename(w)) {
        Some("batchguard") if rest.get(1).map(String::as_str) == Some("run") => {
            match rest.iter().position(|w| w == "--") {
                Some(i) => rest[i + 1..].to_vec(),
                None => Vec::new(),
            }
        }
        Some("flock") => {
            let mut i = 1;
            // Options, then the lock file, then the command (or `-c STRING`).
            while let Some(w) = rest.get(i)
                && w.starts_with('-')
            {
                let takes_value = matches!(
                    w.as_str(),
                    "-w" | "--wait" | "--timeout" | "-E" | "--conflict-exit-code"
                );
                i += if takes_value { 2 } else { 1 };
            }
            i += 1; // the lock file
            match rest.get(i).map(String::as_str) {
                Some("-c" | "--command") => {
                    rest.get(i + 1).map(|s| split_words(s)).unwrap_or_default()
                }
                _ => rest.get(i..).map(<[String]>::to_vec).unwrap_or_default(),
            }
        }
        _ => rest.to_vec(),
    };
    inner
        .into_iter()
        .map(|w| w.strip_prefix("./").map(str::to_owned).unwrap_or(w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        split_words(s)
    }

    #[test]
    fn wrapped_commands() {
        assert!(is_wrapped(&v("flock -n /tmp/x.lock node a.js")));
        assert!(is_wrapped(&v(
            "A=1 cd /srv && /usr/bin/flock -w 5 /l node a.js"
        )));
        assert!(is_wrapped(&v(
            "/usr/local/bin/batchguard run --job x -- node a.js"
        )));
        assert!(!is_wrapped(&v("node a.js")));
        assert!(!is_wrapped(&v("batchguard lint")));
    }

    #[test]
    fn effective_argv_unwraps() {
        assert_eq!(
            effective_argv(&v("cd /srv && flock -w 5 /l ./bin/x --a")),
            v("bin/x --a")
        );
        assert_eq!(
            effective_argv(&v("flock /l -c 'node a.js'")),
            v("node a.js")
        );
        assert_eq!(
            effective_argv(&v("batchguard run --job x -- node a.js")),
            v("node a.js")
        );
    }

    #[test]
    fn ties_from_batchguard_run() {
        let t = batchguard_tie(
            &v("batchguard run --manifest m.yaml --job=settle -- x"),
            Span::default(),
        );
        assert_eq!(
            t.map(|t| (t.job, t.manifest)),
            Some(("settle".into(), Some("m.yaml".into())))
        );
        assert!(batchguard_tie(&v("node x"), Span::default()).is_none());
    }

    #[test]
    fn quotes_group_words() {
        assert_eq!(v(r#"a "b c" 'd e' f\ g"#), ["a", "b c", "d e", "f g"]);
    }
}
