//! crontab files, read as cron reads them.
//!
//! **Files.** `crontab`, `*.crontab`, `*.cron` (files meant to be copied into `cron.d`, read
//! in whatever folder they are), every file directly in a `cron.d` folder and busybox
//! `crontabs/<user>` files. In `cron.d` and `crontabs` folders the names cron skips are
//! skipped (cronie: a leading `.` or `#`, a trailing `~`, `.rpmsave`/`.rpmorig`/`.rpmnew`;
//! dpkg/ucf leftovers), and so is documentation kept beside the files (`README`, `*.md`,
//! `*.txt`, `*.rst`). Other dotted names are read: cronie reads them, and a stale copy
//! (`billing.bak`) that cronie runs is exactly the duplicate worth finding.
//!
//! **The user column.** System-format files have a user between the schedule and the
//! command. Always: files in a `cron.d` folder, `etc/crontab`, files matched by `[sources]
//! crontab_user_column`. Never: busybox `crontabs/<user>` (the file name is the user).
//! Otherwise (`crontab`, `*.crontab`, `*.cron`) the file is recognised from its job lines,
//! taking the word after the schedule (W) and the word after that (N) of every job line:
//! - W is *no user* when N is missing, or W is not a user name (`[a-z_][a-z0-9_-]*$?`, at
//!   most 32 characters: no `/`, `=`, `.`, `$VAR` or quote), or W is a shell word or a
//!   common program (`cd`, `flock`, `php`, `bash` …). One such line makes the file a user
//!   crontab: in a system file cron would take that word for a user.
//! - Otherwise the file has a user column when a line's W is `root`, `www-data`, `nobody`
//!   or `daemon`, when a comment is a column header naming the user (`# m h dom mon dow
//!   user command`, Debian's `# *  *  *  *  * user-name command to be executed`), or when
//!   every line's N is an absolute path, an env assignment or a known program and its W is
//!   not a program itself (`deploy /srv/bin/rotate`).
//! - A word that is both a common user and a program (`node`, `git`, `postgres` …) is a
//!   user only by those signs (or when N is a program: `node node x.js`), so `node
//!   /srv/x.js` alone stays the program node.
//! - Undecided files are user crontabs, except `*.cron`, which are cron.d files.
//!
//! **Lines.** Comments and blank lines are skipped; env lines (`NAME=value`, spaces around
//! `=` allowed) are understood, and `CRON_TZ=` sets the zone of the job lines after it, as
//! cronie does. `TZ=` only sets the command's environment (cronie and Debian cron both
//! evaluate schedules in the daemon's zone). A job line without `CRON_TZ=` takes `[sources]
//! crontab_timezone`, else UTC, and is marked `zone_assumed`. `@reboot` registers nothing
//! periodic. A `%` ends the command (cron feeds the rest to stdin).
//!
//! **Problems**, each once per file, located on the first line concerned:
//! - BG609: lines that are neither a comment, an env line nor a job (with the count).
//! - BG610: CRLF line endings on env or job lines (cron keeps the `\r`); a last job line
//!   without a newline (cron drops it: the job never runs; it is still registered, as
//!   meant); a byte that is not UTF-8 in a job line. Such a byte in the command leaves the
//!   line registered (shown as `?`); in the schedule or user, cron cannot read the line
//!   either, so it registers nothing. In comments and env values such bytes are fine:
//!   cron ignores comments and passes env values as bytes.

use super::{Problem, Read, ReadOptions, Registration, SourceKind, Span};
use crate::manifest::Issue;
use crate::text::Spanned;
use std::path::Path;

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

fn parent_is(path: &Path, dir: &str) -> bool {
    path.parent()
        .and_then(|p| p.file_name())
        .is_some_and(|d| d == dir)
}

pub fn is_crontab_path(path: &Path) -> bool {
    let name = file_name(path);
    if skipped_name(name) {
        return false;
    }
    let named = |ext: &str| name.len() > ext.len() && name.ends_with(ext);
    name == "crontab"
        || named(".crontab")
        || named(".cron")
        || parent_is(path, "cron.d")
        || parent_is(path, "crontabs")
}

/// Names cron skips in its folders, and documentation kept beside crontabs.
fn skipped_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    name.is_empty()
        || name.starts_with(['.', '#'])
        || name.ends_with('~')
        || [".rpmsave", ".rpmorig", ".rpmnew", ".md", ".txt", ".rst"]
            .iter()
            .any(|e| lower.ends_with(e))
        || lower.contains(".dpkg-")
        || lower.contains(".ucf-")
        || lower == "readme"
        || lower.starts_with("readme.")
}

