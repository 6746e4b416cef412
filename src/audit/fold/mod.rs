//! The streaming fold behind `batchguard audit`: ledger rows in any order, state per
//! distinct thing, never per row.
//!
//! - [`hash`]: the 64-bit hashes run ids and output keys are known by;
//! - [`arena`]: run ids, each stored once (only findings read them back);
//! - [`names`]: ledger job names -> job ids (declared jobs first, `--job` filtering);
//! - [`outputs`]: the output rows' tally, which another thread may fill;
//! - [`slots`]: the fixed-size slot and execution records, chained per slot;
//! - `finish`: settles the executions and hands each job to `crate::audit::view`, the
//!   checks and the metrics.

mod arena;
mod finish;
pub(crate) mod hash;
pub(crate) mod names;
pub(crate) mod outputs;
pub(crate) mod slots;

use super::{AuditJob, AuditOptions, InputCounts, MAX_ROW_ERRORS};
use crate::ledger::{Event, EventKind, EventRef, Output, RowError, Status, Trigger};
use hash::Fast;
use jiff::Timestamp;
use names::{IGNORED, JobNames, selected};
use outputs::OutputTally;
use slots::Slots;
use std::collections::HashMap;

/// "No id" in the fold's `u32` links and caches.
pub(crate) const NONE: u32 = u32::MAX;

/// Milliseconds since the epoch: the fold's time.
#[inline]
pub(crate) fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

/// What the fold keeps per job.
pub(crate) struct JobState {
    /// The name findings use.
    pub(crate) display: String,
    /// Index into `jobs` of the manifest, when declared.
    pub(crate) manifest: Option<usize>,
    /// Event rows counted (AU107 names them for an undeclared job).
    pub(crate) rows: u64,
    pub(crate) outputs: u64,
    pub(crate) skips: u64,
    pub(crate) start_events: u64,
}

impl JobState {
    fn new(display: String, manifest: Option<usize>) -> JobState {
        JobState {
            display,
            manifest,
            rows: 0,
            outputs: 0,
            skips: 0,
            start_events: 0,
        }
    }
}

/// The streaming audit. Feed rows in any order; call [`Auditor::finish`] once.
pub struct Auditor {
    pub(crate) jobs: Vec<AuditJob>,
    pub(crate) opts: AuditOptions,
    pub(crate) to_ms: i64,
    /// The clock of the ledger's store (the host's for files), in ms: no slot after it is
    /// due ([`Auditor::clock`]; unbounded until told).
    pub(crate) now_ms: i64,
    names: JobNames,
    pub(crate) states: Vec<JobState>,
    pub(crate) slots: Slots,
    pub(crate) outputs: OutputTally,
    /// After finish merged the outputs: global job id -> the tally's local id.
    out_local: HashMap<u32, u32, Fast>,
    /// First digest recorded at `start` per slot (only with `--snapshots`).
    pub(crate) digests: HashMap<u32, String, Fast>,
    pub(crate) input: InputCounts,
    pub(crate) row_errors: Vec<RowError>,
    /// The one zone the report shows times in (`None`: each job's own, days in UTC).
    pub(crate) report_tz: Option<jiff::tz::TimeZone>,
    /// The drill records given ([`Auditor::drills`]), resolved to jobs at finish.
    pub(crate) drill_input: crate::audit::DrillInput,
    pub(crate) drills: Option<crate::audit::drills::Drills>,
    /// Per manifest job, the earliest `scheduled_at` (ms) of any of its events, the window
    /// or not ([`NO_EVENT`] when none): without `since`, slots count from there.
    pub(crate) first_event: Vec<i64>,
    /// The last job name [`Auditor::first_event`] looked up and its manifest index: rows
    /// outside the window come in runs of one job, and a narrow window over a long ledger
    /// sees mostly those.
    first_event_name: (String, Option<usize>),
}

/// No event of the job was read.
pub(crate) const NO_EVENT: i64 = i64::MAX;

