use crate::declare_rule;
use crate::lint::FileCx;
use crate::lint::registrations::RegCx;
use crate::lint::rule::{Emitter, Rule};
use crate::manifest::yaml::{Node, Value};
use crate::sources::SourceKind;
use crate::text::Span;
use regex::Regex;
use std::sync::LazyLock;

declare_rule! {
    /// ## What it does
    /// Reports a credential written as a literal: a password inside a URL or DSN
    /// (`postgres://app:s3cr3t@db/billing`, `password=s3cr3t`), a well-known key pattern
    /// (AWS access keys, GitHub, GitLab, Slack and Stripe tokens, Google API keys, private
    /// key blocks), and the literal value of a secret-named field, flag or env entry
    /// (`*PASSWORD*`, `*SECRET*`, `*TOKEN*`, `*API_KEY*`, `*ACCESS_KEY*`): a Kubernetes
    /// `env[].value`, a PM2 `env` entry, a manifest value, `--db-password=…` or
    /// `--api-key …` in a command, `PGPASSWORD=…` in a crontab.
    ///
    /// Only literals. A reference is not a secret: `$(VAR)`, `${VAR}`, `$VAR`, `{{ … }}`,
    /// `valueFrom`/`secretKeyRef`, a `secretName`. Nor is a file that holds one
    /// (`--token-file=/var/run/secrets/…`), or a flag without a value (`--disableSecrets`).
    ///
    /// The finding points at the literal itself, and the literal is masked in every
    /// output: source snippets, messages, JSON, SARIF, GitHub annotations and
    /// `batchguard graph`. Messages name the field, never the value. One finding per
    /// literal.
    ///
    /// ## Why it matters
    /// Deploy files live in the repository, are printed in CI logs and pasted into incident
    /// channels. A credential in one is given to everyone who can read any of those, and it
    /// stays in the history after it is "removed". Batch jobs are a favourite place for
    /// this: the CronJob "just needs `PGPASSWORD`", the crontab line "just needs the DSN".
    /// A linter that prints the password it found in its own CI annotation makes it worse,
    /// which is why batchguard masks it everywhere.
    ///
    /// ## Example
    /// ```yaml
    /// env:
    ///   - name: PGPASSWORD
    ///     value: s3cr3t
    /// command: ["node", "jobs/settle.js", "--db", "postgres://app:s3cr3t@db/billing"]
    /// ```
    ///
    /// Use instead:
    /// ```yaml
    /// env:
    ///   - name: PGPASSWORD
    ///     valueFrom:
    ///       secretKeyRef: {name: billing-db, key: password}
    /// command: ["node", "jobs/settle.js", "--db-env", "BILLING_DATABASE_URL"]
    /// ```
    pub struct PlaintextSecret {
        code: "BG801",
        name: "plaintext-secret",
        severity: Error,
        scope: File,
        masks: true,
        summary: "a literal credential: a password in a URL or DSN, a known key pattern (cloud keys, private key blocks, service tokens), a literal value of a secret-named field or env entry (`*PASSWORD*`, `*SECRET*`, `*TOKEN*`, `*API_KEY*`, `*ACCESS_KEY*` in Kubernetes `env[].value`, PM2 `env`, manifest values). Never a reference (`$(VAR)`, `${VAR}`, `secretKeyRef`, `secretName`, `valueFrom`), a file path, or a flag name without a value. The span is the literal itself, which is masked in every output (pretty, json, sarif, github, graph)",
        help: "move the secret to the environment or a secret store and refer to it by name",
    }
}

const ENV_HELP: &str = "read it from a secret (`valueFrom: {secretKeyRef: …}`, the host's environment, a secret store): a value written here is in the repository and in every log that prints the file";

static URL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^@\s/]+)@").expect("static regex")
});

