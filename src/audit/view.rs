//! What the checks and the metrics read: a [`JobView`] per job, and a [`SlotView`] per slot
//! of it, each computed once and handed to every check and to the metrics.
//!
//! The view holds the facts more than one check (or a check and a metric) needs: whether
//! the slot is due and on the schedule, its executions in start order, the first success,
//! the executions that make it a duplicate, and what its snapshot file holds.

use super::drills::Drills;
use super::fold::outputs::DupOutput;
use super::fold::slots::{Exec, SlotFlags};
use super::fold::{Auditor, JobState, NO_EVENT, ms};
use super::snapshot::{Outcome, SnapshotCheck};
use super::{AuditFinding, AuditJob, DrillStatus, checks};
use crate::finding::RuleMeta;
use jiff::Timestamp;

/// One job as every check sees it.
pub(crate) struct JobView<'a> {
    /// The job id in the fold.
    pub(crate) id: usize,
    /// The name findings use.
    pub(crate) display: &'a str,
    /// The manifest job, when declared.
    pub(crate) job: Option<&'a AuditJob>,
    pub(crate) state: &'a JobState,
    pub(crate) with_manifest: bool,
    pub(crate) with_outputs: bool,
    /// `lock.ttl` in ms.
    pub(crate) ttl_ms: Option<i64>,
    grace_ms: i64,
    pub(crate) to_ms: i64,
    /// Slots are due against this: `to`, or the clock when it is earlier (SPEC 7.1 item
    /// 26: a slot after now is not due, whatever `--to` says).
    due_ms: i64,
    /// Every slot of the schedule in `[from, to)` (ms), for a declared job with a schedule
    /// (empty when the job is disabled).
    pub(crate) expected: Option<Vec<i64>>,
    /// From when the job's slots count (see [`Sight`]).
    pub(crate) sight: Sight,
    /// Due slots of the schedule in the window before [`JobView::sight`] lets them count.
    pub(crate) not_counted: u64,
    /// Due expected slots (ms): how many, and the ones without a `start` (AU101).
    pub(crate) due_expected: u64,
    pub(crate) missed: Vec<i64>,
    /// Outputs of the job applied more than once, by key (AU201).
    pub(crate) dup_outputs: Vec<&'a DupOutput>,
    /// The drill records, when given (AU301).
    pub(crate) drills: Option<&'a Drills>,
    audit: &'a Auditor,
}

impl<'a> JobView<'a> {
    pub(crate) fn new(a: &'a Auditor, id: usize) -> JobView<'a> {
        let state = &a.states[id];
        let job = state.manifest.and_then(|m| a.jobs.get(m));
        let ttl_ms = job.and_then(|j| j.ttl_s).map(|s| s as i64 * 1000);
        let grace_ms = job.map(|j| j.grace_s() as i64 * 1000).unwrap_or(0);
        let expected: Option<Vec<i64>> = job.and_then(|j| {
            let s = j.schedule.as_ref()?;
            if !j.enabled {
                return Some(Vec::new());
            }
            Some(
                s.slots(&j.tz, a.opts.from, a.opts.to)
                    .into_iter()
                    .map(ms)
                    .collect(),
            )
        });
        let mut v = JobView {
            id,
            display: &state.display,
            job,
            state,
            with_manifest: a.opts.with_manifest,
            with_outputs: a.opts.with_outputs,
            ttl_ms,
            grace_ms,
            to_ms: a.to_ms,
            due_ms: a.to_ms.min(a.now_ms),
            expected: None,
            sight: Sight::NoEvent,
            not_counted: 0,
            due_expected: 0,
            missed: Vec::new(),
            dup_outputs: Vec::new(),
            drills: a.drills.as_ref(),
            audit: a,
        };
        // A first event at or after `to` is no event of the window: the job's slots in it
        // count, as for a job the ledger never mentions (SPEC 7.1 item 26).
        v.sight = match (job.and_then(|j| j.since), a.first_event.get(id)) {
            (Some(since), _) => Sight::Since(ms(since)),
            (None, Some(&first)) if first != NO_EVENT && first < a.to_ms => {
                Sight::FirstEvent(first)
            }
            _ => Sight::NoEvent,
        };
        if let Some(exp) = &expected {
            for &at in exp.iter() {
                if !v.is_due(at) {
                    continue;
                }
                if !v.counts(at) {
                    v.not_counted += 1;
                    continue;
                }
                v.due_expected += 1;
                let has_start = a
                    .slots
                    .find(id, at)
                    .is_some_and(|s| a.slots.chain(s).any(|x| a.slots.exec(x).has_start()));
                if !has_start {
                    v.missed.push(at);
                }
            }
        }
        v.expected = expected;
        v.dup_outputs = a
            .outputs
            .dups
            .values()
            .filter(|d| d.job == id as u32)
            .collect();
        v.dup_outputs.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }

    /// Whether slot `at` of the schedule is the job's to run: at or after its `since`, or
    /// else its first event (SPEC 7.1 items 21 and 26: first sight); every slot of a job
    /// with neither.
    pub(crate) fn counts(&self, at: i64) -> bool {
        match self.sight {
            Sight::Since(from) | Sight::FirstEvent(from) => at >= from,
            Sight::NoEvent => true,
        }
    }

    /// Whether the manifest's checks judge this job: a declared job, with manifests.
    pub(crate) fn checked(&self) -> Option<&'a AuditJob> {
        self.job.filter(|_| self.with_manifest)
    }

