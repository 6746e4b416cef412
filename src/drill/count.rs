//! What a scenario applied, and the judgement of it against the snapshot's records.
//!
//! Applied keys come from the sandbox store's outputs ledger (what the job wrote to
//! `BATCHGUARD_OUTPUTS`, ingested by the guard, also after a crash), or, when the job has
//! `replay.verify`, from the lines that program prints: the keys really applied in the
//! sandbox, one per application.

use super::sandbox::{Cx, Sandbox};
use super::{DigestCheck, MAX_KEYS, ScenarioResult};
use crate::store::EventRow;
use std::collections::HashMap;

/// The sandbox's applied keys (one per application, in order) and the job's events.
pub struct Facts {
    pub applied: Vec<String>,
    pub events: Vec<EventRow>,
}

pub fn facts(cx: &Cx, sb: &Sandbox) -> Result<Facts, String> {
    let mut st = sb.open_store()?;
    let job = &cx.job.plan.ledger_job;
    let events = st.events_of(job).map_err(|e| e.0)?;
    let applied = match &cx.job.verify {
        None => st
            .outputs_of(job)
            .map_err(|e| e.0)?
            .into_iter()
            .map(|(k, _)| k)
            .collect(),
        Some(argv) => super::external::verify(cx, sb, argv)?,
    };
    Ok(Facts { applied, events })
}

/// The counts of SPEC 8 over everything applied in the sandbox (`all`), with `outputs`
/// the keys applied in this scenario. The reason names duplicates and unexpected keys,
/// and missing records when the scenario must apply every record (`complete`).
pub fn tally(
    cx: &Cx,
    name: &'static str,
    all: &[String],
    outputs: u64,
    complete: bool,
) -> ScenarioResult {
    let mut per: HashMap<&str, u32> = HashMap::with_capacity(all.len());
    let mut order: Vec<&str> = Vec::new();
    for k in all {
        let n = per.entry(k.as_str()).or_insert(0);
        if *n == 0 {
            order.push(k);
        }
        *n += 1;
    }
    let duplicated: Vec<&str> = order.iter().copied().filter(|k| per[k] > 1).collect();
    let unexpected: Vec<&str> = order
        .iter()
        .copied()
        .filter(|k| !cx.records.contains(k))
        .collect();
    let missing: Vec<&str> = cx
        .records
        .keys
        .iter()
        .map(String::as_str)
        .filter(|k| !per.contains_key(k))
        .collect();
    let mut r = ScenarioResult {
        name,
        passed: false,
        inputs: cx.records.keys.len() as u64,
        outputs,
        duplicates: duplicated.len() as u64,
        missing: missing.len() as u64,
        unexpected: unexpected.len() as u64,
        seconds: 0.0,
        recovery_seconds: None,
        attempts: 0,
        fences: Vec::new(),
        skip_reasons: Vec::new(),
        offending_keys: Vec::new(),
        reason: None,
    };
    let mut reasons = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    if !duplicated.is_empty() {
        reasons.push(format!(
            "{} applied more than once",
            says(duplicated.len(), "record was", "records were")
        ));
        keys.extend(duplicated.iter().map(|k| (*k).to_owned()));
    }
    if complete && !missing.is_empty() {
        reasons.push(format!(
            "{} never applied",
            says(missing.len(), "record was", "records were")
        ));
        keys.extend(missing.iter().map(|k| (*k).to_owned()));
    }
    if !unexpected.is_empty() {
        reasons.push(format!(
            "{} no record of the snapshot",
            says(unexpected.len(), "output names", "outputs name")
        ));
        keys.extend(unexpected.iter().map(|k| (*k).to_owned()));
    }
    keys.truncate(MAX_KEYS);
    r.offending_keys = keys;
    if !reasons.is_empty() {
        r.reason = Some(reasons.join("; "));
    }
    r
}

