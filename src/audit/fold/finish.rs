//! The end of the fold: settle the executions, judge each job (its views, the checks and
//! the metrics, jobs in parallel), and assemble the [`AuditResult`].

use super::Auditor;
use crate::audit::drills::Drills;
use crate::audit::hist::Histogram;
use crate::audit::metrics::{self, Attempts, JobMetrics, JobTally, PerDay};
use crate::audit::view::{JobView, Sight, SlotBuf, ts};
use crate::audit::{AuditFinding, AuditNote, AuditResult, DrillInput, JobReport, checks};
use rayon::iter::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator};

/// What judging one job yields.
struct JobOut {
    report: JobReport,
    findings: Vec<AuditFinding>,
    attempts: Attempts,
    per_day: PerDay,
    note: Option<AuditNote>,
}

impl Auditor {
    /// Runs the checks and computes the metrics.
    pub fn finish(mut self) -> AuditResult {
        self.slots.merge_runs();
        // AU001, one per source: events, then outputs (before the outputs' errors join
        // the events' in the report's list).
        let mut au001 = Vec::new();
        au001.extend(checks::rows_rejected(
            self.input.rows_rejected,
            &self.row_errors,
        ));
        au001.extend(checks::rows_rejected(
            self.outputs.input.rows_rejected,
            &self.outputs.row_errors,
        ));
        self.resolve_outputs();
        self.input.rows_accepted = self.input.rows_read - self.input.rows_rejected;
        // Drill records: AU001 for their rejected rows, resolved to the manifest jobs.
        let mut drill_summary = None;
        let drills_absent = match &self.drill_input {
            DrillInput::Absent(why) => Some(why.as_str()),
            DrillInput::Read { .. } if !self.opts.with_manifest => None,
            DrillInput::Read { read, cadence_s } => {
                au001.extend(checks::rows_rejected(read.rows_rejected, &read.errors));
                let (d, summary) = Drills::resolve(
                    read,
                    *cadence_s,
                    &self.names.declared,
                    self.jobs.len(),
                    self.opts.to,
                );
                self.drills = Some(d);
                drill_summary = Some(summary);
                None
            }
        };
        let skipped = checks::skipped(&self.opts, &self.jobs, drills_absent);

        // Jobs are independent: judged in parallel, merged in job order.
        let by_job = self.slots.by_job(self.states.len());
        let outs: Vec<JobOut> = by_job
            .par_iter()
            .enumerate()
            .map(|(jid, ids)| self.judge(jid, ids))
            .collect();

        let mut findings = Vec::new();
        let mut reports = Vec::with_capacity(outs.len());
        let mut parts = Vec::with_capacity(outs.len());
        let mut per_day = PerDay::new();
        let mut totals_lat = Histogram::default();
        let mut totals_dur = Histogram::default();
        let mut notes = Vec::new();
        for o in outs {
            notes.extend(o.note);
            totals_lat.merge(&o.report.latency_hist);
            totals_dur.merge(&o.report.duration_hist);
            parts.push(o.attempts);
            for (d, (a, b)) in o.per_day {
                let e = per_day.entry(d).or_default();
                e.0 += a;
                e.1 += b;
            }
            reports.push(o.report);
            findings.extend(o.findings);
        }
        let totals = metrics::totals(
            reports
                .iter()
                .zip(&self.states)
                .zip(&parts)
                .map(|((r, st), &p)| (&r.metrics, st.start_events, p)),
            &totals_dur,
            &totals_lat,
        );

        findings.sort_by(|a, b| {
            (a.job.as_str(), a.scheduled_at, a.code, &a.run_ids).cmp(&(
                b.job.as_str(),
                b.scheduled_at,
                b.code,
                &b.run_ids,
            ))
        });
        reports.sort_by(|a, b| a.job.cmp(&b.job));
        // Rejected rows first: every other finding is judged without them.
        au001.append(&mut findings);
        AuditResult {
            from: self.opts.from,
            to: self.opts.to,
            input: self.input.clone(),
            row_errors: std::mem::take(&mut self.row_errors),
            findings: au001,
            jobs: reports,
            totals,
            skipped,
            per_day: per_day.into_iter().map(|(d, (a, b))| (d, a, b)).collect(),
            tz: self.report_tz.clone().unwrap_or(jiff::tz::TimeZone::UTC),
            drills: drill_summary,
            notes,
        }
    }

    /// One job: its view, then every slot's view, each handed to the checks and the
    /// metrics.
    fn judge(&self, jid: usize, slot_ids: &[u32]) -> JobOut {
        let job = JobView::new(self, jid);
        let mut findings = Vec::new();
        let mut tally = JobTally::new(&job);
        checks::job_start(&job, &mut findings);
        let mut buf = SlotBuf::new(self);
        for &sid in slot_ids {
            let v = buf.view(&job, sid);
            tally.slot(&v);
            checks::slot(&v, &mut findings);
        }
        checks::job_end(&job, &mut findings);
        let drills = job.drill_status();
        let note = first_sight_note(&job);
        let JobMetrics {
            metrics,
            latency,
            duration,
            attempts,
            per_day,
        } = tally.finish();
        JobOut {
            report: JobReport {
                job: job.display.to_owned(),
                declared: job.checked().is_some(),
                metrics,
                latency_hist: latency,
                duration_hist: duration,
                drills,
            },
            findings,
            attempts,
            per_day,
            note,
        }
    }
}

/// The note for a job whose slots before its first event were not counted (no `since`),
/// the same words as its AU112: `watch` shows it and `metrics` exports the count.
fn first_sight_note(job: &JobView) -> Option<AuditNote> {
    let declared = job.checked()?;
    let Sight::FirstEvent(first) = job.sight else {
        return None;
    };
    if !declared.enabled || job.expected.is_none() || job.not_counted == 0 {
        return None;
    }
    Some(AuditNote {
        job: job.display.to_owned(),
        reason: "before_first_run",
        slots: job.not_counted,
        counted_from: Some(ts(first)),
        message: checks::before_first_run(job, first),
    })
}
