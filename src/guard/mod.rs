//! `batchguard run` (SPEC 7.1): the guard the scheduler calls on every tick. It finds the
//! slot, takes the slot's lease in the store, runs the command under the lease's deadline,
//! classifies the outcome, retries or dead-letters it, and writes the ledger.
//!
//! Exit codes follow `timeout(1)` and `flock(1)` (item 12); see [`Exit`].

pub mod classify;
pub mod plan;
pub mod report;

use crate::process::{self, SpawnError, Stopped};
use crate::store::{
    self, AcquireRequest, AcquireResult, Finish, OutputRow, SlotState, Store, spool,
};
use classify::Class;
use jiff::Timestamp;
use plan::Plan;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `run` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub manifest: PathBuf,
    pub job: String,
    pub store: String,
    pub ledger: Option<String>,
    pub scheduled_at: Option<Timestamp>,
    pub instance: Option<String>,
    pub manual: bool,
    pub reason: Option<String>,
    pub report: Option<PathBuf>,
    pub command: Vec<String>,
}

/// The exit code `run` ends with.
pub const CANNOT_RUN: u8 = 125;
pub const NOT_EXECUTABLE: u8 = 126;
pub const NOT_FOUND: u8 = 127;
pub const DEADLINE: u8 = 124;

/// The whole command; returns the process exit code. Messages go to stderr.
pub fn run(opts: &Options) -> u8 {
    process::block_signals();
    let plan = match plan::plan(opts) {
        Ok(p) => p,
        Err(why) => {
            eprintln!("batchguard run: {why}");
            return CANNOT_RUN;
        }
    };
    let mut report = report::Report::new(&plan.job_name, None);
    let code = guarded(opts, &plan, &mut report);
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

fn replay_line(opts: &Options, slot: Option<Timestamp>) -> String {
    let slot = slot.map_or_else(|| "SLOT".to_owned(), store::rfc3339);
    let mut s = format!(
        "batchguard run --manifest {} --job {}",
        opts.manifest.display(),
        opts.job
    );
    if opts.store != store::DEFAULT_URL {
        s.push_str(&format!(" --store '{}'", crate::db::mask(&opts.store)));
    }
    s.push_str(&format!(" --scheduled-at {slot}"));
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

fn unreachable(opts: &Options, slot: Option<Timestamp>, e: &store::StoreError) -> u8 {
    let shown = slot.map_or_else(|| "the current slot".to_owned(), store::rfc3339);
    eprintln!(
        "batchguard run: the store is unreachable, so job `{}` slot {shown} did not run: {}\n  replay it with: {}",
        opts.job,
        crate::db::scrub(&opts.store, e.0.clone()),
        replay_line(opts, slot)
    );
    CANNOT_RUN
}

fn guarded(opts: &Options, plan: &Plan, report: &mut report::Report) -> u8 {
    let mut st = match store::open(&opts.store) {
        Ok(s) => s,
        Err(e) => {
            report.outcome = "not_run";
            report.exit_code = i32::from(CANNOT_RUN);
            return unreachable(opts, opts.scheduled_at, &e);
        }
    };
    // Leftovers first: spooled writes, and outputs of runs that died.
    if let Err(e) = catch_up(st.as_mut()) {
        eprintln!("batchguard run: note: cannot write the spool yet: {e}");
    }
    let slot = match plan.slot(opts.scheduled_at, st.as_mut()) {
        Ok(s) => s,
        Err(plan::SlotError::Store(e)) => {
            report.outcome = "not_run";
            report.exit_code = i32::from(CANNOT_RUN);
            return unreachable(opts, opts.scheduled_at, &e);
        }
        Err(plan::SlotError::Other(why)) => {
            eprintln!("batchguard run: {why}");
            report.outcome = "not_run";
            report.exit_code = i32::from(CANNOT_RUN);
            return CANNOT_RUN;
        }
    };
    report.scheduled_at = Some(slot);
    let mut trigger = if opts.manual { "manual" } else { "schedule" };
    let mut run_id = new_run_id();
    if opts.manual {
        let ev = plan.event(&run_id, slot, "manual", trigger, opts.reason.clone());
        if let Err(e) = write_or_spool(st.as_mut(), spool::Entry::Event(Box::new(ev))) {
            eprintln!("batchguard run: {e}");
            return CANNOT_RUN;
        }
    }
    loop {
        let key = match plan.lock_key(slot, &run_id) {
            Ok(k) => k,
            Err(why) => {
                eprintln!("batchguard run: {why}");
                return CANNOT_RUN;
            }
        };
        let (snapshot_path, digest) = plan.snapshot(slot);
        let mut start = plan.event(&run_id, slot, "start", trigger, None);
        start.snapshot_digest = digest;
        let req = AcquireRequest {
            key: key.clone(),
            job: plan.ledger_job.clone(),
            scheduled_at: slot,
            holder: plan.instance.clone(),
            run_id: run_id.clone(),
            ttl_secs: plan.ttl.as_secs(),
            max_attempts: plan.max_attempts,
            manual: opts.manual,
            start,
        };
        let sent = Instant::now();
        let acquired = match st.acquire(&req) {
            Ok(AcquireResult::Acquired(a)) => a,
            Ok(AcquireResult::Refused(why)) => {
                let detail = why.to_string();
                eprintln!(
                    "batchguard run: job `{}` slot {} skipped: {detail}",
                    plan.job_name,
                    store::rfc3339(slot)
                );
                let ev = plan.event(&run_id, slot, "skip", trigger, Some(detail.clone()));
                if let Err(e) = write_or_spool(st.as_mut(), spool::Entry::Event(Box::new(ev))) {
                    eprintln!("batchguard run: {e}");
                }
                if report.attempts.is_empty() {
                    report.outcome = match why {
                        store::Refusal::Exhausted { .. } | store::Refusal::DeadLettered => {
                            "dead_lettered"
                        }
                        _ => "skipped",
                    };
                    report.skip_reason = Some(detail);
                }
                report.exit_code = 0;
                return if report.outcome == "failed" {
                    u8::try_from(report.exit_code).unwrap_or(1)
                } else {
                    0
                };
            }
            Err(e) => {
                report.outcome = if report.attempts.is_empty() {
                    "not_run"
                } else {
                    "failed"
                };
                report.exit_code = i32::from(CANNOT_RUN);
                return unreachable(opts, Some(slot), &e);
            }
        };
        let deadline = sent + plan.ttl - plan.safety;
        let deadline_wall = acquired
            .at
            .checked_add(plan.ttl - plan.safety)
            .unwrap_or(acquired.at);
        let attempt = acquired.attempt;
        let run_dir = PathBuf::from(".batchguard/runs").join(&run_id);
        let outputs_path = run_dir.join("outputs");
        let error_path = run_dir.join("error");
        let prepared = std::fs::create_dir_all(&run_dir)
            .and_then(|()| std::fs::write(&outputs_path, b""))
            .map_err(|e| format!("cannot prepare {}: {e}", run_dir.display()));
        let argv =
            prepared.and_then(|()| plan.argv(slot, &run_id, attempt, snapshot_path.as_deref()));
        let started_at = acquired.at;
        let env = plan.env(
            slot,
            &run_id,
            attempt,
            acquired.fence,
            deadline_wall,
            snapshot_path.as_deref(),
            &outputs_path,
            &error_path,
        );
        let result = match &argv {
            Ok(argv) => process::run(&process::Spec {
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
            Err(why) => Err((CANNOT_RUN, why.clone())),
        };
        let class = classify::classify(&result, &error_path, &plan.retry);
        let ended_at = st.now().unwrap_or_else(|_| Timestamp::now());
        let (outputs, rejected) = classify::read_outputs(&outputs_path, ended_at);
        let mut end = plan.event(&run_id, slot, "end", trigger, None);
        end.at = ended_at;
        end.attempt = Some(attempt);
        let attempts_left = plan.max_attempts.is_none_or(|m| u64::from(attempt) < m);
        let (state, dead_letter, retry_next) = match &class.class {
            Class::Success => (SlotState::Succeeded, false, false),
            Class::Interrupted(_) => (SlotState::Interrupted, false, false),
            Class::Retryable if attempts_left => (SlotState::Failed, false, true),
            Class::SpawnFailed => (SlotState::Failed, true, false),
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
        if !rejected.is_empty() {
            detail.push(classify::rejected_detail(&rejected));
        }
        if class.class != Class::Success && !class.stderr_tail.is_empty() {
            detail.push(format!("stderr: {}", class.stderr_tail));
        }
        if !detail.is_empty() {
            end.detail = Some(store::clip_detail(&detail.join("\n")));
        }
        let dl = dead_letter.then(|| {
            let mut d = plan.event(&run_id, slot, "dead_letter", trigger, None);
            d.at = ended_at;
            d.attempt = Some(attempt);
            d.error_code = Some(class.code.clone());
            d.detail = Some(match &class.class {
                Class::Retryable => format!(
                    "attempts exhausted ({attempt} of {})",
                    plan.max_attempts.unwrap_or(0)
                ),
                Class::Fatal => format!("`{}` is classified fatal", class.code),
                _ => format!(
                    "`{}` is not classified (on_unknown: dead_letter)",
                    class.code
                ),
            });
            d
        });
        let fin = Finish {
            key,
            job: plan.ledger_job.clone(),
            scheduled_at: slot,
            run_id: run_id.clone(),
            fence: acquired.fence,
            end,
            outputs: outputs.clone(),
            dead_letter: dl,
            state,
        };
        if let Err(e) = write_or_spool(st.as_mut(), spool::Entry::Finish(Box::new(fin))) {
            eprintln!("batchguard run: {e}");
        }
        let _ = std::fs::remove_dir_all(&run_dir);
        let (exit_status, signal) = match &result {
            Ok(o) => match o.exit {
                process::Exit::Code(c) => (Some(c), None),
                process::Exit::Signal(s) => (None, Some(s)),
            },
            Err(_) => (None, None),
        };
        report.attempts.push(report::Attempt {
            attempt,
            run_id: run_id.clone(),
            fence: acquired.fence,
            instance: plan.instance.clone(),
            started_at,
            ended_at,
            exit_status,
            signal,
            error_code: (class.class != Class::Success).then(|| class.code.clone()),
            outputs: outputs.len(),
            rejected_output_lines: rejected.len(),
        });
        let code = exit_code(&result);
        report.exit_code = i32::from(code);
        match &class.class {
            Class::Success => {
                report.outcome = "succeeded";
                return 0;
            }
            Class::Interrupted(sig) => {
                report.outcome = "failed";
                let c = 128u8.saturating_add(u8::try_from(*sig).unwrap_or(0));
                report.exit_code = i32::from(c);
                return c;
            }
            _ => {}
        }
        if !retry_next {
            report.outcome = if dead_letter {
                "dead_lettered"
            } else {
                "failed"
            };
            return code;
        }
        let delay = plan::delay(&plan.retry, u64::from(attempt));
        if let Some(sig) = process::sleep_unless_stopped(delay) {
            report.outcome = "failed";
            let c = 128u8.saturating_add(u8::try_from(sig).unwrap_or(0));
            report.exit_code = i32::from(c);
            return c;
        }
        report.outcome = "failed";
        trigger = "retry";
        run_id = new_run_id();
    }
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

/// Writes the spool and the outputs of runs that died (their lease expired), once each.
pub fn catch_up(st: &mut dyn Store) -> Result<u64, store::StoreError> {
    let flushed = spool::flush(Path::new(spool::DIR), st)?;
    for (p, why) in &flushed.unreadable {
        eprintln!(
            "batchguard: note: {} is not a spool entry ({why}); left in place",
            p.display()
        );
    }
    let mut n = flushed.written;
    // An empty runs directory has no leftovers: no round trip to the store for them.
    let runs = Path::new(".batchguard/runs");
    let any = std::fs::read_dir(runs).is_ok_and(|mut d| d.next().is_some());
    if !any {
        return Ok(n);
    }
    for run in st.abandoned()? {
        let dir = runs.join(&run.run_id);
        let file = dir.join("outputs");
        if !file.is_file() {
            continue;
        }
        let (outputs, _) = classify::read_outputs(&file, Timestamp::now());
        n += st.ingest_abandoned(&run, &outputs)?;
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(n)
}

/// A run id: unique without coordination (time, pid and 64 random bits).
pub fn new_run_id() -> String {
    use std::io::Read;
    let mut r = [0u8; 8];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut r))
        .is_ok();
    let rand = if ok {
        u64::from_le_bytes(r)
    } else {
        u64::from(std::process::id()).rotate_left(32) ^ (Timestamp::now().as_nanosecond() as u64)
    };
    format!(
        "{}-{:x}-{rand:016x}",
        Timestamp::now().strftime("%Y%m%dT%H%M%S"),
        std::process::id()
    )
}

/// Output keys read from a file, as [`OutputRow`]s.
pub type Outputs = Vec<OutputRow>;
