//! Commands as registrations write them: shell-ish words, env and `cd` preludes, `sh -c`,
//! the `batchguard run` and `flock` wrappers, ties to manifest jobs (SPEC 3.5), and the
//! command identity duplicates are found by (SPEC 3.6).
//!
//! One peeling pass ([`peel`]) serves all of them, so a wrapper is recognised the same way
//! whether the question is "is it locked?", "which job is it?" or "is it the same command?".

use super::Tie;
use crate::text::Span;

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

/// Shells whose `-c STRING` is unwrapped (SPEC 3.6).
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ash", "ksh"];

/// Folders whose programs are found on `PATH` anyway: `/usr/bin/node` is `node`.
const SYSTEM_BIN: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/opt/homebrew/bin",
    "/snap/bin",
];

/// Nesting of wrappers (`sh -c "flock … sh -c …"`) followed before giving up.
const MAX_LAYERS: usize = 16;

/// What peeling a command's wrappers and preludes gives.
#[derive(Clone, Debug, Default, PartialEq)]
struct Peeled {
    /// The command finally run, redirections and a trailing `| logger`/`| tee` dropped.
    words: Vec<String>,
    /// The working directory from the source and every `cd DIR &&` on the way, normalised.
    workdir: Option<String>,
    /// Runs under `flock` or `batchguard run`.
    wrapped: bool,
    /// The options of the first `batchguard run` (before `--`).
    run_options: Option<Vec<String>>,
    /// A `BATCHGUARD_STORE=URL` assignment in front of the first `batchguard run`.
    run_store_env: Option<String>,
}

fn skip_env(words: &[String]) -> &[String] {
    let mut rest = words;
    loop {
        while let Some(first) = rest.first()
            && is_env_assignment(first)
        {
            rest = &rest[1..];
        }
        // `env [-i] [-u NAME] A=1 CMD`
        if rest.first().is_some_and(|w| basename(w) == "env") && rest.len() > 1 {
            rest = &rest[1..];
            while let Some(first) = rest.first()
                && first.starts_with('-')
            {
                let takes_value = matches!(first.as_str(), "-u" | "--unset" | "-C" | "--chdir");
                rest = rest.get(if takes_value { 2 } else { 1 }..).unwrap_or(&[]);
            }
            continue;
        }
        return rest;
    }
}

/// `cd DIR &&`, `cd DIR;` or `cd DIR ;`: the folder and what follows.
fn cd_prelude(words: &[String]) -> Option<(&str, &[String])> {
    if words.first().map(String::as_str) != Some("cd") {
        return None;
    }
    let dir = words.get(1)?;
    if let Some(d) = dir.strip_suffix(';') {
        return Some((d, words.get(2..).unwrap_or(&[])));
    }
    let sep = words.get(2)?;
    matches!(sep.as_str(), "&&" | ";").then(|| (dir.as_str(), words.get(3..).unwrap_or(&[])))
}

/// The script of `sh [opts] -c SCRIPT`, or None when the shell runs a file.
fn shell_script(words: &[String]) -> Option<&str> {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let flags = w.strip_prefix('-')?;
        if !flags.starts_with('-') && flags.contains('c') {
            return words.get(i + 1).map(String::as_str);
        }
        // `-o OPTION` takes a value; other options stand alone.
        i += if matches!(w.as_str(), "-o" | "+o") {
            2
        } else {
            1
        };
    }
    None
}

/// The command `flock [opts] FILE CMD…` (or `flock FILE -c STRING`) runs.
fn flock_inner(words: &[String]) -> Vec<String> {
    let mut i = 1;
    while let Some(w) = words.get(i)
        && w.starts_with('-')
    {
        let takes_value = matches!(
            w.as_str(),
            "-w" | "--wait" | "--timeout" | "-E" | "--conflict-exit-code"
        );
        i += if takes_value { 2 } else { 1 };
    }
    i += 1; // the lock file
    match words.get(i).map(String::as_str) {
        Some("-c" | "--command") => words.get(i + 1).map(|s| split_words(s)).unwrap_or_default(),
        _ => words.get(i..).map(<[String]>::to_vec).unwrap_or_default(),
    }
}

