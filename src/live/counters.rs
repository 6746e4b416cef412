//! What `batchguard metrics` counts since the first ledger row it read: Prometheus
//! counters and histograms only ever grow, so they are kept over every row, not over the
//! window (the window's figures are gauges).

use super::Open;
use crate::ledger::tail::TailEvent;
use crate::ledger::{EventKind, Status};
use jiff::Timestamp;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Upper bounds (seconds) of the duration and latency histograms: a second to a day, the
/// range of batch jobs.
pub const BUCKETS: [f64; 15] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0,
    43200.0, 86400.0,
];

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

/// Who held the lock, from a skip's `held by INSTANCE (run …)`.
pub fn holder(detail: Option<&str>) -> Option<&str> {
    let rest = detail?.strip_prefix("held by ")?;
    Some(rest.split(" (").next().unwrap_or(rest))
}

/// A Prometheus histogram: counts per bucket (not cumulative), sum, count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hist {
    /// `counts[i]` observations in `(BUCKETS[i-1], BUCKETS[i]]`; the last one above all.
    pub counts: [u64; BUCKETS.len() + 1],
    pub sum: f64,
    pub count: u64,
}

impl Hist {
    pub fn observe(&mut self, secs: f64) {
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum += secs;
        self.count += 1;
    }

    /// `(le, cumulative count)` per bucket, `+Inf` last.
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<f64>, u64)> + '_ {
        let mut acc = 0;
        self.counts.iter().enumerate().map(move |(i, c)| {
            acc += c;
            (BUCKETS.get(i).copied(), acc)
        })
    }
}

/// One job's counts since the first row read.
#[derive(Clone, Debug, Default)]
pub struct JobCounters {
    pub started: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub dead_lettered: u64,
    pub manual: u64,
    pub skips: BTreeMap<&'static str, u64>,
    /// `start` to `end` of each run whose `start` was read.
    pub duration: Hist,
    /// `scheduled_at` to the first successful `end`, once per slot.
    pub latency: Hist,
    pub last_success: Option<Timestamp>,
}

/// Every job's counts.
#[derive(Debug, Default)]
pub struct Counters {
    /// Per job (the audit's name for it): a number of its own, and its counts.
    jobs: HashMap<Arc<str>, (u32, JobCounters)>,
    /// Slots that have had their first success, as `(job's number, ms)`.
    succeeded: HashSet<(u32, i64)>,
}

impl Counters {
    /// One event of `job` (the audit's name for it); `open` still holds its run's `start`.
    pub(crate) fn event(
        &mut self,
        job: &Arc<str>,
        e: &TailEvent<'_>,
        open: &HashMap<String, Open>,
    ) {
        if !self.jobs.contains_key(&**job) {
            let n = self.jobs.len() as u32;
            self.jobs.insert(job.clone(), (n, JobCounters::default()));
        }
        let (id, c) = self.jobs.get_mut(&**job).expect("just inserted");
        let id = *id;
        let ev = &e.event;
        match ev.event {
            EventKind::Start => c.started += 1,
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
    /// Every job's counts, by name.
    pub fn by_job(&self) -> BTreeMap<String, JobCounters> {
        self.jobs
            .iter()
            .map(|(k, (_, c))| (k.to_string(), c.clone()))
            .collect()
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
}
