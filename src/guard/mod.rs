//! `batchguard run` (SPEC 7.1): the guard the scheduler calls on every tick. It reads as the
//! steps of the SPEC: [`plan`] (the job, its store, its slot), [`Guard::acquire`] (the
//! lease, or a skip), [`Guard::supervise`] (the command under the lease's deadline),
//! [`classify`] (the outcome as a code and a class) and [`Guard::record_attempt`] (the
//! ledger, the release, the line on stderr, the retry). A slot left unfinished by an
//! earlier tick is caught up first (item 20).
//!
//! Exit codes follow `timeout(1)` and `flock(1)` (item 12); see [`Exit`].

pub mod classify;
pub mod link;
pub mod plan;
pub mod report;

use crate::process::{self, SpawnError, Stopped};
use crate::store::ledger::{self, Batch, Ledger};
use crate::store::{
    self, AcquireRequest, AcquireResult, EventRow, Finish, SlotState, Store, Unfinished, spool,
};
use classify::Class;
use jiff::{SignedDuration, Timestamp};
use plan::Plan;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `run` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub manifest: PathBuf,
    pub job: String,
    /// `--store`; `None` lets the store be resolved (SPEC 7.1 item 13).
    pub store: Option<String>,
    pub ledger: Option<String>,
    pub scheduled_at: Option<Timestamp>,
    pub instance: Option<String>,
    pub manual: bool,
    pub reason: Option<String>,
    pub report: Option<PathBuf>,
    /// `--config`: the `batchguard.toml` with `[run]` (default: found above the manifest).
    pub config: Option<PathBuf>,
    /// `--link`: driven over stdin/stdout by the npm package's `guard()` instead of
    /// running a command (`docs/node-protocol.md`).
    pub link: bool,
    pub command: Vec<String>,
    /// The rule code of a reading issue (lint's mapping), for the message that says why
    /// the manifest cannot be read; handed in so the guard does not depend on lint.
    pub rule_code: fn(crate::manifest::Issue) -> &'static str,
    /// Set by `batchguard drill` only (hidden flags of `run`).
    pub drill: Drill,
}

/// What `batchguard drill` changes in a guarded run, and nothing else: the guard's code
/// path is the one `run` takes on every tick.
#[derive(Debug, Clone, Default)]
pub struct Drill {
    /// The snapshot under test (absolute), instead of the job's `snapshot.path`.
    pub snapshot: Option<PathBuf>,
    /// Waits for end-of-file on stdin just before the first acquire: the drill releases
    /// its concurrent instances at once by closing the pipe they share.
    pub barrier: bool,
    /// Retries follow at once instead of after `delay(i)`: a drill proves the retry, it
    /// does not wait out the backoff.
    pub no_delay: bool,
}

/// The exit code `run` ends with.
pub const CANNOT_RUN: u8 = 125;
pub const NOT_EXECUTABLE: u8 = 126;
pub const NOT_FOUND: u8 = 127;
pub const DEADLINE: u8 = 124;

/// The whole command; returns the process exit code. Messages go to stderr. The report
/// (`--report`) is written whatever the outcome, exit 125 included.
pub fn run(opts: &Options) -> u8 {
    process::block_signals();
    let mut link = opts.link.then(link::Link::start);
    let mut report = report::Report::new(&opts.job, opts.scheduled_at);
    let code = match plan::plan(opts) {
        Ok(plan) => {
            // A drill's runs are rehearsals in a sandbox: they page no monitor and add no
            // span to production traces.
            let drilled =
                opts.drill.snapshot.is_some() || opts.drill.barrier || opts.drill.no_delay;
            let mut notify = if drilled {
                crate::notify::Notifier::off()
            } else {
                crate::notify::Notifier::new(
                    plan.monitor.as_ref(),
                    &plan.job_name,
                    &plan.service,
                    &plan.instance,
                )
            };
            let code = guarded(opts, &plan, &mut report, &mut link, &mut notify);
            if code == CANNOT_RUN && report.outcome == "not_run" {
                // The store could not be reached (or the slot not found): the slot did not
                // run, which is what a monitor is for.
                notify.not_run(report.scheduled_at);
            }
            report.notifications = notify.finish();
            code
        }
        Err(e) => cannot(&link, e.code, e.message),
    };
    report.exit_code = i32::from(code);
    if let Some(l) = &link {
        l.send(&report.link_result());
    }
    if let Some(path) = &opts.report
        && let Err(e) = std::fs::write(path, report.to_json())
    {
        eprintln!(
            "batchguard run: cannot write the report {}: {e}",
            path.display()
        );
    }
    code
}

