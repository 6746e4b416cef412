//! `batchguard init [PATHS]`: a starter manifest for the jobs a tree already registers
//! (Kubernetes CronJobs, PM2 ecosystem files, crontabs, schedules in application code), so
//! a team adopting batchguard starts from what really runs instead of a blank file.
//!
//! The tree is read exactly as `lint` reads it (same discovery, same readers, same
//! `batchguard.toml`), and grouped as lint groups it (ties and duplicates, SPEC 3.5):
//! a registration already tied to, or duplicating, a manifest job in the tree is left out;
//! registrations that duplicate each other become one job. What a registration says is
//! filled in: schedule, zone, command (argv; a crontab line that needs a shell as
//! `/bin/sh -c LINE`), platform, scheduler and instances (`jobs[].deployment` where a job
//! differs from the service). What only a person knows (expected duration, lock TTL,
//! idempotency, retry bound, dead letter, alerts, snapshot, runbook) is written as
//! [`INIT_PLACEHOLDER`], which lint reports until it is replaced (`lint::placeholder`).
//!
//! The registration files are not touched: stderr says how to tie each one to its new
//! job (an annotation, or `batchguard run --job`), since until then lint sees each job
//! twice (BG601).

use crate::config::Settings;
use crate::lint::{self, LintOptions, LintRun};
use crate::manifest::model::INIT_PLACEHOLDER;
use crate::project::Analysis;
use crate::project::Place;
use crate::sources::{Registration, SourceKind, command};
use jiff::Timestamp;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why `init` could not run (exit 2).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum InitError {
    #[error("{path} already exists; not overwriting it")]
    #[diagnostic(help("pass --force to replace it, or choose another --out"))]
    Exists { path: String },
    #[error("cannot read {path}: {why}")]
    Unreadable { path: String, why: String },
    #[error(
        "found no scheduled CronJob, PM2 app, crontab line or in-process schedule under {paths}"
    )]
    #[diagnostic(help(
        "init reads what lint reads: `batchguard lint --list-files {paths}` shows every file it saw"
    ))]
    Nothing { paths: String },
    #[error("cannot write {path}: {why}")]
    Write { path: String, why: String },
    #[error("`{name}` cannot be a service name: {why}")]
    #[diagnostic(help("use lowercase letters, digits, `.`, `_` and `-`, such as `billing`"))]
    BadService { name: String, why: String },
}

/// The starter manifest and what to tell the user about it.
#[derive(Debug, Default)]
pub struct Starter {
    pub service: String,
    /// Empty when every registration is already declared.
    pub yaml: String,
    pub jobs: usize,
    /// Registrations the jobs came from, each with how to tie it to its job.
    pub ties: Vec<String>,
    /// Registrations left out, files not read: said on stderr.
    pub notes: Vec<String>,
}

/// One job of the starter, from its first registration.
struct InitJob {
    name: String,
    kind: SourceKind,
    origin: String,
    schedule: String,
    zone: String,
    zone_note: Option<String>,
    command: Option<Vec<String>>,
    command_note: Option<String>,
    instances: u64,
    enabled: bool,
    /// The dialect of an in-process schedule (its library's).
    scheduler: Option<&'static str>,
    /// How to tie the registration, with `{manifest}` for the manifest's path.
    tie: String,
}