/// Whether the file has a user column, by where it lives, what `[sources]` says, and what
/// its lines say (module docs).
fn user_column(path: &Path, lines: &[Line], opts: &ReadOptions) -> bool {
    if opts.crontab_user_column || parent_is(path, "cron.d") {
        return true;
    }
    let name = file_name(path);
    if name == "crontab" && parent_is(path, "etc") {
        return true;
    }
    if parent_is(path, "crontabs") {
        return false;
    }
    let header = lines
        .iter()
        .any(|l| l.kind == Kind::Comment && is_user_header(l.body));
    let mut evidence = lines.iter().filter_map(|l| match l.kind {
        Kind::Job { sched_fields } => {
            let mut words = l.body.split_ascii_whitespace().skip(sched_fields);
            let w = words.next()?;
            Some(evidence(w, words.next()))
        }
        _ => None,
    });
    let all: Vec<Evidence> = evidence.by_ref().collect();
    if all.contains(&Evidence::NotUser) {
        return false;
    }
    if header || all.contains(&Evidence::Strong) {
        return true;
    }
    if !all.is_empty() && all.iter().all(|e| *e == Evidence::Shaped) {
        return true;
    }
    name.ends_with(".cron")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Evidence {
    /// This word cannot be a user: the file has no user column.
    NotUser,
    /// A user that is no program (`root`): the file has a user column.
    Strong,
    /// A user name followed by what starts a command.
    Shaped,
    /// Could be either.
    Weak,
}

/// Shell words and programs that start commands and are nobody's user name.
const PROGRAMS: &[&str] = &[
    "cd",
    "exec",
    "export",
    "test",
    "[",
    "[[",
    "if",
    "for",
    "while",
    "case",
    "set",
    "source",
    "echo",
    "printf",
    "sleep",
    "true",
    "false",
    "flock",
    "batchguard",
    "timeout",
    "nice",
    "ionice",
    "nohup",
    "env",
    "run-parts",
    "sudo",
    "su",
    "gosu",
    "su-exec",
    "chpst",
    "setuidgid",
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "php",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "java",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "curl",
    "wget",
    "rsync",
    "find",
    "rm",
    "cp",
    "mv",
    "tar",
    "gzip",
    "make",
    "docker",
    "kubectl",
    "certbot",
    "logrotate",
    "wp",
    "drush",
    "mysqldump",
    "pg_dump",
    "psql",
    "artisan",
];

/// Words that are both common user names and programs.
const AMBIGUOUS: &[&str] = &[
    "node", "git", "postgres", "mysql", "redis", "nginx", "mongodb", "deno", "bun",
];

/// System accounts that are no programs.
const SYSTEM_USERS: &[&str] = &["root", "www-data", "nobody", "daemon"];

fn user_like(w: &str) -> bool {
    let w = w.strip_suffix('$').unwrap_or(w);
    let mut chars = w.chars();
    w.len() <= 32
        && chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_lowercase())
        && chars.all(|c| c == '_' || c == '-' || c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn starts_command(n: &str) -> bool {
    n.starts_with(['/', '~', '$'])
        || PROGRAMS.contains(&n)
        || AMBIGUOUS.contains(&n)
        || env_assignment(n).is_some()
}

fn evidence(w: &str, next: Option<&str>) -> Evidence {
    let Some(next) = next else {
        return Evidence::NotUser;
    };
    if !user_like(w) || PROGRAMS.contains(&w) {
        return Evidence::NotUser;
    }
    if SYSTEM_USERS.contains(&w) {
        return Evidence::Strong;
    }
    let program_next = PROGRAMS.contains(&next) || AMBIGUOUS.contains(&next);
    if AMBIGUOUS.contains(&w) {
        return if program_next {
            Evidence::Shaped
        } else {
            Evidence::Weak
        };
    }
    if starts_command(next) {
        Evidence::Shaped
    } else {
        Evidence::Weak
    }
}

/// A comment that heads the columns and names a user column.
fn is_user_header(comment: &str) -> bool {
    let lower = comment.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .trim_start_matches('#')
        .split(|c: char| c.is_ascii_whitespace() || c == '|')
        .filter(|w| !w.is_empty())
        .collect();
    let user = words
        .iter()
        .any(|w| matches!(*w, "user" | "user-name" | "username" | "usr"));
    let command = words
        .iter()
        .any(|w| w.starts_with("command") || *w == "cmd");
    let schedule = words
        .iter()
        .any(|w| matches!(*w, "dow" | "*" | "m" | "min" | "minute" | "wday"));
    user && command && schedule
}

/// `NAME=value` or `NAME = value`, as cron reads env lines: the name, the value (quotes
/// removed) and the value's offset in `line`.
fn env_assignment(line: &str) -> Option<(&str, &str, usize)> {
    let name_end = line.find(|c: char| c == '=' || c.is_ascii_whitespace())?;
    let name = line.get(..name_end)?;
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    if !ok {
        return None;
    }
    let after = line.get(name_end..)?.trim_start().strip_prefix('=')?;
    let raw = after.trim_start();
    let offset = line.len() - raw.len();
    let value = raw.trim_end();
    let value = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    Some((name, value, offset))
}

/// Splits off the first `n` whitespace-separated fields; returns them with their byte
/// offsets in `line`, and the offset of the rest.
fn fields(line: &str, n: usize) -> Option<(Vec<(usize, &str)>, usize)> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    let b = line.as_bytes();
    while out.len() < n {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        let s = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push((s, line.get(s..i)?));
    }
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    Some((out, i))
}

/// The command part before the first unescaped `%`.
fn before_percent(cmd: &str) -> &str {
    let b = cmd.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'%' => return cmd.get(..i).unwrap_or(cmd),
            _ => i += 1,
        }
    }
    cmd
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Blank,
    Comment,
    Env,
    Job { sched_fields: usize },
}