/// Well-known credential shapes, each with the name the message gives it.
static KEY_PATTERNS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    [
        ("an AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("a GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        ("a GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{40,}"),
        ("a GitLab token", r"\bglpat-[0-9A-Za-z_-]{20,}"),
        ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("a Stripe key", r"\b[sr]k_live_[0-9A-Za-z]{16,}"),
        ("a Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
        (
            "a private key",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\z)",
        ),
    ]
    .into_iter()
    .map(|(what, re)| (what, Regex::new(re).expect("static regex")))
    .collect()
});

/// The words of a name: `AWS_SECRET_ACCESS_KEY`, `dbPassword`, `api-key` -> upper case.
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_uppercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// A name that holds a secret (SPEC 3.1: `*PASSWORD*`, `*SECRET*`, `*TOKEN*`, `*API_KEY*`,
/// `*ACCESS_KEY*`), and not one that names or points at a secret (`secretName`,
/// `TOKEN_FILE`, `existingSecret`, `secretKeyRef`).
fn secret_name(name: &str) -> bool {
    if name.contains('/') {
        // `vault.hashicorp.com/agent-inject-secret-db`: an annotation, not a field.
        return false;
    }
    let words = name_words(name);
    let joined = words.concat();
    let holds = joined.contains("PASSWORD")
        || joined.contains("PASSWD")
        || joined.contains("SECRET")
        || joined.contains("APIKEY")
        || joined.contains("ACCESSKEY")
        || words
            .iter()
            .any(|w| w.ends_with("TOKEN") || w.ends_with("TOKENS"));
    let points = words.last().is_some_and(|w| {
        matches!(
            w.as_str(),
            "NAME"
                | "NAMES"
                | "REF"
                | "KEYREF"
                | "FILE"
                | "FILES"
                | "PATH"
                | "DIR"
                | "MOUNT"
                | "NAMESPACE"
                | "URL"
                | "URI"
                | "ENDPOINT"
                | "HOST"
                | "PORT"
                | "TYPE"
                | "KIND"
                | "ENABLED"
                | "DISABLED"
                | "LENGTH"
                | "TTL"
                | "EXPIRY"
                | "VERSION"
        )
    }) || words.first().is_some_and(|w| w == "EXISTING");
    holds && !points
}

/// A flag that switches something on or off rather than taking a value.
fn switch_flag(flag: &str) -> bool {
    let words = name_words(flag);
    words.first().is_some_and(|w| {
        matches!(
            w.as_str(),
            "NO" | "DISABLE"
                | "ENABLE"
                | "SKIP"
                | "USE"
                | "ALLOW"
                | "WITH"
                | "WITHOUT"
                | "IGNORE"
                | "SHOW"
                | "PRINT"
                | "ROTATE"
                | "REFRESH"
                | "GENERATE"
                | "REQUIRE"
                | "VERIFY"
                | "VALIDATE"
                | "CHECK"
        )
    })
}

/// A value that refers to a secret instead of holding one.
fn is_reference(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    v.contains("$(")
        || v.contains("${")
        || v.contains("{{")
        || v.contains("#{")
        || v.strip_prefix('$')
            .is_some_and(|r| r.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()))
        || (v.starts_with('<') && v.ends_with('>'))
        || (v.starts_with('%') && v.ends_with('%') && v.len() > 2)
        || [
            "env:",
            "vault:",
            "secret:",
            "secretref:",
            "ref+",
            "op://",
            "arn:aws:secretsmanager:",
            "arn:aws:ssm:",
            "awssm:",
            "gcpsm:",
            "sm://",
        ]
        .iter()
        .any(|p| lower.starts_with(p))
}

/// A file that holds a secret is not one (`/var/run/secrets/…/token`, `./keys/api.pem`).
fn looks_like_path(v: &str) -> bool {
    static FILE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[\w.-]+(/[\w.-]+)*\.(js|mjs|cjs|ts|py|rb|php|sh|pem|key|crt|cert|p12|json|ya?ml|txt|conf|cfg|ini|env|toml|jks)$")
            .expect("static regex")
    });
    ["/", "./", "../", "~/", "file:"]
        .iter()
        .any(|p| v.starts_with(p))
        || FILE.is_match(v)
}

