//! `drill` reports: pretty (the terminal), json (SPEC 8), markdown (the quarterly record
//! for the incident log). They print the drill's judgement; they never make it.

use super::audit_markdown::{code, esc, text};
use crate::drill::{CountedBy, Report, ScenarioResult};

pub fn json(r: &Report) -> String {
    crate::drill::json_text(r)
}

fn counted_by(r: &Report) -> &'static str {
    match r.counted_by {
        CountedBy::OutputsFile => "the outputs the job reported (BATCHGUARD_OUTPUTS)",
        CountedBy::Verify => "the keys replay.verify printed",
    }
}

fn short_digest(d: &str) -> &str {
    d.get(..19).unwrap_or(d)
}

fn fences(s: &ScenarioResult) -> String {
    if s.fences.is_empty() {
        "-".into()
    } else {
        s.fences
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn failed_names(r: &Report) -> Vec<&'static str> {
    r.scenarios
        .iter()
        .filter(|s| !s.passed)
        .map(|s| s.name)
        .collect()
}

fn verdict(r: &Report) -> String {
    if let Some(d) = r.ledger_digest.as_ref().filter(|d| !d.matches) {
        return format!("FAILED before it started: {}", d.note);
    }
    let failed = failed_names(r);
    let n = r.scenarios.len();
    if failed.is_empty() && !r.teardown_failures.is_empty() {
        let k = r.teardown_failures.len();
        format!(
            "FAILED: {n} of {n} scenarios passed, but {k} teardown{} failed (the sandboxes' external state may remain)",
            if k == 1 { "" } else { "s" }
        )
    } else if failed.is_empty() {
        format!("PASSED: {n} of {n} scenarios")
    } else {
        format!(
            "FAILED: {} of {n} scenarios passed; {} failed",
            n - failed.len(),
            failed.join(", ")
        )
    }
}

pub fn pretty(r: &Report, color: bool, sandbox: Option<&std::path::Path>) -> String {
    let paint = |ok: bool, s: &str| -> String {
        match (color, ok) {
            (false, _) => s.to_owned(),
            (true, true) => format!("\x1b[32m{s}\x1b[0m"),
            (true, false) => format!("\x1b[31;1m{s}\x1b[0m"),
        }
    };
    let mut o = String::new();
    o.push_str(&format!(
        "drill of job `{}` ({}), slot {}\n",
        r.job, r.service, r.scheduled_at
    ));
    let inputs = r.scenarios.first().map_or(0, |s| s.inputs);
    o.push_str(&format!(
        "snapshot {} ({}…, {} records), counted by {}\n",
        r.snapshot,
        short_digest(&r.snapshot_digest),
        inputs,
        counted_by(r)
    ));
    if let Some(d) = &r.ledger_digest {
        o.push_str(&format!("ledger: {}\n", d.note));
    }
    o.push('\n');
    for s in &r.scenarios {
        let mark = paint(s.passed, if s.passed { "pass" } else { "FAIL" });
        o.push_str(&format!(
            "  {mark}  {:<10} {:>6} out  {:>5} dup  {:>5} missing  {:>5} unexpected  {} attempt{}  fences {}  {:.2}s{}\n",
            s.name,
            s.outputs,
            s.duplicates,
            s.missing,
            s.unexpected,
            s.attempts,
            if s.attempts == 1 { "" } else { "s" },
            fences(s),
            s.seconds,
            s.recovery_seconds
                .map(|x| format!(" (recovered in {x:.2}s)"))
                .unwrap_or_default()
        ));
        for why in &s.skip_reasons {
            o.push_str(&format!("          skip: {why}\n"));
        }
        if let Some(reason) = &s.reason {
            o.push_str(&format!("          why: {reason}\n"));
        }
        if !s.offending_keys.is_empty() {
            o.push_str(&format!(
                "          keys: {}\n",
                s.offending_keys.join(", ")
            ));
        }
    }
    for t in &r.teardown_failures {
        o.push_str(&format!(
            "  {}  teardown of sandbox `{}`: {}\n",
            paint(false, "FAIL"),
            t.sandbox,
            t.reason
        ));
    }
    if r.scenarios_at_once > 1 {
        o.push_str(&format!(
            "  ({} sandboxes at a time)\n",
            r.scenarios_at_once
        ));
    }
    o.push('\n');
    let passed = r.passed;
    o.push_str(&paint(passed, &verdict(r)));
    o.push('\n');
    if let Some(dir) = sandbox.filter(|_| !passed) {
        o.push_str(&format!(
            "the sandboxes are kept in {} (each execution's output is in its logs/)\n",
            dir.display()
        ));
    }
    o
}

/// What a failed scenario means for the team, in a sentence.
fn meaning(name: &str) -> &'static str {
    match name {
        "clean" => {
            "A single, undisturbed run does not apply every record exactly once: the job itself is wrong before any failure happens."
        }
        "rerun" => {
            "Running the same slot again (a lock that expired, an operator's replay, a scheduler that fires twice) applies records again: the job is not idempotent, so every rerun double-applies."
        }
        "concurrent" => {
            "Several instances woken by the same tick do not end with exactly one run: the lock does not keep the slot to one holder."
        }
        "crash" => {
            "Recovering a slot whose process died mid-way applies records twice or loses some: the job does not remember what it applied before the crash."
        }
        "retry" => {
            "A retried attempt double-applies or loses records, or never succeeds within max_attempts: the retry policy and the job's idempotency do not fit together."
        }
        "stale" => {
            "A holder paused past its lease (a GC pause, a frozen VM) still writes after another instance took over: the job does not check its fencing token (BATCHGUARD_FENCE) nor make its writes no-ops."
        }
        _ => "",
    }
}

pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "# Recovery drill: {} / {}\n\n",
        esc(&r.service),
        esc(&r.job)
    ));
    o.push_str(&format!("**{}**\n\n", esc(&verdict(r))));
    o.push_str("| | |\n|---|---|\n");
    o.push_str(&format!("| job | {} |\n", code(&r.job)));
    o.push_str(&format!("| service | {} |\n", code(&r.service)));
    o.push_str(&format!("| slot | {} |\n", code(&r.scheduled_at)));
    o.push_str(&format!("| drilled at | {} |\n", code(&r.started_at)));
    o.push_str(&format!("| snapshot | {} |\n", code(&r.snapshot)));
    o.push_str(&format!(
        "| snapshot digest | {} |\n",
        code(&r.snapshot_digest)
    ));
    if let Some(d) = &r.ledger_digest {
        o.push_str(&format!("| ledger check | {} |\n", text(&d.note)));
    }
    o.push_str(&format!("| counted by | {} |\n", esc(counted_by(r))));
    let rb = &r.runbook;
    let field = |v: &Option<String>| {
        v.as_deref()
            .map_or_else(|| "(not in the runbook)".to_owned(), text)
    };
    o.push_str(&format!("| owner | {} |\n", field(&rb.owner)));
    o.push_str(&format!("| on call | {} |\n", field(&rb.on_call)));
    o.push_str(&format!(
        "| communication | {} |\n",
        field(&rb.communication)
    ));
    if rb.emergency_stop.is_some() {
        o.push_str(&format!(
            "| emergency stop | {} |\n",
            field(&rb.emergency_stop)
        ));
    }
    if rb.resume.is_some() {
        o.push_str(&format!("| resume | {} |\n", field(&rb.resume)));
    }
    if !r.scenarios.is_empty() {
        o.push_str("\n## Scenarios\n\n");
        o.push_str("| scenario | result | inputs | outputs | duplicates | missing | unexpected | attempts | fences | seconds | recovery seconds |\n");
        o.push_str("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n");
        for s in &r.scenarios {
            o.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} |\n",
                s.name,
                if s.passed { "passed" } else { "**failed**" },
                s.inputs,
                s.outputs,
                s.duplicates,
                s.missing,
                s.unexpected,
                s.attempts,
                fences(s),
                s.seconds,
                s.recovery_seconds
                    .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"))
            ));
        }
    }
    if !r.teardown_failures.is_empty() {
        o.push_str("\n## Teardown failures\n\nThe external state of these sandboxes may remain; remove it by hand.\n\n");
        for t in &r.teardown_failures {
            o.push_str(&format!("- {}: {}\n", code(&t.sandbox), text(&t.reason)));
        }
    }
    let failed: Vec<&ScenarioResult> = r.scenarios.iter().filter(|s| !s.passed).collect();
    if !failed.is_empty() {
        o.push_str("\n## What this means\n");
        for s in failed {
            o.push_str(&format!("\n### {}\n\n{}\n", s.name, meaning(s.name)));
            if let Some(reason) = &s.reason {
                o.push_str(&format!("\nFound: {}.\n", text(reason)));
            }
            if !s.offending_keys.is_empty() {
                let keys: Vec<String> = s.offending_keys.iter().map(|k| code(k)).collect();
                o.push_str(&format!("\nFirst keys: {}\n", keys.join(", ")));
            }
        }
    }
    o
}