/// `1 record was`, `3 records were`.
fn says(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Fills attempts, fences and skip reasons from the scenario's events.
pub fn executions(r: &mut ScenarioResult, events: &[EventRow]) {
    for e in events {
        match e.event.as_str() {
            "start" => {
                r.attempts += 1;
                if let Some(f) = e.fence {
                    r.fences.push(f);
                }
            }
            "skip" => r
                .skip_reasons
                .push(e.detail.clone().unwrap_or_else(|| "skipped".into())),
            _ => {}
        }
    }
}

/// The last `end` of the scenario's events, when it is a success.
pub fn succeeded(events: &[EventRow]) -> bool {
    events
        .iter()
        .any(|e| e.event == "end" && e.status.as_deref() == Some("success"))
}

/// Why the slot did not succeed, from its last failed `end` or `dead_letter`.
pub fn failure(events: &[EventRow]) -> String {
    let last = events.iter().rev().find(|e| {
        (e.event == "end" && e.status.as_deref() == Some("failure")) || e.event == "dead_letter"
    });
    match last {
        Some(e) => {
            let code = e.error_code.clone().unwrap_or_else(|| "failure".into());
            let detail = e
                .detail
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                .map(|d| format!(": {}", d.trim()))
                .unwrap_or_default();
            format!("the replay failed with {code}{detail}")
        }
        None => "the replay never reported an end".into(),
    }
}

/// Appends a failure reason (the first one leads).
pub fn fail(r: &mut ScenarioResult, why: String) {
    r.passed = false;
    r.reason = Some(match r.reason.take() {
        Some(old) => format!("{why}; {old}"),
        None => why,
    });
}

/// The snapshot's digest against the ledger's `start` for the slot.
pub fn ledger_digest(
    src: &str,
    plan: &crate::guard::plan::Plan,
    slot: jiff::Timestamp,
    digest: &str,
) -> Result<DigestCheck, String> {
    use crate::ledger::read::{ReadOptions, Source, read_events};
    let shown = crate::db::mask(src);
    let source = Source::parse(src).map_err(|e| format!("--ledger {shown}: {}", e.0))?;
    let qualified = format!("{}/{}", plan.service, plan.job_name);
    let mut starts = 0u64;
    let mut recorded: Option<String> = None;
    read_events(
        &source,
        &ReadOptions::default(),
        &mut |e| {
            if e.event == crate::ledger::EventKind::Start
                && e.scheduled_at == slot
                && (e.job == plan.job_name || e.job == qualified)
            {
                starts += 1;
                if let Some(d) = e.snapshot_digest {
                    recorded = Some(d);
                }
            }
        },
        &mut |_| {},
    )
    .map_err(|e| crate::db::scrub(src, format!("--ledger {shown}: {}", e.0)))?;
    let slot_s = crate::store::rfc3339(slot);
    if starts == 0 {
        return Err(format!(
            "--ledger {shown} has no `start` of job `{}` for slot {slot_s}, so the snapshot's digest cannot be checked (give the slot with --scheduled-at, or leave --ledger out)",
            plan.job_name
        ));
    }
    Ok(match recorded {
        None => DigestCheck {
            matches: true,
            recorded: None,
            note: format!(
                "the ledger's start for {slot_s} records no snapshot digest: not checked"
            ),
        },
        Some(r) if r.trim().eq_ignore_ascii_case(digest) => DigestCheck {
            matches: true,
            recorded: Some(r),
            note: "the snapshot is the one the slot's start recorded".into(),
        },
        Some(r) => DigestCheck {
            matches: false,
            recorded: Some(r.clone()),
            note: format!(
                "the snapshot's digest {digest} differs from {r} recorded at the slot's start: it is not the input the slot read, so nothing was run"
            ),
        },
    })
}

/// Why a fault scenario had no point to strike at: the job reported no output line. With
/// `replay.verify` the drill can tell a job that applied records without reporting them
/// from one that found nothing to do.
pub fn no_first_output(cx: &Cx, r: &ScenarioResult, fault: &str) -> String {
    if cx.job.verify.is_some() && r.outputs > 0 {
        format!(
            "the job applied {} (replay.verify lists them) but wrote no line to BATCHGUARD_OUTPUTS, so there was no point to {fault} at: write each key there as it is applied",
            says(r.outputs as usize, "record", "records")
        )
    } else {
        format!(
            "the job ended without writing a line to BATCHGUARD_OUTPUTS, so there was no point to {fault} at: it reports nothing there, or found nothing to do (state that outlives a sandbox: give the job replay.setup and replay.teardown, or keep its state under BATCHGUARD_SANDBOX)"
        )
    }
}