/// True for `>`, `>>`, `2>`, `&>`, `2>&1`, `>/dev/null`, `2>>log`…: an output redirection,
/// and whether its target is the next word.
fn redirection(word: &str) -> Option<bool> {
    let rest = word.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix('&').unwrap_or(rest);
    let after = rest.strip_prefix(">>").or_else(|| rest.strip_prefix('>'))?;
    // `>|` (noclobber override) and `>&2` are redirections too.
    let after = after.strip_prefix('|').unwrap_or(after);
    let after = after.strip_prefix('&').unwrap_or(after);
    Some(after.is_empty())
}

/// Drops output redirections (with their targets) and a trailing `| logger …` / `| tee …`.
fn drop_output_plumbing(words: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "|" || w == "|&" {
            let next = words.get(i + 1).map(|w| basename(w));
            if matches!(next, Some("logger" | "tee")) {
                break;
            }
        }
        match redirection(w) {
            Some(target_follows) => i += if target_follows { 2 } else { 1 },
            None => {
                out.push(w.clone());
                i += 1;
            }
        }
    }
    out
}

fn peel(argv: &[String], workdir: Option<&str>) -> Peeled {
    let mut out = Peeled {
        workdir: workdir.map(normalise_path),
        ..Peeled::default()
    };
    let mut words: Vec<String> = argv.to_vec();
    let mut store_env: Option<String> = None;
    for _ in 0..MAX_LAYERS {
        let rest = skip_env(&words);
        if out.run_options.is_none() {
            let skipped = &words[..words.len() - rest.len()];
            let prefix = format!("{}=", super::STORE_ENV);
            if let Some(v) = skipped.iter().rev().find_map(|w| w.strip_prefix(&prefix)) {
                store_env = Some(v.to_owned());
            }
        }
        if let Some((dir, after)) = cd_prelude(rest) {
            out.workdir = Some(resolve(out.workdir.as_deref(), dir));
            words = after.to_vec();
            continue;
        }
        let program = rest.first().map(|w| basename(w));
        let next: Vec<String> = match program {
            Some(p) if SHELLS.contains(&p) && shell_script(rest).is_some() => {
                shell_script(rest).map(split_words).unwrap_or_default()
            }
            Some("flock") => {
                out.wrapped = true;
                flock_inner(rest)
            }
            Some("batchguard") if rest.get(1).map(String::as_str) == Some("run") => {
                out.wrapped = true;
                let end = rest.iter().position(|w| w == "--");
                if out.run_options.is_none() {
                    out.run_options = Some(rest[2..end.unwrap_or(rest.len())].to_vec());
                    out.run_store_env = store_env.take();
                }
                match end {
                    Some(i) => rest[i + 1..].to_vec(),
                    None => Vec::new(),
                }
            }
            Some("exec" | "nohup") => rest[1..].to_vec(),
            _ => {
                words = rest.to_vec();
                break;
            }
        };
        words = next;
    }
    out.words = drop_output_plumbing(words);
    out
}

/// True when the command runs under `batchguard run` or `flock` (by basename), also behind
/// env assignments, `cd DIR &&` and `sh -c "…"` (SPEC 3.5 "Wrapped crontab lines").
pub fn is_wrapped(argv: &[String]) -> bool {
    peel(argv, None).wrapped
}

/// The value of a `batchguard run` option, `--NAME VALUE` or `--NAME=VALUE` (the last one
/// given, as clap takes it).
fn option_value(options: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    let mut found = None;
    let mut i = 0;
    while i < options.len() {
        let w = options[i].as_str();
        if let Some(v) = w.strip_prefix(&eq) {
            found = Some(v.to_owned());
        } else if w == name {
            found = options.get(i + 1).cloned();
            i += 1;
        }
        i += 1;
    }
    found
}

/// The `--job NAME` (and `--manifest PATH`) of a `batchguard run` command.
pub fn batchguard_tie(argv: &[String], span: Span) -> Option<Tie> {
    let options = peel(argv, None).run_options?;
    option_value(&options, "--job").map(|job| Tie {
        service: None,
        job,
        manifest: option_value(&options, "--manifest"),
        span,
    })
}

/// How a `batchguard run` command names its store itself, when it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunStore {
    /// `--store URL` (or `--store=URL`).
    Flag(String),
    /// `BATCHGUARD_STORE=URL` in front of `batchguard run` (its env prelude, `env …`).
    Env(String),
}

/// Whether the command runs under `batchguard run`, and the store it names itself: `None`
/// when it is no `batchguard run`, `Some(None)` when it gives no store of its own.
pub fn run_store(argv: &[String]) -> Option<Option<RunStore>> {
    let peeled = peel(argv, None);
    let options = peeled.run_options?;
    Some(
        option_value(&options, "--store")
            .map(RunStore::Flag)
            .or(peeled.run_store_env.map(RunStore::Env)),
    )
}

