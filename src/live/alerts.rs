//! The alerts `watch` shows and `metrics` exports, from the thresholds the manifest sets
//! (SPEC 2 `alerts`, `expected_duration`, `lock.ttl`):
//!
//! | kind | fires when |
//! |---|---|
//! | `latency` | a slot of the window has not succeeded within `alerts.max_latency` of its `scheduled_at`: it succeeded later (AU106), or it started and has not succeeded by then (AU111, running or failed) |
//! | `missed` | the window's missed slots (AU101) exceed `alerts.missing_tolerance` (default 0) |
//! | `stale_lease` | a lease is still held past its `lease_until` (older than its TTL: its holder died or hangs), and it expired inside the window |
//! | `overrun` | a run has been going for more than 2 x `expected_duration` |
//!
//! The first two are the audit's own findings over the window, so `watch` and `audit`
//! agree on them; the last two need the store's leases and the runs still open.

use super::JobLimits;
use super::figures::{LeaseView, Running};
use crate::audit::AuditFinding;
use crate::audit::checks::{AU101, AU106, AU111};
use jiff::Timestamp;
use serde::Serialize;
use std::collections::HashMap;

/// What an alert is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Latency,
    Missed,
    StaleLease,
    Overrun,
}

impl AlertKind {
    pub const ALL: [AlertKind; 4] = [
        AlertKind::Latency,
        AlertKind::Missed,
        AlertKind::StaleLease,
        AlertKind::Overrun,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::Latency => "latency",
            AlertKind::Missed => "missed",
            AlertKind::StaleLease => "stale_lease",
            AlertKind::Overrun => "overrun",
        }
    }
}

/// One alert firing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub job: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub message: String,
}

/// What the alerts are judged on.
pub(crate) struct Inputs<'a> {
    pub(crate) now: Timestamp,
    pub(crate) from: Timestamp,
    /// The window's findings, before `[rules]` severities (an alert is not a finding).
    pub(crate) findings: &'a [AuditFinding],
    /// Missed slots per job (the audit's metric).
    pub(crate) missed: &'a [(String, u64)],
    pub(crate) limits: &'a HashMap<String, JobLimits>,
    pub(crate) running: &'a [(String, Running)],
    pub(crate) leases: &'a [LeaseView],
}

fn secs(s: u64) -> String {
    crate::text::duration::secs(s)
}

/// Every alert firing, by job, then kind, then slot.
pub(crate) fn judge(i: &Inputs<'_>) -> Vec<Alert> {
    let mut out = Vec::new();
    for f in i.findings {
        let Some(lim) = i.limits.get(&f.job) else {
            continue;
        };
        let Some(max) = lim.max_latency_s else {
            continue;
        };
        let why = if f.code == AU106.code {
            "succeeded later than"
        } else if f.code == AU111.code {
            "has not succeeded within"
        } else {
            continue;
        };
        out.push(Alert {
            kind: AlertKind::Latency,
            job: f.job.clone(),
            scheduled_at: f.scheduled_at,
            run_id: f.run_ids.last().cloned(),
            message: format!(
                "slot {} {why} alerts.max_latency ({})",
                f.scheduled_at.map(|t| t.to_string()).unwrap_or_default(),
                secs(max)
            ),
        });
    }
    for (job, missed) in i.missed {
        let tolerance = i
            .limits
            .get(job)
            .map_or(0, |l| l.missing_tolerance.unwrap_or(0));
        if *missed > tolerance {
            let first = i
                .findings
                .iter()
                .filter(|f| f.code == AU101.code && &f.job == job)
                .filter_map(|f| f.scheduled_at)
                .min();
            out.push(Alert {
                kind: AlertKind::Missed,
                job: job.clone(),
                scheduled_at: first,
                run_id: None,
                message: format!(
                    "{missed} missed slot{} in the window, over alerts.missing_tolerance ({tolerance}){}",
                    if *missed == 1 { "" } else { "s" },
                    first.map(|t| format!("; the first at {t}")).unwrap_or_default()
                ),
            });
        }
    }
    for l in i.leases {
        if l.lease_until <= i.now && l.lease_until >= i.from {
            let held = (i.now - l.acquired_at).as_secs().max(0) as u64;
            let ttl = (l.lease_until - l.acquired_at).as_secs().max(0) as u64;
            out.push(Alert {
                kind: AlertKind::StaleLease,
                job: l.job.clone(),
                scheduled_at: Some(l.scheduled_at),
                run_id: Some(l.run_id.clone()),
                message: format!(
                    "lease {} of {} (run {}, fence {}) is {} old, past its TTL ({}), and was never released",
                    l.key,
                    l.holder,
                    l.run_id,
                    l.fence,
                    secs(held),
                    secs(ttl)
                ),
            });
        }
    }
    for (job, r) in i.running {
        let Some(expected) = i.limits.get(job).and_then(|l| l.expected_duration_s) else {
            continue;
        };
        let running = (i.now - r.since).as_secs().max(0) as u64;
        if running > expected.saturating_mul(2) {
            out.push(Alert {
                kind: AlertKind::Overrun,
                job: job.clone(),
                scheduled_at: Some(r.scheduled_at),
                run_id: Some(r.run_id.clone()),
                message: format!(
                    "run {} has been running for {}, more than 2 x expected_duration ({})",
                    r.run_id,
                    secs(running),
                    secs(expected)
                ),
            });
        }
    }
    out.sort_by(|a, b| {
        (&a.job, a.kind, a.scheduled_at, &a.run_id).cmp(&(
            &b.job,
            b.kind,
            b.scheduled_at,
            &b.run_id,
        ))
    });
    out
}
