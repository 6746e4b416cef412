//! What `batchguard metrics` counts since the first ledger row it read: Prometheus
//! counters and histograms only ever grow, so they are kept over every row, not over the
//! window (the window's figures are gauges).

use super::Open;
use crate::ledger::tail::TailEvent;
use crate::ledger::{EventKind, Status};
use jiff::Timestamp;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Upper bounds (seconds) of the duration and latency histograms of a job whose
/// `expected_duration` is not known (a ledger job no manifest declares): a second to a day,
/// the range of batch jobs.
pub const BUCKETS: [f64; 15] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0,
    43200.0, 86400.0,
];

/// Ladder steps per doubling: bounds `2^(1/4)` (19 %) apart, so `histogram_quantile`,
/// which interpolates inside one bucket, is never further from the truth than a fifth of
/// the value it reports.
pub const STEPS_PER_OCTAVE: i32 = 4;
/// The ladder spans `expected_duration / 2^LADDER_BELOW` to `expected_duration *
/// 2^LADDER_ABOVE`: from 1/16 x (a run that did nothing) to 4 x (twice the overrun alert).
pub const LADDER_BELOW: i32 = 4;
pub const LADDER_ABOVE: i32 = 2;

/// The bounds of a job's duration and latency histograms, scaled to its
/// `expected_duration` (seconds, above zero): a geometric ladder of quarter octaves from
/// 1/16 x to 4 x, 25 bounds, each rounded to 4 significant digits so `le` labels stay
/// short. Fixed buckets (1 s, 5 s, 10 s …) put a 4 s job's runs in one 1-5 s bucket and
/// made its p95 anything in it; here that job has bounds 3.364, 4 and 4.757 s.
pub fn ladder(expected_s: u64) -> Arc<[f64]> {
    let e = expected_s as f64;
    let mut bounds: Vec<f64> = (-LADDER_BELOW * STEPS_PER_OCTAVE..=LADDER_ABOVE * STEPS_PER_OCTAVE)
        .map(|k| {
            let v = e * 2f64.powf(f64::from(k) / f64::from(STEPS_PER_OCTAVE));
            format!("{v:.3e}").parse::<f64>().unwrap_or(v)
        })
        .collect();
    bounds.dedup();
    bounds.into()
}

/// Why a slot was skipped, from the `detail` `run` writes (SPEC 7.1 item 4).
pub const SKIP_REASONS: [&str; 5] = [
    "held",
    "already_succeeded",
    "dead_lettered",
    "other",
    "unknown",
];

/// The reason word of a skip's `detail`.
pub fn skip_reason(detail: Option<&str>) -> &'static str {
    match detail {
        None => "unknown",
        Some(d) if d.starts_with("held by ") => "held",
        Some(d) if d.starts_with("already succeeded") => "already_succeeded",
        Some(d) if d.starts_with("dead-lettered") => "dead_lettered",
        Some(_) => "other",
    }
}

/// The host's clock minus the store's, in seconds, from the `host clock +3600.2 s` part
/// of a `start` or `skip` detail (parts joined with `; `; SPEC 7.1 item 22).
pub fn host_clock_skew(detail: Option<&str>) -> Option<f64> {
    detail?.split("; ").find_map(|part| {
        let v = part
            .trim()
            .strip_prefix("host clock ")?
            .strip_suffix(" s")?;
        v.parse::<f64>().ok().filter(|x| x.is_finite())
    })
}

/// Who held the lock, from a skip's `held by INSTANCE (run …)`.
pub fn holder(detail: Option<&str>) -> Option<&str> {
    let rest = detail?.strip_prefix("held by ")?;
    Some(rest.split(" (").next().unwrap_or(rest))
}

/// A Prometheus histogram: counts per bucket (not cumulative), sum, count.
#[derive(Clone, Debug, PartialEq)]
pub struct Hist {
    /// Upper bounds, ascending: [`BUCKETS`] or the job's [`ladder`].
    pub bounds: Arc<[f64]>,
    /// `counts[i]` observations in `(bounds[i-1], bounds[i]]`; the last one above all.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Default for Hist {
    /// The fixed [`BUCKETS`].
    fn default() -> Hist {
        Hist::new(Arc::from(&BUCKETS[..]))
    }
}