/// What a (possibly wrapped) command finally runs; see [`Registration::effective_argv`].
/// Leading `./` is dropped from each word; paths are not resolved (see [`identity`]).
///
/// [`Registration::effective_argv`]: super::Registration::effective_argv
pub fn effective_argv(argv: &[String]) -> Vec<String> {
    peel(argv, None)
        .words
        .into_iter()
        .map(|w| w.strip_prefix("./").map(str::to_owned).unwrap_or(w))
        .collect()
}

/// Collapses `.`, `..` and repeated slashes; keeps a leading `/` (and leading `..` of a
/// relative path, which nothing is known above).
pub fn normalise_path(p: &str) -> String {
    let absolute = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// `p` against the working directory `base` when it is known and `p` is relative.
fn resolve(base: Option<&str>, p: &str) -> String {
    match base {
        Some(b) if !p.starts_with('/') && !opaque(p) => normalise_path(&format!("{b}/{p}")),
        _ => normalise_path(p),
    }
}

/// A word whose meaning depends on the shell's expansion (`~`, `$HOME`): kept as written.
fn opaque(word: &str) -> bool {
    word.starts_with(['~', '$'])
}

/// An argument that names a file relative to the working directory when it is one: not
/// an option, not `key=value`, not a URL, not expanded by the shell.
fn relative_word(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with(['-', '/', '+'])
        && !opaque(word)
        && !word.contains(['=', '\n'])
        && !word.contains("://")
        && !word.contains(char::is_whitespace)
}

/// A program as compared: by basename when bare or in a system bin folder, else a path
/// (`./artisan` and `/var/www/shop/artisan` are files of their site, not PATH lookups).
fn program_word(word: &str, workdir: Option<&str>) -> Word {
    if !word.contains('/') || opaque(word) {
        return Word::Program(word.to_owned());
    }
    let path = resolve(workdir, word);
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    if SYSTEM_BIN.contains(&dir) {
        return Word::Program(basename(&path).to_owned());
    }
    Word::Path(path)
}

/// One word of a command identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Word {
    /// Looked up on `PATH`: compared by basename.
    Program(String),
    /// A file (absolute, or relative when no working directory is known).
    Path(String),
    /// Anything else, compared as written.
    Plain(String),
}

impl Word {
    fn text(&self) -> &str {
        match self {
            Word::Program(s) | Word::Path(s) | Word::Plain(s) => s,
        }
    }

    /// The part every matching word shares: the basename (SPEC 3.6 tail rule).
    pub fn tail(&self) -> &str {
        basename(self.text())
    }
}

/// A command as BG601 compares it (SPEC 3.6 "Command identity"): wrappers, env
/// assignments, redirections and a trailing `| logger` gone; relative words resolved
/// against the working directory when it is known.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub workdir: Option<String>,
    /// The program first.
    pub words: Vec<Word>,
}

/// The identity of `argv` started in `workdir` (PM2 `cwd`, a container's `workingDir`).
pub fn identity(argv: &[String], workdir: Option<&str>) -> Identity {
    let peeled = peel(argv, workdir);
    let wd = peeled.workdir.as_deref();
    let mut words = Vec::with_capacity(peeled.words.len());
    let mut it = peeled.words.iter();
    if let Some(program) = it.next() {
        words.push(program_word(program, wd));
    }
    for w in it {
        words.push(if w.starts_with('/') {
            Word::Path(normalise_path(w))
        } else if relative_word(w) {
            match wd {
                Some(_) => Word::Path(resolve(wd, w)),
                None if w.contains('/') || w.starts_with('.') => Word::Path(normalise_path(w)),
                None => Word::Plain(w.clone()),
            }
        } else {
            Word::Plain(w.clone())
        });
    }
    Identity {
        workdir: peeled.workdir,
        words,
    }
}