impl Auditor {
    /// `jobs`: every job of every `--manifest` (empty without manifests).
    pub fn new(jobs: Vec<AuditJob>, opts: AuditOptions) -> Auditor {
        let mut declared = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            declared
                .entry(format!("{}/{}", j.service, j.name))
                .or_insert(i);
            declared.entry(j.name.clone()).or_insert(i);
        }
        let services: std::collections::HashSet<&str> =
            jobs.iter().map(|j| j.service.as_str()).collect();
        let qualify = services.len() > 1;
        // Every manifest job has a state, so its expected slots are checked even when the
        // ledger never mentions it.
        let states = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let display = if qualify {
                    format!("{}/{}", j.service, j.name)
                } else {
                    j.name.clone()
                };
                JobState::new(display, Some(i))
            })
            .collect();
        Auditor {
            to_ms: ms(opts.to),
            now_ms: i64::MAX,
            names: JobNames::new(declared.clone(), jobs.len()),
            states,
            slots: Slots::new(),
            outputs: OutputTally::new(
                opts.from,
                opts.to,
                JobNames::new(declared, jobs.len()),
                jobs.len(),
            ),
            out_local: HashMap::default(),
            digests: HashMap::default(),
            input: InputCounts::default(),
            row_errors: Vec::new(),
            report_tz: None,
            drill_input: Default::default(),
            drills: None,
            first_event: vec![NO_EVENT; jobs.len()],
            first_event_name: (String::new(), None),
            jobs,
            opts,
        }
    }

    /// The drill records for AU301 and each job's last drill; without this call AU301 is
    /// skipped (as with [`crate::audit::DrillInput::Absent`]).
    pub fn drills(&mut self, input: crate::audit::DrillInput) {
        self.drill_input = input;
    }

    /// The clock of the ledger's store now (the host's for a file ledger): a slot is due
    /// only when its grace has passed by then too, so a `--to` in the future counts
    /// nothing past now (SPEC 7.1 item 26).
    pub fn clock(&mut self, now: Timestamp) {
        self.now_ms = ms(now);
    }

    /// Shows every time of the findings, and buckets the per-day counts, in `tz`.
    pub fn report_zone(&mut self, tz: jiff::tz::TimeZone) {
        self.report_tz = Some(tz);
    }

    /// `--job`: fold only the ledger rows of these jobs (`name` or `service/name`). With
    /// manifests, pass only the kept manifest jobs to [`Auditor::new`] and `None` here
    /// leaves every undeclared job out; without, `Some(names)` keeps those.
    pub fn only_jobs(&mut self, undeclared: Option<Vec<String>>) {
        let keep = std::sync::Arc::new(undeclared.unwrap_or_default());
        self.names.keep = Some(keep.clone());
        self.outputs.names.keep = Some(keep);
    }

    /// `--job` names that no ledger row had (meaningful without manifests), each with the
    /// closest name met.
    pub fn unmatched_jobs(&self, wanted: &[String]) -> Vec<(String, Option<String>)> {
        let seen: Vec<&str> = self.names.seen().chain(self.outputs.names.seen()).collect();
        wanted
            .iter()
            .filter(|w| !seen.iter().any(|s| selected(s, std::slice::from_ref(w))))
            .map(|w| {
                let close = crate::text::closest(w, &seen).map(str::to_owned);
                (w.clone(), close)
            })
            .collect()
    }

    fn job_id(&mut self, name: &str) -> u32 {
        let (id, new) = self.names.id(name);
        if new {
            self.states.push(JobState::new(name.to_owned(), None));
        }
        id
    }

    fn in_window(&self, t: Timestamp) -> bool {
        t >= self.opts.from && t < self.opts.to
    }

    /// Says that the event rows are done (output rows and row errors may follow): the
    /// executions are settled now, while outputs may still be read, rather than in
    /// [`Auditor::finish`]. Optional; event rows after it are settled again at finish.
    pub fn events_done(&mut self) {
        self.slots.merge_runs();
    }

    /// One event row.
    pub fn event(&mut self, e: Event) {
        self.event_ref(&e.as_ref());
    }

    /// One event row, borrowed.
    pub fn event_ref(&mut self, e: &EventRef<'_>) {
        self.input.rows_read += 1;
        self.input.events += 1;
        if !self.in_window(e.scheduled_at) {
            self.input.rows_outside_window += 1;
            self.first_event(e.job, e.scheduled_at);
            return;
        }
        let job = self.job_id(e.job);
        if job == IGNORED {
            return;
        }
        if let Some(first) = self.first_event.get_mut(job as usize) {
            *first = (*first).min(ms(e.scheduled_at));
        }
        self.states[job as usize].rows += 1;
        let slot = self.slots.slot_id(job, ms(e.scheduled_at));
        match e.event {
            EventKind::Skip => {
                self.slots.slot_mut(slot).skips += 1;
                self.states[job as usize].skips += 1;
            }
            EventKind::DeadLetter => self.slots.slot_mut(slot).flags.set_dead_lettered(),
            EventKind::Manual => self.slots.slot_mut(slot).flags.set_manual(),
            EventKind::Start => {
                self.states[job as usize].start_events += 1;
                if self.opts.snapshots.is_some()
                    && let Some(d) = e.snapshot_digest
                {
                    self.digests.entry(slot).or_insert_with(|| d.to_owned());
                }
                if e.trigger == Trigger::Manual {
                    self.slots.slot_mut(slot).flags.set_manual();
                }
                let manual = matches!(e.trigger, Trigger::Manual | Trigger::Replay);
                self.slots.exec_mut(e.run_id, slot).started(
                    ms(e.at),
                    e.attempt.unwrap_or(1),
                    manual,
                );
            }
            EventKind::End => {
                let fatal = e.status == Some(Status::Failure)
                    && e.error_code.is_some_and(|c| {
                        self.states[job as usize]
                            .manifest
                            .and_then(|m| self.jobs.get(m))
                            .is_some_and(|j| j.fatal.iter().any(|f| f == c))
                    });
                // An `end` without a status is no success.
                let status = match e.status {
                    Some(Status::Success) => slots::RunStatus::Success,
                    Some(Status::Superseded) => slots::RunStatus::Superseded,
                    Some(Status::Failure) | None => slots::RunStatus::Failure,
                };
                self.slots.exec_mut(e.run_id, slot).ended(
                    ms(e.at),
                    e.attempt.unwrap_or(1),
                    status,
                    fatal,
                );
            }
        }
    }

    /// An event of ledger job `name` for slot `scheduled_at`, read but not folded (a
    /// follower keeps only the window's rows, yet has seen every row): it tells when the
    /// job was first seen, which [`Auditor::event_ref`] learns by itself from every row.
    pub fn first_event(&mut self, name: &str, scheduled_at: Timestamp) {
        if self.first_event.is_empty() {
            return;
        }
        let (last, index) = &mut self.first_event_name;
        if last != name {
            last.clear();
            last.push_str(name);
            *index = self.names.declared.get(name).copied();
        }
        if let Some(first) = index.and_then(|m| self.first_event.get_mut(m)) {
            *first = (*first).min(ms(scheduled_at));
        }
    }

    /// One output row (see [`OutputTally`] to fold outputs on another thread).
    pub fn output(&mut self, o: Output) {
        self.outputs.output(o);
    }

    /// An empty [`OutputTally`] for this audit's jobs and window.
    pub fn output_tally(&self) -> OutputTally {
        let mut names = JobNames::new(self.names.declared.clone(), self.jobs.len());
        names.keep = self.names.keep.clone();
        OutputTally::new(self.opts.from, self.opts.to, names, self.jobs.len())
    }

    /// Takes the outputs folded in `t` (from [`Auditor::output_tally`]); they replace any
    /// fed through [`Auditor::output`], so use one way or the other.
    pub fn merge_outputs(&mut self, t: OutputTally) {
        self.outputs = t;
    }

    /// Room for about `rows` event rows (slots and executions), so the indexes do not grow
    /// (and rehash) on the way.
    pub fn reserve(&mut self, rows: usize) {
        self.slots.reserve(rows / 2);
    }

    /// Resolves the outputs' jobs to this auditor's: counts, row counts and row errors
    /// (event errors first, as when outputs are read after events).
    fn resolve_outputs(&mut self) {
        let n_local = self.outputs.counts.len();
        let mut local_to_global = Vec::with_capacity(n_local);
        for l in 0..n_local {
            let g = match self.outputs.names.undeclared_name(l as u32) {
                None => l as u32,
                Some(_) if self.outputs.counts[l] == 0 => {
                    local_to_global.push(NONE);
                    continue;
                }
                Some(name) => {
                    let name = name.to_owned();
                    self.job_id(&name)
                }
            };
            local_to_global.push(g);
            self.states[g as usize].outputs += self.outputs.counts[l];
            self.out_local.insert(g, l as u32);
        }
        for d in self.outputs.dups.values_mut() {
            d.job = local_to_global[d.job as usize];
        }
        let t = &mut self.outputs.input;
        self.input.rows_read += t.rows_read;
        self.input.rows_rejected += t.rows_rejected;
        self.input.outputs += t.outputs;
        self.input.rows_outside_window += t.rows_outside_window;
        for e in self.outputs.row_errors.drain(..) {
            if self.row_errors.len() < MAX_ROW_ERRORS {
                self.row_errors.push(e);
            }
        }
    }

    /// A row that could not be read: counted and kept for the report (the first 100).
    pub fn row_error(&mut self, e: RowError) {
        self.input.rows_read += 1;
        self.input.rows_rejected += 1;
        if self.row_errors.len() < MAX_ROW_ERRORS {
            self.row_errors.push(e);
        }
    }

    /// Event rows accepted and rejected so far (outputs not included).
    pub fn event_rows(&self) -> (u64, u64) {
        (self.input.events, self.input.rows_rejected)
    }

    /// The first rejected event rows, with their location.
    pub fn first_row_errors(&self) -> &[RowError] {
        &self.row_errors
    }

    /// Whether the output key of `job` was applied (for AU202).
    pub(crate) fn output_seen(&self, job: u32, key: &str) -> bool {
        self.out_local
            .get(&job)
            .is_some_and(|&l| self.outputs.contains(l, key))
    }
}
