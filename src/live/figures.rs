//! What one refresh shows: per job the audit's metrics of the window and what only a
//! live view knows (what runs now, the last outcome, skip reasons, leases, alerts). One
//! [`Snapshot`] feeds the terminal table, `--once --format json` and `/metrics` alike.

use super::alerts::{self, Alert, AlertKind};
use super::counters::{Counters, holder, skip_reason};
use super::window::Window;
use super::{Ended, JobLimits, Names, Open};
use crate::audit::{AuditNote, AuditResult, Metrics};
use crate::ledger::EventKind;
use crate::ledger::tail::{DrillRecord, Polled};
use crate::store::HeldLease;
use jiff::Timestamp;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Everything one refresh found.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub version: u32,
    pub tool: &'static str,
    /// The store or ledger followed (password masked).
    pub source: String,
    pub window: WindowInfo,
    pub input: InputInfo,
    pub jobs: Vec<JobFigures>,
    /// Every lease not released, of the jobs shown.
    pub leases: Vec<LeaseView>,
    /// Why leases are not shown (a store that cannot list them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases_error: Option<String>,
    pub alerts: Vec<Alert>,
    pub alert_counts: AlertCounts,
    /// The window's audit findings by code, after `[rules]` severities.
    pub findings: BTreeMap<&'static str, u64>,
    /// The audit's totals over the window.
    pub totals: Metrics,
    /// Jobs whose slots before their first event (no `since`) were not counted.
    pub notes: Vec<AuditNote>,
    /// How long the refresh took (milliseconds).
    pub refresh_ms: f64,
    /// Counters since the first row (for `metrics`).
    #[serde(skip)]
    pub counters: BTreeMap<String, super::counters::JobCounters>,
}

#[derive(Clone, Debug, Serialize)]
pub struct WindowInfo {
    pub from: Timestamp,
    /// The store's clock at the refresh.
    pub to: Timestamp,
    pub since_s: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    /// Ledger rows read since `watch` started (events and outputs, rejected included).
    pub rows_read: u64,
    pub rows_rejected: u64,
    /// Rows this refresh read.
    pub new_rows: u64,
    /// Event rows whose slot is in the window.
    pub window_events: u64,
}

/// Alerts firing, by kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AlertCounts {
    pub latency: u64,
    pub missed: u64,
    pub stale_lease: u64,
    pub overrun: u64,
    pub total: u64,
}

/// One job's figures over the window.
#[derive(Clone, Debug, Serialize)]
pub struct JobFigures {
    pub job: String,
    /// Whether a manifest declares it.
    pub declared: bool,
    /// Runs started and not ended whose lease has not expired, oldest first.
    pub running: Vec<Running>,
    pub last_outcome: Option<LastOutcome>,
    /// `start` events in the window.
    pub starts: u64,
    /// `skip` events in the window.
    pub skips: u64,
    /// skips / (starts + skips).
    pub lock_contention_ratio: Option<f64>,
    pub skip_reasons: BTreeMap<&'static str, u64>,
    pub last_skip: Option<LastSkip>,
    pub expected_duration_s: Option<u64>,
    pub duration_p50_s: Option<f64>,
    pub duration_p95_s: Option<f64>,
    pub max_latency_s: Option<u64>,
    pub latency_p50_s: Option<f64>,
    pub latency_p95_s: Option<f64>,
    pub expected: u64,
    pub missed: u64,
    pub failed: u64,
    pub missing_tolerance: u64,
    pub leases: Vec<LeaseView>,
    /// Alerts firing for this job.
    pub alerts: u64,
    /// When a drill of the job last passed (`batchguard_drills`, when the ledger has it).
    pub last_passed_drill: Option<Timestamp>,
    /// Every metric of the audit over the window (SPEC 6), as `audit --format json` has it.
    pub metrics: Metrics,
    /// Its slots are shown with seconds (a schedule with slots off the whole minute).
    #[serde(skip)]
    pub slot_seconds: bool,
    /// Due slots of the window not counted (before its first event; see `notes`).
    #[serde(skip)]
    pub not_counted: u64,
}