impl Hist {
    pub fn new(bounds: Arc<[f64]>) -> Hist {
        Hist {
            counts: vec![0; bounds.len() + 1],
            bounds,
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, secs: f64) {
        let i = self.bounds.partition_point(|&b| b < secs);
        self.counts[i] += 1;
        self.sum += secs;
        self.count += 1;
    }

    /// `(le, cumulative count)` per bucket, `+Inf` last.
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<f64>, u64)> + '_ {
        let mut acc = 0;
        self.counts.iter().enumerate().map(move |(i, c)| {
            acc += c;
            (self.bounds.get(i).copied(), acc)
        })
    }
}

/// One job's counts since the first row read.
#[derive(Clone, Debug, Default)]
pub struct JobCounters {
    pub started: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// `end` events with status `superseded` (a newer holder took the slot over).
    pub superseded: u64,
    pub dead_lettered: u64,
    pub manual: u64,
    pub skips: BTreeMap<&'static str, u64>,
    /// `start` to `end` of each run whose `start` was read.
    pub duration: Hist,
    /// `scheduled_at` to the first successful `end`, once per slot.
    pub latency: Hist,
    pub last_success: Option<Timestamp>,
    /// Per instance that ever said its host clock was off: the skew (seconds, host minus
    /// store) of its latest `start` or `skip`, 0 when that one said nothing of it.
    pub host_clock_skew: BTreeMap<String, (Timestamp, f64)>,
}

impl JobCounters {
    /// Counts of a job whose histograms have `bounds` ([`BUCKETS`] when `None`).
    pub fn with_bounds(bounds: Option<Arc<[f64]>>) -> JobCounters {
        let hist = || bounds.clone().map_or_else(Hist::default, Hist::new);
        JobCounters {
            duration: hist(),
            latency: hist(),
            ..JobCounters::default()
        }
    }
}

/// Every job's counts.
#[derive(Debug, Default)]
pub struct Counters {
    /// Per job (the audit's name for it): a number of its own, and its counts.
    jobs: HashMap<Arc<str>, (u32, JobCounters)>,
    /// Slots that have had their first success, as `(job's number, ms)`.
    succeeded: HashSet<(u32, i64)>,
    /// Histogram bounds by job, for jobs with an `expected_duration` ([`ladder`]).
    bounds: HashMap<Arc<str>, Arc<[f64]>>,
}

impl Counters {
    /// Counters whose jobs of `expected` (the audit's name, `expected_duration` in
    /// seconds) have histograms on their [`ladder`]; any other job on [`BUCKETS`].
    pub fn new<'a>(expected: impl IntoIterator<Item = (&'a str, u64)>) -> Counters {
        Counters {
            bounds: expected
                .into_iter()
                .filter(|&(_, s)| s > 0)
                .map(|(job, s)| (Arc::from(job), ladder(s)))
                .collect(),
            ..Counters::default()
        }
    }

    /// One event of `job` (the audit's name for it); `open` still holds its run's `start`.
    pub(crate) fn event(
        &mut self,
        job: &Arc<str>,
        e: &TailEvent<'_>,
        open: &HashMap<String, Open>,
    ) {
        if !self.jobs.contains_key(&**job) {
            let n = self.jobs.len() as u32;
            let counts = JobCounters::with_bounds(self.bounds.get(&**job).cloned());
            self.jobs.insert(job.clone(), (n, counts));
        }
        let (id, c) = self.jobs.get_mut(&**job).expect("just inserted");
        let id = *id;
        let ev = &e.event;
        if matches!(ev.event, EventKind::Start | EventKind::Skip)
            && let Some(instance) = ev.instance
        {
            let skew = host_clock_skew(e.detail);
            match c.host_clock_skew.get_mut(instance) {
                Some(last) if ev.at >= last.0 => *last = (ev.at, skew.unwrap_or(0.0)),
                Some(_) => {}
                None => {
                    if let Some(s) = skew {
                        c.host_clock_skew.insert(instance.to_owned(), (ev.at, s));
                    }
                }
            }
        }
        match ev.event {
            EventKind::Start => c.started += 1,
            // No verdict: neither a success nor a failure, and no run duration.
            EventKind::End if ev.status == Some(Status::Superseded) => c.superseded += 1,
            EventKind::End => {
                if let Some(o) = open.get(ev.run_id) {
                    let secs = (ev.at - o.started).as_secs_f64().max(0.0);
                    c.duration.observe(secs);
                }
                if ev.status == Some(Status::Failure) {
                    c.failed += 1;
                } else {
                    c.succeeded += 1;
                    c.last_success = Some(c.last_success.map_or(ev.at, |t| t.max(ev.at)));
                    if self
                        .succeeded
                        .insert((id, ev.scheduled_at.as_millisecond()))
                    {
                        let secs = (ev.at - ev.scheduled_at).as_secs_f64().max(0.0);
                        c.latency.observe(secs);
                    }
                }
            }
            EventKind::Skip => *c.skips.entry(skip_reason(e.detail)).or_default() += 1,
            EventKind::DeadLetter => c.dead_lettered += 1,
            EventKind::Manual => c.manual += 1,
        }
    }
}