/// The exact command that works `slot` again, for every message that leaves a slot
/// unworked.
fn replay_line(opts: &Options, plan: Option<&Plan>, slot: Option<Timestamp>) -> String {
    replay_with(opts, plan, slot, "")
}

/// [`replay_line`] with more options before the command's `--`.
fn replay_with(opts: &Options, plan: Option<&Plan>, slot: Option<Timestamp>, more: &str) -> String {
    let slot = slot.map_or_else(|| "SLOT".to_owned(), store::rfc3339);
    let mut s = format!(
        "batchguard run --manifest {} --job {}",
        shell_quote(&opts.manifest.display().to_string()),
        shell_quote(&opts.job)
    );
    let raw = plan.map(|p| p.store.raw()).or(opts.store.as_deref());
    if let Some(p) = plan.filter(|p| p.store.raw() != store::DEFAULT_URL) {
        s.push_str(&format!(" --store '{}'", p.store));
    }
    if let Some(l) = opts.ledger.as_ref().filter(|l| Some(l.as_str()) != raw) {
        s.push_str(&format!(" --ledger '{}'", crate::db::mask(l)));
    }
    s.push_str(&format!(" --scheduled-at {slot}{more}"));
    if !opts.command.is_empty() {
        s.push_str(" --");
        for a in &opts.command {
            s.push(' ');
            s.push_str(&shell_quote(a));
        }
    }
    s
}

fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Says why `run` cannot run, on stderr and to the link's driver; exit 125.
fn cannot(link: &Option<link::Link>, code: &str, message: String) -> u8 {
    eprintln!("batchguard run: {message}");
    if let Some(l) = link {
        l.error(code, &message);
    }
    CANNOT_RUN
}

/// What to say when the store did not take a statement (or could not be opened), with the
/// replay line.
fn unreachable(
    opts: &Options,
    plan: &Plan,
    slot: Option<Timestamp>,
    e: &store::StoreError,
) -> String {
    let shown = slot.map_or_else(|| "the current slot".to_owned(), store::rfc3339);
    let (what, why) = (e.kind().says(), e.0.as_str());
    format!(
        "the store {} ({}) {what}, so job `{}` slot {shown} did not run: {}\n  replay it with: {}",
        plan.store,
        plan.store_from,
        opts.job,
        plan.store.scrub(why.to_owned()),
        replay_line(opts, Some(plan), slot)
    )
}

/// Why a slot is worked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    Schedule,
    Manual,
    Replay,
    Retry,
    CatchUp,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Manual => "manual",
            Trigger::Replay => "replay",
            Trigger::Retry => "retry",
            Trigger::CatchUp => "catch_up",
        }
    }
}

/// What working one slot came to.
struct Worked {
    code: u8,
    outcome: &'static str,
    skip_reason: Option<String>,
    attempts: Vec<report::Attempt>,
    /// `run` was told to stop (a signal) while working it.
    interrupted: bool,
}

impl Worked {
    fn not_run(code: u8) -> Worked {
        Worked {
            code,
            outcome: "not_run",
            skip_reason: None,
            attempts: vec![],
            interrupted: false,
        }
    }
}

/// One `run`: the plan, the store it opened, and the ledger apart when there is one.
struct Guard<'a> {
    opts: &'a Options,
    plan: &'a Plan,
    st: Box<dyn Store>,
    apart: Option<Apart>,
    /// The driver of `--link`, when there is one.
    link: &'a mut Option<link::Link>,
    /// Check-ins and spans (`crate::notify`), when configured.
    notify: &'a mut crate::notify::Notifier,
}