/// Builds the starter for `paths` (the tree read as lint reads it).
pub fn starter(
    paths: &[PathBuf],
    settings: Settings,
    service: Option<&str>,
    manifest_path: &str,
    now: Timestamp,
) -> Result<Starter, InitError> {
    let service = match service {
        Some(s) => checked_service(s)?,
        None => service_from_paths(paths),
    };
    let run = lint::run(&LintOptions {
        paths: paths.to_vec(),
        settings,
        now,
    });
    if let Some((path, why)) = run.unreadable.first() {
        return Err(InitError::Unreadable {
            path: path.display().to_string(),
            why: why.clone(),
        });
    }
    let analysis = Analysis::new(&run.project, &run.files, now);
    let mut out = Starter {
        service: service.clone(),
        ..Starter::default()
    };
    for f in run.findings.iter().filter(|f| f.code == "BG609") {
        let file = run.files.get(f.at.file).map_or("?", |f| f.display.as_str());
        out.notes.push(format!(
            "not read: {file}: {} (its jobs are not in the starter)",
            f.message
        ));
    }
    let mut order: Vec<usize> = (0..run.project.regs.len()).collect();
    order.sort_by_key(|&r| {
        let reg = &run.project.regs[r];
        (
            run.files.get(reg.file).map(|f| f.display.clone()),
            reg.span.start,
        )
    });
    let mut done_groups: HashSet<usize> = HashSet::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut jobs: Vec<InitJob> = Vec::new();
    let mut scheduled = 0usize;
    for r in order {
        let reg = &run.project.regs[r];
        let Some(schedule) = &reg.schedule else {
            continue;
        };
        scheduled += 1;
        let place = Place::Reg(r);
        let at = format!("{} {}", analysis.where_(place), reg.label);
        let group = analysis.group_of.get(&place).copied();
        let places = group.map_or(&[][..], |g| analysis.groups[g].places.as_slice());
        if let Some(Place::Job(j)) = places.iter().find(|p| matches!(p, Place::Job(_))) {
            let job = &run.project.jobs[*j];
            let how = if analysis.ties.get(r).copied().flatten().is_some() {
                "tied to"
            } else {
                "the same job as"
            };
            out.notes.push(format!(
                "left out: {at}: {how} manifest job `{}` ({})",
                job.key(),
                analysis.where_(Place::Job(*j))
            ));
            continue;
        }
        if let Some(g) = group
            && !done_groups.insert(g)
        {
            out.notes.push(format!(
                "left out: {at}: the same job as a registration above (lint reports it as BG601)"
            ));
            continue;
        }
        let name = unique_name(&job_name(reg), &mut names);
        let mut job = from_registration(&run, &analysis, r, reg, name, schedule.value.clone());
        job.tie = tie_hint(reg, &job, &service, schedule.value.as_str());
        job.origin = at;
        jobs.push(job);
    }
    if scheduled == 0 {
        return Err(InitError::Nothing {
            paths: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
        });
    }
    out.jobs = jobs.len();
    if jobs.is_empty() {
        return Ok(out);
    }
    for j in &jobs {
        out.ties.push(format!(
            "{}: {}",
            j.origin,
            j.tie.replace("{manifest}", manifest_path)
        ));
    }
    out.yaml = render(&service, &jobs, paths);
    Ok(out)
}

/// What `init` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Files and directories to read; the current directory when empty.
    pub paths: Vec<PathBuf>,
    /// Service name; the first folder's name when absent.
    pub service: Option<String>,
    /// Write here instead of stdout.
    pub out: Option<PathBuf>,
    /// Replace `out` when it exists.
    pub force: bool,
}

/// The whole command: build the starter, write it (stdout or `--out`), say on stderr what
/// was left out and how to tie each registration.
pub fn run(args: &Options, settings: Settings) -> Result<(), InitError> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    if let Some(out) = &args.out
        && out.exists()
        && !args.force
    {
        return Err(InitError::Exists {
            path: out.display().to_string(),
        });
    }
    let service_hint = args.service.as_deref();
    let default_name = format!(
        "{}.batchguard.yaml",
        service_hint.map_or_else(|| service_from_paths(&paths), str::to_owned)
    );
    let manifest_path = args
        .out
        .as_ref()
        .map_or(default_name, |p| p.display().to_string());
    let s = starter(
        &paths,
        settings,
        service_hint,
        &manifest_path,
        Timestamp::now(),
    )?;
    for n in &s.notes {
        eprintln!("{n}");
    }
    if s.jobs == 0 {
        eprintln!(
            "nothing to write: every registration found is already declared by a manifest job"
        );
        return Ok(());
    }
    match &args.out {
        Some(path) => std::fs::write(path, &s.yaml).map_err(|e| InitError::Write {
            path: path.display().to_string(),
            why: e.to_string(),
        })?,
        None => {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            // A closed pipe (`| head`) is not worth an error.
            let _ = o.write_all(s.yaml.as_bytes());
            let _ = o.flush();
        }
    }
    let whose = if s.jobs == 1 { "job" } else { "jobs" };
    let target = args
        .out
        .as_ref()
        .map_or("stdout".to_owned(), |p| p.display().to_string());
    eprintln!(
        "batchguard init: {} {whose} of service `{}` written to {target}",
        s.jobs, s.service
    );
    eprintln!(
        "fill in every `{INIT_PLACEHOLDER}` (`batchguard lint {manifest_path}` lists them), then tie each registration to its job, or lint reports every job twice (BG601):"
    );
    for t in &s.ties {
        eprintln!("  {t}");
    }
    Ok(())
}