/// A value that can be a credential written in plain text.
fn is_literal(v: &str) -> bool {
    let t = v.trim();
    !t.is_empty()
        && !is_reference(t)
        && !looks_like_path(t)
        && !matches!(
            t.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "none" | "~"
        )
        && !t.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-'))
}

/// One literal credential inside a value: its byte range there, and what it is.
#[derive(Debug)]
struct Hit {
    start: usize,
    end: usize,
    what: String,
}

/// Strips one pair of shell quotes around `v[s..e]`.
fn unquote(v: &str, s: usize, e: usize) -> (usize, usize) {
    let inner = &v[s..e];
    for q in ['"', '\''] {
        if inner.len() >= 2 && inner.starts_with(q) && inner.ends_with(q) {
            return (s + 1, e - 1);
        }
    }
    (s, e)
}

/// Credentials inside free text (an argv word, a shell line, a DSN): URL passwords, key
/// patterns, `NAME=value` / `--flag=value` / `--flag value` with a secret name. Hits never
/// overlap.
fn scan_text(value: &str) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::new();
    let push = |hits: &mut Vec<Hit>, h: Hit| {
        if h.end > h.start && !hits.iter().any(|o| h.start < o.end && o.start < h.end) {
            hits.push(h);
        }
    };
    for c in URL_PASSWORD.captures_iter(value) {
        if let Some(m) = c.get(1)
            && is_literal(m.as_str())
        {
            push(
                &mut hits,
                Hit {
                    start: m.start(),
                    end: m.end(),
                    what: "the password in a URL".into(),
                },
            );
        }
    }
    for (what, re) in KEY_PATTERNS.iter() {
        for m in re.find_iter(value) {
            push(
                &mut hits,
                Hit {
                    start: m.start(),
                    end: m.end(),
                    what: (*what).into(),
                },
            );
        }
    }
    // Words of the text with their byte ranges (whitespace, `;`, `&`, `?` separate, as in
    // shell lines, ADO-style DSNs and query strings).
    let sep = |c: char| c.is_whitespace() || matches!(c, ';' | '&' | '?');
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    let mut quote: Option<char> = None;
    for (i, c) in value.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => continue,
            None if c == '"' || c == '\'' => quote = Some(c),
            None => {}
        }
        match (sep(c) && quote.is_none(), start) {
            (true, Some(s)) => {
                words.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, value.len()));
    }
    for (k, &(s, e)) in words.iter().enumerate() {
        let word = &value[s..e];
        if let Some((name, _)) = word.split_once('=') {
            let bare = name.trim_start_matches('-');
            let named = !bare.is_empty()
                && bare
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            let (vs, ve) = unquote(value, s + name.len() + 1, e);
            if named && secret_name(bare) && is_literal(&value[vs..ve]) {
                let what = if name.starts_with('-') {
                    format!("the value of `{name}`")
                } else {
                    format!("`{name}`")
                };
                push(
                    &mut hits,
                    Hit {
                        start: vs,
                        end: ve,
                        what,
                    },
                );
            }
        } else if word.starts_with('-')
            && secret_name(word.trim_start_matches('-'))
            && !switch_flag(word)
            && let Some(&(ns, ne)) = words.get(k + 1)
            && !value[ns..ne].starts_with('-')
        {
            let (vs, ve) = unquote(value, ns, ne);
            if is_literal(&value[vs..ve]) {
                push(
                    &mut hits,
                    Hit {
                        start: vs,
                        end: ve,
                        what: format!("the value of `{word}`"),
                    },
                );
            }
        }
    }
    hits
}

