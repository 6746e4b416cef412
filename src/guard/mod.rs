//! `batchguard run` (SPEC 7.1): the guard the scheduler calls on every tick. It finds the
//! slot, takes the slot's lease in the store, runs the command under the lease's deadline,
//! classifies the outcome, retries or dead-letters it, and writes the ledger.
//!
//! Exit codes follow `timeout(1)` and `flock(1)` (item 12); see [`Exit`].

pub mod classify;
pub mod plan;
pub mod report;

use crate::process::{self, SpawnError, Stopped};
use crate::store::ledger::{self, Batch, Ledger};
use crate::store::{
    self, AcquireRequest, AcquireResult, EventRow, Finish, SlotState, Store, spool,
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
    if let Some(l) = opts.ledger.as_ref().filter(|l| **l != opts.store) {
        s.push_str(&format!(" --ledger '{}'", crate::db::mask(l)));
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
    let (what, why) = (e.kind().says(), e.0.as_str());
    eprintln!(
        "batchguard run: the store {what}, so job `{}` slot {shown} did not run: {}\n  replay it with: {}",
        opts.job,
        crate::db::scrub(&opts.store, why.to_owned()),
        replay_line(opts, slot)
    );
    CANNOT_RUN
}

/// A `--ledger` apart from the store: opened on first use, once (a ledger that cannot be
/// reached is not retried within the run: its writes are spooled).
struct Apart {
    src: String,
    ledger: Option<Result<Box<dyn Ledger>, String>>,
}

impl Apart {
    fn new(opts: &Options) -> Option<Apart> {
        let src = opts.ledger.as_ref().filter(|l| **l != opts.store)?;
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

fn guarded(opts: &Options, plan: &Plan, report: &mut report::Report) -> u8 {
    let mut apart = Apart::new(opts);
    let url = match store::StoreUrl::parse(&opts.store) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("batchguard run: --store {e}");
            report.outcome = "not_run";
            report.exit_code = i32::from(CANNOT_RUN);
            return CANNOT_RUN;
        }
    };
    let mut st = match store::open(&url) {
        Ok(s) => s,
        Err(e) => {
            report.outcome = "not_run";
            report.exit_code = i32::from(CANNOT_RUN);
            return unreachable(opts, opts.scheduled_at, &e);
        }
    };
    // Leftovers first: spooled writes, and outputs of runs that died.
    if let Err(e) = catch_up(st.as_mut(), &opts.store) {
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
    let mut trigger = if opts.manual {
        "manual"
    } else if opts.drill.snapshot.is_some() {
        "replay"
    } else {
        "schedule"
    };
    let mut run_id = new_run_id();
    if opts.manual {
        let ev = plan.event(&run_id, slot, "manual", trigger, opts.reason.clone());
        if let Err(e) = record(st.as_mut(), &mut apart, ev) {
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
        let (snapshot_path, digest) = match &opts.drill.snapshot {
            Some(p) => (
                Some(p.display().to_string()),
                std::fs::read(p).ok().map(|b| crate::snapshot::digest(&b)),
            ),
            None => plan.snapshot(slot),
        };
        if opts.drill.barrier && trigger != "retry" {
            barrier();
        }
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
            ledger: apart.is_none(),
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
                if let (Some(a), store::Refusal::Exhausted { attempts }) = (apart.as_mut(), &why) {
                    // The store dead-lettered the slot; its ledger event is ours to write.
                    let mut dl = plan.event(&run_id, slot, "dead_letter", trigger, None);
                    dl.attempt = Some(*attempts).filter(|a| *a > 0);
                    dl.error_code = Some("ATTEMPTS_EXHAUSTED".into());
                    dl.detail = Some(format!(
                        "all {attempts} attempts were used; the last one never reported an end"
                    ));
                    if let Err(e) = Batch::events(vec![dl]).map_or(Ok(()), |b| a.write(b)) {
                        eprintln!("batchguard run: {e}");
                    }
                }
                let ev = plan.event(&run_id, slot, "skip", trigger, Some(detail.clone()));
                if let Err(e) = record(st.as_mut(), &mut apart, ev) {
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
        if let Some(a) = apart.as_mut() {
            let mut start = req.start.clone();
            start.at = acquired.at;
            start.attempt = Some(acquired.attempt);
            start.fence = Some(acquired.fence);
            if let Err(e) = Batch::events(vec![start]).map_or(Ok(()), |b| a.write(b)) {
                eprintln!("batchguard run: {e}");
            }
        }
        let deadline = sent + plan.ttl - plan.safety;
        let deadline_wall = acquired
            .at
            .checked_add(plan.ttl - plan.safety)
            .unwrap_or(acquired.at);
        let attempt = acquired.attempt;
        let run_dir = PathBuf::from(".batchguard/runs").join(&run_id);
        let outputs_path = run_dir.join("outputs");
        let error_path = run_dir.join("error");
        let meta = apart.as_ref().map(|a| RunMeta {
            store: opts.store.clone(),
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
            Err(why) => {
                eprintln!("batchguard run: {why}");
                Err((CANNOT_RUN, why.clone()))
            }
        };
        let class = classify::classify(&result, &error_path, &plan.retry);
        let ended_at = st.now().unwrap_or_else(|_| Timestamp::now());
        let (outputs, rejected) = classify::read_outputs(&outputs_path, ended_at);
        let rejected_count = rejected.count;
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
        if rejected.count > 0 {
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
        let mut fin = Finish {
            key,
            job: plan.ledger_job.clone(),
            scheduled_at: slot,
            run_id: run_id.clone(),
            fence: acquired.fence,
            end,
            outputs: outputs.clone(),
            dead_letter: dl,
            state,
            ledger: apart.is_none(),
        };
        if let Some(a) = apart.as_mut() {
            // The ledger first, then the run directory, then the release: a released
            // lease never leaves a run directory whose outputs would be ingested twice.
            let mut events = vec![fin.end.clone()];
            events.extend(fin.dead_letter.clone());
            let batch = Batch {
                job: fin.job.clone(),
                scheduled_at: slot,
                run_id: run_id.clone(),
                events,
                outputs: std::mem::take(&mut fin.outputs),
            };
            match a.write(batch) {
                Ok(()) => remove_run_dir(&run_dir),
                Err(e) => eprintln!("batchguard run: {e}"),
            }
            if let Err(e) = write_or_spool(st.as_mut(), spool::Entry::Finish(Box::new(fin))) {
                eprintln!("batchguard run: {e}");
            }
        } else {
            if let Err(e) = write_or_spool(st.as_mut(), spool::Entry::Finish(Box::new(fin))) {
                eprintln!("batchguard run: {e}");
            }
            remove_run_dir(&run_dir);
        }
        drop(alive);
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
            rejected_output_lines: rejected_count,
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
        let delay = if opts.drill.no_delay {
            std::time::Duration::ZERO
        } else {
            plan::delay(&plan.retry, u64::from(attempt))
        };
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