fn from_registration(
    run: &LintRun,
    analysis: &Analysis,
    r: usize,
    reg: &Registration,
    name: String,
    schedule: String,
) -> InitJob {
    let file = run.files.get(reg.file);
    let redact = |s: &str| file.map_or_else(|| s.to_owned(), |f| f.redact(s));
    let (zone, zone_note) = match (&reg.timezone, reg.zone_assumed) {
        (Some(z), false) => (z.value.clone(), None),
        (Some(z), true) => (
            z.value.clone(),
            Some("from [sources] crontab_timezone: the crontab has no CRON_TZ= line".to_owned()),
        ),
        (None, true) => (
            "UTC".to_owned(),
            Some(
                "assumed: the crontab has no CRON_TZ= line; write the zone cron runs in".to_owned(),
            ),
        ),
        (None, false) => ("UTC".to_owned(), None),
    };
    let mut command_note: Option<String> = None;
    if let Some(code) = &reg.code {
        command_note = Some(format!(
            "the schedule runs inside the app ({}, at {}); this is its module",
            code.call,
            analysis.where_(Place::Reg(r))
        ));
    }
    let command = if reg.command.is_empty() {
        command_note = Some("the registration names no command (the image's entrypoint?)".into());
        None
    } else if reg.wrapped {
        Some(reg.effective_argv().iter().map(|w| redact(w)).collect())
    } else if reg.kind == SourceKind::Crontab {
        let text = analysis
            .command_text(Place::Reg(r))
            .unwrap_or_else(|| command::shell_join(&reg.command));
        if needs_shell(&text) {
            Some(vec!["/bin/sh".to_owned(), "-c".to_owned(), text])
        } else {
            Some(crate::sources::split_words(&text))
        }
    } else {
        Some(reg.command.iter().map(|w| redact(w)).collect())
    };
    if let Some(c) = &command
        && c.iter().any(|w| w.contains('{'))
    {
        command_note = Some(
            "`{…}` reads as a template placeholder in a manifest (BG004): rewrite that part".into(),
        );
    }
    if let Some(w) = &reg.workdir {
        let note = format!("runs in {} ({})", w.value, workdir_source(reg.kind));
        command_note = Some(match command_note {
            Some(n) => format!("{note}; {n}"),
            None => note,
        });
    }
    InitJob {
        name,
        kind: reg.kind,
        origin: String::new(),
        schedule,
        zone,
        zone_note,
        command,
        command_note,
        instances: reg.instances.max(1),
        enabled: !reg.suspended(),
        scheduler: (reg.kind == SourceKind::Code).then(|| reg.dialect.as_str()),
        tie: String::new(),
    }
}

fn workdir_source(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Kubernetes => "the container's workingDir",
        SourceKind::Pm2 => "the app's cwd",
        SourceKind::Crontab => "cd",
        SourceKind::Code => "the project folder",
    }
}

/// How to make `reg` the registration of its new job (SPEC 3.5 "Ties").
fn tie_hint(reg: &Registration, job: &InitJob, service: &str, schedule: &str) -> String {
    let name = &job.name;
    if let Some(t) = &reg.tie {
        return match &t.service {
            Some(s) if s != service => format!(
                "its annotation names `{s}/{}`: set it to `batchguard.dev/job: {service}/{name}`",
                t.job
            ),
            Some(_) => "tied by its annotation once lint reads it with the manifest".to_owned(),
            None => format!(
                "already runs `batchguard run --job {}`: tied once lint reads it with the manifest",
                t.job
            ),
        };
    }
    let run = format!("batchguard run --manifest {{manifest}} --job {name} --");
    let argv = reg.effective_argv();
    match reg.kind {
        SourceKind::Code => format!(
            "wrap its callback in `guarded({{ manifest: \"{{manifest}}\", job: \"{name}\" }}, fn)` \
             from the batchguard npm package"
        ),
        SourceKind::Kubernetes => format!(
            "add the annotation `batchguard.dev/job: {service}/{name}` under metadata.annotations"
        ),
        SourceKind::Pm2 => format!(
            "run it as `{run} {}` (script: batchguard, args after it)",
            command::shell_join(&argv)
        ),
        SourceKind::Crontab => {
            let cmd = job
                .command
                .as_ref()
                .map_or(String::new(), |c| match c.as_slice() {
                    [sh, dash_c, line] if sh == "/bin/sh" && dash_c == "-c" => line.clone(),
                    words => command::shell_join(words),
                });
            format!("write the line as `{schedule} {run} {cmd}`")
        }
    }
}