/// SPEC 7.1 as steps: open the store and write leftovers; find the slot and any unfinished
/// slot to catch up (one round trip); work the catch-up, then the current slot.
fn guarded(
    opts: &Options,
    plan: &Plan,
    report: &mut report::Report,
    link: &mut Option<link::Link>,
    notify: &mut crate::notify::Notifier,
) -> u8 {
    let st = match store::open(&plan.store) {
        Ok(s) => s,
        Err(e) => {
            let m = unreachable(opts, plan, opts.scheduled_at, &e);
            return cannot(link, "E_STORE", m);
        }
    };
    let mut g = Guard {
        opts,
        plan,
        st,
        apart: Apart::new(opts, plan),
        link,
        notify,
    };
    // Leftovers first: spooled writes, and outputs of runs that died.
    if let Err(e) = catch_up(g.st.as_mut(), plan.store.raw()) {
        eprintln!("batchguard run: note: cannot write the spool yet: {e}");
    }
    let (slot, behind) = match g.slots() {
        Ok(s) => s,
        Err(code) => return code,
    };
    report.scheduled_at = Some(slot);
    let trigger = if opts.manual {
        Trigger::Manual
    } else if opts.drill.snapshot.is_some() {
        Trigger::Replay
    } else {
        Trigger::Schedule
    };
    if let Some(u) = behind {
        eprintln!(
            "batchguard run: job `{}` slot {} {} (attempt {} of {}): catching it up before slot {}",
            plan.job_name,
            store::rfc3339(u.scheduled_at),
            match u.state.as_str() {
                "lost" => "lost its holder",
                "interrupted" => "was interrupted",
                _ => "failed without being dead-lettered",
            },
            u.attempts,
            plan.max_attempts
                .map_or_else(|| "unbounded".to_owned(), |m| m.to_string()),
            store::rfc3339(slot)
        );
        let w = g.work(u.scheduled_at, Trigger::CatchUp);
        let worked = !w.attempts.is_empty();
        report.caught_up = Some(report::CaughtUp {
            scheduled_at: u.scheduled_at,
            outcome: w.outcome,
            exit_code: i32::from(w.code),
            attempts: w.attempts,
        });
        if w.interrupted {
            // Told to stop while catching up: the current slot is left for the next tick.
            return w.code;
        }
        if opts.link && worked {
            // One slot per `guard()` call: the catch-up was this call's slot.
            if let Some(c) = report.caught_up.take() {
                report.scheduled_at = Some(c.scheduled_at);
                report.outcome = c.outcome;
                report.attempts = c.attempts;
            }
            return w.code;
        }
    }
    let w = g.work(slot, trigger);
    report.outcome = w.outcome;
    report.skip_reason = w.skip_reason;
    report.attempts = w.attempts;
    // A skip of the current slot does not hide a catch-up that failed.
    match &report.caught_up {
        Some(c) if w.code == 0 && w.outcome == "skipped" && c.exit_code != 0 => {
            u8::try_from(c.exit_code).unwrap_or(1)
        }
        _ => w.code,
    }
}