/// One line of the file.
struct Line<'a> {
    /// 1-based line number.
    n: usize,
    /// Offset of `body` in the text.
    start: usize,
    /// The line without leading blanks and without its `\r\n`.
    body: &'a str,
    crlf: bool,
    newline: bool,
    kind: Kind,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += raw.len();
        let newline = raw.ends_with('\n');
        let no_lf = raw.strip_suffix('\n').unwrap_or(raw);
        let crlf = no_lf.ends_with('\r');
        let line = no_lf.strip_suffix('\r').unwrap_or(no_lf);
        let body = line.trim_start();
        let kind = if body.trim_end().is_empty() {
            Kind::Blank
        } else if body.starts_with('#') {
            Kind::Comment
        } else if !body.starts_with('@') && env_assignment(body).is_some() {
            Kind::Env
        } else {
            Kind::Job {
                sched_fields: if body.starts_with('@') { 1 } else { 5 },
            }
        };
        out.push(Line {
            n: i + 1,
            start: line_start + (line.len() - body.len()),
            body,
            crlf,
            newline,
            kind,
        });
    }
    out
}

/// Line numbers after the first, for a message: `lines 4, 9 and 12`.
fn more_lines(nums: &[usize]) -> String {
    const SHOWN: usize = 10;
    let shown: Vec<String> = nums.iter().take(SHOWN).map(usize::to_string).collect();
    let list = match shown.as_slice() {
        [] => return String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    let rest = nums.len().saturating_sub(SHOWN);
    let tail = if rest > 0 {
        format!(" and {rest} more")
    } else {
        String::new()
    };
    let s = if nums.len() == 1 { "" } else { "s" };
    format!(" (also line{s} {list}{tail})")
}

/// Reads a crontab from its bytes. cron reads bytes, not characters, so a byte that is
/// not UTF-8 costs only its line (BG610), never the file: in the text shown it becomes `?`,
/// one byte for one byte, so every span stays where cron sees it.
pub fn read_bytes(path: &Path, bytes: &[u8], opts: &ReadOptions) -> Read {
    let mut text = String::with_capacity(bytes.len());
    let mut invalid = Vec::new();
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        for _ in chunk.invalid() {
            invalid.push(text.len());
            text.push('?');
        }
    }
    let mut out = read_with(path, &text, &invalid, opts);
    out.text = text;
    out
}

/// Reads a crontab that is valid UTF-8.
pub fn read(path: &Path, text: &str, opts: &ReadOptions) -> Read {
    read_with(path, text, &[], opts)
}