/// A run going on now.
#[derive(Clone, Debug, Serialize)]
pub struct Running {
    pub scheduled_at: Timestamp,
    pub run_id: String,
    /// Its instance (the lease's holder).
    pub instance: Option<String>,
    /// When it started (or took its lease).
    pub since: Timestamp,
    pub running_s: i64,
    pub fence: Option<i64>,
    pub attempt: Option<u32>,
    /// Seconds its lease has left (with a store).
    pub lease_secs_left: Option<i64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LastOutcome {
    /// `succeeded`, `failed` or `dead_lettered`.
    pub outcome: &'static str,
    pub scheduled_at: Timestamp,
    pub at: Timestamp,
    pub run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LastSkip {
    pub scheduled_at: Timestamp,
    pub at: Timestamp,
    /// The instance that was refused.
    pub instance: Option<String>,
    pub reason: &'static str,
    /// Who held the lock, when it was held.
    pub holder: Option<String>,
    pub detail: Option<String>,
}

/// A lease not released.
#[derive(Clone, Debug, Serialize)]
pub struct LeaseView {
    pub job: String,
    pub key: String,
    pub scheduled_at: Timestamp,
    pub holder: String,
    pub run_id: String,
    pub fence: i64,
    pub acquired_at: Timestamp,
    pub lease_until: Timestamp,
    /// Negative once expired.
    pub secs_left: i64,
    pub expired: bool,
}

/// What a snapshot is built from.
pub(crate) struct Parts<'a> {
    pub(crate) now: Timestamp,
    pub(crate) from: Timestamp,
    pub(crate) since_s: u64,
    pub(crate) source: &'a str,
    pub(crate) audit: AuditResult,
    pub(crate) limits: &'a HashMap<String, JobLimits>,
    pub(crate) window: &'a Window,
    pub(crate) names: &'a mut Names,
    pub(crate) open: &'a HashMap<String, Open>,
    pub(crate) last_end: &'a HashMap<std::sync::Arc<str>, Ended>,
    pub(crate) leases: Vec<(String, HeldLease)>,
    pub(crate) leases_error: Option<String>,
    pub(crate) counters: &'a Counters,
    pub(crate) drills: Vec<DrillRecord>,
    pub(crate) rejected: u64,
    pub(crate) rows_read: u64,
    pub(crate) polled: Polled,
    pub(crate) settings: &'a crate::config::Settings,
    pub(crate) started: Instant,
}

/// What the window's rows say per job beyond the audit's metrics.
#[derive(Default)]
struct WindowFacts {
    starts: u64,
    skips: u64,
    reasons: BTreeMap<&'static str, u64>,
    last_skip: Option<LastSkip>,
}

/// [`WindowFacts`] while the rows are read: the last skip borrowed from the window.
#[derive(Default)]
struct Counting<'w> {
    starts: u64,
    skips: u64,
    reasons: BTreeMap<&'static str, u64>,
    last_skip: Option<crate::live::window::WindowEvent<'w>>,
}

