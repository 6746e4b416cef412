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

use super::runner::RunnerKind;
use super::{Problem, Read, ReadOptions, Registration, SourceKind, Span};
use crate::manifest::Issue;
use crate::schedule::{Dialect, Schedule};
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
    // supercronic has no user column (`crontab/crontab.go` `parseJobLine`: schedule, then
    // command); neither has busybox crond (`load_crontab`: five fields and the command).
    if opts.crontab_no_user_column
        || opts
            .crontab_runner
            .as_ref()
            .is_some_and(|r| r.kind != RunnerKind::Cron)
    {
        return false;
    }
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

/// The schedule fields supercronic takes from a job line (`crontab/crontab.go`
/// `parseJobLine`): it tries 7, 6, 5 and 1 fields, each only when a command follows, and
/// keeps the first count cronexpr parses. `None` when no count parses (supercronic then
/// refuses the whole crontab).
fn supercronic_fields(body: &str) -> Option<usize> {
    let words: Vec<&str> = body.split_ascii_whitespace().collect();
    [7, 6, 5, 1].into_iter().find(|&n| {
        words.len() > n && Schedule::parse(&words[..n].join(" "), Dialect::Supercronic).is_ok()
    })
}

/// A word that reads as a cron field rather than a program: digits and `* ? / , - L W #`,
/// or day and month names.
fn cron_like(w: &str) -> bool {
    const NAMES: [&str; 19] = [
        "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "JAN", "FEB", "MAR", "APR", "MAY", "JUN",
        "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ];
    let upper = w.to_ascii_uppercase();
    let symbolic = upper
        .bytes()
        .all(|b| b.is_ascii_digit() || b"*?/,-LW#".contains(&b))
        && upper
            .bytes()
            .any(|b| b.is_ascii_digit() || b == b'*' || b == b'?');
    let named = upper.split([',', '-']).all(|p| NAMES.contains(&p));
    symbolic || named
}

/// A job line with 6 or 7 schedule fields under cron or crond, which read 5: the sixth
/// word would be run as the command. BG101, with the runner that would accept the line.
fn extra_fields(
    body: &str,
    start: usize,
    n: usize,
    user_column: bool,
    opts: &ReadOptions,
) -> Option<Problem> {
    let words: Vec<(usize, &str)> = body
        .split_ascii_whitespace()
        .map(|w| (w.as_ptr() as usize - body.as_ptr() as usize, w))
        .collect();
    let extra = words
        .iter()
        .skip(5)
        .take(2)
        .take_while(|(_, w)| cron_like(w))
        .count();
    if extra == 0 || words.len() <= 5 + extra {
        return None;
    }
    let count = 5 + extra;
    let (s0, _) = words.first()?;
    let (sl, wl) = words.get(count - 1)?;
    let sched = body.get(*s0..sl + wl.len())?;
    let cmd_words: Vec<&str> = words.iter().skip(5).map(|(_, w)| *w).collect();
    let misread = match cmd_words.split_first() {
        Some((user, rest)) if user_column => {
            format!(
                "would take `{user}` for the user and run `{}`",
                rest.join(" ")
            )
        }
        _ => format!("would run `{}` as the command", cmd_words.join(" ")),
    };
    let runner = opts
        .crontab_runner
        .as_ref()
        .map_or_else(|| "Debian cron (assumed)".to_owned(), |r| r.name());
    let as_super = match Schedule::parse(sched, Dialect::Supercronic) {
        Ok(_) if count == 6 => {
            "supercronic would read it as five fields and a year (cronexpr puts a 0 second \
             first), not as seconds"
                .to_owned()
        }
        Ok(_) => "supercronic would read it as seconds, five fields and a year".to_owned(),
        Err(e) => format!("supercronic would not accept it either ({e})"),
    };
    Some(Problem {
        issue: Issue::InvalidCron,
        span: Span::new(start + s0, sched.len()),
        message: format!(
            "crontab line {n} has {count} schedule fields (`{sched}`): {runner} reads 5 and \
             {misread}, so the job as written never runs; {as_super}"
        ),
        help: "write the 5 fields cron reads; if supercronic runs this file, say so: its \
               Dockerfile or compose file beside it, or `crontab_runner = \"supercronic\"` \
               under [sources] in batchguard.toml"
            .into(),
    })
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
    let supercronic = opts
        .crontab_runner
        .as_ref()
        .is_some_and(|r| r.kind == RunnerKind::Supercronic);
    let busybox = opts
        .crontab_runner
        .as_ref()
        .is_some_and(|r| r.kind == RunnerKind::Busybox);
    let mut lines = lines(text);
    if supercronic {
        for l in &mut lines {
            if let Kind::Job { sched_fields } = &mut l.kind {
                *sched_fields = supercronic_fields(l.body).unwrap_or(*sched_fields);
            }
        }
    }
    let user_column = user_column(path, &lines, opts);
    let dialect = opts
        .crontab_runner
        .as_ref()
        .map_or(Dialect::Crontab, |r| r.dialect());
    let mut out = Read::default();
    if let Some(r) = &opts.crontab_runner {
        out.notes.push(format!("run by {}: {}", r.name(), r.from));
    }
    // supercronic keeps one zone for the whole file: the last `CRON_TZ=` line's
    // (`crontab/crontab.go` `ParseCrontab` sets `Context.Timezone` once, after the loop).
    let file_tz: Option<Spanned<String>> = if supercronic {
        lines
            .iter()
            .rev()
            .filter(|l| l.kind == Kind::Env)
            .find_map(|l| {
                let (name, value, voff) = env_assignment(l.body)?;
                let vstart = l.start + voff;
                let end = l.start + l.body.len();
                // `time.LoadLocation("")` is UTC.
                let value = if value.is_empty() { "UTC" } else { value };
                (name == "CRON_TZ").then(|| Spanned {
                    value: value.to_owned(),
                    span: Span::new(vstart, end.saturating_sub(vstart)),
                })
            })
    } else {
        None
    };
    let mut tz: Option<Spanned<String>> = file_tz.clone();
    let mut store_env: Option<Spanned<String>> = None;
    let mut unreadable: Vec<(usize, Span, String)> = Vec::new();
    let mut not_utf8: Vec<(usize, usize, bool)> = Vec::new();
    let mut crlf: Vec<(usize, usize)> = Vec::new();
    for line in &lines {
        let end = line.start + line.body.len();
        // supercronic reads lines with `bufio.ScanLines`, which drops a `\r` before the
        // `\n`: CRLF files are read as meant.
        if line.crlf && !supercronic && matches!(line.kind, Kind::Env | Kind::Job { .. }) {
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
                        // supercronic: one zone per file (above); busybox crond reads no
                        // `CRON_TZ` (`load_crontab` knows `MAILTO=` and `SHELL=` only).
                        if !supercronic && !busybox {
                            tz = set;
                        }
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
        if f.first().is_some_and(|(_, w)| *w == "@reboot") && !supercronic {
            // Runs once at boot: listed, never a schedule (docs/crontab-runners.md).
            out.notes.push(format!(
                "line {}: `@reboot` runs its command at boot, not on a schedule (listed, not checked)",
                line.n
            ));
            out.boot.push(format!("crontab line {} (@reboot)", line.n));
            continue;
        }
        if !supercronic
            && sched_fields == 5
            && let Some(p) = extra_fields(body, line.start, line.n, user_column, opts)
        {
            out.problems.push(p);
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
        // supercronic and busybox crond read a last line without newline like any other.
        if !line.newline
            && !opts
                .crontab_runner
                .as_ref()
                .is_some_and(|r| r.reads_last_line())
        {
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
            dialect,
            crontab_runner: opts.crontab_runner.clone(),
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

    fn supercronic() -> ReadOptions {
        ReadOptions {
            crontab_runner: Some(crate::sources::runner::CrontabRunner {
                kind: RunnerKind::Supercronic,
                overlapping: false,
                from: "test".into(),
            }),
            ..ReadOptions::default()
        }
    }

    #[test]
    fn supercronic_splits_7_then_6_then_5_fields_then_a_macro() {
        let text = "*/5 * * * * * * /bin/a x\n0 3 * * * 2030 /bin/b\n0 4 * * * /bin/c 1 2 3\n@daily /bin/d\n";
        let r = read(Path::new("crontab"), text, &supercronic());
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let got: Vec<(&str, Vec<String>)> = r
            .registrations
            .iter()
            .map(|g| {
                (
                    g.schedule.as_ref().map_or("", |s| s.value.as_str()),
                    g.command.clone(),
                )
            })
            .collect();
        assert_eq!(got[0].0, "*/5 * * * * * *");
        assert_eq!(got[1].0, "0 3 * * * 2030");
        assert_eq!(
            got[2],
            (
                "0 4 * * *",
                vec!["/bin/c".into(), "1".into(), "2".into(), "3".into()]
            )
        );
        assert_eq!(got[3].0, "@daily");
        assert!(
            r.registrations
                .iter()
                .all(|g| g.dialect == Dialect::Supercronic)
        );
    }

    #[test]
    fn supercronic_reads_crlf_and_a_last_line_and_keeps_the_last_cron_tz() {
        let text =
            "CRON_TZ=Asia/Seoul\r\n0 3 * * * /bin/a\r\nCRON_TZ=Europe/Paris\r\n0 4 * * * /bin/b";
        let r = read(Path::new("crontab"), text, &supercronic());
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        // `ParseCrontab` sets one zone for the file: the last CRON_TZ.
        assert!(r.registrations.iter().all(|g| g.zone() == "Europe/Paris"));
        // The same file under cron: CRLF and the dropped last line are BG610.
        let cron = read(Path::new("crontab"), text, &ReadOptions::default());
        assert_eq!(cron.problems.len(), 2, "{:?}", cron.problems);
        assert_eq!(cron.registrations[0].zone(), "Asia/Seoul");
    }

    #[test]
    fn six_fields_under_cron_are_bg101_and_register_nothing() {
        let r = read(
            Path::new("crontab"),
            "0 3 * * * 2019 /bin/backup\n*/30 * * * * * /bin/poll\n0 4 * * * /bin/ok\n",
            &ReadOptions::default(),
        );
        assert_eq!(r.registrations.len(), 1);
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
        assert!(r.problems.iter().all(|p| p.issue == Issue::InvalidCron));
        assert!(
            r.problems[0].message.contains("6 schedule fields"),
            "{}",
            r.problems[0].message
        );
        assert!(
            r.problems[0].message.contains("`2019 /bin/backup`"),
            "{}",
            r.problems[0].message
        );
        // A command that only looks numeric after five fields is a command.
        let ok = read(
            Path::new("crontab"),
            "0 3 * * * 2019\n",
            &ReadOptions::default(),
        );
        assert!(ok.problems.is_empty(), "{:?}", ok.problems);
    }

    #[test]
    fn reboot_is_listed_under_cron_and_invalid_under_supercronic() {
        let text = "@reboot /bin/warm\n";
        let cron = read(Path::new("crontab"), text, &ReadOptions::default());
        assert!(cron.registrations.is_empty());
        assert_eq!(cron.boot, ["crontab line 1 (@reboot)"]);
        let sup = read(Path::new("crontab"), text, &supercronic());
        assert_eq!(sup.registrations.len(), 1);
        let s = sup.registrations[0]
            .schedule
            .as_ref()
            .map(|s| s.value.as_str());
        assert_eq!(s, Some("@reboot"));
        assert!(Schedule::parse("@reboot", Dialect::Supercronic).is_err());
    }

    #[test]
    fn supercronic_has_no_user_column() {
        let r = read(
            Path::new("etc/cron.d/app"),
            "0 3 * * * root /bin/a\n",
            &supercronic(),
        );
        assert_eq!(r.registrations[0].command[0], "root");
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
