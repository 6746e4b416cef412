//! `batchguard run` (SPEC 7.1): the guard the scheduler calls on every tick. It reads as the
//! steps of the SPEC: [`plan`] (the job, its store), `slots` (its slot, bounded by the
//! store's clock, and the slots behind it), [`Guard::acquire`] (the lease, or a skip),
//! `attempt` (the command under the lease's deadline, then the `end`, the release and the
//! retry), [`classify`] (the outcome as a code and a class), `say` (every line on stderr)
//! and `leftovers` (the ledger apart, the spool, the outputs of runs that died). A slot left
//! unfinished by an earlier tick is caught up, or dead-lettered when spent, first
//! (items 20, 29).
//!
//! Exit codes follow `timeout(1)` and `flock(1)` (item 12); see [`Exit`].

mod attempt;
pub mod classify;
mod leftovers;
pub mod link;
pub mod plan;
pub mod report;
mod say;
mod slots;

pub use leftovers::catch_up;
use leftovers::{Apart, record};
pub use link::bad_claim_key;
use say::{cannot, unreachable};
use slots::{Checks, Slots};

use crate::process::{self, Stopped};
use crate::store::ledger::Batch;
use crate::store::{self, AcquireRequest, AcquireResult, EventRow, Store, Unfinished};
use classify::Class;
use jiff::Timestamp;
use plan::Plan;
use std::path::PathBuf;
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
    /// The acquire answered slots to catch up first; nothing was worked.
    behind: Option<Vec<Unfinished>>,
}

impl Worked {
    fn not_run(code: u8) -> Worked {
        Worked {
            code,
            outcome: "not_run",
            skip_reason: None,
            attempts: vec![],
            interrupted: false,
            behind: None,
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
    /// This host's clock against the store's (item 22): `None` until a store answer gave
    /// the latter, then the `detail` part when it is off by more than the tick tolerance.
    skew: Option<Option<String>>,
}

/// SPEC 7.1 as steps: open the store and write leftovers; find the slot and any unfinished
/// slot to catch up (with `--scheduled-at`, on a store that folds the read into its
/// acquire, the acquire answers them); dead-letter the slots whose last attempt was lost,
/// work the catch-up, then the current slot.
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
        skew: None,
    };
    // Leftovers first: spooled writes, and outputs of runs that died.
    if let Err(e) = catch_up(g.st.as_mut(), plan.store.raw()) {
        eprintln!("batchguard run: note: cannot write the spool yet: {e}");
    }
    let Slots {
        slot,
        mut behind,
        mut checks,
    } = match g.slots() {
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
    loop {
        if !behind.is_empty()
            && let Some(code) = g.catch_up_behind(std::mem::take(&mut behind), slot, report)
        {
            return code;
        }
        let w = g.work(slot, trigger, checks.take());
        if let Some(list) = w.behind {
            // The acquire found slots to catch up first; the current slot comes after them.
            behind = list;
            continue;
        }
        report.outcome = w.outcome;
        report.skip_reason = w.skip_reason;
        report.attempts = w.attempts;
        // A skip of the current slot does not hide a catch-up that failed.
        return match &report.caught_up {
            Some(c) if w.code == 0 && w.outcome == "skipped" && c.exit_code != 0 => {
                u8::try_from(c.exit_code).unwrap_or(1)
            }
            _ => w.code,
        };
    }
}

impl Guard<'_> {
    /// One slot: acquire, supervise, classify, record; again while the retry policy says so.
    fn work(&mut self, slot: Timestamp, first: Trigger, mut checks: Option<Checks>) -> Worked {
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
            let taken = match self.acquire(slot, trigger, &run_id, checks.take()) {
                Acquire::Taken(t) => t,
                Acquire::Behind(list) => {
                    worked.behind = Some(list);
                    return worked;
                }
                Acquire::Skipped {
                    outcome,
                    reason,
                    succeeded,
                } => {
                    // Skipped after an attempt of ours: the slot is another holder's now;
                    // the failed attempt's code stands, unless the slot succeeded there
                    // (item 29: the slot is done, which is what the exit code says).
                    if worked.attempts.is_empty() || succeeded {
                        worked.outcome = outcome;
                        worked.skip_reason = Some(reason);
                        worked.code = 0;
                    }
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
            worked.skip_reason = next.skip_reason;
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
    fn acquire(
        &mut self,
        slot: Timestamp,
        trigger: Trigger,
        run_id: &str,
        checks: Option<Checks>,
    ) -> Acquire {
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
        start.detail = Some(match self.skew_part() {
            Some(skew) => format!("store: {kind}; {skew}"),
            None => format!("store: {kind}"),
        });
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
            clock: checks.and_then(|c| c.clock),
            catch_up_from: checks.and_then(|c| c.catch_up_from),
        };
        let sent = Instant::now();
        let answer = self.st.acquire(&req);
        if answer.is_ok()
            && self.skew.is_none()
            && let Ok(now) = self.st.now()
        {
            self.note_skew(now);
        }
        let acquired = match answer {
            Ok(AcquireResult::Acquired(a)) => a,
            Ok(AcquireResult::Refused(why)) => return self.skipped(slot, trigger, run_id, why),
            Ok(AcquireResult::OutOfClock { now }) => {
                return Acquire::Failed(self.out_of_clock(slot, now));
            }
            Ok(AcquireResult::Behind { unfinished, .. }) => return Acquire::Behind(unfinished),
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
        let mut detail = format!("{reason}; store: {kind}");
        if let Some(skew) = self.skew_part() {
            detail.push_str("; ");
            detail.push_str(&skew);
        }
        // A catch-up that dead-letters a spent slot is not a tick turned away: its record
        // is the store's `dead_letter`, and [`Guard::catch_up_behind`] has said it.
        let dead_lettering =
            trigger == Trigger::CatchUp && matches!(why, store::Refusal::Exhausted { .. });
        if !dead_lettering {
            eprintln!(
                "batchguard run: job `{}` slot {} skipped: {detail}",
                plan.job_name,
                store::rfc3339(slot)
            );
        }
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
        if !dead_lettering {
            let ev = plan.event(run_id, slot, "skip", trigger.as_str(), Some(detail));
            if let Err(e) = self.record(ev) {
                eprintln!("batchguard run: {e}");
            }
        }
        let at = crate::notify::Attempt {
            slot,
            attempt: 0,
            fence: 0,
            run_id,
            trigger: trigger.as_str(),
        };
        self.notify.skipped(&at, &why, &reason);
        // Item 28: `dead_lettered` is the answer of the call that dead-lettered the slot; a
        // later call on it is a skip, reason `dead-lettered`.
        let outcome = match why {
            store::Refusal::Exhausted { .. } => "dead_lettered",
            _ => "skipped",
        };
        let succeeded = matches!(why, store::Refusal::Succeeded { .. });
        Acquire::Skipped {
            outcome,
            reason,
            succeeded,
        }
    }
}

enum Acquire {
    Taken(Taken),
    Skipped {
        outcome: &'static str,
        reason: String,
        /// The slot had succeeded (here or on another instance).
        succeeded: bool,
    },
    /// Slots to catch up before this one (the store folded the read into the acquire).
    Behind(Vec<Unfinished>),
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
    /// Why a superseded attempt counts as a skip.
    skip_reason: Option<String>,
    retry_after: Option<std::time::Duration>,
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
