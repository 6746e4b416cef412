//! `batchguard drill` (SPEC 7.3): the quarterly rehearsal. It replays one slot's input
//! snapshot through the job's `replay.command` in sandboxes and proves that a rerun, two
//! instances at once, a crash, a retry and a stale holder never apply a record twice or
//! drop one.
//!
//! Every execution is a real `batchguard run` process (the guard's own code, with three
//! hidden drill flags: the snapshot under test, a barrier on stdin, no backoff wait) whose
//! command is the drill's tap ([`shim`]) in front of the job. The drill synchronises on
//! facts it can observe: process exits, the tap's marker files, the sandbox store's rows.
//!
//! | room | holds |
//! |---|---|
//! | `job.rs` | the manifest job: the guard's plan, `replay`, `snapshot.key`, runbook |
//! | `records.rs` | the snapshot's record keys, read strictly |
//! | `sandbox.rs` | a sandbox (directory, SQLite store, `BATCHGUARD_SANDBOX`) and its processes |
//! | `count.rs` | what a scenario applied, by the outputs ledger or `replay.verify`, judged |
//! | `scenarios/` | one file per scenario |
//! | `shim.rs` | the tap between the guard and the job |

pub mod count;
pub mod external;
pub mod job;
pub mod records;
pub mod sandbox;
pub mod scenarios;
pub mod shim;
pub mod units;

use jiff::Timestamp;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// What `drill` was asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    pub manifest: PathBuf,
    pub job: String,
    pub snapshot: PathBuf,
    pub scheduled_at: Option<Timestamp>,
    pub ledger: Option<String>,
    pub scenarios: Vec<Scenario>,
    /// A store the user named; refused unless it is a fresh SQLite file (SPEC 9).
    pub store: Option<String>,
    /// Where the sandboxes are made (kept); default a temporary directory, removed after.
    pub sandbox: Option<PathBuf>,
    pub time_limit: Option<Duration>,
    /// How many sandboxes may run at the same time (`--jobs`); default the number of
    /// cores. Only a job whose state is known to be per sandbox runs them so.
    pub jobs: Option<usize>,
    /// The batchguard binary that runs each execution (this one).
    pub exe: PathBuf,
    pub rule_code: fn(crate::manifest::Issue) -> &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    Clean,
    Rerun,
    Concurrent,
    Crash,
    Retry,
    Stale,
}

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::Clean,
        Scenario::Rerun,
        Scenario::Concurrent,
        Scenario::Crash,
        Scenario::Retry,
        Scenario::Stale,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Clean => "clean",
            Scenario::Rerun => "rerun",
            Scenario::Concurrent => "concurrent",
            Scenario::Crash => "crash",
            Scenario::Retry => "retry",
            Scenario::Stale => "stale",
        }
    }

    /// Parses `--scenarios clean,rerun`; `all` is every scenario.
    pub fn parse_list(s: &str) -> Result<Vec<Scenario>, String> {
        let mut out = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if w == "all" {
                out.extend(Scenario::ALL);
                continue;
            }
            let Some(sc) = Scenario::ALL.into_iter().find(|sc| sc.name() == w) else {
                let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                let hint = crate::text::closest(w, &names)
                    .map(|c| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                return Err(format!(
                    "`{w}` is not a drill scenario{hint}; the scenarios are {}",
                    names.join(", ")
                ));
            };
            out.push(sc);
        }
        if out.is_empty() {
            return Err("--scenarios names no scenario".into());
        }
        // `rerun` continues `clean`'s sandbox, so selecting it runs `clean` first.
        if out.contains(&Scenario::Rerun) {
            out.push(Scenario::Clean);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// How outputs were counted (SPEC 8 `counted_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CountedBy {
    OutputsFile,
    Verify,
}

/// One scenario's outcome (SPEC 8).
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    pub name: &'static str,
    pub passed: bool,
    pub inputs: u64,
    pub outputs: u64,
    pub duplicates: u64,
    pub missing: u64,
    pub unexpected: u64,
    pub seconds: f64,
    /// From the fault to the slot's successful end (`crash`, `retry`, `stale`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_seconds: Option<f64>,
    pub attempts: u64,
    pub fences: Vec<i64>,
    pub skip_reasons: Vec<String>,
    pub offending_keys: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The whole drill (SPEC 8 `drill --format json`, plus what the quarterly record names).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub version: u32,
    pub tool: &'static str,
    pub job: String,
    pub service: String,
    pub scheduled_at: String,
    pub passed: bool,
    pub counted_by: CountedBy,
    pub snapshot: String,
    pub snapshot_digest: String,
    /// What the digest check against `--ledger` found; absent without `--ledger`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger_digest: Option<DigestCheck>,
    pub started_at: String,
    pub runbook: job::Runbook,
    pub scenarios: Vec<ScenarioResult>,
    /// CPU seconds the job's executions and `replay.verify` used (measured by the tap and
    /// the drill), so batchguard's own share of a drill can be told. When scenarios ran
    /// at the same time, `replay.verify`'s, `setup`'s and `teardown`'s CPU is not in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_cpu_seconds: Option<f64>,
    /// How many sandboxes ran at the same time at most (1: one after the other).
    pub scenarios_at_once: usize,
    /// Sandboxes whose `replay.teardown` failed: their external state may remain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub teardown_failures: Vec<SandboxFailure>,
}

