//! crontab files: `crontab`, `*.crontab`, and files under a `cron.d` folder (which carry a
//! user column after the schedule). Comments and blank lines are skipped; env lines
//! (`NAME=value`) are understood, and `CRON_TZ=` sets the zone of the lines after it, as
//! cronie does. `@reboot` has no schedule and registers nothing periodic. A `%` ends the
//! command (cron feeds the rest to stdin). A line that is neither is a BG609 finding:
//! a registration that cannot be read might be the duplicate.

use super::{At, Problem, Read, ReadOptions, Registration, SourceKind, Span};
use std::path::Path;

pub fn is_crontab_path(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "crontab" || name.ends_with(".crontab") || in_cron_d(path)
}

fn in_cron_d(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    // run-parts ignores names with dots or a trailing ~; so do we (README, .keep …).
    path.parent()
        .and_then(|p| p.file_name())
        .is_some_and(|d| d == "cron.d")
        && !name.starts_with('.')
        && !name.ends_with('~')
        && !name.ends_with(".md")
}

fn env_assignment(line: &str) -> Option<(&str, &str)> {
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    let ok = !name.is_empty()
        && name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    ok.then(|| (name, value.trim().trim_matches(['"', '\''])))
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

pub fn read(path: &Path, text: &str, opts: &ReadOptions) -> Read {
    let user_column = opts.crontab_user_column || in_cron_d(path);
    let mut out = Read::default();
    let mut tz: Option<At<String>> = None;
    let mut offset = 0;
    for (n, raw) in text.split_inclusive('\n').enumerate() {
        let line_start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start();
        let lead = line.len() - trimmed.len();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let first_word = trimmed.split_whitespace().next().unwrap_or("");
        if !trimmed.starts_with('@')
            && first_word.contains('=')
            && let Some((name, value)) = env_assignment(trimmed)
        {
            if name == "CRON_TZ" {
                let vstart = line_start + lead + trimmed.find('=').map_or(0, |i| i + 1);
                tz = (!value.is_empty()).then(|| At {
                    value: value.to_owned(),
                    span: Span::new(vstart, line.len() - (vstart - line_start)),
                });
            }
            continue;
        }
        let sched_fields = if trimmed.starts_with('@') { 1 } else { 5 };
        let want = sched_fields + usize::from(user_column);
        let Some((f, rest)) = fields(trimmed, want) else {
            out.problems.push(Problem {
                code: "BG609",
                span: Span::new(line_start + lead, trimmed.len()),
                message: format!(
                    "crontab line {} is neither a comment, an env line nor a job: expected {} \
                     schedule field(s){} and a command",
                    n + 1,
                    sched_fields,
                    if user_column { ", a user" } else { "" }
                ),
                help: "fix the line; a registration that cannot be read may hide a duplicate"
                    .into(),
            });
            continue;
        };
        if f.first().is_some_and(|(_, w)| *w == "@reboot") {
            continue;
        }
        let sched_start = f.first().map_or(0, |(s, _)| *s);
        let sched_end = f
            .get(sched_fields - 1)
            .map_or(sched_start, |(s, w)| s + w.len());
        let schedule = trimmed.get(sched_start..sched_end).unwrap_or("").to_owned();
        let cmd_text = before_percent(trimmed.get(rest..).unwrap_or("")).trim_end();
        let command = super::split_words(cmd_text);
        let command_span = Span::new(line_start + lead + rest, cmd_text.len());
        let tie = super::batchguard_tie(&command, command_span);
        out.registrations.push(Registration {
            kind: SourceKind::Crontab,
            file: 0,
            span: Span::new(line_start + lead, trimmed.len()),
            label: format!("crontab line {}", n + 1),
            schedule: Some(At {
                value: schedule,
                span: Span::new(line_start + lead + sched_start, sched_end - sched_start),
            }),
            timezone: tz.clone(),
            dialect: SourceKind::Crontab.dialect(),
            wrapped: super::is_wrapped(&command),
            command,
            command_span,
            instances: 1,
            instances_span: None,
            cluster: false,
            kube: None,
            tie,
            ..Registration::default()
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
        assert_eq!(a.effective_argv(), ["node", "jobs/a.js", "--x"]);
        assert!(!a.wrapped);
        assert!(r.registrations[1].wrapped);
        assert_eq!(a.label, "crontab line 4");
    }

    #[test]
    fn a_short_line_is_reported() {
        let r = read(Path::new("crontab"), "0 2 * *\n", &ReadOptions::default());
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].code, "BG609");
    }
}