impl Identity {
    /// A key that every command this one matches shares: program basename and the last
    /// path component of each argument. Grouping buckets by it before comparing.
    pub fn bucket_key(&self) -> Vec<&str> {
        self.words.iter().map(Word::tail).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// True when a word is relative (no working directory to resolve it against), so it
    /// may match an absolute path by its tail.
    pub fn has_relative(&self) -> bool {
        self.words.iter().enumerate().any(|(i, w)| match w {
            Word::Program(_) => false,
            Word::Path(p) => !p.starts_with('/'),
            Word::Plain(p) => i > 0 && relative_word(p),
        })
    }

    /// An identity without relative words matches only identities with the same key
    /// (program basename, every other word as it is), or ones with relative words.
    pub fn exact_key(&self) -> Vec<&str> {
        self.words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { w.tail() } else { w.text() })
            .collect()
    }

    /// SPEC 3.6: the same program (by basename) and arguments. Different working
    /// directories mean different commands; a relative word matches an absolute path with
    /// the same tail only when one side has no known working directory.
    pub fn same_command(&self, other: &Identity) -> bool {
        if self.words.len() != other.words.len() {
            return false;
        }
        let tail_rule = match (&self.workdir, &other.workdir) {
            (Some(a), Some(b)) if a != b => return false,
            (Some(_), Some(_)) => false,
            _ => true,
        };
        self.words
            .iter()
            .zip(&other.words)
            .all(|(a, b)| word_matches(a, b, tail_rule))
    }
}

fn word_matches(a: &Word, b: &Word, tail_rule: bool) -> bool {
    if a.text() == b.text() {
        return true;
    }
    match (a, b) {
        // A PATH lookup matches any program of that name.
        (Word::Program(x), Word::Program(y) | Word::Path(y))
        | (Word::Path(y), Word::Program(x)) => basename(y) == x,
        _ if !tail_rule => false,
        _ => {
            let (x, y) = (a.text(), b.text());
            let (abs, rel) = match (x.starts_with('/'), y.starts_with('/')) {
                (true, false) => (x, y),
                (false, true) => (y, x),
                _ => return false,
            };
            relative_word(rel)
                && !rel.starts_with("..")
                && abs
                    .strip_suffix(rel)
                    .is_some_and(|head| head.ends_with('/'))
        }
    }
}