impl Guard<'_> {
    /// The slot this tick works and the oldest unfinished slot within the catch-up window
    /// with attempts left; the store's clock and the unfinished slots come in one answer.
    fn slots(&mut self) -> Result<(Timestamp, Option<Unfinished>), u8> {
        let (opts, plan) = (self.opts, self.plan);
        let given = match opts.scheduled_at.map(|t| plan.given_slot(t)) {
            Some(Err(why)) => return Err(cannot(self.link, "E_SLOT", why)),
            Some(Ok(t)) => Some(t),
            None => None,
        };
        let catches_up = !opts.manual && opts.drill.snapshot.is_none();
        let host_guess = given.unwrap_or_else(Timestamp::now);
        // The widest the window can be (`retry.catch_up`, else an interval of at most an
        // hour) and an hour more for a host clock that is off: the exact window is applied
        // below, from the slot the store's clock gives.
        let reach = plan
            .catch_up
            .unwrap_or(std::time::Duration::from_secs(3600));
        let (unfinished, now) = if catches_up && !reach.is_zero() {
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
        let slot = match given {
            Some(t) => t,
            None => {
                let now = match now {
                    Some(n) => n,
                    None => match self.st.now() {
                        Ok(n) => n,
                        Err(e) => return Err(self.store_failed(None, &e)),
                    },
                };
                match plan.slot_at(now) {
                    Ok(t) => t,
                    Err(why) => return Err(cannot(self.link, "E_RUN", why)),
                }
            }
        };
        let window = SignedDuration::try_from(plan.catch_up_window(slot)).unwrap_or_default();
        let oldest = slot.checked_sub(window).unwrap_or(Timestamp::MIN);
        let behind = unfinished.into_iter().find(|u| {
            u.scheduled_at >= oldest
                && u.scheduled_at < slot
                && plan.max_attempts.is_none_or(|m| u64::from(u.attempts) < m)
        });
        Ok((slot, behind))
    }

    /// One slot: acquire, supervise, classify, record; again while the retry policy says so.
    fn work(&mut self, slot: Timestamp, first: Trigger) -> Worked {
        let (opts, plan) = (self.opts, self.plan);
        let mut trigger = first;
        let mut run_id = new_run_id();
        let mut worked = Worked::not_run(CANNOT_RUN);
        self.notify.begin_slot();
        if trigger == Trigger::Manual {
            let ev = plan.event(
                &run_id,
                slot,
                "manual",
                trigger.as_str(),
                opts.reason.clone(),
            );
            if let Err(e) = self.record(ev) {
                eprintln!("batchguard run: {e}");
                return worked;
            }
        }
        loop {
            let taken = match self.acquire(slot, trigger, &run_id) {
                Acquire::Taken(t) => t,
                Acquire::Skipped { outcome, reason } => {
                    if worked.attempts.is_empty() {
                        worked.outcome = outcome;
                        worked.skip_reason = Some(reason);
                        worked.code = 0;
                    }
                    // Skipped after an attempt of ours: the slot is another holder's now;
                    // the failed attempt's code stands.
                    return worked;
                }
                Acquire::Failed(code) => {
                    worked.code = code;
                    if !worked.attempts.is_empty() {
                        worked.outcome = "failed";
                    }
                    return worked;
                }
            };
            let ran = self.supervise(slot, trigger, &run_id, &taken);
            let verdict = classify::classify(&ran.result, &ran.error_path, &plan.retry);
            let next = self.record_attempt(slot, trigger, &run_id, &taken, &ran, &verdict);
            worked.attempts.push(next.attempt);
            worked.code = next.code;
            worked.outcome = next.outcome;
            worked.interrupted = matches!(verdict.class, Class::Interrupted(_));
            let gone = self.link.as_ref().is_some_and(|l| l.gone);
            let Some(delay) = next.retry_after.filter(|_| !gone) else {
                return worked;
            };
            let delay = if opts.drill.no_delay {
                std::time::Duration::ZERO
            } else {
                delay
            };
            if let Some(sig) = process::sleep_unless_stopped(delay) {
                worked.outcome = "failed";
                worked.interrupted = true;
                worked.code = 128u8.saturating_add(u8::try_from(sig).unwrap_or(0));
                return worked;
            }
            trigger = Trigger::Retry;
            run_id = new_run_id();
        }
    }

    /// The store did not answer: said with the replay line, and told to the link; 125.
    fn store_failed(&self, slot: Option<Timestamp>, e: &store::StoreError) -> u8 {
        let m = unreachable(self.opts, self.plan, slot, e);
        cannot(self.link, "E_STORE", m)
    }

    /// Writes one event where the ledger is: the store's tables, or the ledger apart. Its
    /// time is the store's, as `start` and `end` are: one clock in one ledger, however far
    /// this host's clock is off.
    fn record(&mut self, mut ev: EventRow) -> Result<(), String> {
        ev.at = self.store_now();
        record(self.st.as_mut(), &mut self.apart, ev)
    }

    /// The store's clock (an extension of its last answer where it can), else this host's.
    fn store_now(&mut self) -> Timestamp {
        self.st.now().unwrap_or_else(|_| Timestamp::now())
    }

    /// Step 3 of SPEC 7.1: the lease, in one statement in the store's clock, with `start`;
    /// or the skip, said on stderr and written to the ledger.
    fn acquire(&mut self, slot: Timestamp, trigger: Trigger, run_id: &str) -> Acquire {
        let (opts, plan) = (self.opts, self.plan);
        let key = match plan.lock_key(slot, run_id) {
            Ok(k) => k,
            Err(why) => return Acquire::Failed(cannot(self.link, "E_RUN", why)),
        };
        let (snapshot_path, digest) = match &opts.drill.snapshot {
            Some(p) => (
                Some(p.display().to_string()),
                std::fs::read(p).ok().map(|b| crate::snapshot::digest(&b)),
            ),
            None => plan.snapshot(slot),
        };
        if opts.drill.barrier && trigger != Trigger::Retry {
            barrier();
        }
        let kind = plan.store.kind().as_str();
        let mut start = plan.event(run_id, slot, "start", trigger.as_str(), None);
        start.snapshot_digest = digest;
        start.detail = Some(format!("store: {kind}"));
        let req = AcquireRequest {
            key: key.clone(),
            job: plan.ledger_job.clone(),
            scheduled_at: slot,
            holder: plan.instance.clone(),
            run_id: run_id.to_owned(),
            ttl_secs: plan.ttl.as_secs(),
            max_attempts: plan.max_attempts,
            manual: opts.manual,
            start,
            ledger: self.apart.is_none(),
        };
        let sent = Instant::now();
        let acquired = match self.st.acquire(&req) {
            Ok(AcquireResult::Acquired(a)) => a,
            Ok(AcquireResult::Refused(why)) => return self.skipped(slot, trigger, run_id, why),
            Err(e) => return Acquire::Failed(self.store_failed(Some(slot), &e)),
        };
        if let Some(a) = self.apart.as_mut() {
            let mut start = req.start.clone();
            start.at = acquired.at;
            start.attempt = Some(acquired.attempt);
            start.fence = Some(acquired.fence);
            if let Err(e) = Batch::events(vec![start]).map_or(Ok(()), |b| a.write(b)) {
                eprintln!("batchguard run: {e}");
            }
        }
        self.notify.started(&crate::notify::Attempt {
            slot,
            attempt: acquired.attempt,
            fence: acquired.fence,
            run_id,
            trigger: trigger.as_str(),
        });
        Acquire::Taken(Taken {
            key,
            sent,
            acquired,
            snapshot_path,
        })
    }

    /// Item 4: a refused lease is a `skip`, with the reason and the store's kind.
    fn skipped(
        &mut self,
        slot: Timestamp,
        trigger: Trigger,
        run_id: &str,
        why: store::Refusal,
    ) -> Acquire {
        let plan = self.plan;
        let kind = plan.store.kind().as_str();
        let reason = why.to_string();
        let detail = format!("{reason}; store: {kind}");
        eprintln!(
            "batchguard run: job `{}` slot {} skipped: {detail}",
            plan.job_name,
            store::rfc3339(slot)
        );
        if let (Some(a), store::Refusal::Exhausted { attempts }) = (self.apart.as_mut(), &why) {
            // The store dead-lettered the slot; its ledger event is ours to write.
            let mut dl = plan.event(run_id, slot, "dead_letter", trigger.as_str(), None);
            dl.at = self.st.now().unwrap_or(dl.at);
            dl.attempt = Some(*attempts).filter(|a| *a > 0);
            dl.error_code = Some("ATTEMPTS_EXHAUSTED".into());
            dl.detail = Some(format!(
                "all {attempts} attempts were used; the last one never reported an end"
            ));
            if let Err(e) = Batch::events(vec![dl]).map_or(Ok(()), |b| a.write(b)) {
                eprintln!("batchguard run: {e}");
            }
        }
        let ev = plan.event(run_id, slot, "skip", trigger.as_str(), Some(detail));
        if let Err(e) = self.record(ev) {
            eprintln!("batchguard run: {e}");
        }
        let at = crate::notify::Attempt {
            slot,
            attempt: 0,
            fence: 0,
            run_id,
            trigger: trigger.as_str(),
        };
        self.notify.skipped(&at, &why, &reason);
        let outcome = match why {
            store::Refusal::Exhausted { .. } | store::Refusal::DeadLettered => "dead_lettered",
            _ => "skipped",
        };
        Acquire::Skipped { outcome, reason }
    }

    /// Step 5: the run directory, then the command under the lease's deadline. A failure
    /// of this host to prepare or start it is a [`Class::SpawnFailed`] attempt.
    fn supervise(&mut self, slot: Timestamp, trigger: Trigger, run_id: &str, taken: &Taken) -> Ran {
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
    fn record_attempt(
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
        self.finish(fin, &ran.run_dir);
        let (exit_status, signal) = match &ran.result {
            Ok(o) => match o.exit {
                process::Exit::Code(c) => (Some(c), None),
                process::Exit::Signal(s) => (None, Some(s)),
            },
            Err(_) => (None, None),
        };
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
            attempt: report::Attempt {
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
            },
            code,
            outcome,
            retry_after,
        }
    }

    /// Writes the finish where it belongs. With a ledger apart: the ledger first, then the
    /// run directory, then the release, so a released lease never leaves a run directory
    /// whose outputs would be ingested twice.
    fn finish(&mut self, mut fin: Finish, run_dir: &Path) {
        if let Some(a) = self.apart.as_mut() {
            let mut events = vec![fin.end.clone()];
            events.extend(fin.dead_letter.clone());
            let batch = Batch {
                job: fin.job.clone(),
                scheduled_at: fin.scheduled_at,
                run_id: fin.run_id.clone(),
                events,
                outputs: std::mem::take(&mut fin.outputs),
            };
            match a.write(batch) {
                Ok(()) => remove_run_dir(run_dir),
                Err(e) => eprintln!("batchguard run: {e}"),
            }
            if let Err(e) = write_or_spool(self.st.as_mut(), spool::Entry::Finish(Box::new(fin))) {
                eprintln!("batchguard run: {e}");
            }
        } else {
            if let Err(e) = write_or_spool(self.st.as_mut(), spool::Entry::Finish(Box::new(fin))) {
                eprintln!("batchguard run: {e}");
            }
            remove_run_dir(run_dir);
        }
    }

    /// Item 18: every outcome but a success is one line on stderr, with the slot, the code
    /// and the OS error or the command's last stderr line.
    fn say(
        &self,
        slot: Timestamp,
        attempt: u32,
        class: &classify::Classified,
        rejected: &classify::Rejections,
        dead_letter: bool,
        retry_after: Option<std::time::Duration>,
    ) {
        let (opts, plan) = (self.opts, self.plan);
        let head = format!(
            "batchguard run: job `{}` slot {} attempt {attempt} of {}",
            plan.job_name,
            store::rfc3339(slot),
            plan.max_attempts
                .map_or_else(|| "unbounded".to_owned(), |m| m.to_string()),
        );
        if rejected.hashed > 0 {
            eprintln!("{head}: {}", classify::hashed_detail(rejected.hashed));
        }
        if rejected.count > 0 {
            eprintln!("{head}: {}", classify::rejected_detail(rejected));
        }
        let last = last_line(&class.stderr_tail);
        let why = match (&class.class, last) {
            (Class::Success, _) => return,
            (Class::SpawnFailed, _) => {
                eprintln!(
                    "{head} could not start on this host ({}): {}; the lease is released, so another instance or the next tick works it\n  replay it with: {}",
                    plan.instance,
                    class.message,
                    replay_line(opts, Some(plan), Some(slot))
                );
                return;
            }
            (Class::Interrupted(sig), _) => {
                eprintln!(
                    "{head} was interrupted (SIG{}): ended INTERRUPTED; the next `run` of this job catches it up",
                    process::signal_name(*sig)
                );
                return;
            }
            (_, Some(l)) => format!("{} (last stderr line: {l})", class.code),
            (_, None) if class.code == "TTL_EXCEEDED" => {
                "TTL_EXCEEDED (stopped at the deadline, before its lease could end)".to_owned()
            }
            (_, None) => class.code.clone(),
        };
        if let Some(d) = retry_after {
            eprintln!("{head} failed: {why}; retrying in {} s", d.as_secs());
        } else if dead_letter {
            eprintln!(
                "{head} failed: {why}; dead-lettered: {}\n  after a fix, rerun it with: {}",
                dead_letter_reason(class, attempt, plan.max_attempts),
                replay_with(opts, Some(plan), Some(slot), " --manual --reason '…'")
            );
        } else {
            eprintln!("{head} failed: {why}");
        }
    }
}