impl Counters {
    /// Every job's counts, by name; a declared job with no event yet has empty ones on
    /// its own bounds, so its buckets never change once it runs.
    pub fn by_job(&self) -> BTreeMap<String, JobCounters> {
        let mut all: BTreeMap<String, JobCounters> = self
            .jobs
            .iter()
            .map(|(k, (_, c))| (k.to_string(), c.clone()))
            .collect();
        for (job, b) in &self.bounds {
            all.entry(job.to_string())
                .or_insert_with(|| JobCounters::with_bounds(Some(b.clone())));
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_holders_come_from_the_detail_run_writes() {
        let held = "held by host-a (run r1, fence 3, lease ends in 40 s)";
        assert_eq!(skip_reason(Some(held)), "held");
        assert_eq!(holder(Some(held)), Some("host-a"));
        assert_eq!(
            skip_reason(Some("already succeeded (run r1)")),
            "already_succeeded"
        );
        assert_eq!(
            skip_reason(Some("dead-lettered (all 3 attempts were used)")),
            "dead_lettered"
        );
        assert_eq!(skip_reason(Some("busy")), "other");
        assert_eq!(skip_reason(None), "unknown");
        assert_eq!(holder(Some("already succeeded (run r1)")), None);
    }

    #[test]
    fn the_host_clock_skew_is_read_from_its_part_of_the_detail() {
        assert_eq!(
            host_clock_skew(Some("store: postgres; host clock -3599.8 s")),
            Some(-3599.8)
        );
        assert_eq!(host_clock_skew(Some("host clock +3600.2 s")), Some(3600.2));
        assert_eq!(
            host_clock_skew(Some("held by a (run r1); host clock +12.0 s")),
            Some(12.0)
        );
        assert_eq!(host_clock_skew(Some("store: postgres")), None);
        assert_eq!(host_clock_skew(Some("host clock soon s")), None);
        assert_eq!(host_clock_skew(None), None);
    }

    #[test]
    fn histogram_buckets_are_cumulative_with_inf_last() {
        let mut h = Hist::default();
        for s in [0.5, 1.0, 7.0, 100_000.0] {
            h.observe(s);
        }
        let c: Vec<(Option<f64>, u64)> = h.cumulative().collect();
        assert_eq!(c[0], (Some(1.0), 2));
        assert_eq!(c[2], (Some(10.0), 3));
        assert_eq!(*c.last().unwrap(), (None, 4));
        assert_eq!(h.count, 4);
    }

    #[test]
    fn a_ladder_is_quarter_octaves_from_a_sixteenth_to_four_times_expected() {
        let l = ladder(4);
        assert_eq!(l.len(), 25);
        assert_eq!(l[0], 0.25);
        assert_eq!(l[16], 4.0);
        assert_eq!(l[24], 16.0);
        assert_eq!((l[15], l[17]), (3.364, 4.757));
        for w in l.windows(2) {
            let r = w[1] / w[0];
            assert!((1.18..1.2).contains(&r), "{w:?}");
        }
        // A run of 3.4 s lands in (3.364, 4], as Prometheus' `le` reads it.
        let mut h = Hist::new(l.clone());
        h.observe(3.4);
        h.observe(4.0);
        assert_eq!(h.counts[16], 2);
        let c = Counters::new([("settle", 4), ("never", 0)]);
        let by = c.by_job();
        assert_eq!(by["settle"].duration.bounds, l);
        assert!(!by.contains_key("never"), "no expected_duration: no ladder");
    }
}
