//! SPEC 6 metrics: per job from its [`JobView`] and each [`SlotView`] (the same views the
//! checks read), and the totals over the jobs. `docs/audit.md` defines each number.

use super::hist::Histogram;
use super::snapshot::Outcome;
use super::view::{JobView, SlotView};
use jiff::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;

/// Missed and duplicated slots per day (`YYYY-MM-DD`).
pub(crate) type PerDay = BTreeMap<String, (u64, u64)>;

/// SPEC 6 metrics of one job (or the totals). Rates are `None` when their denominator is 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub expected: u64,
    pub started: u64,
    pub succeeded: u64,
    pub missed: u64,
    pub failed: u64,
    pub duplicated: u64,
    pub lost: u64,
    /// Executions that ended `superseded` (SPEC 7.1 item 24): a newer holder took their
    /// slot over; counted apart, never as a failure or a duplicate.
    pub superseded: u64,
    pub skipped: u64,
    pub lock_contention_ratio: Option<f64>,
    pub first_attempt_success_rate: Option<f64>,
    pub success_after_retry_rate: Option<f64>,
    pub dead_lettered: u64,
    pub manual_recoveries: u64,
    pub duration_p50_s: Option<f64>,
    pub duration_p95_s: Option<f64>,
    pub duration_p99_s: Option<f64>,
    pub duration_max_s: Option<f64>,
    pub latency_p50_s: Option<f64>,
    pub latency_p95_s: Option<f64>,
    pub latency_p99_s: Option<f64>,
    pub latency_max_s: Option<f64>,
    pub outputs: u64,
    pub duplicate_outputs: u64,
    pub missing_outputs: u64,
}

/// First attempts that succeeded, first attempts that failed, and of those the slots that
/// succeeded later: the numerators and denominators of the two rates.
#[derive(Clone, Copy, Default)]
pub(crate) struct Attempts {
    first_ok: u64,
    first_failed: u64,
    recovered: u64,
}

/// One job's metrics while its slots are counted.
pub(crate) struct JobTally {
    m: Metrics,
    lat: Histogram,
    dur: Histogram,
    attempts: Attempts,
    per_day: PerDay,
    start_events: u64,
}

/// One job's metrics, counted.
pub(crate) struct JobMetrics {
    pub(crate) metrics: Metrics,
    pub(crate) latency: Histogram,
    pub(crate) duration: Histogram,
    pub(crate) attempts: Attempts,
    pub(crate) per_day: PerDay,
}

impl JobTally {
    /// The job-level counts: skips, outputs, due expected slots and the missed ones,
    /// duplicated output keys.
    pub(crate) fn new(job: &JobView) -> JobTally {
        let mut t = JobTally {
            m: Metrics {
                skipped: job.state.skips,
                outputs: job.state.outputs,
                ..Metrics::default()
            },
            lat: Histogram::default(),
            dur: Histogram::default(),
            attempts: Attempts::default(),
            per_day: PerDay::new(),
            start_events: job.state.start_events,
        };
        t.m.expected += job.due_expected;
        for &at in &job.missed {
            t.m.missed += 1;
            bump_day(
                &mut t.per_day,
                crate::audit::view::ts(at),
                true,
                job.report_tz(),
            );
        }
        t.m.duplicate_outputs += job.dup_outputs.len() as u64;
        t
    }

    /// Counts one slot of the job.
    pub(crate) fn slot(&mut self, v: &SlotView) {
        let m = &mut self.m;
        if v.flags.dead_lettered() {
            m.dead_lettered += 1;
        }
        if v.flags.manual() {
            m.manual_recoveries += 1;
        }
        if v.job.expected.is_none() && v.due {
            // No schedule to expect from: a slot seen in the ledger is expected.
            m.expected += 1;
        }
        if v.counts_expected && !v.started.is_empty() {
            m.started += 1;
        }
        if v.counts_expected && v.success_end.is_some() {
            m.succeeded += 1;
        }
        m.superseded += v.superseded();
        let mut lost = false;
        for &x in v.execs {
            let e = v.exec(x);
            match (e.has_start(), e.has_end()) {
                // A superseded execution's time is its lost lease's, not a run's.
                (true, true) if e.superseded() => {}
                (true, true) => self.dur.record((e.end - e.start).max(0) as u64),
                (true, false) => lost |= v.due,
                _ => {}
            }
        }
        if lost && v.counts_expected {
            m.lost += 1;
        }
        let checked = v.job.checked().is_some();
        if !v.duplicates.is_empty() {
            if v.counts_expected || !checked {
                m.duplicated += 1;
            }
            bump_day(&mut self.per_day, v.t, false, v.job.report_tz());
        }
        if !checked {
            if !v.started.is_empty() {
                if let Some(end) = v.success_end {
                    self.lat.record((end - v.at).max(0) as u64);
                }
                self.attempts.first(v);
            }
            return;
        }
        if v.failed() && v.counts_expected {
            m.failed += 1;
        }
        if let Some(end) = v.success_end
            && v.counts_expected
        {
            self.lat.record((end - v.at).max(0) as u64);
        }
        if v.counts_expected && !v.started.is_empty() {
            self.attempts.first(v);
        }
        if v.job.with_outputs
            && let Some(s) = v.snapshot
            && let Outcome::Found { missing_count, .. } = &s.outcome
        {
            m.missing_outputs += missing_count;
        }
    }