    /// The window's end.
    pub(crate) fn to(&self) -> Timestamp {
        self.audit.opts.to
    }

    /// A manifest job's drills, when drill records were given.
    pub(crate) fn drill_status(&self) -> Option<DrillStatus> {
        let d = self.drills?;
        let job = self.checked()?;
        Some(d.status(self.state.manifest?, job))
    }

    /// `scheduled_at + grace <= to` (and `<= now`): the run had time to happen and finish.
    pub(crate) fn is_due(&self, at: i64) -> bool {
        at.saturating_add(self.grace_ms) <= self.due_ms
    }

    /// A slot as the report's zone shows it (`2026-03-01T02:00:00+09:00`), else the job's.
    pub(crate) fn slot_text(&self, t: Timestamp) -> String {
        match (self.audit.report_tz.as_ref(), self.job) {
            (Some(tz), _) => crate::schedule::format_slot(t, tz),
            (None, Some(j)) => crate::schedule::format_slot(t, &j.tz),
            (None, None) => t.to_string(),
        }
    }

    pub(crate) fn report_tz(&self) -> Option<&'a jiff::tz::TimeZone> {
        self.audit.report_tz.as_ref()
    }

    #[inline]
    pub(crate) fn exec(&self, x: u32) -> &'a Exec {
        self.audit.slots.exec(x)
    }

    /// The run id of execution `x`.
    pub(crate) fn run_id(&self, x: u32) -> String {
        self.audit.slots.run_id(x)
    }

    /// The execution of a run id hash.
    pub(crate) fn run_by_hash(&self, h: u64) -> Option<u32> {
        self.audit.slots.by_hash(h)
    }

    /// A finding of `check` about the job as a whole.
    pub(crate) fn finding(
        &self,
        check: &'static RuleMeta,
        message: String,
        run_ids: Vec<String>,
    ) -> AuditFinding {
        checks::finding(check, message, self.display, None, run_ids)
    }
}

/// From when a job's expected slots count: a slot before the job existed is not missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sight {
    /// The manifest's `since` (ms).
    Since(i64),
    /// No `since`: the earliest `scheduled_at` of the job's events in the ledger (ms),
    /// before the window's end; earlier slots are one AU112.
    FirstEvent(i64),
    /// No `since` and no event before the window's end: every slot counts (AU101 each).
    NoEvent,
}

/// What a slot's snapshot file says (with `--snapshots`, for a slot that ran).
pub(crate) struct SnapshotFacts {
    pub(crate) outcome: Outcome,
    /// The digest recorded at `start`.
    pub(crate) digest: Option<String>,
    /// Whether the slot lies within `snapshot.retention` of `to`.
    pub(crate) retained: bool,
}

/// One slot as every check sees it.
pub(crate) struct SlotView<'v> {
    pub(crate) job: &'v JobView<'v>,
    /// `scheduled_at` (ms) and as a timestamp.
    pub(crate) at: i64,
    pub(crate) t: Timestamp,
    /// Due: always for a job the manifest does not judge.
    pub(crate) due: bool,
    /// An instant of the schedule (always without one to compare with).
    pub(crate) on_schedule: bool,
    /// Whether the slot counts towards the expected slots of the metrics.
    pub(crate) counts_expected: bool,
    pub(crate) flags: SlotFlags,
    /// Every execution, by `(start, end)`.
    pub(crate) execs: &'v [u32],
    /// The executions with a `start`, in start order.
    pub(crate) started: &'v [u32],
    /// The first successful `end` (ms).
    pub(crate) success_end: Option<i64>,
    /// Executions that make the slot a duplicate (AU102): the earlier ones, then each
    /// start that clashed with them; empty when none did.
    pub(crate) duplicates: &'v [u32],
    pub(crate) snapshot: Option<&'v SnapshotFacts>,
}