fn dead_letter_reason(class: &classify::Classified, attempt: u32, max: Option<u64>) -> String {
    match &class.class {
        Class::Retryable => format!("attempts exhausted ({attempt} of {})", max.unwrap_or(0)),
        Class::Fatal => format!("`{}` is classified fatal", class.code),
        _ => format!(
            "`{}` is not classified (on_unknown: dead_letter)",
            class.code
        ),
    }
}

/// The last non-empty line of a stderr tail, at most 200 characters.
fn last_line(tail: &str) -> Option<String> {
    let l = tail.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(if l.chars().count() > 200 {
        let cut: String = l.chars().take(200).collect();
        format!("{cut}…")
    } else {
        l.to_owned()
    })
}

enum Acquire {
    Taken(Taken),
    Skipped {
        outcome: &'static str,
        reason: String,
    },
    /// Could not ask (exit code, already said).
    Failed(u8),
}

struct Taken {
    key: String,
    /// Monotonic time just before the acquire was sent: the deadline counts from it.
    sent: Instant,
    acquired: store::Acquired,
    snapshot_path: Option<String>,
}

struct Ran {
    result: Result<process::Outcome, (u8, String)>,
    run_dir: PathBuf,
    outputs_path: PathBuf,
    error_path: PathBuf,
    /// The run directory's lock, held (never read) until the attempt is recorded.
    _alive: Option<std::fs::File>,
}

