//! `batchguard slots`: the instants a schedule fires in `[from, to)`, as the job's real
//! scheduler fires them (SPEC 1, SPEC 4), one RFC 3339 instant per line with the zone's
//! offset at that instant. A repeated-hour slot that the dialect runs twice is printed
//! twice, once per offset; a slot the dialect skips is not printed.
//!
//! `--annotate` adds, at its place in the stream, one `# ` line for each DST change that
//! alters what the job runs (a slot skipped, run late, run twice, or once where the
//! cadence needed two), in BG103's words. Every other line stays an instant, so
//! `grep -v '^#'` gives back the plain output.
//!
//! Output is streamed a day at a time, so a year of a per-second schedule never sits in
//! memory. Every failure to run (unreadable or broken manifest, unknown job, bad expression,
//! unknown zone, empty window) is a [`SlotsError`], which the commands layer renders with
//! miette and maps to exit code 2.

use crate::manifest::load;
use crate::manifest::model::Field;
use crate::schedule::describe::{describe, same_clause};
use crate::schedule::{Dialect, DstAction, DstEffect, Schedule, format_slot};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use std::io::{self, Write};
use std::path::Path;

/// Why `slots` could not run.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SlotsError {
    #[error("`{expr}` is not a valid {dialect} schedule: {message}")]
    #[diagnostic()]
    BadSchedule {
        expr: String,
        dialect: Dialect,
        message: String,
        #[source_code]
        src: String,
        #[label("here")]
        span: miette::SourceSpan,
        #[help]
        help: Option<String>,
    },
    #[error("{place}`{zone}` is not an IANA time zone name")]
    #[diagnostic()]
    UnknownZone {
        /// Where the name was written (`path: job `x`: `), empty for --timezone.
        place: String,
        zone: String,
        #[help]
        help: Option<String>,
    },
    #[error("{path}: no job named `{job}`")]
    #[diagnostic()]
    UnknownJob {
        path: String,
        job: String,
        #[help]
        help: String,
    },
    #[error("{path}: {message}")]
    #[diagnostic(help("`batchguard lint {path}` shows every problem in the file"))]
    Manifest { path: String, message: String },
    #[error("cannot read {path}: {why}")]
    #[diagnostic()]
    Unreadable { path: String, why: String },
    #[error("--from {from} is not before --to {to}: the window [from, to) is empty")]
    #[diagnostic()]
    EmptyWindow { from: Timestamp, to: Timestamp },
    #[error("cannot write the slots: {0}")]
    Write(#[from] io::Error),
}

/// What to enumerate: a manifest's job, or an expression with its dialect and zone.
#[derive(Clone, Debug)]
pub enum Source {
    Job {
        manifest: std::path::PathBuf,
        job: String,
    },
    Expression {
        expr: String,
        dialect: Dialect,
        /// IANA name; UTC when absent.
        timezone: Option<String>,
    },
}

/// What `slots` was asked for.
#[derive(Clone, Debug)]
pub struct Options {
    pub source: Source,
    /// First instant of the window (included).
    pub from: Timestamp,
    /// End of the window (excluded).
    pub to: Timestamp,
    /// Also write the DST changes that alter what runs, as `# ` lines.
    pub annotate: bool,
}

/// A schedule ready to enumerate, and a note for stderr (a disabled job).
pub struct Resolved {
    pub schedule: Schedule,
    pub tz: TimeZone,
    pub note: Option<String>,
}

/// Finds the schedule and zone the options name.
pub fn resolve(opts: &Options) -> Result<Resolved, SlotsError> {
    if opts.from >= opts.to {
        return Err(SlotsError::EmptyWindow {
            from: opts.from,
            to: opts.to,
        });
    }
    let (expr, dialect, timezone) = match &opts.source {
        Source::Job { manifest, job } => return from_manifest(manifest, job),
        Source::Expression {
            expr,
            dialect,
            timezone,
        } => (expr, *dialect, timezone),
    };
    let tz = match timezone.as_deref() {
        None => TimeZone::UTC,
        Some(z) => zone(z, String::new())?,
    };
    Ok(Resolved {
        schedule: parse(expr, dialect)?,
        tz,
        note: None,
    })
}

fn parse(expr: &str, dialect: Dialect) -> Result<Schedule, SlotsError> {
    Schedule::parse(expr, dialect).map_err(|e| {
        let help = match &e.kind {
            crate::schedule::CronErrorKind::Unsupported { accepted_by }
                if !accepted_by.is_empty() =>
            {
                let names: Vec<&str> = accepted_by.iter().map(|d| d.as_str()).collect();
                Some(format!("accepted by: {} (--dialect)", names.join(", ")))
            }
            _ => None,
        };
        let start = e.span.start.min(expr.len());
        let len = e.span.end.min(expr.len()).saturating_sub(start);
        SlotsError::BadSchedule {
            expr: expr.to_owned(),
            dialect,
            message: e.message.clone(),
            src: expr.to_owned(),
            span: (start, len).into(),
            help,
        }
    })
}