/// A sandbox whose `replay.teardown` failed, and why.
#[derive(Clone, Debug, Serialize)]
pub struct SandboxFailure {
    pub sandbox: String,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct DigestCheck {
    pub matches: bool,
    pub recorded: Option<String>,
    pub note: String,
}

/// Why a drill could not run (exit 2).
#[derive(Debug)]
pub struct CannotRun(pub String);

/// The most offending keys a report names (SPEC 8).
pub const MAX_KEYS: usize = 20;

/// A drill's report, and where its sandboxes were kept (a `--sandbox`, or a temporary
/// one that holds a failure).
pub struct Done {
    pub report: Report,
    pub kept: Option<PathBuf>,
}

/// The whole command: checks, then every selected scenario in its own sandbox.
pub fn drill(opts: &Options) -> Result<Done, CannotRun> {
    let e = CannotRun;
    let dj = job::load(opts).map_err(e)?;
    if let Some(s) = &opts.store {
        refuse_store(s).map_err(CannotRun)?;
    }
    let snapshot = std::path::absolute(&opts.snapshot)
        .map_err(|err| CannotRun(format!("{}: {err}", opts.snapshot.display())))?;
    let bytes = std::fs::read(&snapshot).map_err(|err| {
        CannotRun(format!(
            "cannot read the snapshot {}: {err}",
            snapshot.display()
        ))
    })?;
    let digest = crate::snapshot::digest(&bytes);
    drop(bytes);
    let records = records::read(&snapshot, dj.format, &dj.key).map_err(CannotRun)?;
    let slot = match opts.scheduled_at {
        Some(t) => dj.plan.given_slot(t),
        None => dj.plan.latest_slot(Timestamp::now()),
    }
    .map_err(CannotRun)?;
    let started_at = crate::store::rfc3339(Timestamp::now());
    let mut report = Report {
        version: 1,
        tool: "batchguard",
        job: dj.plan.job_name.clone(),
        service: dj.plan.service.clone(),
        scheduled_at: crate::store::rfc3339(slot),
        passed: false,
        counted_by: if dj.verify.is_some() {
            CountedBy::Verify
        } else {
            CountedBy::OutputsFile
        },
        snapshot: snapshot.display().to_string(),
        snapshot_digest: digest.clone(),
        ledger_digest: None,
        started_at,
        runbook: dj.runbook.clone(),
        scenarios: Vec::new(),
        job_cpu_seconds: None,
        scenarios_at_once: 1,
        teardown_failures: Vec::new(),
    };
    if let Some(l) = &opts.ledger {
        let check = count::ledger_digest(l, &dj.plan, slot, &digest).map_err(CannotRun)?;
        let matches = check.matches;
        report.ledger_digest = Some(check);
        if !matches {
            // The snapshot is not the slot's input: nothing it proves would be about the slot.
            return Ok(Done { report, kept: None });
        }
    }
    let root =
        sandbox::Root::new(opts.sandbox.as_deref(), opts.store.as_deref()).map_err(CannotRun)?;
    let limit = opts
        .time_limit
        .unwrap_or_else(|| dj.expected.saturating_mul(10));
    let cx = sandbox::Cx {
        exe: opts.exe.clone(),
        manifest: std::path::absolute(&opts.manifest)
            .map_err(|err| CannotRun(format!("{}: {err}", opts.manifest.display())))?,
        job: dj,
        snapshot,
        slot,
        limit,
        records,
        cwd: std::env::current_dir()
            .map_err(|err| CannotRun(format!("the working directory: {err}")))?,
        verify_cpu: std::sync::Mutex::new(0.0),
        parallel: std::sync::atomic::AtomicBool::new(false),
    };
    let untouched = match &cx.job.verify {
        Some(_) => Some(root.sandbox("untouched", false).map_err(CannotRun)?),
        None => None,
    };
    let ready = match &untouched {
        Some(u) => external::setup(&cx, u)
            .and_then(|()| external::untouched(&cx, u, "before the first scenario")),
        None => Ok(()),
    };
    let all = units::units(&opts.scenarios);
    let jobs = opts.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let mut released_cpu = 0.0;
    let mut error = None;
    match ready {
        Err(why) => {
            for sc in &opts.scenarios {
                report.scenarios.push(units::not_run(&cx, *sc, &why));
            }
        }
        Ok(()) => {
            let (outs, at_once) = units::run_all(&cx, &root, &all, jobs, untouched.as_ref());
            report.scenarios_at_once = at_once;
            for (u, out) in all.iter().zip(outs) {
                match out {
                    Ok(o) => {
                        report.scenarios.extend(o.results);
                        if let Some(why) = o.teardown {
                            report.teardown_failures.push(SandboxFailure {
                                sandbox: u.name.to_owned(),
                                reason: why,
                            });
                        }
                        if let Some((cpu, removal)) = o.released {
                            released_cpu += cpu;
                            let _ = removal.join();
                        }
                    }
                    Err(e) => error = error.or(Some(e)),
                }
            }
        }
    }
    if let Some(u) = &untouched
        && let Err(why) = external::teardown(&cx, u)
    {
        report.teardown_failures.push(SandboxFailure {
            sandbox: u.name(),
            reason: why,
        });
    }
    if let Some(e) = error {
        let _ = root.finish(false);
        return Err(CannotRun(e));
    }
    report.passed =
        report.scenarios.iter().all(|s| s.passed) && report.teardown_failures.is_empty();
    report.job_cpu_seconds = Some(root.jobs_cpu() + released_cpu + cx.verify_cpu());
    let kept = root.finish(report.passed);
    Ok(Done { report, kept })
}

/// The JSON report (SPEC 8), as `--format json` prints it: the drill record's
/// `report_digest` is the digest of these bytes.
pub fn json_text(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// `--record SOURCE`: appends the drill's outcome to the drill records (SPEC 5.3), the
/// job named `service/name` so drills of same-named jobs of two services stay apart.
pub fn record(source: &str, r: &Report) -> Result<(), String> {
    let parse = |t: &str| {
        t.parse::<Timestamp>()
            .map_err(|e| format!("the report's time `{t}`: {e}"))
    };
    let rec = crate::ledger::drills::DrillRecord {
        job: format!("{}/{}", r.service, r.job),
        scheduled_at: parse(&r.scheduled_at)?,
        at: parse(&r.started_at)?,
        passed: r.passed,
        scenarios: crate::ledger::drills::format_scenarios(
            r.scenarios.iter().map(|s| (s.name, s.passed)),
        ),
        report_digest: crate::snapshot::digest(json_text(r).as_bytes()),
    };
    crate::store::drills::append(source, &rec)
}

/// SPEC 9: a drill writes only inside its sandbox. A store is accepted only when it is a
/// SQLite file that does not exist yet (it becomes the `clean` sandbox's store).
fn refuse_store(url: &str) -> Result<(), String> {
    let shown = crate::db::mask(url);
    let Some(path) = url.strip_prefix("sqlite:") else {
        return Err(format!(
            "--store {shown} is not a fresh sandbox: a drill never writes to a store a scheduler uses; it makes its own SQLite store in each sandbox (leave --store out, or name a sqlite: file that does not exist yet)"
        ));
    };
    let path = path.strip_prefix("//").unwrap_or(path);
    if path.is_empty() || std::path::Path::new(path).exists() {
        return Err(format!(
            "--store {shown} is not a fresh sandbox: the file exists (it may be a store `run` uses); a drill only writes to a store it creates. It was left untouched"
        ));
    }
    Ok(())
}