struct Next {
    attempt: report::Attempt,
    code: u8,
    outcome: &'static str,
    retry_after: Option<std::time::Duration>,
}

/// A `--ledger` apart from the store: opened on first use, once (a ledger that cannot be
/// reached is not retried within the run: its writes are spooled).
struct Apart {
    src: String,
    ledger: Option<Result<Box<dyn Ledger>, String>>,
}

impl Apart {
    fn new(opts: &Options, plan: &Plan) -> Option<Apart> {
        let src = opts.ledger.as_ref().filter(|l| *l != plan.store.raw())?;
        Some(Apart {
            src: src.clone(),
            ledger: None,
        })
    }

    /// Writes the batch to the ledger, or spools it for the next `run` or `store flush`.
    fn write(&mut self, batch: Batch) -> Result<(), String> {
        let src = &self.src;
        let l = self
            .ledger
            .get_or_insert_with(|| ledger::open(src).map_err(|e| e.0));
        let why = match l {
            Ok(l) => match l.write(&batch) {
                Ok(()) => return Ok(()),
                Err(e) => e.0,
            },
            Err(why) => why.clone(),
        };
        let why = crate::db::scrub(src, why);
        let entry = spool::Entry::Ledger {
            ledger: self.src.clone(),
            batch: Box::new(batch),
        };
        match spool::put(Path::new(spool::DIR), &entry) {
            Ok(p) => {
                eprintln!(
                    "batchguard run: the ledger did not take a write ({why}); spooled to {} for the next run or `batchguard store flush`",
                    p.display()
                );
                Ok(())
            }
            Err(io) => Err(format!(
                "the ledger did not take a write ({why}) and the spool failed too: {io}"
            )),
        }
    }
}