impl SlotView<'_> {
    #[inline]
    pub(crate) fn exec(&self, x: u32) -> &Exec {
        self.job.exec(x)
    }

    /// A due slot with a started execution that could give a verdict (not superseded)
    /// and no success: a failed run (AU111, the `failed` metric).
    pub(crate) fn failed(&self) -> bool {
        self.due
            && self.success_end.is_none()
            && self.started.iter().any(|&x| !self.exec(x).superseded())
    }

    /// The executions of the slot that ended `superseded`.
    pub(crate) fn superseded(&self) -> u64 {
        self.execs
            .iter()
            .filter(|&&x| self.exec(x).superseded())
            .count() as u64
    }

    pub(crate) fn run_id(&self, x: u32) -> String {
        self.job.run_id(x)
    }

    /// The run ids of `execs`.
    pub(crate) fn run_ids(&self, execs: &[u32]) -> Vec<String> {
        execs.iter().map(|&x| self.run_id(x)).collect()
    }

    pub(crate) fn slot_text(&self) -> String {
        self.job.slot_text(self.t)
    }

    /// A finding of `check` about this slot.
    pub(crate) fn finding(
        &self,
        check: &'static RuleMeta,
        message: String,
        run_ids: Vec<String>,
    ) -> AuditFinding {
        checks::finding(check, message, self.job.display, Some(self.t), run_ids)
    }
}

/// The buffers slot views are built in, reused for every slot of a job.
pub(crate) struct SlotBuf {
    execs: Vec<u32>,
    started: Vec<u32>,
    duplicates: Vec<u32>,
    snapshot: Option<SnapshotFacts>,
    snapshots: Option<SnapshotCheck>,
}

impl SlotBuf {
    pub(crate) fn new(a: &Auditor) -> SlotBuf {
        SlotBuf {
            execs: Vec::new(),
            started: Vec::new(),
            duplicates: Vec::new(),
            snapshot: None,
            snapshots: a.opts.snapshots.clone().map(SnapshotCheck::new),
        }
    }

    /// The view of slot `sid` of `job`.
    pub(crate) fn view<'v>(&'v mut self, job: &'v JobView<'v>, sid: u32) -> SlotView<'v> {
        let a = job.audit;
        let slot = a.slots.slot(sid);
        let at = slot.at;
        let t = ts(at);
        let checked = job.checked().is_some();
        let declared = job.job.is_some();
        let due = if checked { job.is_due(at) } else { true };
        let on_schedule = job
            .expected
            .as_ref()
            .map(|e| e.binary_search(&at).is_ok())
            .unwrap_or(!declared || !job.with_manifest);
        let counts_expected = match &job.expected {
            Some(_) => due && on_schedule && job.counts(at),
            None => due,
        };

        self.execs.clear();
        self.execs.extend(a.slots.chain(sid));
        self.execs.sort_unstable_by_key(|&x| {
            let e = a.slots.exec(x);
            (e.start, e.end)
        });
        self.started.clear();
        self.started.extend(
            self.execs
                .iter()
                .copied()
                .filter(|&x| a.slots.exec(x).has_start()),
        );
        let success_end = self
            .execs
            .iter()
            .map(|&x| a.slots.exec(x))
            .filter(|e| e.succeeded() && e.has_end())
            .map(|e| e.end)
            .min();

        // A start while an earlier execution was active (until its end; without one, until
        // start + lock.ttl), or after an earlier one had succeeded.
        self.duplicates.clear();
        // A superseded execution neither clashes nor is clashed with: its lease had run
        // out when the newer holder took the slot (SPEC 7.1 item 24), one holder at a time.
        for (k, &x) in self.started.iter().enumerate() {
            let e = a.slots.exec(x);
            if e.superseded() {
                continue;
            }
            let clash = self.started[..k].iter().any(|&y| {
                let p = a.slots.exec(y);
                if p.superseded() {
                    return false;
                }
                let active_until = if p.has_end() {
                    p.end
                } else {
                    job.ttl_ms
                        .map_or(i64::MAX, |ttl| p.start.saturating_add(ttl))
                };
                let overlapping = e.start >= p.start && e.start < active_until;
                let after_success = p.succeeded() && p.has_end() && e.start >= p.end;
                overlapping || after_success
            });
            if clash {
                if self.duplicates.is_empty() {
                    // Name the earlier execution(s) it clashed with.
                    self.duplicates.extend(
                        self.started[..k]
                            .iter()
                            .copied()
                            .filter(|&y| !a.slots.exec(y).superseded()),
                    );
                }
                self.duplicates.push(x);
            }
        }

        self.snapshot = None;
        if let Some(j) = job.checked()
            && let Some(sc) = self.snapshots.as_mut()
            && let Some(spec) = &j.snapshot
            && !self.started.is_empty()
        {
            let retained = spec
                .retention_s
                .is_none_or(|r| at.saturating_add(r as i64 * 1000) >= job.to_ms);
            let digest = a.digests.get(&sid).cloned();
            let outcome = sc.check(j, spec, t, digest.as_deref(), |k| {
                a.output_seen(job.id as u32, k)
            });
            self.snapshot = Some(SnapshotFacts {
                outcome,
                digest,
                retained,
            });
        }

        SlotView {
            job,
            at,
            t,
            due,
            on_schedule,
            counts_expected,
            flags: slot.flags,
            execs: &self.execs,
            started: &self.started,
            success_end,
            duplicates: &self.duplicates,
            snapshot: self.snapshot.as_ref(),
        }
    }
}

/// A fold time (ms) as a timestamp.
pub(crate) fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}