/// `invalid`: sorted offsets of the bytes of `text` that stand for bytes that were not UTF-8.
fn read_with(path: &Path, text: &str, invalid: &[usize], opts: &ReadOptions) -> Read {
    let lines = lines(text);
    let user_column = user_column(path, &lines, opts);
    let mut out = Read::default();
    let mut tz: Option<Spanned<String>> = None;
    let mut store_env: Option<Spanned<String>> = None;
    let mut unreadable: Vec<(usize, Span, String)> = Vec::new();
    let mut not_utf8: Vec<(usize, usize, bool)> = Vec::new();
    let mut crlf: Vec<(usize, usize)> = Vec::new();
    for line in &lines {
        let end = line.start + line.body.len();
        if line.crlf && matches!(line.kind, Kind::Env | Kind::Job { .. }) {
            crlf.push((line.n, end));
        }
        let sched_fields = match line.kind {
            Kind::Blank | Kind::Comment => continue,
            Kind::Env => {
                if let Some((name, value, voff)) = env_assignment(line.body)
                    && (name == "CRON_TZ" || name == super::STORE_ENV)
                {
                    let vstart = line.start + voff;
                    let set = (!value.is_empty()).then(|| Spanned {
                        value: value.to_owned(),
                        span: Span::new(vstart, end.saturating_sub(vstart)),
                    });
                    // Like CRON_TZ, an env line holds for the job lines after it.
                    if name == "CRON_TZ" {
                        tz = set;
                    } else {
                        store_env = set;
                    }
                }
                continue;
            }
            Kind::Job { sched_fields } => sched_fields,
        };
        let body = line.body;
        let want = sched_fields + usize::from(user_column);
        let parsed = fields(body, want).filter(|(_, rest)| *rest < body.trim_end().len());
        let Some((f, rest)) = parsed else {
            unreadable.push((
                line.n,
                Span::new(line.start, body.trim_end().len()),
                format!(
                    "expected {} schedule field{}{} and a command",
                    sched_fields,
                    if sched_fields == 1 { "" } else { "s" },
                    if user_column { ", a user" } else { "" }
                ),
            ));
            continue;
        };
        let bad = invalid
            .get(invalid.partition_point(|&b| b < line.start)..)
            .and_then(|s| s.first())
            .copied()
            .filter(|&b| b < end);
        if let Some(b) = bad {
            let in_command = b >= line.start + rest;
            not_utf8.push((line.n, b, in_command));
            if !in_command {
                continue;
            }
        }
        if f.first().is_some_and(|(_, w)| *w == "@reboot") {
            continue;
        }
        let sched_start = f.first().map_or(0, |(s, _)| *s);
        let sched_end = f
            .get(sched_fields - 1)
            .map_or(sched_start, |(s, w)| s + w.len());
        let schedule = body.get(sched_start..sched_end).unwrap_or("").to_owned();
        let sched_span = Span::new(line.start + sched_start, sched_end - sched_start);
        let cmd_text = before_percent(body.get(rest..).unwrap_or("")).trim_end();
        let command = super::split_words(cmd_text);
        let command_span = Span::new(line.start + rest, cmd_text.len());
        let tie = super::batchguard_tie(&command, command_span);
        let (timezone, zone_assumed) = match &tz {
            Some(t) => (Some(t.clone()), false),
            None => (
                opts.crontab_timezone.as_ref().map(|z| Spanned {
                    value: z.clone(),
                    span: sched_span,
                }),
                true,
            ),
        };
        if !line.newline {
            out.problems.push(Problem {
                issue: Issue::CrontabFormat,
                span: Span::new(line.start, body.trim_end().len()),
                message: format!(
                    "crontab line {} is the last line and has no newline: cron ignores it, so this job never runs",
                    line.n
                ),
                help: "end the file with a newline".into(),
            });
        }
        out.registrations.push(Registration {
            kind: SourceKind::Crontab,
            span: Span::new(line.start, body.trim_end().len()),
            label: format!("crontab line {}", line.n),
            schedule: Some(Spanned {
                value: schedule,
                span: sched_span,
            }),
            timezone,
            zone_assumed,
            dialect: SourceKind::Crontab.dialect(),
            wrapped: super::is_wrapped(&command),
            command,
            command_span,
            instances: 1,
            tie,
            store_env: store_env.clone(),
            ..Registration::default()
        });
    }
    if let Some(((n, span, why), rest)) = unreadable.split_first() {
        let others: Vec<usize> = rest.iter().map(|(n, ..)| *n).collect();
        out.problems.push(Problem {
            issue: Issue::SourceNotRead,
            span: *span,
            message: format!(
                "crontab line {n} is neither a comment, an env line nor a job: {why}{}; lines that cannot be read are not checked",
                more_lines(&others)
            ),
            help: "fix the line; a registration that cannot be read may hide a duplicate".into(),
        });
    }
    if let Some(((n, b, in_command), rest)) = not_utf8.split_first() {
        let others: Vec<usize> = rest.iter().map(|(n, ..)| *n).collect();
        let what = if *in_command {
            "in its command (read as `?`: duplicates are compared on that spelling)"
        } else {
            "before its command: cron cannot read the schedule, and neither can batchguard"
        };
        out.problems.push(Problem {
            issue: Issue::CrontabFormat,
            span: Span::new(*b, 1),
            message: format!(
                "crontab line {n} has a byte that is not UTF-8 {what}{}",
                more_lines(&others)
            ),
            help: "save the crontab as UTF-8 (`iconv -f latin1 -t utf-8`)".into(),
        });
    }
    if let Some(&(n, at)) = crlf.first() {
        let count = crlf.len();
        let (lines_word, verb) = if count == 1 {
            ("line ends", "its")
        } else {
            ("lines end", "each")
        };
        out.problems.push(Problem {
            issue: Issue::CrontabFormat,
            span: Span::new(at, 1),
            message: format!(
                "{count} {lines_word} in CRLF (`\\r\\n`), the first at line {n}: cron keeps the `\\r`, so {verb} command or env value ends in a carriage return"
            ),
            help: "save the crontab with LF line endings (`dos2unix`, or `eol=lf` in .gitattributes)".into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_env_lines_macros_and_user_column() {
        let text = "MAILTO=ops@example.com\nCRON_TZ=Asia/Seoul\n# nightly\n0 2 * * * root cd /srv && node jobs/a.js --x %stdin\n@daily root flock -n /l node b.js\n@reboot root node c.js\n";
        let r = read(
            Path::new("etc/cron.d/billing"),
            text,
            &ReadOptions::default(),
        );
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.registrations.len(), 2);
        let a = &r.registrations[0];
        assert_eq!(
            a.schedule.as_ref().map(|s| s.value.as_str()),
            Some("0 2 * * *")
        );
        assert_eq!(a.zone(), "Asia/Seoul");
        assert!(!a.zone_assumed);
        assert_eq!(a.effective_argv(), ["node", "jobs/a.js", "--x"]);
        assert!(!a.wrapped);
        assert!(r.registrations[1].wrapped);
        assert_eq!(a.label, "crontab line 4");
    }

    #[test]
    fn unreadable_lines_are_one_bg609() {
        let r = read(
            Path::new("crontab"),
            "0 2 * *\n0 3 * * * ok\nfoo\n0 4\n",
            &ReadOptions::default(),
        );
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert_eq!(r.problems[0].issue, Issue::SourceNotRead);
        assert_eq!(r.problems[0].span.start, 0);
        assert!(
            r.problems[0].message.contains("(also lines 3 and 4)"),
            "{}",
            r.problems[0].message
        );
        assert_eq!(r.registrations.len(), 1);
    }

    #[test]
    fn a_user_without_command_is_unreadable() {
        let r = read(
            Path::new("etc/cron.d/x"),
            "0 2 * * * root\n",
            &ReadOptions::default(),
        );
        assert_eq!(
            r.problems.first().map(|p| p.issue),
            Some(Issue::SourceNotRead)
        );
        assert!(r.registrations.is_empty());
    }

    #[test]
    fn env_lines_with_spaces_and_quotes() {
        let r = read(
            Path::new("crontab"),
            "CRON_TZ = 'Europe/Paris'\n0 2 * * * /bin/a\n",
            &ReadOptions::default(),
        );
        assert_eq!(r.registrations[0].zone(), "Europe/Paris");
    }

    #[test]
    fn a_bad_byte_in_the_schedule_registers_nothing() {
        let r = read_bytes(
            Path::new("crontab"),
            b"0 \xff * * * /bin/a\n0 3 * * * /bin/b\n",
            &ReadOptions::default(),
        );
        assert_eq!(r.registrations.len(), 1);
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].issue, Issue::CrontabFormat);
        assert_eq!(r.problems[0].span, Span::new(2, 1));
        assert_eq!(&r.text[2..3], "?");
    }

    #[test]
    fn headers() {
        assert!(is_user_header("# m h dom mon dow user  command"));
        assert!(is_user_header(
            "# *  *  *  *  * user-name command to be executed"
        ));
        assert!(!is_user_header("# m h  dom mon dow   command"));
        assert!(!is_user_header("# the user asked for this command"));
    }
}