fn zone(name: &str, place: String) -> Result<TimeZone, SlotsError> {
    TimeZone::get(name).map_err(|_| SlotsError::UnknownZone {
        place,
        zone: name.to_owned(),
        help: crate::manifest::zone::help(name),
    })
}

fn from_manifest(path: &Path, job: &str) -> Result<Resolved, SlotsError> {
    let shown = path.display().to_string();
    let fail = |message: String| SlotsError::Manifest {
        path: shown.clone(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| SlotsError::Unreadable {
        path: shown.clone(),
        why: crate::text::io_reason(&e),
    })?;
    let (_, loaded) = load::load(&bytes);
    if loaded.root.is_none() {
        let why = loaded
            .diags
            .first()
            .map_or_else(|| "not a manifest".to_owned(), |d| d.message.clone());
        return Err(fail(format!("cannot read it as a manifest: {why}")));
    }
    let found = match loaded.job(job) {
        Ok(found) => found,
        Err(none) => {
            let help = match none.closest {
                Some(s) => format!("did you mean `{s}`?"),
                None if none.names.is_empty() => "the manifest declares no jobs".to_owned(),
                None => format!("jobs in this manifest: {}", none.names.join(", ")),
            };
            return Err(SlotsError::UnknownJob {
                path: shown,
                job: job.to_owned(),
                help,
            });
        }
    };
    let Some(expr) = found.schedule.value() else {
        return Err(fail(format!("job `{job}` has no valid `schedule`")));
    };
    let tz = match &found.timezone {
        Field::Absent => TimeZone::UTC,
        Field::Ok(z) => zone(&z.value, format!("{shown}: job `{job}`: "))?,
        Field::Invalid => return Err(fail(format!("job `{job}` has an invalid `timezone`"))),
    };
    let schedule = parse(expr, loaded.manifest.deployment_of(found).scheduler)?;
    let note = (found.enabled.value() == Some(&false)).then(|| {
        format!("note: job `{job}` is disabled (enabled: false); these are the slots it would run")
    });
    Ok(Resolved { schedule, tz, note })
}

/// A `# ` line about a DST change, and the instant it is printed before: the first instant
/// the change touches (the late or first run), or the change itself for a skipped slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotation {
    pub at: Timestamp,
    pub text: String,
}

/// The DST changes in `[from, to)` that alter what the schedule runs (those BG103 would
/// report), one line per date, kind and action, in stream order.
pub fn annotations(r: &Resolved, from: Timestamp, to: Timestamp) -> Vec<Annotation> {
    let tz = r.schedule.zone(&r.tz);
    let effects: Vec<DstEffect> = r
        .schedule
        .dst_effects(tz, from, to)
        .into_iter()
        .filter(|e| !e.ordinary)
        .collect();
    let mut out: Vec<Annotation> = effects
        .chunk_by(same_clause)
        .map(|group| Annotation {
            at: group
                .iter()
                .map(|e| match e.action {
                    DstAction::Skipped => e.transition,
                    DstAction::RunsLate { at }
                    | DstAction::RunsEarly { at }
                    | DstAction::RunsOnce { at }
                    | DstAction::AlsoRunsEarly { at } => at,
                    DstAction::RunsTwice { first, .. } => first,
                })
                .min()
                .unwrap_or(from),
            text: format!("# {}", describe(group, tz, r.schedule.dialect())),
        })
        .collect();
    out.sort_by_key(|a| a.at);
    out
}

/// Writes every slot in `[from, to)`, one per line, a day of slots at a time, with each annotation written before the first slot at or after its
/// instant (the ones left at the end of the window after the last slot).
pub fn write_annotated(
    r: &Resolved,
    from: Timestamp,
    to: Timestamp,
    notes: &[Annotation],
    out: &mut impl Write,
) -> io::Result<u64> {
    let mut n = 0;
    let mut notes = notes.iter().peekable();
    let mut cursor = from;
    while cursor < to {
        let end = cursor
            .checked_add(SignedDuration::from_hours(24))
            .map_or(to, |e| e.min(to));
        for t in r.schedule.slots(&r.tz, cursor, end) {
            while let Some(a) = notes.next_if(|a| a.at <= t) {
                writeln!(out, "{}", a.text)?;
            }
            writeln!(out, "{}", format_slot(t, r.schedule.zone(&r.tz)))?;
            n += 1;
        }
        cursor = end;
    }
    for a in notes {
        writeln!(out, "{}", a.text)?;
    }
    out.flush()?;
    Ok(n)
}

/// The whole command: resolve, then stream to stdout. A closed pipe (`| head`) ends the
/// output quietly.
pub fn run(opts: &Options) -> Result<(), SlotsError> {
    let r = resolve(opts)?;
    if let Some(note) = &r.note {
        eprintln!("{note}");
    }
    let stdout = io::stdout().lock();
    let mut out = io::BufWriter::with_capacity(64 * 1024, stdout);
    let notes = if opts.annotate {
        annotations(&r, opts.from, opts.to)
    } else {
        Vec::new()
    };
    match write_annotated(&r, opts.from, opts.to, &notes, &mut out) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(()),
    }
}
