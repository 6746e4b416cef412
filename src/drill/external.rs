//! The job's state outside the sandbox directory (SPEC 7.3 "External state"): the
//! commands of `replay` run in a sandbox's environment (`setup`, `verify`, `teardown`),
//! and the check that a sandbox's state is its own.
//!
//! The leak check runs `replay.verify` in a sandbox where no job runs (the *untouched*
//! sandbox, set up like the others): it must list no key before the first scenario and
//! after each one. Any key it lists was applied by a run of another sandbox, so the job's
//! state is shared. A check of "keys no run of this sandbox reported" would call a
//! correct job leaky after `crash` or `stale`: a job killed or paused after its first
//! output line may have applied rows whose output lines never reached the tap.

use super::sandbox::{Cx, Sandbox};
use std::ffi::OsString;

/// What a command printed, or why it failed (with its stderr's start).
pub fn run(cx: &Cx, sb: &Sandbox, what: &str, argv: &[String]) -> Result<Vec<u8>, String> {
    let slot = crate::store::rfc3339(cx.slot);
    let compact = crate::snapshot::compact(cx.slot);
    let snapshot = cx.snapshot.display().to_string();
    let sandbox = sb.state.display().to_string();
    let values = [
        ("job", cx.job.plan.job_name.as_str()),
        ("service", cx.job.plan.service.as_str()),
        ("scheduled_at", slot.as_str()),
        ("scheduled_at_compact", compact.as_str()),
        ("snapshot", snapshot.as_str()),
        ("sandbox", sandbox.as_str()),
    ];
    let argv: Vec<OsString> = argv
        .iter()
        .map(|a| crate::manifest::template::render(a, &values).map(Into::into))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: {e}"))?;
    let env = vec![
        ("BATCHGUARD_SANDBOX".to_owned(), sandbox.clone()),
        ("BATCHGUARD_JOB".to_owned(), cx.job.plan.job_name.clone()),
        ("BATCHGUARD_SCHEDULED_AT".to_owned(), slot.clone()),
        ("BATCHGUARD_SNAPSHOT".to_owned(), snapshot.clone()),
    ];
    let cpu0 = super::shim::children_cpu();
    let out = crate::process::capture(&crate::process::Capture {
        argv: &argv,
        env: &env,
        cwd: Some(&cx.cwd),
        timeout: cx.limit,
        grace: std::time::Duration::from_secs(1),
        stdout_cap: 256 << 20,
        stderr_cap: 4096,
    })
    .map_err(|e| format!("{what} could not run: {e:?}"))?;
    cx.add_verify_cpu(super::shim::children_cpu() - cpu0);
    let shown = argv
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = std::fs::write(sb.logs.join(format!("{what}.stderr")), &out.stderr);
    if out.timed_out {
        return Err(format!(
            "{what} (`{shown}`) did not finish within the time limit"
        ));
    }
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        return Err(format!(
            "{what} (`{shown}`) failed ({}){}",
            out.status,
            if err.is_empty() {
                String::new()
            } else {
                format!(": {err}")
            }
        ));
    }
    Ok(out.stdout)
}

/// `replay.verify`'s keys in the sandbox, one per application.
pub fn verify(cx: &Cx, sb: &Sandbox, argv: &[String]) -> Result<Vec<String>, String> {
    let out = run(cx, sb, "replay.verify", argv)?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}

/// Makes the sandbox's external state (`replay.setup`), when the job declares it.
pub fn setup(cx: &Cx, sb: &Sandbox) -> Result<(), String> {
    match &cx.job.setup {
        Some(argv) => run(cx, sb, "replay.setup", argv).map(drop),
        None => Ok(()),
    }
}

/// Removes the sandbox's external state (`replay.teardown`), when the job declares it.
pub fn teardown(cx: &Cx, sb: &Sandbox) -> Result<(), String> {
    match &cx.job.teardown {
        Some(argv) => run(cx, sb, "replay.teardown", argv).map(drop),
        None => Ok(()),
    }
}

/// The words of a failure whose cause is state shared between sandboxes.
pub const SHARED: &str = "state shared between sandboxes";

/// `Err(reason)` when `replay.verify` in a sandbox where no job ran (or has run yet)
/// lists keys; `when` says at which point of the drill.
pub fn untouched(cx: &Cx, sb: &Sandbox, when: &str) -> Result<(), String> {
    let Some(argv) = &cx.job.verify else {
        return Ok(());
    };
    let keys = verify(cx, sb, argv)?;
    if keys.is_empty() {
        return Ok(());
    }
    let mut shown: Vec<&str> = keys.iter().map(String::as_str).take(5).collect();
    shown.dedup();
    Err(format!(
        "{SHARED}: replay.verify lists {} in sandbox `{}` {when}, where no job has run (first: {}); give each sandbox its own state (replay.setup and replay.teardown, or state under BATCHGUARD_SANDBOX)",
        if keys.len() == 1 {
            "1 key".to_owned()
        } else {
            format!("{} keys", keys.len())
        },
        sb.name(),
        shown.join(", ")
    ))
}
