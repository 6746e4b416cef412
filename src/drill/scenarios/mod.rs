//! One file per scenario of SPEC 7.3. Each starts real `batchguard run` processes in its
//! sandbox, plays its fault, and judges what the sandbox then holds.

pub mod clean;
pub mod concurrent;
pub mod crash;
pub mod rerun;
pub mod retry;
pub mod stale;

use super::ScenarioResult;
use super::count;
use super::sandbox::{Cx, Sandbox};
use crate::store::EventRow;
use std::time::Instant;

/// Judges the sandbox after a scenario: counts over everything applied there, attempts
/// and skips over the events from `events_from` on; `before` is what was applied before
/// the scenario began (`rerun`). A sandbox that cannot be read fails the scenario.
pub(super) fn judge(
    cx: &Cx,
    sb: &Sandbox,
    name: &'static str,
    t0: Instant,
    complete: bool,
    events_from: usize,
    before: usize,
) -> (ScenarioResult, Vec<EventRow>) {
    let (mut r, events) = match count::facts(cx, sb) {
        Ok(f) => {
            let new = f.applied.len().saturating_sub(before) as u64;
            let r = count::tally(cx, name, &f.applied, new, complete);
            let events = f.events.into_iter().skip(events_from).collect::<Vec<_>>();
            (r, events)
        }
        Err(why) => {
            let mut r = count::tally(cx, name, &[], 0, false);
            r.reason = Some(why);
            (r, Vec::new())
        }
    };
    count::executions(&mut r, &events);
    r.seconds = t0.elapsed().as_secs_f64();
    r.passed = r.reason.is_none();
    (r, events)
}