    /// The job's rates and percentiles.
    pub(crate) fn finish(self) -> JobMetrics {
        let JobTally {
            mut m,
            lat,
            dur,
            attempts: a,
            per_day,
            start_events,
        } = self;
        let total_attempted = start_events + m.skipped;
        m.lock_contention_ratio =
            (total_attempted > 0).then(|| round6(m.skipped as f64 / total_attempted as f64));
        let started_slots = a.first_ok + a.first_failed;
        m.first_attempt_success_rate =
            (started_slots > 0).then(|| round6(a.first_ok as f64 / started_slots as f64));
        m.success_after_retry_rate =
            (a.first_failed > 0).then(|| round6(a.recovered as f64 / a.first_failed as f64));
        fill_percentiles(&mut m, &dur, &lat);
        JobMetrics {
            metrics: m,
            latency: lat,
            duration: dur,
            attempts: a,
            per_day,
        }
    }
}

impl Attempts {
    /// The slot's first attempt (its earliest start that was not superseded: a superseded
    /// one gave no verdict): succeeded, or failed and whether the slot succeeded later.
    fn first(&mut self, v: &SlotView) {
        let Some(&first) = v.started.iter().find(|&&x| !v.exec(x).superseded()) else {
            return;
        };
        if v.exec(first).succeeded() {
            self.first_ok += 1;
        } else {
            self.first_failed += 1;
            if v.success_end.is_some() {
                self.recovered += 1;
            }
        }
    }
}

/// The totals: sums, rates over the summed numerators and denominators, percentiles over
/// the merged histograms. `jobs`: each job's metrics, its `start` events and attempts.
pub(crate) fn totals<'a>(
    jobs: impl Iterator<Item = (&'a Metrics, u64, Attempts)>,
    dur: &Histogram,
    lat: &Histogram,
) -> Metrics {
    let mut t = Metrics::default();
    let (mut skips, mut starts) = (0u64, 0u64);
    let mut a = Attempts::default();
    for (m, start_events, parts) in jobs {
        t.expected += m.expected;
        t.started += m.started;
        t.succeeded += m.succeeded;
        t.missed += m.missed;
        t.failed += m.failed;
        t.duplicated += m.duplicated;
        t.lost += m.lost;
        t.superseded += m.superseded;
        t.skipped += m.skipped;
        t.dead_lettered += m.dead_lettered;
        t.manual_recoveries += m.manual_recoveries;
        t.outputs += m.outputs;
        t.duplicate_outputs += m.duplicate_outputs;
        t.missing_outputs += m.missing_outputs;
        skips += m.skipped;
        starts += start_events;
        a.first_ok += parts.first_ok;
        a.first_failed += parts.first_failed;
        a.recovered += parts.recovered;
    }
    t.lock_contention_ratio =
        (starts + skips > 0).then(|| round6(skips as f64 / (starts + skips) as f64));
    t.first_attempt_success_rate = (a.first_ok + a.first_failed > 0)
        .then(|| round6(a.first_ok as f64 / (a.first_ok + a.first_failed) as f64));
    t.success_after_retry_rate =
        (a.first_failed > 0).then(|| round6(a.recovered as f64 / a.first_failed as f64));
    fill_percentiles(&mut t, dur, lat);
    t
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn fill_percentiles(m: &mut Metrics, dur: &Histogram, lat: &Histogram) {
    let s = |v: Option<f64>| v.map(|ms| round6(ms / 1000.0));
    m.duration_p50_s = s(dur.percentile(50.0));
    m.duration_p95_s = s(dur.percentile(95.0));
    m.duration_p99_s = s(dur.percentile(99.0));
    m.duration_max_s = s(dur.max().map(|v| v as f64));
    m.latency_p50_s = s(lat.percentile(50.0));
    m.latency_p95_s = s(lat.percentile(95.0));
    m.latency_p99_s = s(lat.percentile(99.0));
    m.latency_max_s = s(lat.max().map(|v| v as f64));
}

/// Counts a missed (or duplicated) slot on its day in the report's zone (UTC without one).
fn bump_day(per_day: &mut PerDay, t: Timestamp, missed: bool, tz: Option<&jiff::tz::TimeZone>) {
    let day = match tz {
        Some(tz) => t
            .to_zoned_datetime(tz.clone())
            .strftime("%Y-%m-%d")
            .to_string(),
        None => t.strftime("%Y-%m-%d").to_string(),
    };
    let e = per_day.entry(day).or_default();
    if missed {
        e.0 += 1;
    } else {
        e.1 += 1;
    }
}