/// Writes one event where the ledger is: the store's tables, or the ledger apart.
fn record(st: &mut dyn Store, apart: &mut Option<Apart>, ev: EventRow) -> Result<(), String> {
    match apart {
        None => write_or_spool(st, spool::Entry::Event(Box::new(ev))),
        Some(a) => match Batch::events(vec![ev]) {
            Some(b) => a.write(b),
            None => Ok(()),
        },
    }
}

/// What a run directory of a run with a ledger apart says about its run, so the outputs of
/// a run that died reach the ledger it was writing to.
#[derive(serde::Serialize, serde::Deserialize)]
struct RunMeta {
    store: String,
    ledger: String,
    job: String,
    scheduled_at: Timestamp,
}

const RUN_META: &str = "run.json";

fn write_meta(dir: &Path, meta: &RunMeta) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = serde_json::to_vec(meta).map_err(std::io::Error::other)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(dir.join(RUN_META))?;
    f.write_all(&text)
}

/// Blocks until stdin reaches its end (the drill's barrier; see [`Drill::barrier`]).
fn barrier() {
    use std::io::Read;
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
}

/// The exit code of item 12 for one attempt.
fn exit_code(result: &Result<process::Outcome, (u8, String)>) -> u8 {
    match result {
        Err((code, _)) => *code,
        Ok(o) => match (o.stopped, o.exit) {
            (Stopped::Deadline, _) => DEADLINE,
            (Stopped::Interrupted(s), _) => 128u8.saturating_add(u8::try_from(s).unwrap_or(0)),
            (Stopped::No, process::Exit::Code(c)) => u8::try_from(c).unwrap_or(1),
            (Stopped::No, process::Exit::Signal(s)) => {
                128u8.saturating_add(u8::try_from(s).unwrap_or(0))
            }
        },
    }
}

/// Writes to the store, or spools when the store does not answer.
fn write_or_spool(st: &mut dyn Store, entry: spool::Entry) -> Result<(), String> {
    let r = match &entry {
        spool::Entry::Finish(f) => st.finish(f),
        spool::Entry::Event(e) => st.append(e),
        spool::Entry::Ledger { .. } => return Err("a ledger entry is not for the store".into()),
    };
    match r {
        Ok(()) => Ok(()),
        Err(e) => match spool::put(Path::new(spool::DIR), &entry) {
            Ok(p) => {
                eprintln!(
                    "batchguard run: the ledger did not take a write ({e}); spooled to {} for the next run or `batchguard store flush`",
                    p.display()
                );
                Ok(())
            }
            Err(io) => Err(format!(
                "the ledger did not take a write ({e}) and the spool failed too: {io}"
            )),
        },
    }
}

/// What a catch-up wrote, and what it had to leave behind (reported on stderr).
#[derive(Debug, Default)]
pub struct CaughtUp {
    pub written: u64,
    pub left: u64,
}

