//! `batchguard audit` from arguments to an [`AuditResult`]: load the manifests, stream the
//! ledger through the [`Auditor`], with a progress bar on a terminal. `main` only maps the
//! result to an exit code.

use super::manifests::{self, ManifestError, NotEvaluable};
use super::{AuditOptions, AuditResult, Auditor, DrillInput};
use crate::ledger::drills::{self, DrillSource};
use crate::ledger::input::STDIN;
use crate::ledger::read::{self, FileFormat, ReadOptions, Source};
use crate::ledger::{EventKind, EventRef, RowError, Status, Trigger};
use jiff::Timestamp;
use std::path::PathBuf;

/// What `audit` was asked (SPEC 1).
#[derive(Default)]
pub struct RunOptions {
    pub ledger: String,
    pub outputs: Option<String>,
    /// `outputs` is the file `run` creates beside a JSONL ledger at the first output a
    /// run reports, and it does not exist yet: no run reported one, so it is read as
    /// zero outputs (the output checks still run) rather than refused.
    pub outputs_unwritten: bool,
    pub manifests: Vec<PathBuf>,
    pub snapshots: Option<PathBuf>,
    pub from: Timestamp,
    pub to: Timestamp,
    /// `--since`: the window is the last this many seconds before the ledger's clock
    /// (`from` and `to` are then not read).
    pub since: Option<u64>,
    pub assume_tz: Option<String>,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// `batchguard.toml` (check severities, `drill_cadence`); the lint of the manifests.
    pub settings: crate::config::Settings,
    /// `--job`: audit only these jobs (`name` or `service/name`); empty: all.
    pub jobs: Vec<String>,
    /// `--ledger-format`: the format of a file source whose name does not tell it.
    pub ledger_format: Option<FileFormat>,
    /// `--drills`: where the drill records are (default: the ledger database's
    /// `batchguard_drills` table, when the ledger is a database).
    pub drills: Option<String>,
    /// `--timezone`: the zone the report shows times in.
    pub timezone: Option<String>,
    /// The offset `--from` was written with (`None` for `Z`): the report's zone without
    /// `--timezone`.
    pub from_offset: Option<jiff::tz::Offset>,
    /// Lint's diagnostics for a manifest job the audit cannot evaluate (the commands layer
    /// passes `lint::diagnose_manifest`); `None`: plain located lines.
    pub diagnose: Option<crate::audit::manifests::Diagnose>,
}

/// Why the audit could not run (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CannotRun(pub String);

/// Why the audit could not run: a message, or manifest jobs it cannot evaluate (rendered
/// with their places in the manifest, as lint shows them).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{0}")]
    CannotRun(String),
    #[error(transparent)]
    Manifest(Box<NotEvaluable>),
}

impl From<CannotRun> for AuditError {
    fn from(e: CannotRun) -> Self {
        AuditError::CannotRun(e.0)
    }
}

/// A source error that names its source once: readers' messages mostly do already.
fn named(src: &Source, message: String) -> String {
    let shown = src.display();
    if message.contains(&shown) {
        message
    } else {
        format!("cannot read {shown}: {message}")
    }
}

/// How many rejected rows an exit-2 "nothing could be read" message quotes.
const FIRST_REASONS: usize = 5;