pub(crate) fn build(p: Parts<'_>) -> Snapshot {
    let Parts {
        now,
        from,
        since_s,
        source,
        mut audit,
        limits,
        window,
        names,
        open,
        last_end,
        leases,
        leases_error,
        counters,
        drills,
        rejected,
        rows_read,
        polled,
        settings,
        started,
    } = p;

    // By job number, so a row costs no name lookup.
    let mut by_id: Vec<Counting> = (0..names.len()).map(|_| Counting::default()).collect();
    let mut window_events = 0u64;
    window.events(from, now, &mut |e| {
        window_events += 1;
        let ev = &e.event;
        if !matches!(ev.event, EventKind::Start | EventKind::Skip) {
            return;
        }
        let Some(f) = by_id.get_mut(e.job_id as usize) else {
            return;
        };
        if ev.event == EventKind::Start {
            f.starts += 1;
            return;
        }
        f.skips += 1;
        let reason = skip_reason(e.detail);
        *f.reasons.entry(reason).or_default() += 1;
        if f.last_skip.as_ref().is_none_or(|l| ev.at >= l.event.at) {
            f.last_skip = Some(*e);
        }
    });
    let mut facts: HashMap<String, WindowFacts> = by_id
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let last_skip = f.last_skip.map(|e| LastSkip {
                scheduled_at: e.event.scheduled_at,
                at: e.event.at,
                instance: e.event.instance.map(str::to_owned),
                reason: skip_reason(e.detail),
                holder: holder(e.detail).map(str::to_owned),
                detail: e.detail.map(str::to_owned),
            });
            let facts = WindowFacts {
                starts: f.starts,
                skips: f.skips,
                reasons: f.reasons,
                last_skip,
            };
            (names.by_id(i as u32).to_owned(), facts)
        })
        .collect();

    let lease_views: Vec<LeaseView> = leases
        .iter()
        .map(|(job, l)| LeaseView {
            job: job.clone(),
            key: l.key.clone(),
            scheduled_at: l.scheduled_at,
            holder: l.holder.clone(),
            run_id: l.run_id.clone(),
            fence: l.fence,
            acquired_at: l.acquired_at,
            lease_until: l.lease_until,
            secs_left: secs_between(now, l.lease_until),
            expired: l.lease_until <= now,
        })
        .collect();

    // Runs going on: the ledger's open runs still inside their lease, and live leases
    // whose `start` the ledger does not have (yet).
    let mut running: Vec<(String, Running)> = Vec::new();
    for (run_id, o) in open {
        let lease = lease_views.iter().find(|l| &l.run_id == run_id);
        let ttl = limits.get(&*o.job).and_then(|l| l.ttl_s);
        let within = match (lease, ttl) {
            (Some(l), _) => !l.expired,
            (None, Some(t)) => o.started + jiff::SignedDuration::from_secs(t as i64) > now,
            (None, None) => true,
        };
        if !within {
            continue;
        }
        running.push((
            o.job.to_string(),
            Running {
                scheduled_at: o.scheduled_at,
                run_id: run_id.clone(),
                instance: o
                    .instance
                    .clone()
                    .or_else(|| lease.map(|l| l.holder.clone())),
                since: o.started,
                running_s: secs_between(o.started, now),
                fence: o.fence.or(lease.map(|l| l.fence)),
                attempt: Some(o.attempt),
                lease_secs_left: lease.map(|l| l.secs_left),
            },
        ));
    }
    for l in lease_views.iter().filter(|l| !l.expired) {
        if open.contains_key(&l.run_id) {
            continue;
        }
        running.push((
            l.job.clone(),
            Running {
                scheduled_at: l.scheduled_at,
                run_id: l.run_id.clone(),
                instance: Some(l.holder.clone()),
                since: l.acquired_at,
                running_s: secs_between(l.acquired_at, now),
                fence: Some(l.fence),
                attempt: None,
                lease_secs_left: Some(l.secs_left),
            },
        ));
    }
    running.sort_by(|a, b| (&a.0, a.1.since, &a.1.run_id).cmp(&(&b.0, b.1.since, &b.1.run_id)));

    let missed: Vec<(String, u64)> = audit
        .jobs
        .iter()
        .map(|j| (j.job.clone(), j.metrics.missed))
        .collect();
    let alerts = alerts::judge(&alerts::Inputs {
        now,
        from,
        findings: &audit.findings,
        missed: &missed,
        limits,
        running: &running,
        leases: &lease_views,
    });
    crate::audit::run::apply_severities(&mut audit, settings);
    let mut findings: BTreeMap<&'static str, u64> = BTreeMap::new();
    for f in &audit.findings {
        *findings.entry(f.code).or_default() += 1;
    }

    let mut passed_drill: HashMap<String, Timestamp> = HashMap::new();
    for d in drills.iter().filter(|d| d.passed) {
        if let Some(job) = names.shown(&d.job) {
            let e = passed_drill.entry(job.to_string()).or_insert(d.at);
            *e = (*e).max(d.at);
        }
    }

    let mut counts = AlertCounts::default();
    for a in &alerts {
        counts.total += 1;
        match a.kind {
            AlertKind::Latency => counts.latency += 1,
            AlertKind::Missed => counts.missed += 1,
            AlertKind::StaleLease => counts.stale_lease += 1,
            AlertKind::Overrun => counts.overrun += 1,
        }
    }

    let jobs = audit
        .jobs
        .iter()
        .map(|r| {
            let lim = limits.get(&r.job).cloned().unwrap_or_default();
            let f = facts.remove(&r.job).unwrap_or_default();
            let m = &r.metrics;
            JobFigures {
                job: r.job.clone(),
                declared: r.declared,
                running: running
                    .iter()
                    .filter(|(j, _)| *j == r.job)
                    .map(|(_, x)| x.clone())
                    .collect(),
                last_outcome: last_end.get(r.job.as_str()).map(|e| LastOutcome {
                    outcome: e.outcome,
                    scheduled_at: e.scheduled_at,
                    at: e.at,
                    run_id: e.run_id.clone(),
                    error_code: e.error_code.clone(),
                }),
                starts: f.starts,
                skips: f.skips,
                lock_contention_ratio: m.lock_contention_ratio,
                skip_reasons: f.reasons,
                last_skip: f.last_skip,
                expected_duration_s: lim.expected_duration_s,
                duration_p50_s: m.duration_p50_s,
                duration_p95_s: m.duration_p95_s,
                max_latency_s: lim.max_latency_s,
                latency_p50_s: m.latency_p50_s,
                latency_p95_s: m.latency_p95_s,
                expected: m.expected,
                missed: m.missed,
                failed: m.failed,
                missing_tolerance: lim.missing_tolerance.unwrap_or(0),
                leases: lease_views
                    .iter()
                    .filter(|l| l.job == r.job)
                    .cloned()
                    .collect(),
                alerts: alerts.iter().filter(|a| a.job == r.job).count() as u64,
                last_passed_drill: passed_drill.get(&r.job).copied(),
                metrics: m.clone(),
                slot_seconds: lim.slot_seconds,
                not_counted: audit
                    .notes
                    .iter()
                    .filter(|n| n.job == r.job)
                    .map(|n| n.slots)
                    .sum(),
            }
        })
        .collect();

    Snapshot {
        version: 1,
        tool: "batchguard",
        source: source.to_owned(),
        window: WindowInfo {
            from,
            to: now,
            since_s,
        },
        input: InputInfo {
            rows_read,
            rows_rejected: rejected,
            new_rows: polled.events + polled.outputs + polled.rejected,
            window_events,
        },
        jobs,
        leases: lease_views,
        leases_error,
        alerts,
        alert_counts: counts,
        findings,
        totals: audit.totals.clone(),
        notes: audit.notes.clone(),
        refresh_ms: (started.elapsed().as_secs_f64() * 1e6).round() / 1e3,
        counters: counters.by_job(),
    }
}

/// Whole seconds from `a` to `b` (negative when `b` is earlier), rounded towards zero.
fn secs_between(a: Timestamp, b: Timestamp) -> i64 {
    (b - a).as_secs()
}