/// Writes the spool and the outputs of runs that died (their lease expired), once each.
/// `store_url` is the store's URL as given: run directories of runs that held a lease in
/// another store are not this store's to judge.
pub fn catch_up(st: &mut dyn Store, store_url: &str) -> Result<CaughtUp, store::StoreError> {
    let flushed = spool::flush(Path::new(spool::DIR), st)?;
    for (p, why) in &flushed.unreadable {
        eprintln!(
            "batchguard: note: {} is not a spool entry ({why}); left in place",
            p.display()
        );
    }
    for (p, why) in &flushed.failed {
        eprintln!(
            "batchguard: note: {} stays spooled: its ledger did not take it ({why})",
            p.display()
        );
    }
    let mut done = CaughtUp {
        written: flushed.written,
        left: (flushed.unreadable.len() + flushed.failed.len()) as u64,
    };
    // An empty runs directory has no leftovers: no round trip to the store for them.
    let runs = Path::new(".batchguard/runs");
    let dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
                })
                .collect()
        })
        .unwrap_or_default();
    if dirs.is_empty() {
        return Ok(done);
    }
    for run in st.abandoned()? {
        let dir = runs.join(&run.run_id);
        // The run's own lock, taken: a live run holds it, and of two runs catching up
        // at once only one ingests (the other finds it held, or the directory gone).
        let Ok(_claim) = hold_run_dir(&dir) else {
            continue;
        };
        let file = dir.join("outputs");
        if !file.is_file() {
            continue;
        }
        let (outputs, _) = classify::read_outputs(&file, Timestamp::now());
        done.written += st.ingest_abandoned(&run, &outputs)?;
        remove_run_dir(&dir);
    }
    // Runs with a ledger apart: their directory names the ledger.
    for dir in dirs {
        let Ok(text) = std::fs::read(dir.join(RUN_META)) else {
            continue;
        };
        let Ok(meta) = serde_json::from_slice::<RunMeta>(&text) else {
            eprintln!(
                "batchguard: note: {} is not readable; {} left in place",
                dir.join(RUN_META).display(),
                dir.display()
            );
            continue;
        };
        let Some(run_id) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if meta.store != store_url {
            continue;
        }
        let Ok(_claim) = hold_run_dir(&dir) else {
            continue;
        };
        if !dir.join(RUN_META).is_file() || st.live(run_id)? {
            continue;
        }
        let (outputs, _) = classify::read_outputs(&dir.join("outputs"), Timestamp::now());
        let n = outputs.len() as u64;
        if n > 0 {
            let mut a = Apart {
                src: meta.ledger.clone(),
                ledger: None,
            };
            let batch = Batch {
                job: meta.job,
                scheduled_at: meta.scheduled_at,
                run_id: run_id.to_owned(),
                events: vec![],
                outputs,
            };
            if let Err(e) = a.write(batch) {
                eprintln!("batchguard: {e}");
                done.left += 1;
                continue;
            }
        }
        done.written += n;
        remove_run_dir(&dir);
    }
    Ok(done)
}

const RUN_LOCK: &str = "alive";

/// Removes a run directory while its lock is held. It is first renamed to a hidden name
/// that no run id has (catch-up skips hidden names), then emptied: removed in place,
/// another catch-up could open, and so create, its lock file after `remove_dir_all`
/// unlinked it and before the `rmdir`, and the directory would be left behind.
fn remove_run_dir(dir: &Path) {
    let Some(name) = dir.file_name() else {
        return;
    };
    let mut hidden = std::ffi::OsString::from(".removing-");
    hidden.push(name);
    let gone = dir.with_file_name(hidden);
    match std::fs::rename(dir, &gone) {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&gone);
        }
        Err(_) => {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// An exclusive `flock` on the run directory's lock file, held for the life of the attempt:
/// the kernel drops it when the process dies, so a run whose lease has expired but whose
/// process is merely paused (stopped, swapped out, frozen) is never taken for dead and its
/// outputs file is not ingested from under it. Catch-up takes the same lock before it
/// ingests a directory, so two runs catching up at once never ingest one run twice.
fn hold_run_dir(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(RUN_LOCK))?;
    // SAFETY: flock on a file we own; the fd lives as long as `f`.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f)
}

/// A run id: unique without coordination (time, pid and 64 random bits).
pub fn new_run_id() -> String {
    let mut r = [0u8; 8];
    crate::notify::random(&mut r);
    let rand = u64::from_le_bytes(r);
    format!(
        "{}-{:x}-{rand:016x}",
        Timestamp::now().strftime("%Y%m%dT%H%M%S"),
        std::process::id()
    )
}