pub fn run(o: &RunOptions) -> Result<AuditResult, AuditError> {
    let (from, to, since_clock) = window(o)?;
    if from >= to {
        return Err(CannotRun(format!("--from {from} is not before --to {to}")).into());
    }
    // One did-you-mean for zones everywhere (abbreviations like KST name their IANA zone).
    let zone = |flag: &str, z: &str| {
        jiff::tz::TimeZone::get(z).map_err(|_| {
            let hint = crate::manifest::zone::help(z)
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            CannotRun(format!("{flag} `{z}` is not an IANA time zone name{hint}"))
        })
    };
    let assume_tz = match &o.assume_tz {
        None => None,
        Some(z) => Some(zone("--assume-tz", z)?),
    };
    let report_tz = match (&o.timezone, o.from_offset) {
        (Some(z), _) => zone("--timezone", z)?,
        (None, Some(off)) => jiff::tz::TimeZone::fixed(off),
        (None, None) => jiff::tz::TimeZone::UTC,
    };
    let mut manifest_paths = Vec::new();
    for p in &o.manifests {
        manifest_paths.extend(manifests::discover(p).map_err(AuditError::CannotRun)?);
    }
    let jobs = match manifests::load_jobs(&manifest_paths, &o.settings, &o.jobs, o.diagnose) {
        Ok(jobs) => jobs,
        Err(ManifestError::Io(m)) => return Err(AuditError::CannotRun(m)),
        Err(ManifestError::NotEvaluable(e)) => return Err(AuditError::Manifest(Box::new(e))),
    };
    let ledger = Source::parse_as(&o.ledger, o.ledger_format).map_err(|e| CannotRun(e.0))?;
    if o.ledger == STDIN && o.outputs.as_deref() == Some(STDIN) {
        return Err(AuditError::CannotRun(
            "--ledger - and --outputs - cannot both read standard input".into(),
        ));
    }
    // A database ledger holds its outputs table too (when it has one: else the output
    // checks are skipped, as without --outputs); a file ledger needs --outputs.
    let mut outputs_absent = None;
    let outputs = match &o.outputs {
        Some(s) => Some(Source::parse_as(s, o.ledger_format).map_err(|e| CannotRun(e.0))?),
        None => match &ledger {
            Source::Sqlite(_) | Source::Postgres { .. } | Source::Mysql { .. } => {
                if read::has_outputs_table(&ledger).map_err(|e| CannotRun(e.0))? == Some(false) {
                    outputs_absent = Some(format!(
                        "{} has no outputs table: applied outputs cannot be checked (give --outputs SOURCE)",
                        ledger.display()
                    ));
                    None
                } else {
                    Some(ledger.clone())
                }
            }
            _ => None,
        },
    };
    if let Some(dir) = &o.snapshots
        && !dir.is_dir()
    {
        return Err(CannotRun(format!("--snapshots {} is not a directory", dir.display())).into());
    }
    let ropts = ReadOptions { assume_tz };
    // Only manifest jobs have drills to judge. `--drills` is read before the ledger, so a
    // bad one fails in a second, not after a 10M-row ledger; the ledger database's table
    // after it, so a ledger that cannot be read says so in its own words.
    let cadence_s = o.settings.drill_cadence.secs();
    let given = match &o.drills {
        Some(s) => Some(DrillSource::parse(s).map_err(|m| CannotRun(format!("--drills: {m}")))?),
        None => None,
    };
    let mut drills = match given {
        Some(src) if !o.manifests.is_empty() => Some(read_drills(&src, false, &ropts, cadence_s)?),
        _ => None,
    };
    let opts = AuditOptions {
        from,
        to,
        snapshots: o.snapshots.clone(),
        with_manifest: !o.manifests.is_empty(),
        with_outputs: outputs.is_some(),
    };
    let mut auditor = Auditor::new(jobs, opts);
    auditor.report_zone(report_tz);
    if !o.jobs.is_empty() {
        // With manifests the kept jobs are the declared ones; without, the names filter.
        auditor.only_jobs((o.manifests.is_empty()).then(|| o.jobs.clone()));
    }
    let bar = o.progress.then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {pos} rows ({per_sec})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb
    });
    if let Some(n) = estimate_rows(&ledger) {
        auditor.reserve(n);
    }
    let mut tally = auditor.output_tally();
    if let Some(n) = outputs.as_ref().and_then(estimate_rows) {
        tally.reserve(n);
    }
    if let Some(b) = &bar {
        b.set_message(format!("reading events from {}", ledger.display()));
    }
    // Three threads: the events reader parses rows into batches, this thread folds them
    // into the auditor, and the outputs (which need nothing from the events) are read and
    // folded into their own tally, merged at finish.
    let (ev_res, out_res) = std::thread::scope(|s| {
        let out_thread = outputs
            .as_ref()
            .filter(|_| !o.outputs_unwritten)
            .map(|src| {
                let ropts = &ropts;
                s.spawn(move || {
                    let cell = std::cell::RefCell::new(tally);
                    read::read_outputs(src, ropts, &mut |x| cell.borrow_mut().output(x), &mut |e| {
                        cell.borrow_mut().row_error(e)
                    })
                    .map(|_| cell.into_inner())
                    .map_err(|e| CannotRun(named(src, e.0)))
                })
            });
        let (tx, rx) = std::sync::mpsc::sync_channel::<EventBatch>(8);
        let (back_tx, back_rx) = std::sync::mpsc::channel::<EventBatch>();
        let ledger = &ledger;
        let ropts = &ropts;
        let ev_thread = s.spawn(move || {
            let batch = std::cell::RefCell::new(EventBatch::default());
            let r = read::read_event_refs(
                ledger,
                ropts,
                &mut |e| {
                    let mut b = batch.borrow_mut();
                    b.push(e);
                    if b.rows.len() == BATCH {
                        let fresh = back_rx.try_recv().unwrap_or_default();
                        let full = std::mem::replace(&mut *b, fresh);
                        // A closed channel means the fold stopped: the rest is not needed.
                        let _ = tx.send(full);
                    }
                },
                &mut |e| batch.borrow_mut().errors.push(e),
            );
            let rest = batch.into_inner();
            if !rest.rows.is_empty() || !rest.errors.is_empty() {
                let _ = tx.send(rest);
            }
            r.map_err(|e| CannotRun(named(ledger, e.0)))
        });
        let mut n = 0u64;
        for mut b in rx {
            for i in 0..b.rows.len() {
                auditor.event_ref(&b.get(i));
            }
            for e in b.errors.drain(..) {
                auditor.row_error(e);
            }
            let before = n;
            n += b.rows.len() as u64;
            if before >> 16 != n >> 16
                && let Some(bar) = &bar
            {
                bar.set_position(n);
            }
            b.clear();
            let _ = back_tx.send(b);
        }
        let ev = ev_thread
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        if ev.is_ok() {
            auditor.events_done();
        }
        let out = out_thread.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (ev, out)
    });
    ev_res?;
    // Read after the rows, so a source that cannot be read says so in the reader's words.
    let now = match since_clock {
        Some(now) => now,
        None => crate::ledger::tail::clock(&ledger).map_err(|e| CannotRun(named(&ledger, e.0)))?,
    };
    auditor.clock(now);
    if o.manifests.is_empty() && !o.jobs.is_empty() {
        let unmatched = auditor.unmatched_jobs(&o.jobs);
        if let Some((w, close)) = unmatched.first() {
            let hint = close
                .as_ref()
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(AuditError::CannotRun(format!(
                "--job `{w}` has no row in {}{hint}",
                ledger.display()
            )));
        }
    }
    let (accepted, rejected) = auditor.event_rows();
    if accepted == 0 && rejected > 0 {
        let mut msg = format!(
            "no event row of {} could be read ({} rejected), so there is nothing to audit:",
            ledger.display(),
            rejected
        );
        for e in auditor.first_row_errors().iter().take(FIRST_REASONS) {
            msg.push_str(&format!("\n  {e}"));
        }
        if rejected > FIRST_REASONS as u64 {
            msg.push_str(&format!(
                "\n  … and {} more",
                rejected - FIRST_REASONS as u64
            ));
        }
        return Err(AuditError::CannotRun(msg));
    }
    if let Some(t) = out_res {
        auditor.merge_outputs(t.map_err(AuditError::from)?);
    }
    if drills.is_none() && !o.manifests.is_empty() {
        drills = Some(match DrillSource::of_ledger(&ledger) {
            Some(src) => read_drills(&src, true, &ropts, cadence_s)?,
            // A file ledger holds no drill records.
            None => DrillInput::default(),
        });
    }
    if let Some(d) = drills {
        auditor.drills(d);
    }
    if let Some(b) = &bar {
        b.set_message("checking");
    }
    let mut result = auditor.finish();
    apply_severities(&mut result, &o.settings);
    if let Some(why) = outputs_absent {
        for s in &mut result.skipped {
            if s.codes.contains(&super::checks::AU201.code) {
                s.reason = why.clone();
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(result)
}

/// The drill records of `src` for AU301 (`from_ledger`: the ledger database's table, not
/// `--drills`), or why there are none.
fn read_drills(
    src: &DrillSource,
    from_ledger: bool,
    ropts: &ReadOptions,
    cadence_s: u64,
) -> Result<DrillInput, CannotRun> {
    let read = drills::read_from(src, ropts).map_err(|m| {
        CannotRun(if from_ledger {
            format!("drill records of the ledger: {m}")
        } else {
            format!("--drills: {m}")
        })
    })?;
    if !read.table_present {
        if from_ledger {
            return Ok(DrillInput::default());
        }
        return Ok(DrillInput::Absent(format!(
            "no drill records: {} has no `{}` table (`batchguard drill --record SOURCE` creates it)",
            read.source,
            drills::TABLE
        )));
    }
    Ok(DrillInput::Read { read, cadence_s })
}

/// `--from`/`--to`, or with `--since` the window that ends at the ledger's clock (SPEC 7.1:
/// PostgreSQL's and MySQL's `now()`; the host's for SQLite, as `run` reads it, and for
/// files), with that clock (without `--since` it is read after the rows: no slot after
/// it is due, item 26).
fn window(o: &RunOptions) -> Result<(Timestamp, Timestamp, Option<Timestamp>), AuditError> {
    let Some(since) = o.since else {
        return Ok((o.from, o.to, None));
    };
    let src = Source::parse_as(&o.ledger, o.ledger_format).map_err(|e| CannotRun(e.0))?;
    let to = crate::ledger::tail::clock(&src).map_err(|e| CannotRun(named(&src, e.0)))?;
    let from = i64::try_from(since)
        .ok()
        .and_then(|s| to.checked_sub(jiff::SignedDuration::from_secs(s)).ok())
        .ok_or_else(|| CannotRun("--since reaches before the earliest instant".into()))?;
    Ok((from, to, Some(to)))
}

/// `[rules]` of `batchguard.toml`: a check set to `off` reports nothing, `warning` and
/// `error` change its severity (and so the exit code under `--fail-on`).
pub fn apply_severities(r: &mut AuditResult, settings: &crate::config::Settings) {
    r.findings
        .retain_mut(|f| match settings.severity(f.code, f.name, f.severity) {
            Some(sev) => {
                f.severity = sev;
                true
            }
            None => false,
        });
}

/// Rows per batch handed from the events reader to the fold.
const BATCH: usize = 8192;

/// Event rows copied out of the reader's buffer, their strings in one text buffer; batches
/// go back to the reader to be reused, so the pipeline allocates nothing per row.
#[derive(Default)]
struct EventBatch {
    text: String,
    rows: Vec<PackedEvent>,
    errors: Vec<RowError>,
}

/// `(start, len)` in [`EventBatch::text`]; `len == u32::MAX` is `None`.
type Span = (u32, u32);

struct PackedEvent {
    run_id: Span,
    job: Span,
    instance: Span,
    error_code: Span,
    snapshot_digest: Span,
    scheduled_at: Timestamp,
    at: Timestamp,
    event: EventKind,
    attempt: Option<u32>,
    status: Option<Status>,
    trigger: Trigger,
}

impl EventBatch {
    fn span(&mut self, s: Option<&str>) -> Span {
        match s {
            None => (0, u32::MAX),
            Some(s) => {
                let start = self.text.len() as u32;
                self.text.push_str(s);
                (start, s.len() as u32)
            }
        }
    }

    fn str(&self, (start, len): Span) -> Option<&str> {
        (len != u32::MAX).then(|| &self.text[start as usize..(start + len) as usize])
    }

    fn push(&mut self, e: &EventRef<'_>) {
        let p = PackedEvent {
            run_id: self.span(Some(e.run_id)),
            job: self.span(Some(e.job)),
            instance: self.span(e.instance),
            error_code: self.span(e.error_code),
            snapshot_digest: self.span(e.snapshot_digest),
            scheduled_at: e.scheduled_at,
            at: e.at,
            event: e.event,
            attempt: e.attempt,
            status: e.status,
            trigger: e.trigger,
        };
        self.rows.push(p);
    }

    fn get(&self, i: usize) -> EventRef<'_> {
        let p = &self.rows[i];
        EventRef {
            run_id: self.str(p.run_id).unwrap_or(""),
            job: self.str(p.job).unwrap_or(""),
            scheduled_at: p.scheduled_at,
            event: p.event,
            at: p.at,
            instance: self.str(p.instance),
            attempt: p.attempt,
            status: p.status,
            error_code: self.str(p.error_code),
            snapshot_digest: self.str(p.snapshot_digest),
            trigger: p.trigger,
        }
    }

    fn clear(&mut self) {
        self.text.clear();
        self.rows.clear();
        self.errors.clear();
    }
}

/// About how many rows a file source holds: its size over the mean length of its first
/// lines (`None` for databases or when it cannot tell). Used to size the indexes up front.
fn estimate_rows(src: &Source) -> Option<usize> {
    use std::io::Read;
    let path = match src {
        Source::Csv(p) | Source::Jsonl(p) => p,
        _ => return None,
    };
    // Only a regular file can be opened twice: a pipe or standard input would lose the
    // rows this sizing read takes.
    if crate::ledger::input::is_stdin(path) || !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut head = vec![0u8; 256 * 1024];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(_) => return None,
        }
    }
    let head = &head[..got];
    if crate::ledger::input::Compression::sniff(head) != crate::ledger::input::Compression::None {
        return None;
    }
    let first = head.iter().position(|&b| b == b'\n')? + 1;
    let last = head.iter().rposition(|&b| b == b'\n')? + 1;
    let lines = head[first..last].iter().filter(|&&b| b == b'\n').count();
    if lines < 16 {
        return None;
    }
    let mean = (last - first) as f64 / lines as f64;
    // Capped: a narrow window over a huge ledger needs far less than the file holds, and
    // beyond the cap the indexes simply grow as they go.
    Some(((len as f64 / mean) as usize).min(1 << 24))
}