/// A crontab command that only a shell runs as written: operators, redirections,
/// expansions, globs, or leading `VAR=value` / `cd`.
fn needs_shell(text: &str) -> bool {
    let first = text.split_whitespace().next().unwrap_or("");
    text.contains([
        '&', '|', ';', '<', '>', '$', '`', '*', '?', '~', '(', ')', '[', '#', '!', '\\',
    ]) || first.contains('=')
        || first == "cd"
}

/// The job name a registration suggests: its tie, its own name, else its program.
fn job_name(reg: &Registration) -> String {
    if let Some(t) = &reg.tie {
        return slug(&t.job);
    }
    if let Some((_, rest)) = reg.label.split_once('`')
        && let Some((n, _)) = rest.split_once('`')
    {
        let s = slug(n);
        if !s.is_empty() {
            return s;
        }
    }
    let argv = command::strip_prelude(&reg.effective_argv()).to_vec();
    // The script a program runs (`node jobs/settle.js`), else the program itself.
    let word = argv
        .iter()
        .skip(1)
        .find(|w| !w.starts_with('-') && (w.contains('/') || w.contains('.')))
        .or(argv.first())
        .cloned()
        .unwrap_or_default();
    let base = word.rsplit('/').next().unwrap_or(&word);
    let stem = base.split('.').next().unwrap_or(base);
    let s = slug(stem);
    if s.is_empty() { "job".to_owned() } else { s }
}

/// `[a-z0-9][a-z0-9._-]{0,62}` from any text: lowercased, other characters as `-`.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            c
        } else {
            '-'
        };
        if c == '-' && out.ends_with('-') {
            continue;
        }
        out.push(c);
    }
    let trimmed = out.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut s: String = trimmed.chars().take(63).collect();
    while s.ends_with('-') {
        s.pop();
    }
    s
}

fn unique_name(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_owned();
    let mut n = 2;
    while taken.contains(&name) {
        let suffix = format!("-{n}");
        let keep: String = base.chars().take(63 - suffix.len()).collect();
        name = format!("{keep}{suffix}");
        n += 1;
    }
    taken.insert(name.clone());
    name
}

fn checked_service(name: &str) -> Result<String, InitError> {
    let s = slug(name);
    if s != name {
        return Err(InitError::BadService {
            name: name.to_owned(),
            why: if s.is_empty() {
                "it has no letter or digit".to_owned()
            } else {
                format!("it is not a plain name (did you mean `{s}`?)")
            },
        });
    }
    Ok(s)
}

/// The service a tree is: the name of the (first) folder given, else `service`.
fn service_from_paths(paths: &[PathBuf]) -> String {
    let first = paths.first().map_or(Path::new("."), PathBuf::as_path);
    let dir = if first.is_file() {
        first.parent().unwrap_or(Path::new("."))
    } else {
        first
    };
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let s = abs
        .file_name()
        .and_then(|n| n.to_str())
        .map(slug)
        .unwrap_or_default();
    if s.is_empty() {
        "service".to_owned()
    } else {
        s
    }
}

/// A YAML scalar: plain when it cannot be read as anything but this string, else quoted.
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '+'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain { s.to_owned() } else { quoted(s) }
}

/// A double-quoted YAML scalar (JSON string syntax is valid YAML).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.replace('"', "\\\"")))
}

fn platform_of(kind: SourceKind) -> (&'static str, Option<&'static str>) {
    match kind {
        SourceKind::Kubernetes => ("kubernetes", None),
        // A `cron_restart` is evaluated by PM2's croner, not node-cron (SPEC 4).
        SourceKind::Pm2 => ("pm2", Some("pm2")),
        SourceKind::Crontab => ("crontab", None),
        // A schedule inside a Node.js app; its own dialect is written per job.
        SourceKind::Code => ("pm2", None),
    }
}