/// The command as a shell would read it, quoting only where a word needs it: how argv
/// lists (Kubernetes, PM2, manifest lists) are shown in messages.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_owned()
    } else if !w.contains(['"', '\\', '$', '`']) {
        format!("\"{w}\"")
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
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
    fn the_store_a_run_command_names() {
        let store = |cmd: &str| run_store(&v(cmd));
        assert_eq!(store("node x"), None);
        assert_eq!(store("batchguard run --job a -- node x"), Some(None));
        assert_eq!(
            store("batchguard run --job a --store 'postgres://db/ops' -- node x --store y"),
            Some(Some(RunStore::Flag("postgres://db/ops".into())))
        );
        assert_eq!(
            store("cd /srv && BATCHGUARD_STORE=redis://r/0 batchguard run --job=a -- x"),
            Some(Some(RunStore::Env("redis://r/0".into())))
        );
        assert_eq!(
            store("sh -c 'env BATCHGUARD_STORE=mysql://m/o batchguard run --store=\"$S\" --job a'"),
            Some(Some(RunStore::Flag("$S".into())))
        );
        // An assignment for the job's own command is not the guard's.
        assert_eq!(
            store("batchguard run --job a -- env BATCHGUARD_STORE=x node y"),
            Some(None)
        );
    }

    #[test]
    fn quotes_group_words() {
        assert_eq!(v(r#"a "b c" 'd e' f\ g"#), ["a", "b c", "d e", "f g"]);
    }

    fn id(cmd: &str, wd: Option<&str>) -> Identity {
        identity(&v(cmd), wd)
    }

    #[test]
    fn wrappers_behind_shells_and_cd() {
        assert!(is_wrapped(&v(r#"sh -c "flock -n /l node a.js""#)));
        assert!(is_wrapped(&v(
            "/bin/bash -lc 'cd /srv && flock /l node a.js'"
        )));
        assert!(is_wrapped(&v(
            "cd /srv; batchguard run --job x -- node a.js"
        )));
        assert!(!is_wrapped(&v("bash jobs/flock.sh")));
        let t = batchguard_tie(
            &v(r#"cd /srv && sh -c "batchguard run --job settle -- node a.js""#),
            Span::default(),
        );
        assert_eq!(t.map(|t| t.job), Some("settle".into()));
    }

    #[test]
    fn plumbing_is_dropped() {
        for cmd in [
            "node a.js >> /var/log/a.log 2>&1",
            "node a.js > /dev/null 2>/dev/null",
            "node a.js &>/dev/null",
            "node a.js >/dev/null 2>&1 | logger -t a",
            "node a.js 2>&1 | /usr/bin/tee -a /var/log/a",
            "exec node a.js",
        ] {
            assert_eq!(effective_argv(&v(cmd)), v("node a.js"), "{cmd}");
        }
        // A real pipeline stays a pipeline.
        assert_eq!(
            effective_argv(&v("node a.js | gzip")),
            v("node a.js | gzip")
        );
    }

    #[test]
    fn the_spellings_of_one_command_match() {
        let base = id("node jobs/settle.js", Some("/srv/payments"));
        for (cmd, wd) in [
            ("cd /srv/payments && node jobs/settle.js >> log 2>&1", None),
            ("/usr/bin/node /srv/payments/jobs/settle.js | logger", None),
            (r#"sh -c "cd /srv/payments && node ./jobs/settle.js""#, None),
            (
                "/bin/sh -c 'node /srv/payments/jobs/../jobs/settle.js'",
                None,
            ),
            (
                "PATH=/x NODE_ENV=production node jobs/settle.js",
                Some("/srv/payments/"),
            ),
            (
                "flock -n /tmp/s.lock node /srv/payments/jobs/settle.js",
                None,
            ),
            (
                "batchguard run --job settle -- node jobs/settle.js",
                Some("/srv/payments"),
            ),
        ] {
            let other = id(cmd, wd);
            assert!(base.same_command(&other), "{cmd}: {other:?}");
            assert!(other.same_command(&base), "{cmd}");
            assert_eq!(base.bucket_key(), other.bucket_key(), "{cmd}");
        }
    }

    #[test]
    fn working_directories_separate() {
        let shop = id("cd /var/www/shop && php artisan schedule:run", None);
        let blog = id("cd /var/www/blog && php artisan schedule:run", None);
        assert!(!shop.same_command(&blog));
        let shop_abs = id("/var/www/shop/artisan schedule:run", None);
        let blog_abs = id("/var/www/blog/artisan schedule:run", None);
        assert!(!shop_abs.same_command(&blog_abs));
        // The same file started from another folder may read other relative files.
        let inner = id("cd jobs && node settle.js", Some("/srv/payments"));
        assert!(!inner.same_command(&id("node jobs/settle.js", Some("/srv/payments"))));
    }

    #[test]
    fn tail_rule_needs_an_unknown_working_directory() {
        let abs = id("node /srv/payments/jobs/settle.js", None);
        let rel = id("node jobs/settle.js", None);
        assert!(rel.same_command(&abs) && abs.same_command(&rel));
        // Known elsewhere: resolved, and no longer the same file.
        let elsewhere = id("node jobs/settle.js", Some("/srv/other"));
        assert!(!elsewhere.same_command(&abs) && !abs.same_command(&elsewhere));
        // Both known and equal: compared resolved, no tail rule needed.
        let a = id("node jobs/settle.js", Some("/srv/payments"));
        let b = id(
            "cd /srv/payments && node /srv/payments/jobs/settle.js",
            None,
        );
        assert!(a.same_command(&b));
        // An option never matches by tail.
        assert!(!id("node --all", None).same_command(&id("node /x/--all", None)));
        // A different tail is a different file.
        assert!(!rel.same_command(&id("node /srv/payments/settle.js", None)));
    }

    #[test]
    fn programs_by_basename() {
        assert!(id("/usr/local/bin/node a.js", None).same_command(&id("node a.js", None)));
        assert!(id("/opt/node/bin/node a.js", None).same_command(&id("node a.js", None)));
        assert!(!id("node a.js", None).same_command(&id("deno a.js", None)));
    }

    #[test]
    fn paths_normalise() {
        assert_eq!(normalise_path("/srv//app/./x/../y/"), "/srv/app/y");
        assert_eq!(normalise_path("./a/b"), "a/b");
        assert_eq!(normalise_path("../a"), "../a");
        assert_eq!(normalise_path("/.."), "/");
    }

    #[test]
    fn argv_lists_shown_with_quotes_where_needed() {
        let argv = vec![
            "/bin/sh".to_owned(),
            "-c".into(),
            "cd /srv && node a.js".into(),
        ];
        assert_eq!(shell_join(&argv), r#"/bin/sh -c "cd /srv && node a.js""#);
        assert_eq!(shell_join(&["echo".into(), "$HOME".into()]), "echo '$HOME'");
    }
}