/// The span of `value[start..end]` in the file: the literal itself, found in the scalar's
/// text as written (quotes, escapes and block scalars included); the whole scalar when the
/// literal is not written verbatim (escaped).
fn locate(text: &str, node: Span, value: &str, start: usize, end: usize) -> Span {
    let Some(lit) = value.get(start..end) else {
        return node;
    };
    let nth = value
        .get(..start)
        .map_or(0, |before| before.matches(lit).count());
    text.get(node.start..node.end())
        .and_then(|raw| raw.match_indices(lit).nth(nth))
        .map_or(node, |(i, _)| Span::new(node.start + i, lit.len()))
}

/// Keys whose subtree refers to secrets kept elsewhere.
fn reference_key(key: &str) -> bool {
    matches!(
        key,
        "valueFrom" | "secretKeyRef" | "secretRef" | "envFrom" | "configMapKeyRef"
    )
}

fn str_of(node: &Node) -> Option<&str> {
    match &node.value {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// A Kubernetes-style `{name: X, value: Y}` entry with a secret name and a literal value.
fn env_pair(entries: &[(Node, Node)]) -> Option<(&str, &Node)> {
    let field = |k: &str| {
        entries
            .iter()
            .find(|(key, _)| str_of(key) == Some(k))
            .map(|(_, v)| v)
    };
    let name = field("name").and_then(str_of)?;
    let value = field("value")?;
    (secret_name(name) && str_of(value).is_some_and(is_literal)).then_some((name, value))
}

/// Already reported (by the file pass, or an earlier registration of the same file)?
fn reported(out: &Emitter, span: Span) -> bool {
    out.out.iter().any(|f| {
        f.code == PlaintextSecret::META.code
            && f.at.span.start < span.end()
            && span.start < f.at.span.end().max(f.at.span.start + 1)
    })
}

fn emit(out: &mut Emitter, span: Span, message: String, help: Option<&str>) {
    if reported(out, span) {
        return;
    }
    match help {
        Some(h) => out.emit_with_help(span, message, h),
        None => out.emit(span, message),
    }
}

fn field_note(key: Option<&str>) -> String {
    key.map(|k| format!(" in `{k}`")).unwrap_or_default()
}

impl PlaintextSecret {
    fn scan_scalar(cx: &FileCx, node: &Node, s: &str, key: Option<&str>, out: &mut Emitter) {
        for h in scan_text(s) {
            let span = locate(cx.text, node.span, s, h.start, h.end);
            emit(
                out,
                span,
                format!("{}{} is written in plain text", h.what, field_note(key)),
                None,
            );
        }
    }

    fn walk(cx: &FileCx, node: &Node, key: Option<&str>, out: &mut Emitter) {
        match &node.value {
            Value::Map(entries) => {
                if let Some((name, value)) = env_pair(entries)
                    && let Some(s) = str_of(value)
                {
                    let t = s.trim();
                    let offset = s.find(t).unwrap_or(0);
                    let span = locate(cx.text, value.span, s, offset, offset + t.len());
                    emit(
                        out,
                        span,
                        format!("env entry `{name}` has its value written in plain text"),
                        Some(ENV_HELP),
                    );
                }
                for (k, v) in entries {
                    let k = str_of(k);
                    if k.is_some_and(reference_key) {
                        continue;
                    }
                    match (k, str_of(v)) {
                        (Some(k), Some(s)) if secret_name(k) => {
                            let t = s.trim();
                            if is_literal(t) {
                                let offset = s.find(t).unwrap_or(0);
                                let span = locate(cx.text, v.span, s, offset, offset + t.len());
                                emit(
                                    out,
                                    span,
                                    format!("`{k}` has its value written in plain text"),
                                    Some(ENV_HELP),
                                );
                            } else {
                                Self::scan_scalar(cx, v, s, Some(k), out);
                            }
                        }
                        _ => Self::walk(cx, v, k, out),
                    }
                }
            }
            Value::Seq(items) => {
                // An argv list: `["--api-key", "abc"]`, the flag names the next entry.
                let mut flag: Option<&str> = None;
                for item in items {
                    match str_of(item) {
                        Some(s) => {
                            let t = s.trim();
                            if let Some(f) = flag
                                && !t.starts_with('-')
                                && is_literal(t)
                            {
                                let offset = s.find(t).unwrap_or(0);
                                let span = locate(cx.text, item.span, s, offset, offset + t.len());
                                emit(
                                    out,
                                    span,
                                    format!(
                                        "the value of `{f}`{} is written in plain text",
                                        field_note(key)
                                    ),
                                    None,
                                );
                            } else {
                                Self::scan_scalar(cx, item, s, key, out);
                            }
                            flag = (t.starts_with('-')
                                && !t.contains('=')
                                && secret_name(t.trim_start_matches('-'))
                                && !switch_flag(t))
                            .then_some(t);
                        }
                        None => {
                            flag = None;
                            Self::walk(cx, item, key, out);
                        }
                    }
                }
            }
            Value::Str(s) => Self::scan_scalar(cx, node, s, key, out),
            _ => {}
        }
    }
}

impl Rule for PlaintextSecret {
    fn check_file(&self, cx: &FileCx, out: &mut Emitter) {
        Self::walk(cx, cx.root, None, out);
    }

    /// What the file pass cannot see: crontab lines (no YAML), a PM2 file evaluated with
    /// node, and the env entries every reader collects. Deduplicated by span with the file
    /// pass, so a literal is reported once.
    fn check_registration(&self, cx: &RegCx, out: &mut Emitter) {
        let reg = cx.reg;
        for (name, value) in &reg.env {
            let t = value.value.trim();
            if secret_name(&name.value) && is_literal(t) {
                let offset = value.value.find(t).unwrap_or(0);
                let span = locate(cx.text, value.span, &value.value, offset, offset + t.len());
                emit(
                    out,
                    span,
                    format!(
                        "env entry `{}` of {} has its value written in plain text",
                        name.value, reg.label
                    ),
                    Some(ENV_HELP),
                );
            }
        }
        match reg.kind {
            SourceKind::Crontab => {
                let span = reg.command_span;
                if let Some(line) = cx.text.get(span.start..span.end()) {
                    for h in scan_text(line) {
                        emit(
                            out,
                            Span::new(span.start + h.start, h.end - h.start),
                            format!(
                                "{} in the command of {} is written in plain text",
                                h.what, reg.label
                            ),
                            None,
                        );
                    }
                }
                crontab_env_lines(cx.text, reg.span.start, out);
            }
            SourceKind::Pm2 => {
                // The words of an evaluated file have no spans: each literal is found in
                // the text after the app's name (or anywhere), else the command is marked.
                let line = crate::sources::command::shell_join(&reg.command);
                for h in scan_text(&line) {
                    let lit = &line[h.start..h.end];
                    let lit = lit.trim_matches(['"', '\'']);
                    let span = cx
                        .text
                        .get(reg.span.start..)
                        .and_then(|t| t.find(lit))
                        .map(|i| Span::new(reg.span.start + i, lit.len()))
                        .or_else(|| cx.text.find(lit).map(|i| Span::new(i, lit.len())))
                        .unwrap_or(reg.command_span);
                    emit(
                        out,
                        span,
                        format!(
                            "{} in the command of {} is written in plain text",
                            h.what, reg.label
                        ),
                        None,
                    );
                }
            }
            SourceKind::Kubernetes | SourceKind::Code => {}
        }
    }
}

/// `PGPASSWORD=…` lines of a crontab (cron passes them to every command after them): the
/// env lines between the previous job line and the one at `before`, so that each line is
/// looked at once however many jobs the file has.
fn crontab_env_lines(text: &str, before: usize, out: &mut Emitter) {
    let head = text.get(..before).unwrap_or("");
    let mut end = head.rfind('\n').map_or(0, |i| i + 1);
    while end > 0 {
        let start = head[..end - 1].rfind('\n').map_or(0, |i| i + 1);
        let line = head[start..end].trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start();
        let is_env = trimmed.split_once('=').is_some_and(|(name, _)| {
            let name = name.trim();
            !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        });
        if !(trimmed.is_empty() || trimmed.starts_with('#') || is_env) {
            break;
        }
        if is_env && !trimmed.starts_with('#') {
            env_line(start + (line.len() - trimmed.len()), trimmed, out);
        }
        end = start;
    }
}

fn env_line(at: usize, line: &str, out: &mut Emitter) {
    let Some((name, value)) = line.split_once('=') else {
        return;
    };
    let name = name.trim();
    if !secret_name(name) {
        return;
    }
    let vstart = at + line.len() - value.len();
    let t = value.trim();
    let t = match t.strip_prefix(['"', '\'']) {
        Some(inner) => inner.trim_end_matches(['"', '\'']),
        None => t,
    };
    if !is_literal(t) {
        return;
    }
    let offset = value.find(t).unwrap_or(0);
    emit(
        out,
        Span::new(vstart + offset, t.len()),
        format!("crontab env line `{name}` has its value written in plain text"),
        Some(ENV_HELP),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(s: &str) -> Vec<&str> {
        scan_text(s)
            .into_iter()
            .map(|h| &s[h.start..h.end])
            .collect()
    }

    #[test]
    fn literals_in_text() {
        assert_eq!(hits("postgres://app:hunter2@db/billing"), ["hunter2"]);
        assert_eq!(hits("--db-password=hunter2"), ["hunter2"]);
        assert_eq!(hits("PGPASSWORD=s3cret psql -h db"), ["s3cret"]);
        assert_eq!(hits("mysql --password 'pa ss'"), ["pa ss"]);
        assert_eq!(hits("host=db user=app password=hunter2"), ["hunter2"]);
        assert_eq!(hits("Server=db;Password=hunter2;"), ["hunter2"]);
        assert_eq!(hits("AKIAABCDEFGHIJKLMNOP"), ["AKIAABCDEFGHIJKLMNOP"]);
        assert_eq!(hits("--api-key abc123 --all"), ["abc123"]);
    }

    #[test]
    fn references_paths_and_switches_are_not_secrets() {
        for s in [
            "postgres://app:${DB_PASSWORD}@db/billing",
            "--token=$(API_TOKEN)",
            "--password=$PGPASSWORD",
            "--token-file=/var/run/secrets/kubernetes.io/serviceaccount/token",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "--disableSecrets",
            "--disable-secrets node jobs/a.js",
            "--api-key --all",
            "https://example.com/path",
            "--password={{ .Values.password }}",
            "tokenizer=bert",
            "--secret-name=billing-db",
        ] {
            assert!(hits(s).is_empty(), "{s}: {:?}", hits(s));
        }
    }

    #[test]
    fn secret_names() {
        for n in [
            "PGPASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "apiKey",
            "api-key",
            "accessToken",
            "SECRET_KEY",
            "db_passwd",
        ] {
            assert!(secret_name(n), "{n}");
        }
        for n in [
            "secretName",
            "TOKEN_FILE",
            "existingSecret",
            "tokenizer",
            "PASSWORD_PATH",
            "owner",
            "key",
            "vault.hashicorp.com/agent-inject-secret-db",
        ] {
            assert!(!secret_name(n), "{n}");
        }
    }

    #[test]
    fn located_in_the_text_as_written() {
        let text = "a: \"x \\t --password=hunter2\"\n";
        let node = Span::new(3, text.len() - 4);
        let value = "x \t --password=hunter2";
        let h = &scan_text(value)[0];
        let span = locate(text, node, value, h.start, h.end);
        assert_eq!(&text[span.start..span.end()], "hunter2");
    }
}