fn render(service: &str, jobs: &[InitJob], paths: &[PathBuf]) -> String {
    let p = INIT_PLACEHOLDER;
    // The service's platform: the one most jobs run on (the first in path order on a tie).
    let mut counts: Vec<(SourceKind, usize)> = Vec::new();
    for j in jobs {
        match counts.iter_mut().find(|(k, _)| *k == j.kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((j.kind, 1)),
        }
    }
    let top = counts
        .iter()
        .fold(None::<(SourceKind, usize)>, |best, &(k, n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((k, n)),
        })
        .map_or(SourceKind::Crontab, |(k, _)| k);
    let from: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Starter manifest written by `batchguard init` from the registrations in `{}`.",
        from.join("`, `")
    );
    let _ = writeln!(
        y,
        "# Every `{p}` is a value only you know: lint reports each one until it is"
    );
    let _ = writeln!(
        y,
        "# replaced, or deleted where it does not apply (`batchguard explain CODE` says why it matters)."
    );
    let _ = writeln!(y, "version: 1");
    let _ = writeln!(y, "service: {}", scalar(service));
    let (platform, scheduler) = platform_of(top);
    let _ = writeln!(y, "deployment:\n  platform: {platform}");
    if let Some(s) = scheduler {
        let _ = writeln!(y, "  scheduler: {s}");
    }
    let _ = writeln!(y, "  instances: 1");
    let _ = writeln!(y, "defaults:");
    let _ = writeln!(y, "  runbook:");
    for f in [
        "owner",
        "on_call",
        "emergency_stop",
        "resume",
        "communication",
    ] {
        let _ = writeln!(y, "    {f}: {p}");
    }
    let _ = writeln!(y, "  alerts:\n    channel: {p}");
    let _ = writeln!(y, "jobs:");
    for j in jobs {
        let _ = writeln!(y, "  - name: {}", scalar(&j.name));
        let _ = writeln!(y, "    # from {}", j.origin);
        let _ = writeln!(y, "    schedule: {}", quoted(&j.schedule));
        if let Some(n) = &j.zone_note {
            let _ = writeln!(y, "    # timezone {n}");
        }
        let _ = writeln!(y, "    timezone: {}", scalar(&j.zone));
        if let Some(n) = &j.command_note {
            let _ = writeln!(y, "    # command: {n}");
        }
        if let Some(c) = &j.command {
            let words: Vec<String> = c.iter().map(|w| quoted(w)).collect();
            let _ = writeln!(y, "    command: [{}]", words.join(", "));
        }
        if j.kind != top || j.instances != 1 || j.scheduler.is_some() {
            let (platform, scheduler) = platform_of(j.kind);
            let scheduler = j.scheduler.or(scheduler);
            let _ = writeln!(y, "    deployment:\n      platform: {platform}");
            if let Some(s) = scheduler {
                let _ = writeln!(y, "      scheduler: {s}");
            }
            let _ = writeln!(y, "      instances: {}", j.instances);
        }
        if !j.enabled {
            let _ = writeln!(y, "    # the registration is suspended");
            let _ = writeln!(y, "    enabled: false");
        }
        let _ = writeln!(y, "    expected_duration: {p}");
        let _ = writeln!(
            y,
            "    lock:\n      key: \"{{job}}:{{scheduled_at}}\"\n      ttl: {p}"
        );
        let _ = writeln!(y, "    idempotency:\n      strategy: {p}\n      key: {p}");
        let _ = writeln!(y, "    retry:\n      max_attempts: {p}");
        let _ = writeln!(y, "    dead_letter:\n      target: {p}");
        let _ = writeln!(y, "    alerts:\n      max_latency: {p}");
        let _ = writeln!(y, "    snapshot:\n      path: {p}\n      retention: {p}");
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_job_names() {
        assert_eq!(slug("Settle Payments!"), "settle-payments");
        assert_eq!(slug("--x"), "x");
        assert_eq!(slug("日本"), "");
        assert_eq!(slug(&"a".repeat(100)).len(), 63);
        let mut taken = HashSet::new();
        assert_eq!(unique_name("a", &mut taken), "a");
        assert_eq!(unique_name("a", &mut taken), "a-2");
        assert_eq!(unique_name("a", &mut taken), "a-3");
    }

    #[test]
    fn scalars_that_yaml_would_read_otherwise_are_quoted() {
        assert_eq!(scalar("Asia/Seoul"), "Asia/Seoul");
        assert_eq!(scalar("yes"), "\"yes\"");
        assert_eq!(scalar("123"), "\"123\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
    }

    #[test]
    fn shell_lines_are_told_from_plain_commands() {
        assert!(!needs_shell("/usr/local/bin/backup.sh --full"));
        assert!(needs_shell("backup.sh >> /var/log/b.log 2>&1"));
        assert!(needs_shell("cd /srv && node a.js"));
        assert!(needs_shell("FOO=1 node a.js"));
    }
}
