//! One attempt once the lease is taken (SPEC 7.1 items 5–7, 24): the run directory and the
//! command (or the link's callback) under the lease's deadline, then its `end` (outputs,
//! dead letter, release) in one write, the outcome said, and whether to retry.

use super::leftovers::{RunMeta, hold_run_dir, remove_run_dir, write_meta};
use super::say::{dead_letter_reason, last_line};
use super::{
    CANNOT_RUN, Guard, NOT_EXECUTABLE, NOT_FOUND, Next, Ran, Taken, Trigger, classify, exit_code,
    link, plan, report,
};
use crate::process::{self, SpawnError};
use crate::store::{self, Finish, Finished, SlotState, spool};
use classify::Class;
use jiff::{SignedDuration, Timestamp};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a finish that the store does not take is tried again before it is spooled (and
/// never past the lease): long enough for a failover or a cut link to heal, short enough
/// that a store that is down does not hold the tick for the whole lease.
const RIDE_OUT: Duration = Duration::from_secs(10);

impl Guard<'_> {
    /// Step 5: the run directory, then the command under the lease's deadline. A failure
    /// of this host to prepare or start it is a [`Class::SpawnFailed`] attempt.
    pub(super) fn supervise(
        &mut self,
        slot: Timestamp,
        trigger: Trigger,
        run_id: &str,
        taken: &Taken,
    ) -> Ran {
        let plan = self.plan;
        let deadline = taken.sent + plan.ttl - plan.safety;
        let deadline_wall = taken
            .acquired
            .at
            .checked_add(plan.ttl - plan.safety)
            .unwrap_or(taken.acquired.at);
        let attempt = taken.acquired.attempt;
        let run_dir = PathBuf::from(".batchguard/runs").join(run_id);
        let outputs_path = run_dir.join("outputs");
        let error_path = run_dir.join("error");
        let meta = self.apart.as_ref().map(|a| RunMeta {
            store: plan.store.raw().to_owned(),
            ledger: a.src.clone(),
            job: plan.ledger_job.clone(),
            scheduled_at: slot,
        });
        let mut alive = None;
        let prepared = std::fs::create_dir_all(&run_dir)
            .and_then(|()| {
                alive = Some(hold_run_dir(&run_dir)?);
                Ok(())
            })
            .and_then(|()| meta.as_ref().map_or(Ok(()), |m| write_meta(&run_dir, m)))
            .and_then(|()| std::fs::write(&outputs_path, b""))
            .map_err(|e| {
                let cwd = std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|_| ".".into());
                format!(
                    "cannot prepare its run directory {} in {cwd}: {e}",
                    run_dir.display()
                )
            });
        let linked = self.link.is_some();
        let argv = prepared.and_then(|()| {
            if linked {
                Ok(vec![])
            } else {
                plan.argv(slot, run_id, attempt, taken.snapshot_path.as_deref())
            }
        });
        let mut env = plan.env(
            slot,
            run_id,
            attempt,
            taken.acquired.fence,
            deadline_wall,
            taken.snapshot_path.as_deref(),
            &outputs_path,
            &error_path,
        );
        if let Some(tp) = self.notify.traceparent() {
            env.push(("TRACEPARENT".into(), tp));
        }
        let claim_job = plan.ledger_job.clone();
        let fence = taken.acquired.fence;
        let st = &mut self.st;
        let mut claim = |key: &str| st.claim(&claim_job, key, run_id, fence);
        let result = match (&argv, self.link.as_mut()) {
            (Ok(_), Some(l)) => Ok(l.attempt(
                &link::Granted {
                    slot,
                    attempt,
                    fence: taken.acquired.fence,
                    run_id,
                    deadline: deadline_wall,
                    abort_at: deadline_wall
                        .checked_sub(SignedDuration::try_from(plan.grace).unwrap_or_default())
                        .unwrap_or(deadline_wall),
                    trigger: trigger.as_str(),
                    traceparent: self.notify.traceparent(),
                },
                &outputs_path,
                &error_path,
                deadline,
                plan.grace,
                &mut claim,
            )),
            (Ok(argv), None) => process::run(&process::Spec {
                argv,
                env: &env,
                deadline,
                grace: plan.grace,
            })
            .map_err(|e| match e {
                SpawnError::NotFound(m) => (NOT_FOUND, m),
                SpawnError::NotExecutable(m) => (NOT_EXECUTABLE, m),
                SpawnError::Other(m) => (NOT_EXECUTABLE, m),
            }),
            (Err(why), _) => Err((CANNOT_RUN, why.clone())),
        };
        Ran {
            result,
            run_dir,
            outputs_path,
            error_path,
            _alive: alive,
        }
    }

    /// Steps 6 and 7: the attempt's `end` (outputs, dead letter, release) in one write, the
    /// outcome said on stderr, and whether to retry.
    pub(super) fn record_attempt(
        &mut self,
        slot: Timestamp,
        trigger: Trigger,
        run_id: &str,
        taken: &Taken,
        ran: &Ran,
        class: &classify::Classified,
    ) -> Next {
        let plan = self.plan;
        let attempt = taken.acquired.attempt;
        let ended_at = self.store_now();
        let (outputs, rejected) = classify::read_outputs(&ran.outputs_path, ended_at);
        let mut end = plan.event(run_id, slot, "end", trigger.as_str(), None);
        end.at = ended_at;
        end.attempt = Some(attempt);
        let attempts_left = plan.max_attempts.is_none_or(|m| u64::from(attempt) < m);
        // A host's failure to start the command is that host's (item 14): the slot is
        // released for another instance or a later tick, never dead-lettered.
        let (state, dead_letter, retry) = match &class.class {
            Class::Success => (SlotState::Succeeded, false, false),
            Class::Interrupted(_) => (SlotState::Interrupted, false, false),
            Class::SpawnFailed => (SlotState::Failed, false, false),
            Class::Retryable if attempts_left => (SlotState::Failed, false, true),
            _ => (SlotState::Failed, true, false),
        };
        let mut detail = Vec::new();
        if class.class == Class::Success {
            end.status = Some("success".into());
        } else {
            end.status = Some("failure".into());
            end.error_code = Some(class.code.clone());
            if !class.message.is_empty() {
                detail.push(class.message.clone());
            }
        }
        if rejected.count > 0 {
            detail.push(classify::rejected_detail(&rejected));
        }
        if rejected.hashed > 0 {
            detail.push(classify::hashed_detail(rejected.hashed));
        }
        if class.class != Class::Success && !class.stderr_tail.is_empty() {
            detail.push(format!("stderr: {}", class.stderr_tail));
        }
        if self.link.as_ref().is_some_and(|l| l.overran) {
            // Item 25: the attempt ended, its callback did not.
            detail.push(link::NOT_STOPPED.to_owned());
        }
        if let Some(skew) = self.skew_part() {
            detail.push(skew);
        }
        if !detail.is_empty() {
            end.detail = Some(store::clip_detail(&detail.join("\n")));
        }
        let dl = dead_letter.then(|| {
            let mut d = plan.event(run_id, slot, "dead_letter", trigger.as_str(), None);
            d.at = ended_at;
            d.attempt = Some(attempt);
            d.error_code = Some(class.code.clone());
            d.detail = Some(dead_letter_reason(class, attempt, plan.max_attempts));
            d
        });
        let fin = Finish {
            key: taken.key.clone(),
            job: plan.ledger_job.clone(),
            scheduled_at: slot,
            run_id: run_id.to_owned(),
            fence: taken.acquired.fence,
            end,
            outputs: outputs.clone(),
            dead_letter: dl,
            state,
            ledger: self.apart.is_none(),
        };
        let lease_end = taken.sent + plan.ttl - plan.safety;
        let done = self.finish(fin, &ran.run_dir, Some(lease_end));
        let (exit_status, signal) = match &ran.result {
            Ok(o) => match o.exit {
                process::Exit::Code(c) => (Some(c), None),
                process::Exit::Signal(s) => (None, Some(s)),
            },
            Err(_) => (None, None),
        };
        let report_attempt = report::Attempt {
            attempt,
            run_id: run_id.to_owned(),
            fence: taken.acquired.fence,
            instance: plan.instance.clone(),
            started_at: taken.acquired.at,
            ended_at,
            exit_status,
            signal,
            error_code: (class.class != Class::Success).then(|| class.code.clone()),
            outputs: outputs.len(),
            rejected_output_lines: rejected.count,
        };
        if let Some(Finished::Superseded {
            run_id: newer,
            fence,
        }) = done
        {
            // Item 24: another holder took the slot after this attempt's lease ended; its
            // verdict is theirs. No retry, no dead letter: a skip, exit 0. Its outputs were
            // applied, so they are recorded (audit sees any double apply).
            let reason = Finished::superseded_by(&newer, fence);
            eprintln!(
                "batchguard run: job `{}` slot {} attempt {attempt}: {reason}: another holder took the slot after this attempt's lease ended, so this attempt's verdict ({}) is not recorded (its outputs are: they were applied)",
                plan.job_name,
                store::rfc3339(slot),
                if class.class == Class::Success {
                    "success"
                } else {
                    class.code.as_str()
                },
            );
            if let Some(l) = self.link.as_mut() {
                l.refuse_late();
                l.ended(slot, attempt, Some("SUPERSEDED"), None);
            }
            return Next {
                attempt: report_attempt,
                code: 0,
                outcome: "skipped",
                skip_reason: Some(reason),
                retry_after: None,
            };
        }
        let code = match class.class {
            Class::Success => 0,
            _ => exit_code(&ran.result),
        };
        let retry_after = retry.then(|| plan::delay(&plan.retry, u64::from(attempt)));
        self.say(slot, attempt, class, &rejected, dead_letter, retry_after);
        if let Some(l) = self.link.as_mut() {
            l.refuse_late();
            let code = (class.class != Class::Success).then_some(class.code.as_str());
            l.ended(slot, attempt, code, retry_after.filter(|_| !l.gone));
        }
        let outcome = match (&class.class, dead_letter) {
            (Class::Success, _) => "succeeded",
            (_, true) => "dead_lettered",
            _ => "failed",
        };
        let success = class.class == Class::Success;
        self.notify.ended(
            slot,
            attempt,
            &crate::notify::Outcome {
                outcome,
                success,
                retrying: retry_after.is_some() && !self.link.as_ref().is_some_and(|l| l.gone),
                exit_code: code,
                error_code: (!success).then_some(class.code.as_str()),
                message: last_line(&class.stderr_tail).unwrap_or_else(|| class.message.clone()),
            },
        );
        Next {
            attempt: report_attempt,
            code,
            outcome,
            skip_reason: None,
            retry_after,
        }
    }

    /// Writes the finish where it belongs, and says what the store made of it (`None`:
    /// spooled). With a ledger apart, the store first (it alone knows whether this attempt
    /// was superseded, item 24), then the ledger, then the run directory; the run
    /// directory's lock, held until the attempt is recorded, keeps a catch-up from
    /// ingesting its outputs meanwhile.
    pub(super) fn finish(
        &mut self,
        fin: Finish,
        run_dir: &Path,
        lease_end: Option<Instant>,
    ) -> Option<Finished> {
        let Some(src) = self.apart.as_ref().map(|a| a.src.clone()) else {
            let done = self
                .settle(&fin, lease_end)
                .or_else(|e| self.spool(spool::Entry::Finish(Box::new(fin)), &e));
            remove_run_dir(run_dir);
            return done.ok();
        };
        match self.settle(&fin, lease_end) {
            Ok(done) => {
                // SPEC 7.5: the run's claims wrote no row in the ledger apart; they go with
                // its end, each once.
                let mut fin = fin;
                if let Err(e) = store::with_claims(self.st.as_mut(), &mut fin) {
                    eprintln!(
                        "batchguard run: the claims of run {} are not in the ledger: {e}",
                        fin.run_id
                    );
                }
                let batch = fin.ledger_batch(Some(&done));
                let written = self.apart.as_mut().map(|a| a.write(batch));
                match written {
                    Some(Ok(())) => remove_run_dir(run_dir),
                    Some(Err(e)) => eprintln!("batchguard run: {e}"),
                    None => {}
                }
                Some(done)
            }
            // The store has not judged it: the ledger's part waits with the store's (a
            // verdict written now could be a superseded attempt's).
            Err(e) => {
                let entry = spool::Entry::FinishApart {
                    ledger: src,
                    fin: Box::new(fin),
                };
                if self.spool(entry, &e).is_ok() {
                    remove_run_dir(run_dir);
                }
                None
            }
        }
    }

    /// Spools `entry`, saying so; `Err` (said) when the spool cannot take it either.
    fn spool(&self, entry: spool::Entry, why: &store::StoreError) -> Result<Finished, ()> {
        match spool::put(Path::new(spool::DIR), &entry) {
            Ok(p) => eprintln!(
                "batchguard run: the ledger did not take a write ({why}); spooled to {} for the next run or `batchguard store flush`",
                p.display()
            ),
            Err(io) => eprintln!(
                "batchguard run: the ledger did not take a write ({why}) and the spool failed too: {io}"
            ),
        }
        Err(())
    }

    /// The store's finish, tried again on a fresh connection while this attempt's lease
    /// lasts (`lease_end`), for at most [`RIDE_OUT`]: a link cut for a moment must not leave
    /// a slot that succeeded for the store to take for lost once the lease ends, and another
    /// instance to run again. Past that (or on any other error) it is spooled, as SPEC 7.1
    /// item 10 says; the store then counts the holder as lost (item 20), and `audit` shows
    /// the slot run twice.
    fn settle(
        &mut self,
        fin: &Finish,
        lease_end: Option<Instant>,
    ) -> Result<Finished, store::StoreError> {
        let mut pause = Duration::from_millis(50);
        let until = lease_end.map(|end| end.min(Instant::now() + RIDE_OUT));
        loop {
            let e = match self.st.finish(fin) {
                Ok(done) => return Ok(done),
                Err(e) if e.kind() == store::ErrorKind::Unreachable => e,
                Err(e) => return Err(e),
            };
            // Never the same connection again: an answer cut off half-way (a signal, a
            // cut link) would be read as the next request's.
            loop {
                let left = until.map_or(Duration::ZERO, |u| {
                    u.saturating_duration_since(Instant::now())
                });
                if left.is_zero() || process::sleep_unless_stopped(pause.min(left)).is_some() {
                    return Err(e);
                }
                pause = (pause * 2).min(Duration::from_secs(1));
                if let Ok(st) = store::open(&self.plan.store) {
                    self.st = st;
                    break;
                }
            }
        }
    }
}
