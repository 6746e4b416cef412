//! Which slot a tick works (SPEC 7.1 items 2, 15, 20, 22, 29): the named slot or the store's
//! clock's, bounded by the store's clock; the host's skew said; the slots behind it
//! dead-lettered when spent, else the oldest caught up first.

use super::say::{cannot, replay_with, unfinished_says};
use super::{Acquire, Guard, Trigger, new_run_id, report};
use crate::store::{self, Finish, SlotState, Unfinished};
use jiff::{SignedDuration, Timestamp};
use std::path::PathBuf;

/// The slot a tick works, what to catch up before it, and the checks its first acquire
/// carries when the store folds them in.
pub(super) struct Slots {
    pub(super) slot: Timestamp,
    pub(super) behind: Vec<Unfinished>,
    pub(super) checks: Option<Checks>,
}

/// Items 22 and 27: the clock bound and the catch-up read, sent with the acquire.
#[derive(Clone, Copy)]
pub(super) struct Checks {
    pub(super) clock: Option<store::ClockBound>,
    pub(super) catch_up_from: Option<Timestamp>,
}

impl Guard<'_> {
    /// The slot this tick works and the unfinished slots within the catch-up window; the
    /// store's clock and the unfinished slots come in one answer, or ride on the acquire.
    pub(super) fn slots(&mut self) -> Result<Slots, u8> {
        let (opts, plan) = (self.opts, self.plan);
        let given = match opts.scheduled_at.map(|t| plan.given_slot(t)) {
            Some(Err(why)) => return Err(cannot(self.link, "E_SLOT", why)),
            Some(Ok(t)) => Some(t),
            None => None,
        };
        // A manual run and a drill name old slots on purpose: no catch-up, no clock bound.
        let checked = !opts.manual && opts.drill.snapshot.is_none();
        let from_of = |slot: Timestamp| {
            let window = plan.catch_up_window(slot);
            (!window.is_zero()).then(|| {
                slot.checked_sub(SignedDuration::try_from(window).unwrap_or_default())
                    .unwrap_or(Timestamp::MIN)
            })
        };
        if let Some(slot) = given
            && checked
            && self.st.folds_checks()
        {
            return Ok(Slots {
                slot,
                behind: vec![],
                checks: Some(Checks {
                    clock: plan.clock_check.then(|| plan.clock_bound(slot)),
                    catch_up_from: from_of(slot),
                }),
            });
        }
        let host_guess = given.unwrap_or_else(Timestamp::now);
        // The widest the window can be (`retry.catch_up`, else an interval of at most an
        // hour) and an hour more for a host clock that is off: the exact window is applied
        // below, from the slot the store's clock gives.
        let reach = plan
            .catch_up
            .unwrap_or(std::time::Duration::from_secs(3600));
        let (unfinished, now) = if checked && !reach.is_zero() {
            let from = host_guess
                .checked_sub(SignedDuration::try_from(reach).unwrap_or_default())
                .and_then(|t| t.checked_sub(SignedDuration::from_hours(1)))
                .unwrap_or(Timestamp::MIN);
            match self.st.unfinished(&plan.ledger_job, from) {
                Ok((u, now)) => (u, Some(now)),
                Err(e) => return Err(self.store_failed(given, &e)),
            }
        } else {
            (vec![], None)
        };
        let now = match (now, given.is_none() || checked) {
            (Some(n), _) => Some(n),
            (None, true) => match self.st.now() {
                Ok(n) => Some(n),
                Err(e) => return Err(self.store_failed(given, &e)),
            },
            (None, false) => None,
        };
        if let Some(n) = now {
            self.note_skew(n);
        }
        let slot = match (given, now) {
            (Some(t), _) => t,
            (None, Some(now)) => match plan.slot_at(now) {
                Ok(t) => t,
                Err(why) => return Err(cannot(self.link, "E_RUN", why)),
            },
            (None, None) => return Err(cannot(self.link, "E_RUN", "no clock".into())),
        };
        if let (Some(t), Some(now), true) = (given, now, checked && plan.clock_check)
            && !plan.clock_bound(t).admits(now)
        {
            return Err(self.out_of_clock(t, now));
        }
        let oldest = from_of(slot);
        let behind = unfinished
            .into_iter()
            .filter(|u| oldest.is_some_and(|o| u.scheduled_at >= o) && u.scheduled_at < slot)
            .collect();
        Ok(Slots {
            slot,
            behind,
            checks: None,
        })
    }

    /// Item 22: a named slot outside the store's clock's bound is refused, exit 125, saying
    /// which way this host's clock is off.
    pub(super) fn out_of_clock(&mut self, slot: Timestamp, now: Timestamp) -> u8 {
        let plan = self.plan;
        let bound = plan.clock_bound(slot);
        let secs = |d: SignedDuration| d.as_secs_f64().abs();
        let message = if now < bound.earliest {
            format!(
                "job `{}`: slot {} is {:.1} s ahead of the store's clock ({}): this host's clock runs ahead; the slot is worked by the tick that comes when it is due",
                plan.job_name,
                store::rfc3339(slot),
                secs(slot.duration_since(now)),
                store::rfc3339(now)
            )
        } else {
            format!(
                "job `{}`: slot {} is {:.1} s behind the store's clock ({}): this host's clock runs behind (or its tick came late), and the slot is older than the catch-up reach; an operator reruns it with: {}",
                plan.job_name,
                store::rfc3339(slot),
                secs(now.duration_since(slot)),
                store::rfc3339(now),
                replay_with(self.opts, Some(plan), Some(slot), " --manual --reason '…'")
            )
        };
        cannot(self.link, "E_SLOT", message)
    }

    /// Item 22: the host's clock against the store's, once a store answer gave the latter;
    /// beyond the tick tolerance it is said on stderr and in the events' `detail`.
    pub(super) fn note_skew(&mut self, store_now: Timestamp) {
        if self.skew.is_some() {
            return;
        }
        let off = Timestamp::now().duration_since(store_now);
        let tol = SignedDuration::try_from(self.plan.tolerance_at(store_now)).unwrap_or_default();
        if off.abs() <= tol {
            self.skew = Some(None);
            return;
        }
        let part = format!("host clock {:+.1} s", off.as_secs_f64());
        eprintln!(
            "batchguard run: job `{}` on {}: {part} off the store's clock (tick tolerance {:.1} s); the store's clock decides the slot",
            self.plan.job_name,
            self.plan.instance,
            tol.as_secs_f64()
        );
        self.skew = Some(Some(part));
    }

    /// The skew part of a `detail`, when this host's clock is off.
    pub(super) fn skew_part(&self) -> Option<String> {
        self.skew.clone().flatten()
    }

    /// Slots behind the current one: those whose last attempt was lost (or failed) with no
    /// attempt left are dead-lettered (item 29: nothing ends silent), then the oldest with
    /// attempts left is worked. `Some(code)`: this `run` ends here.
    pub(super) fn catch_up_behind(
        &mut self,
        behind: Vec<Unfinished>,
        slot: Timestamp,
        report: &mut report::Report,
    ) -> Option<u8> {
        let (opts, plan) = (self.opts, self.plan);
        let spent = |u: &Unfinished| {
            plan.max_attempts
                .is_some_and(|m| u64::from(u.attempts) >= m)
        };
        for u in behind.iter().filter(|u| spent(u)) {
            eprintln!(
                "batchguard run: job `{}` slot {} {} with no attempt left ({} of {}): dead-lettering it",
                plan.job_name,
                store::rfc3339(u.scheduled_at),
                unfinished_says(&u.state),
                u.attempts,
                plan.max_attempts.unwrap_or(0),
            );
            let run_id = new_run_id();
            // The store's acquire of a spent slot dead-letters it (its `dead_letter` event
            // says how many attempts were used) and grants no lease.
            if let Acquire::Taken(t) = self.acquire(u.scheduled_at, Trigger::CatchUp, &run_id, None)
            {
                // Granted after all (attempts were added to the manifest meanwhile): the
                // lease is released unused, and the slot stays for the next catch-up.
                let mut end = plan.event(&run_id, u.scheduled_at, "end", "catch_up", None);
                end.at = self.store_now();
                end.attempt = Some(t.acquired.attempt);
                end.status = Some("failure".into());
                end.error_code = Some("INTERRUPTED".into());
                end.detail = Some(
                    "acquired to dead-letter a spent slot that had attempts again; not run".into(),
                );
                let fin = Finish {
                    key: t.key.clone(),
                    job: plan.ledger_job.clone(),
                    scheduled_at: u.scheduled_at,
                    run_id: run_id.clone(),
                    fence: t.acquired.fence,
                    end,
                    outputs: vec![],
                    dead_letter: None,
                    state: SlotState::Interrupted,
                    ledger: self.apart.is_none(),
                };
                let dir = PathBuf::from(".batchguard/runs").join(&run_id);
                self.finish(fin, &dir, None);
            }
        }
        let u = behind.into_iter().find(|u| !spent(u))?;
        eprintln!(
            "batchguard run: job `{}` slot {} {} (attempt {} of {}): catching it up before slot {}",
            plan.job_name,
            store::rfc3339(u.scheduled_at),
            unfinished_says(&u.state),
            u.attempts,
            plan.max_attempts
                .map_or_else(|| "unbounded".to_owned(), |m| m.to_string()),
            store::rfc3339(slot)
        );
        let w = self.work(u.scheduled_at, Trigger::CatchUp, None);
        let worked = !w.attempts.is_empty();
        report.caught_up = Some(report::CaughtUp {
            scheduled_at: u.scheduled_at,
            outcome: w.outcome,
            exit_code: i32::from(w.code),
            attempts: w.attempts,
        });
        if w.interrupted {
            // Told to stop while catching up: the current slot is left for the next tick.
            return Some(w.code);
        }
        if opts.link && worked {
            // One slot per `guard()` call: the catch-up was this call's slot.
            if let Some(c) = report.caught_up.take() {
                report.scheduled_at = Some(c.scheduled_at);
                report.outcome = c.outcome;
                report.attempts = c.attempts;
            }
            return Some(w.code);
        }
        None
    }
}
